"""Shared-exponent formats: QPyTorch/SWALP block floating point and OCP MX.

Block maxima are computed with ``amax(..., keepdim=True)`` and broadcast, so no full-size
auxiliary tensor is materialised (QPyTorch expands the block maximum to the input's size).
"""

from __future__ import annotations

import math

import torch

from embstab.lowprec.rounding import round_integer, scale_pow2
from embstab.lowprec.floatq import quantize_float
from embstab.lowprec.formats import E8M0_BIAS, MXINT8_FRAC_BITS, BlockFloatFormat, MXFormat

__all__ = ["quantize_block", "quantize_mx", "block_view", "block_exponents", "block_integers",
           "mx_scale_exponents", "mx_int8_integers"]


def block_view(x: torch.Tensor, block_size: int | None, axis: int | None):
    """Reshape ``x`` so that each block is one slice over the reduction dims.

    Parameters
    ----------
    x : torch.Tensor
        The tensor.
    block_size : int or None
        Elements per block along ``axis`` (the last block is zero-padded); None: one block over all
        of ``axis``'s complement (or the whole tensor when ``axis`` is None too).
    axis : int or None
        Axis the blocks run along (default the last one when ``block_size`` is given).

    Returns
    -------
    view : torch.Tensor
        The (zero-padded) data.
    reduce_dims : tuple of int
        The dims to take the block maximum over.
    restore : callable
        Maps a tensor shaped like ``view`` back to ``x``'s shape.
    """
    if block_size is None:
        if axis is None:
            return x, tuple(range(x.dim())), lambda t: t
        ax = axis % x.dim() if x.dim() else 0
        return x, tuple(d for d in range(x.dim()) if d != ax), lambda t: t
    ax = -1 if axis is None else axis
    moved = torch.movedim(x, ax, -1) if x.dim() else x.reshape(1)
    n = moved.shape[-1]
    nb = -(-n // block_size)
    pad = nb * block_size - n
    padded = torch.nn.functional.pad(moved, (0, pad)) if pad else moved
    view = padded.reshape(*moved.shape[:-1], nb, block_size)

    def restore(t: torch.Tensor) -> torch.Tensor:
        t = t.reshape(*moved.shape[:-1], nb * block_size)[..., :n]
        return torch.movedim(t, -1, ax).reshape(x.shape) if x.dim() else t.reshape(x.shape)

    return view, (view.dim() - 1,), restore


def block_exponents(view: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``floor(log2(amax))`` per block (0 for all-zero blocks) and a mask of blocks holding Inf/NaN.

    Parameters
    ----------
    view : torch.Tensor
        Blocked data from :func:`block_view`.
    dims : tuple of int
        The reduction dims of a block.

    Returns
    -------
    exponents : torch.Tensor
        int exponents, kept dims of size 1.
    bad : torch.Tensor
        bool mask of blocks whose maximum is Inf or NaN, same shape.
    """
    amax = view.abs().amax(dim=dims, keepdim=True) if dims else view.abs()
    bad = ~torch.isfinite(amax)
    _, e = torch.frexp(torch.where(bad | (amax == 0), torch.ones_like(amax), amax).double())
    return e - 1, bad


def quantize_block(x: torch.Tensor, fmt: BlockFloatFormat, rounding: str,
                   generator: torch.Generator | None) -> torch.Tensor:
    """Block floating point: ``k * 2**(E - (word_bits-2))`` per block, ``|k| <= 2**(word_bits-1) - 1``.

    Blocks containing Inf or NaN come back as all-NaN, so an overflow stays visible (e.g. to a
    loss scaler) instead of silently zeroing the block's other values.

    Parameters
    ----------
    x : torch.Tensor
        Float tensor.
    fmt : BlockFloatFormat
        The format (word bits, block size and axis).
    rounding : str
        Canonical rounding mode.
    generator : torch.Generator or None
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor
        The rounded values, in ``x``'s shape and dtype.
    """
    view, dims, restore = block_view(x, fmt.block_size, fmt.axis)
    k, se, bad = block_integers(view, dims, fmt, rounding, generator)
    y = scale_pow2(k, se)
    y = torch.where(bad, torch.full_like(y, math.nan), y)
    return restore(y).to(x.dtype)


def block_integers(view: torch.Tensor, dims: tuple[int, ...], fmt: BlockFloatFormat, rounding: str,
                   generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Block-float integers ``k``, step exponents ``se`` (value = ``k * 2**se``) and the Inf/NaN mask.

    Parameters
    ----------
    view : torch.Tensor
        Blocked data from :func:`block_view`.
    dims : tuple of int
        The reduction dims of a block.
    fmt : BlockFloatFormat
        The format.
    rounding : str
        Canonical rounding mode.
    generator : torch.Generator or None
        Randomness for stochastic rounding.

    Returns
    -------
    k : torch.Tensor
        float64 integers, clamped to the word.
    se : torch.Tensor
        Step exponent per block.
    bad : torch.Tensor
        bool mask of blocks holding Inf/NaN.
    """
    E, bad = block_exponents(view, dims)
    se = E - (fmt.word_bits - 2)
    k = round_integer(scale_pow2(view.double(), -se), rounding, generator)
    hi = 2 ** (fmt.word_bits - 1) - 1
    return k.clamp(-hi - (0 if fmt.symmetric else 1), hi), se, bad


def mx_scale_exponents(view: torch.Tensor, fmt: MXFormat) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-block scale exponents ``s`` (clamped to E8M0's range) and the mask of Inf/NaN blocks.

    Parameters
    ----------
    view : torch.Tensor
        Blocked data from :func:`block_view` (blocks along the last dim).
    fmt : MXFormat
        The format.

    Returns
    -------
    s : torch.Tensor
        ``floor(log2 amax) − emax_elem`` per block, in [−127, 127].
    bad : torch.Tensor
        bool mask of blocks holding Inf/NaN.
    """
    E, bad = block_exponents(view, (view.dim() - 1,))
    return (E - fmt.emax_elem).clamp(-E8M0_BIAS, E8M0_BIAS), bad


def mx_int8_integers(v: torch.Tensor, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """MXINT8 element integers ``k`` (float64, ``|k| <= 127``) of block-scaled values ``v``.

    Parameters
    ----------
    v : torch.Tensor
        float64 values already divided by their block scale.
    rounding : str
        Canonical rounding mode.
    generator : torch.Generator or None
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor
        float64 integers in [−127, 127] (value = ``k * 2**-6``).
    """
    return round_integer(scale_pow2(v, MXINT8_FRAC_BITS), rounding, generator).clamp(-127, 127)


def quantize_mx(x: torch.Tensor, fmt: MXFormat, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """OCP MX: per block of ``block_size`` along ``axis``, scale ``2**s`` with
    ``s = clamp(floor(log2 amax) - emax_elem, -127, 127)``; elements rounded to the element format
    (saturating). Blocks with Inf/NaN come back as NaN (the E8M0 NaN scale).

    Parameters
    ----------
    x : torch.Tensor
        Float tensor.
    fmt : MXFormat
        The format (element format, block size and axis).
    rounding : str
        Canonical rounding mode.
    generator : torch.Generator or None
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor
        The rounded values, in ``x``'s shape and dtype.
    """
    view, _, restore = block_view(x, fmt.block_size, fmt.axis)
    s, bad = mx_scale_exponents(view, fmt)
    v = scale_pow2(view.double(), -s)
    if fmt.element == "int8":
        q = scale_pow2(mx_int8_integers(v, rounding, generator), -MXINT8_FRAC_BITS)
    else:
        q = quantize_float(v, fmt.element, rounding, generator)
    y = scale_pow2(q, s)
    y = torch.where(bad, torch.full_like(y, math.nan), y)
    return restore(y).to(x.dtype)

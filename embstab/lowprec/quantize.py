"""The public entry points :func:`quantize`, :func:`encode` and :func:`decode`: any format, any
rounding, torch or numpy input. Each dispatches through the format's handler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import embstab.lowprec.gpu as gpu
from embstab.lowprec.codes import BlockCodes
from embstab.lowprec.formats import Format, get_format
from embstab.lowprec.handlers import check_encodable, handler_for
from embstab.lowprec.rounding import as_generator, check_rounding

__all__ = ["quantize", "encode", "decode", "to_work_tensor"]


def to_work_tensor(x: Any) -> tuple[torch.Tensor, Callable[[torch.Tensor], Any]]:
    """``x`` as a detached float32/float64 torch tensor, and a function that turns a result back
    into ``x``'s type and dtype (numpy stays numpy, bf16/fp16 tensors are upcast exactly).

    Parameters
    ----------
    x : torch.Tensor or array_like
        Floating-point tensor, or numeric array-like (numpy arrays are copied; integers become
        float64).

    Returns
    -------
    work : torch.Tensor
        float32 or float64 tensor.
    restore : callable
        Maps a result shaped like ``work`` back to ``x``'s kind and dtype.

    Raises
    ------
    TypeError
        For a non-floating tensor or non-numeric input.
    """
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dtype in (torch.float32, torch.float64):
            return t, lambda y: y
        if t.dtype in (torch.float16, torch.bfloat16):
            dtype = t.dtype
            return t.float(), lambda y: y.to(dtype)
        if t.is_floating_point():  # fp8 dtypes: widen exactly, narrow with torch's cast afterwards
            dtype = t.dtype
            return t.float(), lambda y: y.to(dtype)
        raise TypeError(f"quantize needs a floating-point tensor, got {t.dtype}")
    arr = np.asarray(x)
    if arr.dtype in (np.float32, np.float64):
        dtype = arr.dtype
        # copy keeps the caller's array safe and makes read-only arrays (Embedding.vectors) usable
        return torch.from_numpy(np.array(arr, copy=True)), lambda y: y.numpy().astype(dtype, copy=False)
    if arr.dtype.kind in "fV" or arr.dtype.name in ("bfloat16",) or arr.dtype.kind == "f":
        dtype = arr.dtype
        return torch.from_numpy(arr.astype(np.float32)), lambda y: y.numpy().astype(dtype)
    if arr.dtype.kind in "iub":
        return torch.from_numpy(arr.astype(np.float64)), lambda y: y.numpy()
    raise TypeError(f"quantize needs numeric input, got dtype {arr.dtype}")


def quantize(x: Any, fmt: Format | str, rounding: str = "nearest", generator: torch.Generator | int | None = None,
             *, compiled: bool = False) -> Any:
    """Round ``x`` onto the values of ``fmt``.

    Parameters
    ----------
    x : torch.Tensor or array_like
        Input on any device. torch in → torch out, numpy in → numpy out, same dtype as the input
        (fp16/bf16 inputs are widened exactly, rounded, and cast back, so a format with more
        precision than the input dtype is rounded once more by that cast).
    fmt : Format or str
        A :class:`FloatFormat`, :class:`FixedFormat`, :class:`BlockFloatFormat`, :class:`MXFormat`,
        :class:`UniformFormat`, or a preset name (``"bf16"``, ``"fp8_e4m3fn"``, ``"mxfp4"``, ...).
    rounding : {"nearest", "nearest_away", "nearest_up", "toward_zero", "stochastic", "stochastic:K"}
        ``"nearest"`` is round-half-to-even. ``"stochastic"`` rounds up with probability equal to
        the distance to the lower grid point over the gap (unbiased at every exponent, subnormals
        included), except where saturation at ±max biases it toward zero. ``"stochastic:K"``
        uses only K random bits, like hardware stochastic rounding: the probability is that
        distance truncated to K bits, so results are biased toward zero by less than 2**-K of a
        grid step (exact scaled path; slower than ``"stochastic"``).
    generator : torch.Generator or int, optional
        Source of randomness for stochastic rounding; an int is a seed for a fresh generator.
        ``None`` uses torch's default generator. Draws happen on the generator's device, so a seed
        reproduces results whatever the thread count.
    compiled : bool
        Use the ``torch.compile``-fused kernel for float formats (several times faster on large
        CPU tensors; the first call per format, mode and dtype compiles for tens of seconds).
        Results are bit-identical to the eager path.

    Returns
    -------
    Same type as ``x``.

    Notes
    -----
    Not differentiable; use :class:`embstab.lowprec.Quantizer` for a straight-through gradient.
    NaN inputs stay NaN for every format (formats without a NaN code cannot store them:
    :func:`encode` raises). Infinite inputs follow the format's overflow policy.
    """
    fmt = get_format(fmt)
    handler = handler_for(fmt)
    rounding = check_rounding(rounding)
    t, back = to_work_tensor(x)
    gen = as_generator(generator, t.device)
    with torch.no_grad():
        y = gpu.try_kernel(t, fmt, rounding, gen)  # float32 CUDA tensors: one fused pass
        if y is None:
            y = handler.quantize(t, fmt, rounding, gen, compiled=compiled)
    return back(y)


def encode(x: Any, fmt: Format | str, rounding: str = "nearest", generator: torch.Generator | int | None = None):
    """Round ``x`` onto ``fmt`` and return integer codes.

    Parameters
    ----------
    x : torch.Tensor or array_like
        Values to encode.
    fmt : Format or str
        A format or preset name.
    rounding : str, default "nearest"
        As for :func:`quantize`.
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor, numpy.ndarray or BlockCodes
        For float formats: bit patterns (uint8 up to 8 bits, else int32/int64). Fixed point: the
        integer ``k`` with value ``k * 2**-frac_bits``. Uniform: the level index in
        ``[0, 2**bits - 1]`` (``bits >= 32``: the float32 bit pattern of the clipped value).
        Block and MX formats: a :class:`BlockCodes`. torch in → torch out; numpy in → numpy out
        (BlockCodes always hold tensors).

    Raises
    ------
    CodeError
        If a value has no code (NaN in a format without NaN, non-finite input to fixed, uniform
        or block formats).
    """
    fmt = get_format(fmt)
    handler = handler_for(fmt)
    rounding = check_rounding(rounding)
    is_numpy = not isinstance(x, torch.Tensor)
    t, _ = to_work_tensor(x)
    gen = as_generator(generator, t.device)
    with torch.no_grad():
        check_encodable(t, fmt)
        out = handler.encode(t, fmt, rounding, gen)
    return out.numpy() if is_numpy and not isinstance(out, BlockCodes) else out


def decode(codes: Any, fmt: Format | str | None = None, dtype: torch.dtype = torch.float32):
    """Values of codes produced by :func:`encode`.

    Parameters
    ----------
    codes : torch.Tensor, array_like or BlockCodes
        The codes; :class:`BlockCodes` carry their format.
    fmt : Format or str, optional
        The format the codes were encoded with (required unless ``codes`` is a BlockCodes).
    dtype : torch.dtype, default torch.float32
        Result dtype.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        The values; numpy codes give a numpy array.

    Raises
    ------
    TypeError
        Without a format, or for block formats given plain codes.
    """
    if isinstance(codes, BlockCodes):
        return handler_for(codes.format).decode(codes, codes.format).to(dtype)
    if fmt is None:
        raise TypeError("decode needs the format the codes were encoded with")
    fmt = get_format(fmt)
    handler = handler_for(fmt)
    if handler.block_codes:
        raise TypeError(f"{type(fmt).__name__} codes come as BlockCodes")
    is_numpy = not isinstance(codes, torch.Tensor)
    c = torch.as_tensor(np.asarray(codes).astype(np.int64)) if is_numpy else codes
    out = handler.decode(c, fmt).to(dtype)
    return out.numpy() if is_numpy else out

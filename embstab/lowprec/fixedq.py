"""Rounding to fixed-point grids: :class:`FixedFormat` and the embedding :class:`UniformFormat`."""

from __future__ import annotations

import torch

from embstab.lowprec.rounding import round_integer, scale_pow2
from embstab.lowprec.formats import FixedFormat, UniformFormat

__all__ = ["quantize_fixed", "quantize_uniform", "uniform_levels"]


def fixed_integers(x: torch.Tensor, fmt: FixedFormat, rounding: str,
                   generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Integer codes ``k`` (float64) with ``x ≈ k * 2**-frac_bits``, and the mask of clamped elements."""
    # float64 holds every fp32 value and its power-of-two multiples exactly
    k = round_integer(scale_pow2(x.double(), fmt.frac_bits), rounding, generator)
    if not fmt.clamp:
        return k, None
    lo = -(2 ** (fmt.word_bits - 1)) + (1 if fmt.symmetric else 0)
    hi = 2 ** (fmt.word_bits - 1) - 1
    clamped = (k < lo) | (k > hi)
    return k.clamp(lo, hi), clamped


def quantize_fixed(x: torch.Tensor, fmt: FixedFormat, rounding: str, generator: torch.Generator | None,
                   return_mask: bool = False):
    """Round ``x`` onto a fixed-point grid (result in x's dtype).

    Parameters
    ----------
    x : torch.Tensor
        Float tensor.
    fmt : FixedFormat
        The format.
    rounding : str
        Canonical rounding mode.
    generator : torch.Generator or None
        Randomness for stochastic rounding.
    return_mask : bool, default False
        Also return the mask of elements that were clamped (for straight-through estimators that
        zero their gradient).

    Returns
    -------
    torch.Tensor or tuple of (torch.Tensor, torch.Tensor)
        The rounded values, and with ``return_mask`` the bool mask of clamped elements (all False
        for a non-clamping format).
    """
    k, clamped = fixed_integers(x, fmt, rounding, generator)
    y = scale_pow2(k, -fmt.frac_bits).to(x.dtype)
    if return_mask:
        return y, (clamped if clamped is not None else torch.zeros_like(x, dtype=torch.bool))
    return y


def uniform_levels(x: torch.Tensor, fmt: UniformFormat, rounding: str,
                   generator: torch.Generator | None) -> torch.Tensor:
    """Level indices ``q`` in ``{0, ..., 2**bits - 1}`` (float64) of the clipped values.

    Parameters
    ----------
    x : torch.Tensor
        Float tensor.
    fmt : UniformFormat
        The format (bits and clip > 0).
    rounding : str
        Canonical rounding mode.
    generator : torch.Generator or None
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor
        float64 level indices, shaped like ``x``.
    """
    r = fmt.clip
    xc = x.double().clamp(-r, r)
    n = 2 ** fmt.bits - 1
    return round_integer((xc + r) * (n / (2 * r)), rounding, generator)


def quantize_uniform(x: torch.Tensor, fmt: UniformFormat, rounding: str,
                     generator: torch.Generator | None) -> torch.Tensor:
    """Clip to ``[-clip, clip]`` and round onto ``2**bits`` evenly spaced levels.

    Computed in float64, returned in x's dtype. ``bits >= 32``: clip only; ``clip == 0``: all zeros.

    Parameters
    ----------
    x : torch.Tensor
        Float tensor.
    fmt : UniformFormat
        The format (bits and clip).
    rounding : str
        Canonical rounding mode.
    generator : torch.Generator or None
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor
        The rounded values, shaped like ``x``.
    """
    if fmt.clip == 0:
        return torch.zeros_like(x)
    if fmt.bits >= 32:
        return x.clamp(-fmt.clip, fmt.clip)
    q = uniform_levels(x, fmt, rounding, generator)
    n = 2 ** fmt.bits - 1
    return (q * (2 * fmt.clip / n) - fmt.clip).to(x.dtype)

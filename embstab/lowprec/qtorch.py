"""QPyTorch compatibility: reproduce ``qtorch.quant``'s documented numerics.

For re-running old papers' recipes. Differences from QPyTorch itself, on purpose: randomness comes
from an explicit ``torch.Generator`` (QPyTorch's CPU float/block stochastic rounding uses an
unseeded global mt19937), ``man=23`` is the identity (QPyTorch flips the sign, issue #48), and
stochastic rounding is exact in the subnormal range (QPyTorch pre-rounds there).
"""

from __future__ import annotations

from typing import Any

import torch

from embstab.errors import ConfigError
from embstab.lowprec.formats import BlockFloatFormat, FixedFormat, qtorch_float
from embstab.lowprec.quantize import quantize

__all__ = ["float_quantize", "fixed_point_quantize", "block_quantize"]

_MODES = ("nearest", "stochastic")


def _mode(rounding: str) -> str:
    if rounding not in _MODES:
        raise ConfigError(f"qtorch rounding must be 'nearest' or 'stochastic', got {rounding!r}")
    return rounding


def float_quantize(x: Any, exp: int, man: int, rounding: str = "stochastic",
                   generator: torch.Generator | int | None = None) -> Any:
    """QPyTorch ``float_quantize``: IEEE bias with every exponent code finite (e4m3 max 480),
    nearest = ties away from zero, saturation; for ``exp < 8`` Inf → ±max and NaN → +max; zero
    results lose their sign (−0 → +0). With ``exp = 8`` fp32's Inf/NaN are kept (bf16-like).

    Parameters
    ----------
    x : torch.Tensor or array_like
        Values to round.
    exp : int
        Exponent bits, 1..8.
    man : int
        Mantissa bits, 1..23.
    rounding : {"stochastic", "nearest"}, default "stochastic"
        Rounding mode.
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        The rounded values; numpy in → numpy out.

    Raises
    ------
    ValueError
        If ``exp`` or ``man`` is out of range, or ``rounding`` is neither mode.
    """
    if not (1 <= exp <= 8 and 1 <= man <= 23):
        raise ConfigError(f"qtorch float formats need 1 <= exp <= 8 and 1 <= man <= 23, got exp={exp}, man={man}")
    mode = "nearest_away" if _mode(rounding) == "nearest" else "stochastic"
    fmt = qtorch_float(exp, man)
    y = quantize(x, fmt, mode, generator)
    t = torch.as_tensor(y)
    if exp < 8:
        t = torch.where(torch.isnan(t), torch.full_like(t, fmt.max), t)
    t = t + 0.0  # zeros take QPyTorch's subnormal path (x + 2^emin - 2^emin) and lose their sign
    return t if isinstance(y, torch.Tensor) else t.numpy()


def fixed_point_quantize(x: Any, wl: int, fl: int, clamp: bool = True, symmetric: bool = False,
                         rounding: str = "stochastic", generator: torch.Generator | int | None = None) -> Any:
    """QPyTorch ``fixed_point_quantize`` (its CPU behaviour: nearest = ties to even).

    Parameters
    ----------
    x : torch.Tensor or array_like
        Values to round.
    wl : int
        Word length in bits, > 0.
    fl : int
        Fractional bits, > 0.
    clamp : bool, default True
        Clamp to the word's range.
    symmetric : bool, default False
        Drop the most negative code.
    rounding : {"stochastic", "nearest"}, default "stochastic"
        Rounding mode.
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        The rounded values; numpy in → numpy out.

    Raises
    ------
    ValueError
        If ``wl`` or ``fl`` is not positive, or ``rounding`` is neither mode.
    """
    if wl <= 0 or fl <= 0:
        raise ConfigError(f"qtorch fixed point needs wl > 0 and fl > 0, got wl={wl}, fl={fl}")
    return quantize(x, FixedFormat(wl, fl, symmetric=symmetric, clamp=clamp), _mode(rounding), generator)


def block_quantize(x: Any, wl: int, dim: int = -1, rounding: str = "stochastic",
                   generator: torch.Generator | int | None = None) -> Any:
    """QPyTorch ``block_quantize``: ``dim=-1`` shares one exponent over the tensor, ``dim=k`` one per
    index along axis k; nearest sends ties toward +inf; codes are clipped to ±(2**(wl-1) - 1).

    Parameters
    ----------
    x : torch.Tensor or array_like
        Values to round.
    wl : int
        Word length in bits, > 0.
    dim : int, default -1
        Axis of the shared exponents (−1: one exponent for the whole tensor).
    rounding : {"stochastic", "nearest"}, default "stochastic"
        Rounding mode.
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor or numpy.ndarray
        The rounded values; numpy in → numpy out.

    Raises
    ------
    ValueError
        If ``wl`` ≤ 0, ``dim`` < −1, or ``rounding`` is neither mode.
    """
    if wl <= 0 or dim < -1:
        raise ConfigError(f"qtorch block float needs wl > 0 and dim >= -1, got wl={wl}, dim={dim}")
    mode = "nearest_up" if _mode(rounding) == "nearest" else "stochastic"
    return quantize(x, BlockFloatFormat(wl, axis=None if dim == -1 else dim), mode, generator)

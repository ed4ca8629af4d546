"""Rounding modes, exact rounding of scaled values to integers, random draws and small tensor helpers.

Everything here works on torch tensors. The "scaled" representation is the workhorse of the exact
paths: a value is multiplied by an exact power of two so that the target grid becomes the
integers, then rounded to an integer in float64 (which holds every fp32 value and every integer up
to 2**53 exactly).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from embstab.errors import ConfigError, did_you_mean

__all__ = ["MAX_SR_BITS", "ROUNDINGS", "RoundingError", "check_rounding", "sr_bits", "as_generator", "kernel_seed", "round_integer", "uniform_bits", "scale_pow2"]

#: Rounding modes. "nearest" is round-half-to-even (IEEE default); "nearest_away" sends ties away
#: from zero (QPyTorch's float "nearest"); "nearest_up" sends ties toward +inf (QPyTorch's block
#: float); "toward_zero" truncates; "stochastic" rounds up with probability equal to the fraction.
ROUNDINGS = ("nearest", "nearest_away", "nearest_up", "toward_zero", "stochastic")
_ALIASES = {"rne": "nearest", "nearest_even": "nearest", "rna": "nearest_away", "rtz": "toward_zero",
            "sr": "stochastic", "truncate": "toward_zero"}


#: Largest number of random bits ``"stochastic:K"`` may use (float64 grid fractions have 52).
MAX_SR_BITS = 52


class RoundingError(ConfigError):
    """An unknown or malformed rounding-mode name."""


def check_rounding(rounding: str) -> str:
    """Canonical name of a rounding mode.

    Besides :data:`ROUNDINGS` (and aliases such as ``"rne"``, ``"sr"``), ``"stochastic:K"`` (also
    ``"sr:K"``, ``"sr_bits(K)"``) is stochastic rounding with only K random bits, as hardware
    does it: K random bits are added to the first K discarded bits and the sum truncated, so the
    probability of rounding up is the fraction truncated to K bits (biased toward zero by less
    than 2**-K of a grid step).

    Parameters
    ----------
    rounding : str
        A rounding name or alias (case-insensitive).

    Returns
    -------
    str
        The canonical name, e.g. ``"nearest"`` or ``"stochastic:8"``.

    Raises
    ------
    RoundingError
        For an unknown name (with a did-you-mean hint) or a bad K.
    TypeError
        If ``rounding`` is not a string.
    """
    if not isinstance(rounding, str):
        raise TypeError(f"rounding must be a string, got {type(rounding).__name__}")
    name = rounding.lower().strip()
    bits = _sr_bits(name)
    if bits is not None:
        if not 1 <= bits <= MAX_SR_BITS:
            raise RoundingError(f"stochastic rounding with K random bits needs 1 <= K <= {MAX_SR_BITS}, got {rounding!r}")
        return f"stochastic:{bits}"
    key = _ALIASES.get(name, name)
    if key not in ROUNDINGS:
        hint = did_you_mean(name, [*ROUNDINGS, *_ALIASES])
        raise RoundingError(f"unknown rounding {rounding!r}{hint}; expected one of {', '.join(ROUNDINGS)} "
                            "or 'stochastic:K' (K random bits)")
    return key


def _sr_bits(name: str) -> int | None:
    """K of a few-random-bits stochastic rounding name, else None (ValueError if K is not an int)."""
    for prefix, suffix in (("stochastic:", ""), ("sr:", ""), ("sr_bits(", ")")):
        if name.startswith(prefix) and name.endswith(suffix):
            text = name[len(prefix):len(name) - len(suffix)]
            try:
                return int(text)
            except ValueError:
                raise RoundingError(f"rounding {name!r}: K must be an integer number of random bits") from None
    return None


def sr_bits(rounding: str) -> int | None:
    """K of a canonical ``"stochastic:K"`` rounding (None for every other mode).

    Parameters
    ----------
    rounding : str
        A canonical rounding name (from :func:`check_rounding`).

    Returns
    -------
    int or None
        The number of random bits K.
    """
    return int(rounding.split(":", 1)[1]) if rounding.startswith("stochastic:") else None


def as_generator(generator: Any, device: torch.device) -> torch.Generator | None:
    """A ``torch.Generator`` from a generator, an int seed or None.

    Parameters
    ----------
    generator : torch.Generator, int or None
        An existing generator (returned as is), a seed for a fresh one, or None.
    device : torch.device
        Device of a generator made from a seed.

    Returns
    -------
    torch.Generator or None
        None means torch's default generator, so ``torch.manual_seed`` still governs code that
        passes nothing.

    Raises
    ------
    TypeError
        For any other type.
    """
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        g = torch.Generator(device=device)
        g.manual_seed(int(generator))
        return g
    raise TypeError(f"generator must be a torch.Generator, an int seed or None, got {type(generator).__name__}")


def kernel_seed(generator: torch.Generator | None, device: torch.device) -> int:
    """One draw from ``generator`` that seeds a compiled kernel's counter-based random stream.

    Parameters
    ----------
    generator : torch.Generator or None
        The caller's generator (None: torch's default generator on ``device``).
    device : torch.device
        Where the rounded tensor lives (the draw happens on the generator's own device).

    Returns
    -------
    int
        A seed in ``[0, 2**63 - 1)``: the same generator state gives the same seed, so kernel
        results stay reproducible under ``generator=``.
    """
    gdev = generator.device if generator is not None else device
    return int(torch.randint(0, 2**63 - 1, (1,), generator=generator, device=gdev, dtype=torch.int64))


def uniform_bits(shape: tuple[int, ...], bits: int, generator: torch.Generator | None, device: torch.device,
                 dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Independent uniform integers on ``[0, 2**bits)`` drawn from ``generator``.

    Parameters
    ----------
    shape : tuple of int
        Result shape.
    bits : int
        Bits per draw, 1..62.
    generator : torch.Generator or None
        Source of randomness (None: torch's default generator).
    device : torch.device
        Where the result lives.
    dtype : torch.dtype
        int32 (``bits <= 31``) or int64.

    Returns
    -------
    torch.Tensor
        Drawn on the generator's device (so a CPU generator gives the same stream whatever the
        tensor's device or the thread count) and moved afterwards.
    """
    gdev = generator.device if generator is not None else device
    n = math.prod(shape)
    if dtype == torch.int32 and bits <= 31:
        # the generator's cost is per draw: one 63-bit draw gives two int32 halves of >= 31
        # uniform bits each, masked to ``bits`` (twice as fast as one draw per element)
        r = torch.empty((n + 1) // 2, dtype=torch.int64, device=gdev).random_(generator=generator)
        r = r.view(torch.int32)[:n].reshape(shape)
        r &= 2 ** bits - 1
    else:
        r = torch.randint(0, 2 ** bits, shape, generator=generator, device=gdev, dtype=dtype)
    return r.to(device)


def scale_pow2(x: torch.Tensor, k: int | torch.Tensor) -> torch.Tensor:
    """``x * 2**k`` exactly (barring over/underflow of the result), for scalar or per-element k.

    ``torch.ldexp`` computes ``2**k`` first, which overflows float64 for |k| > 1023; splitting the
    exponent in two keeps every factor representable.

    Parameters
    ----------
    x : torch.Tensor
        Float tensor.
    k : int or torch.Tensor
        Exponent, or integer exponents broadcastable against ``x``.

    Returns
    -------
    torch.Tensor
        The scaled values, in ``x``'s dtype (broadcast shape for tensor ``k``).
    """
    if isinstance(k, int):
        if abs(k) <= 1000:
            return x * math.ldexp(1.0, k)
        h = k // 2
        return (x * math.ldexp(1.0, h)) * math.ldexp(1.0, k - h)
    h = torch.div(k, 2, rounding_mode="floor")
    one = torch.ones(torch.broadcast_shapes(x.shape, k.shape), dtype=x.dtype, device=x.device)
    return (x * torch.ldexp(one, h)) * torch.ldexp(one, k - h)


def round_integer(y: torch.Tensor, rounding: str, generator: torch.Generator | None) -> torch.Tensor:
    """Round float64 values ``y`` to integers (returned as float64).

    Nearest modes and truncation are exact and also accept float32 (the result keeps ``y``'s
    dtype); the stochastic modes need float64. Stochastic rounding works on the magnitude (so
    SR(-y) is distributed as -SR(y)) and rounds up iff ``u < frac(|y|)`` with ``u`` a 53-bit
    uniform: the probability equals the fraction exactly whenever the fraction is a multiple of
    2**-53, which holds for every fp32 input whose magnitude is at least 2**-29 grid steps; below
    that the error is under 2**-53 in absolute probability.

    Parameters
    ----------
    y : torch.Tensor
        Values to round.
    rounding : str
        Canonical rounding mode (see :func:`check_rounding`).
    generator : torch.Generator or None
        Randomness for the stochastic modes (its device may differ from ``y``'s).

    Returns
    -------
    torch.Tensor
        The integers, in ``y``'s dtype and shape.

    Raises
    ------
    TypeError
        If a stochastic mode gets a tensor that is not float64 (or any mode a non-float tensor).
    ValueError
        For an unknown rounding name.
    """
    if y.dtype != torch.float64 and (rounding.startswith("stochastic") or not y.is_floating_point()):
        raise TypeError("round_integer expects float64")
    if rounding == "nearest":
        return torch.round(y)
    if rounding == "toward_zero":
        return torch.trunc(y)
    f = torch.floor(y)
    diff = y - f  # exact: f and y share their high bits
    if rounding == "nearest_up":
        return f + (diff >= 0.5).to(y.dtype)
    if rounding == "nearest_away":
        return f + ((diff > 0.5) | ((diff == 0.5) & (y > 0))).to(y.dtype)
    if rounding == "stochastic":
        a = y.abs()
        fa = torch.floor(a)
        frac = a - fa
        gdev = generator.device if generator is not None else y.device
        u = torch.rand(y.shape, generator=generator, device=gdev, dtype=torch.float64).to(y.device)
        return torch.copysign(fa + (u < frac), y)
    k = sr_bits(rounding)
    if k is not None:
        # hardware adds K random bits to the first K bits of the fraction and truncates: up with
        # probability floor(frac * 2**K) / 2**K, which is what r < floor(frac * 2**K) draws
        a = y.abs()
        fa = torch.floor(a)
        kept = torch.floor(scale_pow2(a - fa, k))  # exact: a power-of-two scaling, then floor
        gdev = generator.device if generator is not None else y.device
        r = torch.randint(0, 2**k, y.shape, generator=generator, device=gdev, dtype=torch.int64).to(y.device)
        return torch.copysign(fa + (r.double() < kept), y)
    raise ConfigError(f"unknown rounding {rounding!r}")

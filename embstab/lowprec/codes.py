"""Integer codes for storage: float bit patterns and the shared-exponent :class:`BlockCodes`.

:func:`embstab.lowprec.encode`/:func:`~embstab.lowprec.decode` dispatch through the format
handlers (:mod:`embstab.lowprec.handlers`), which build on these. Float codes are the standard ``sign | exponent | mantissa`` layouts, so they agree bit for bit
with ml_dtypes and torch's fp8 dtypes (e.g. ``encode(x, FP8_E4M3FN)`` equals
``x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from embstab.errors import ConfigError
from embstab.lowprec.formats import BlockFloatFormat, FloatFormat, MXFormat
from embstab.lowprec.rounding import scale_pow2

__all__ = ["BlockCodes", "CodeError", "float_codes", "float_values", "float_code_table"]


class CodeError(ConfigError):
    """A value cannot be stored in the requested format (e.g. NaN in a format without a NaN code)."""


@dataclass
class BlockCodes:
    """Codes of a shared-exponent format: per-element ``codes`` plus one ``exponents`` entry per
    block (the step exponent for block float; the E8M0 byte, i.e. scale exponent +
    :data:`~embstab.lowprec.formats.E8M0_BIAS`, for MX), and the original ``shape``."""

    codes: torch.Tensor
    exponents: torch.Tensor
    shape: tuple[int, ...]
    format: BlockFloatFormat | MXFormat


def float_codes(v: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Bit patterns of values already on ``fmt``'s grid.

    Parameters
    ----------
    v : torch.Tensor
        Values representable in ``fmt`` (e.g. results of quantize).
    fmt : FloatFormat

    Returns
    -------
    torch.Tensor
        int64 codes.

    Raises
    ------
    CodeError
        For NaN in a format without a NaN code.
    """
    v = v.double()
    e, m = fmt.exp_bits, fmt.man_bits
    sign = torch.signbit(v).long()
    a = v.abs()
    nan = torch.isnan(v)
    inf = torch.isinf(v)
    safe = torch.where(nan | inf, torch.zeros_like(a), a)
    _, ex = torch.frexp(safe)
    normal = safe >= fmt.min_normal
    E = torch.where(normal, ex - 1, torch.full_like(ex, fmt.emin))
    frac = scale_pow2(safe, (fmt.man_bits - E).long())  # normal: in [2^m, 2^(m+1)); subnormal: < 2^m
    man = frac.long() - torch.where(normal, 1 << m, 0)
    code = (sign << (e + m)) | (torch.where(normal, E + fmt.bias, 0).long() << m) | man
    top = (1 << e) - 1
    if inf.any():
        code = torch.where(inf, (sign << (e + m)) | (top << m), code)
    if nan.any():
        if fmt.specials == "finite":
            raise CodeError(f"NaN cannot be stored in {fmt}, which has no NaN code")
        if fmt.specials == "ieee":
            if m == 0:
                raise CodeError(f"NaN cannot be stored in {fmt}: an ieee format needs a mantissa bit for NaN")
            nan_code = (top << m) | (1 << (m - 1))
        elif fmt.specials == "fn":
            nan_code = (top << m) | ((1 << m) - 1)
        else:  # fnuz: the would-be negative zero
            nan_code = 1 << (e + m)
        code = torch.where(nan, torch.full_like(code, nan_code), code)
    return code


def float_values(codes: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """float64 values of bit patterns.

    Parameters
    ----------
    codes : torch.Tensor
        Integer bit patterns of ``fmt``.
    fmt : FloatFormat

    Returns
    -------
    torch.Tensor
        float64 values (NaN/Inf for the special codes).
    """
    c = codes.long()
    e, m = fmt.exp_bits, fmt.man_bits
    sign = (c >> (e + m)) & 1
    ef = (c >> m) & ((1 << e) - 1)
    mf = (c & ((1 << m) - 1)).double()
    normal = ef > 0
    mag = torch.where(normal, scale_pow2(mf + (1 << m), (ef - fmt.bias - m).clamp(min=-1074)),
                      scale_pow2(mf, fmt.emin - m))
    top = (1 << e) - 1
    if fmt.specials == "ieee":
        mag = torch.where(ef == top, torch.where(mf == 0, math.inf, math.nan), mag)
    elif fmt.specials == "fn":
        mag = torch.where((ef == top) & (mf == (1 << m) - 1), math.nan, mag)
    elif fmt.specials == "fnuz":
        mag = torch.where(c == (1 << (e + m)), math.nan, mag)
    return torch.where(sign.bool(), -mag, mag)


def float_code_table(fmt: FloatFormat) -> np.ndarray:
    """The float64 value of every code of a format of at most 16 bits.

    Parameters
    ----------
    fmt : FloatFormat

    Returns
    -------
    numpy.ndarray
        ``table[code]`` is the code's value.

    Raises
    ------
    CodeError
        For formats wider than 16 bits.
    """
    if fmt.bits > 16:
        raise CodeError(f"{fmt} has {fmt.bits} bits; a code table needs at most 16")
    return float_values(torch.arange(2 ** fmt.bits), fmt).numpy()

"""Integer codes for storage: :func:`encode` a tensor into a format's bit patterns, :func:`decode` back.

Float codes are the standard ``sign | exponent | mantissa`` layouts, so they agree bit for bit
with ml_dtypes and torch's fp8 dtypes (e.g. ``encode(x, FP8_E4M3FN)`` equals
``x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from embstab.errors import EmbstabError
from embstab.lowprec._core import as_generator, check_rounding, round_integer, scale_pow2
from embstab.lowprec.blockq import block_view, mx_scale_exponents, block_exponents
from embstab.lowprec.fixedq import fixed_integers, uniform_levels
from embstab.lowprec.floatq import quantize_float
from embstab.lowprec.formats import (BlockFloatFormat, FixedFormat, FloatFormat, Format, MXFormat, UniformFormat,
                                     get_format)
from embstab.lowprec.quantize import to_work_tensor

__all__ = ["encode", "decode", "BlockCodes", "CodeError", "float_code_table"]


class CodeError(EmbstabError, ValueError):
    """A value cannot be stored in the requested format (e.g. NaN in a format without a NaN code)."""


@dataclass
class BlockCodes:
    """Codes of a shared-exponent format: per-element ``codes`` plus one ``exponents`` entry per
    block (the step exponent for block float; the E8M0 byte, i.e. scale exponent + 127, for MX),
    and the original ``shape``."""

    codes: torch.Tensor
    exponents: torch.Tensor
    shape: tuple[int, ...]
    format: BlockFloatFormat | MXFormat


def _float_codes(v: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Bit patterns (int64) of values already on ``fmt``'s grid."""
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


def _float_values(codes: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """float64 values of bit patterns."""
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
    """The float64 value of every code of a format of at most 16 bits (index = code)."""
    if fmt.bits > 16:
        raise ValueError(f"{fmt} has {fmt.bits} bits; a code table needs at most 16")
    return _float_values(torch.arange(2 ** fmt.bits), fmt).numpy()


def _code_dtype(bits: int) -> torch.dtype:
    return torch.uint8 if bits <= 8 else (torch.int32 if bits <= 31 else torch.int64)


def encode(x: Any, fmt: Format | str, rounding: str = "nearest", generator: torch.Generator | int | None = None):
    """Round ``x`` onto ``fmt`` and return integer codes.

    Returns
    -------
    For float formats: bit patterns (uint8 up to 8 bits, else int32/int64). Fixed point: the
    integer ``k`` with value ``k * 2**-frac_bits``. Uniform: the level index in
    ``[0, 2**bits - 1]`` (``bits >= 32``: the float32 bit pattern of the clipped value). Block and
    MX formats: a :class:`BlockCodes`. torch in → torch out; numpy in → numpy out (BlockCodes
    always hold tensors).

    Raises
    ------
    CodeError
        If a value has no code (NaN in a format without NaN, non-finite input to fixed, uniform
        or block formats).
    """
    fmt = get_format(fmt)
    rounding = check_rounding(rounding)
    is_numpy = not isinstance(x, torch.Tensor)
    t, _ = to_work_tensor(x)
    gen = as_generator(generator, t.device)
    with torch.no_grad():
        if isinstance(fmt, (FixedFormat, UniformFormat, BlockFloatFormat, MXFormat)) and not torch.isfinite(t).all():
            raise CodeError(f"{fmt} has no codes for NaN or Inf")
        if isinstance(fmt, FloatFormat):
            out = _float_codes(quantize_float(t, fmt, rounding, gen), fmt).to(_code_dtype(fmt.bits))
        elif isinstance(fmt, FixedFormat):
            k, _ = fixed_integers(t, fmt, rounding, gen)
            out = k.long()
        elif isinstance(fmt, UniformFormat):
            if fmt.bits >= 32:
                out = t.float().clamp(-fmt.clip, fmt.clip).view(torch.int32)
            elif fmt.clip == 0:
                out = torch.full(t.shape, (2 ** fmt.bits - 1) // 2, dtype=_code_dtype(fmt.bits))
            else:
                out = uniform_levels(t, fmt, rounding, gen).to(_code_dtype(fmt.bits))
        elif isinstance(fmt, BlockFloatFormat):
            view, dims, _ = block_view(t, fmt.block_size, fmt.axis)
            E, _ = block_exponents(view, dims)
            se = E - (fmt.word_bits - 2)
            hi = 2 ** (fmt.word_bits - 1) - 1
            k = round_integer(scale_pow2(view.double(), -se), rounding, gen).clamp(-hi - (not fmt.symmetric), hi)
            return BlockCodes(k.to(torch.int32), se.to(torch.int32), tuple(t.shape), fmt)
        elif isinstance(fmt, MXFormat):
            view, _, _ = block_view(t, fmt.block_size, fmt.axis)
            s, _ = mx_scale_exponents(view, fmt)
            v = scale_pow2(view.double(), -s)
            if fmt.element == "int8":
                codes = round_integer(v * 64.0, rounding, gen).clamp(-127, 127).to(torch.int8)
            else:
                codes = _float_codes(quantize_float(v, fmt.element, rounding, gen), fmt.element).to(torch.uint8)
            return BlockCodes(codes, (s + 127).to(torch.uint8), tuple(t.shape), fmt)
        else:
            raise TypeError(f"fmt must be a number format, got {type(fmt).__name__}")
    return out.numpy() if is_numpy else out


def decode(codes: Any, fmt: Format | str | None = None, dtype: torch.dtype = torch.float32):
    """Values of ``codes`` produced by :func:`encode` with format ``fmt`` (as ``dtype``; numpy
    codes give a numpy array). For :class:`BlockCodes` the format is taken from the codes."""
    if isinstance(codes, BlockCodes):
        fmt = codes.format
        view_codes = codes.codes
        if isinstance(fmt, BlockFloatFormat):
            vals = scale_pow2(view_codes.double(), codes.exponents.long())
        else:
            s = codes.exponents.long() - 127
            elem = view_codes.double() / 64.0 if fmt.element == "int8" else _float_values(view_codes, fmt.element)
            vals = scale_pow2(elem, s)
        ref = torch.empty(codes.shape, dtype=torch.float64)
        _, _, restore = block_view(ref, fmt.block_size, fmt.axis)
        return restore(vals).to(dtype)
    if fmt is None:
        raise TypeError("decode needs the format the codes were encoded with")
    fmt = get_format(fmt)
    is_numpy = not isinstance(codes, torch.Tensor)
    c = torch.as_tensor(np.asarray(codes).astype(np.int64)) if is_numpy else codes
    if isinstance(fmt, FloatFormat):
        out = _float_values(c, fmt)
    elif isinstance(fmt, FixedFormat):
        out = scale_pow2(c.double(), -fmt.frac_bits)
    elif isinstance(fmt, UniformFormat):
        if fmt.bits >= 32:
            out = c.to(torch.int32).view(torch.float32).double()
        else:
            out = c.double() * (2 * fmt.clip / (2 ** fmt.bits - 1)) - fmt.clip
    else:
        raise TypeError(f"{type(fmt).__name__} codes come as BlockCodes")
    out = out.to(dtype)
    return out.numpy() if is_numpy else out

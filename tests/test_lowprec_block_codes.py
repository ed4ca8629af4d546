"""Block float and MX formats, and integer codes for every format."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from embstab.lowprec import (BF16, FP4_E2M1, FP6_E2M3, FP6_E3M2, FP8_E4M3FN, FP8_E5M2, FP16, MXFP4, MXFP8_E4M3,
                             MXINT8, BlockCodes, BlockFloatFormat, CodeError, FixedFormat, MXFormat, UniformFormat,
                             decode, encode, float_code_table, quantize)


def _rows(n=40, d=50, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d)) * np.exp2(rng.uniform(-8, 8, (n, 1)))).astype(np.float32)


def test_block_float_per_row_matches_float64_reference():
    x = _rows()
    wl = 6
    got = quantize(x, BlockFloatFormat(wl, axis=0))
    amax = np.abs(x).max(axis=1, keepdims=True).astype(np.float64)
    step = np.exp2(np.floor(np.log2(amax)) - (wl - 2))
    ref = np.clip(np.round(x / step), -(2 ** (wl - 1) - 1), 2 ** (wl - 1) - 1) * step
    assert np.array_equal(got, ref.astype(np.float32))


def test_block_float_swalp_range_and_zero_blocks():
    x = torch.tensor([[-1.999, 0.5], [0.0, 0.0]])
    sym = quantize(x, BlockFloatFormat(4, axis=0))
    asym = quantize(x, BlockFloatFormat(4, axis=0, symmetric=False))
    assert sym[0, 0].item() == -1.75 and asym[0, 0].item() == -2.0
    assert torch.equal(sym[1], torch.zeros(2))


def test_block_with_inf_becomes_nan_block():
    y = quantize(torch.tensor([[1.0, math.inf], [1.0, 2.0]]), BlockFloatFormat(8, axis=0))
    assert torch.isnan(y[0]).all() and torch.equal(y[1], torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("fmt,cast", [
    (MXFP4, lambda v: v.astype(ml_dtypes.float4_e2m1fn).astype(np.float64)),
    (MXFP8_E4M3, lambda v: torch.from_numpy(v.astype(np.float32)).to(torch.float8_e4m3fn).double().numpy()),
], ids=["mxfp4", "mxfp8_e4m3"])
def test_mx_matches_blockwise_reference(fmt, cast):
    x = _rows(8, 70)  # 70 columns: blocks of 32, 32 and a short 6
    got = quantize(x, fmt)
    ref = np.empty_like(x, dtype=np.float64)
    for i in range(x.shape[0]):
        for s in range(0, 70, 32):
            blk = x[i, s:s + 32].astype(np.float64)
            e = np.clip(np.floor(np.log2(np.abs(blk).max())) - fmt.emax_elem, -127, 127)
            ref[i, s:s + 32] = cast(blk / 2 ** e) * 2 ** e  # element cast saturates (torch) / is finite (fp4)
    assert np.array_equal(got, ref.astype(np.float32))


def test_mxint8_equals_block_float_8_over_blocks_of_32():
    x = _rows(6, 64)
    assert np.array_equal(quantize(x, MXINT8), quantize(x, BlockFloatFormat(8, block_size=32)))


def test_mx_scale_clamps_to_e8m0_range():
    tiny = np.full((1, 32), 2.0 ** -140, np.float32)
    y = quantize(tiny, MXFP8_E4M3)  # scale 2^-127: elements 2^-13 underflow e4m3fn's 2^-9 floor to zero
    assert np.all(y == 0)


@pytest.mark.parametrize("fmt,dt", [(BF16, ml_dtypes.bfloat16), (FP16, np.float16), (FP8_E4M3FN, ml_dtypes.float8_e4m3fn),
                                    (FP8_E5M2, ml_dtypes.float8_e5m2), (FP6_E3M2, ml_dtypes.float6_e3m2fn),
                                    (FP6_E2M3, ml_dtypes.float6_e2m3fn), (FP4_E2M1, ml_dtypes.float4_e2m1fn)], ids=str)
def test_float_codes_match_ml_dtypes_bit_patterns(fmt, dt):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(5000) * 3, [0.0, -0.0, fmt.min_subnormal, -fmt.max]]).astype(np.float32)
    codes = encode(x, fmt)
    ref = x.astype(dt).view(np.uint16 if fmt.bits == 16 else np.uint8)
    assert np.array_equal(codes.astype(np.int64), ref.astype(np.int64))
    assert np.array_equal(decode(codes, fmt), quantize(x, fmt))
    table = float_code_table(fmt) if fmt.bits <= 16 else None
    with np.errstate(invalid="ignore"):  # NaN payloads widen with a warning
        ref_table = np.arange(2 ** fmt.bits, dtype=np.uint16 if fmt.bits == 16 else np.uint8).view(dt).astype(np.float64)
    assert np.array_equal(table, ref_table, equal_nan=True)


def test_nan_and_inf_codes():
    assert np.isnan(decode(encode(np.float32(np.nan), FP8_E4M3FN), FP8_E4M3FN))
    assert decode(encode(np.float32(-np.inf), FP8_E5M2), FP8_E5M2) == -np.inf
    with pytest.raises(CodeError, match="no NaN code"):
        encode(np.array([np.nan], np.float32), FP4_E2M1)
    with pytest.raises(CodeError, match="NaN or Inf"):
        encode(np.array([np.inf], np.float32), UniformFormat(4, 1.0))


@pytest.mark.parametrize("fmt", [FixedFormat(8, 3), FixedFormat(6, -2, symmetric=True), UniformFormat(3, 1.5),
                                 UniformFormat(32, 1.0), BlockFloatFormat(5, axis=0), BlockFloatFormat(6, block_size=16),
                                 MXFP4, MXINT8, MXFormat(FP6_E2M3, block_size=8)], ids=str)
def test_decode_of_encode_is_quantize(fmt):
    x = torch.from_numpy(_rows(5, 40, seed=2))
    codes = encode(x, fmt)
    if isinstance(codes, BlockCodes):
        assert codes.codes.numel() >= x.numel()
    back = decode(codes, fmt)
    assert torch.equal(back, quantize(x, fmt))


def test_uniform_codes_are_level_indices():
    fmt = UniformFormat(2, 1.5)
    codes = encode(np.array([-9.0, -0.4, 0.6, 1.5], np.float32), fmt)
    assert codes.tolist() == [0, 1, 2, 3]

"""The native-cast fast path of ``quantize``: exactly the float64 reference wherever it is taken."""

from __future__ import annotations

import pytest
import torch

from embstab.lowprec import FloatFormat, quantize
from embstab.lowprec.floatq import _native_dtypes, native_dtype, quantize_float_reference


def _patterns() -> torch.Tensor:
    """Every sign/exponent/top-7-mantissa-bit prefix with low bits at and around every tie
    position of a <= 16-bit format, plus random fp32 patterns (NaN, Inf, subnormals included)."""
    hi = torch.arange(1 << 16, dtype=torch.int32) << 16
    lows = [0, 1, 0xFFFF, 0x7FFF, 0x8000, 0x8001]
    for bit in (12, 13, 19, 20, 21):  # tie bits of fp16 / fp8 e4m3 / e5m2
        lows += [(1 << bit) - 1, 1 << bit, (1 << bit) + 1]
    x = (hi[:, None] | torch.tensor(lows, dtype=torch.int32)[None, :]).reshape(-1)
    g = torch.Generator().manual_seed(0)
    rnd = torch.randint(-2**31, 2**31 - 1, (1 << 18,), generator=g, dtype=torch.int64).to(torch.int32)
    return torch.cat([x, rnd]).view(torch.float32)


@pytest.mark.parametrize("fmt", sorted(_native_dtypes(), key=str), ids=str)
def test_native_cast_equals_reference(fmt):
    x = _patterns()
    assert native_dtype(fmt, "nearest", torch.float32) is not None
    got, ref = quantize(x, fmt), quantize_float_reference(x, fmt)
    same = (got.view(torch.int32) == ref.view(torch.int32)) | (got.isnan() & ref.isnan())
    assert bool(same.all()), x[~same][:5].tolist()


def test_native_path_only_where_exact():
    bf16 = FloatFormat(8, 7)
    assert native_dtype(bf16, "nearest", torch.float32) is torch.bfloat16
    assert native_dtype(bf16, "stochastic", torch.float32) is None
    assert native_dtype(bf16, "nearest", torch.float64) is None  # torch would round twice via fp32
    assert native_dtype(FloatFormat(4, 3, "fn"), "nearest", torch.float32) is None  # torch saturates, fn is NaN
    assert native_dtype(FloatFormat(5, 2, overflow="saturate"), "nearest", torch.float32) is None

"""Specials (±Inf, NaN, overflow, ±0) per overflow policy, and the QPyTorch-compatible numerics."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from embstab.lowprec import BF16, FP4_E2M1, FP6_E3M2, FP8_E4M3FN, FP8_E4M3FNUZ, FP8_E5M2, FP16, quantize
from embstab.lowprec.qtorch import block_quantize, fixed_point_quantize, float_quantize

SPECIALS = np.array([464.0, 470.0, 1e6, -1e6, np.inf, -np.inf, np.nan, 448.0], np.float32)


def test_e4m3fn_default_policy_is_nan_like_ml_dtypes():
    got = quantize(SPECIALS, FP8_E4M3FN)
    ref = SPECIALS.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.array_equal(got, ref, equal_nan=True)
    assert got[0] == 448.0 and np.isnan(got[1])  # 464 is a tie that rounds to even (448); above it is NaN


def test_e4m3fn_saturating_policy_matches_torch_cast():
    fmt = FP8_E4M3FN.replace(overflow="saturate")
    x = torch.from_numpy(SPECIALS[~np.isnan(SPECIALS)])
    assert torch.equal(quantize(x, fmt), x.to(torch.float8_e4m3fn).float())  # torch saturates, even ±Inf


def test_ieee_formats_overflow_to_inf_like_casts():
    x = np.array([57344.0, 61439.0, 61440.0, -1e9, np.inf, np.nan], np.float32)
    assert np.array_equal(quantize(x, FP8_E5M2), x.astype(ml_dtypes.float8_e5m2).astype(np.float32), equal_nan=True)
    big = torch.tensor([3.4e38, -3.4028235e38, 65520.0, 65519.0, math.inf])
    assert torch.equal(quantize(big, BF16), big.to(torch.bfloat16).float())
    assert torch.equal(quantize(big, FP16), big.half().float())


def test_ieee_saturate_keeps_infinities_but_clamps_finite_overflow():
    fmt = FP16.replace(overflow="saturate")
    assert quantize(np.array([1e6, -np.inf], np.float32), fmt).tolist() == [65504.0, -math.inf]


def test_finite_formats_saturate_and_keep_nan():
    x = np.array([7.0, 100.0, np.inf, -np.inf, np.nan], np.float32)
    got = quantize(x, FP4_E2M1)
    assert got[:4].tolist() == [6.0, 6.0, 6.0, -6.0]
    assert np.isnan(got[4])  # documented choice: NaN stays NaN (ml_dtypes gives -0)
    assert quantize(np.float32(1e9), FP6_E3M2) == 28.0


def test_signed_zeros():
    x = np.array([0.0, -0.0, -1e-30], np.float32)
    assert np.signbit(quantize(x, FP8_E4M3FN)).tolist() == [False, True, True]
    assert np.signbit(quantize(x, FP8_E4M3FNUZ)).tolist() == [False, False, False]  # fnuz has no -0


def test_toward_zero_never_overflows_a_finite_input():
    assert quantize(np.float32(1e6), FP16, "toward_zero") == 65504.0
    assert quantize(np.float32(-np.inf), FP16, "toward_zero") == -np.inf


# ---------------------------------------------------------------- qtorch compatibility (spec §1.3–1.4)
def test_qtorch_float_nearest_is_ties_away():
    assert float_quantize(torch.tensor([1.00048828125]), 5, 10, "nearest").item() == 1.0009765625
    assert torch.tensor([1.00048828125]).half().item() == 1.0


def test_qtorch_float_maxima_and_specials():
    x = torch.tensor([1e9, -1e9, math.inf, math.nan, -0.0, -1e-30])
    y = float_quantize(x, 4, 3, "nearest")
    assert y[:4].tolist() == [480.0, -480.0, 480.0, 480.0]  # NaN -> +max
    assert not torch.signbit(y[4:]).any()  # -0 and underflowed negatives come back as +0
    assert float_quantize(torch.tensor([1e9]), 5, 2, "nearest").item() == 114688.0
    assert float_quantize(torch.tensor([1e9]), 5, 10, "nearest").item() == 131008.0
    assert math.isinf(float_quantize(torch.tensor([math.inf]), 8, 7, "nearest").item())
    bf = float_quantize(torch.tensor([-0.0, -1e-30, -1e-45]), 8, 7, "nearest")
    assert torch.signbit(bf).tolist() == [False, True, False]  # bf16 keeps the sign of non-zero results


def test_qtorch_man23_is_identity_not_sign_flip():
    x = torch.tensor([3.0, -1.2345678])
    assert torch.equal(float_quantize(x, 8, 23, "nearest"), x)


def test_qtorch_fp6_fp4_match_ml_dtypes_off_ties():
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal(100_000).astype(np.float32) * 3)
    for (e, m), dt in [((3, 2), ml_dtypes.float6_e3m2fn), ((2, 3), ml_dtypes.float6_e2m3fn), ((2, 1), ml_dtypes.float4_e2m1fn)]:
        got = float_quantize(x, e, m, "nearest").numpy()
        ref = x.numpy().astype(dt).astype(np.float32)
        assert (got != ref).sum() == 0  # random normals essentially never hit an exact tie


def test_qtorch_fixed_cpu_ties_even():
    x = torch.tensor([0.125, 0.375, 0.625, 100.0, -100.0])
    assert fixed_point_quantize(x, 8, 2, rounding="nearest").tolist() == [0.0, 0.5, 0.5, 31.75, -32.0]
    assert fixed_point_quantize(x, 8, 2, symmetric=True, rounding="nearest")[-1].item() == -31.75


def test_qtorch_block_ties_toward_plus_inf_and_axis_semantics():
    y = block_quantize(torch.tensor([0.3125, -0.3125, 2.0]), 6, rounding="nearest")
    assert y.tolist() == [0.375, -0.25, 2.0]
    x = torch.tensor([[1.0, 0.3], [100.0, 3.0]])
    assert block_quantize(x, 6, dim=0, rounding="nearest").tolist() == [[1.0, 0.3125], [100.0, 4.0]]
    assert block_quantize(x, 6, dim=1, rounding="nearest").tolist() == [[0.0, 0.25], [100.0, 3.0]]


def test_qtorch_argument_checks():
    with pytest.raises(ValueError, match="man"):
        float_quantize(torch.ones(1), 4, 24)
    with pytest.raises(ValueError, match="fl > 0"):
        fixed_point_quantize(torch.ones(1), 8, 0)
    with pytest.raises(ValueError, match="rounding"):
        block_quantize(torch.ones(1), 8, rounding="toward_zero")

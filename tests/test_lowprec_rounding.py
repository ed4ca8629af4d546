"""Round-to-nearest against the oracles: ml_dtypes casts, torch casts, and a float64 reference."""

from __future__ import annotations

import math

import ml_dtypes

from embstab.errors import UnknownNameError
import numpy as np
import pytest
import torch

from embstab.lowprec import (BF16, FP4_E2M1, FP6_E2M3, FP6_E3M2, FP8_E3M4, FP8_E4M3, FP8_E4M3FN, FP8_E4M3FNUZ,
                             FP8_E5M2, FP8_E5M2FNUZ, FP16, FloatFormat, float_code_table, quantize)
from embstab.lowprec.floatq import quantize_float_reference

ORACLES = [
    (BF16, ml_dtypes.bfloat16), (FP16, np.float16), (FP8_E4M3FN, ml_dtypes.float8_e4m3fn),
    (FP8_E4M3, ml_dtypes.float8_e4m3), (FP8_E4M3FNUZ, ml_dtypes.float8_e4m3fnuz), (FP8_E5M2, ml_dtypes.float8_e5m2),
    (FP8_E5M2FNUZ, ml_dtypes.float8_e5m2fnuz), (FP8_E3M4, ml_dtypes.float8_e3m4), (FP6_E3M2, ml_dtypes.float6_e3m2fn),
    (FP6_E2M3, ml_dtypes.float6_e2m3fn), (FP4_E2M1, ml_dtypes.float4_e2m1fn),
]
IDS = [str(f) for f, _ in ORACLES]


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise bit equality (so -0 != +0), NaNs equal to NaNs."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    return (a.view(np.int32) == b.view(np.int32)) | (np.isnan(a) & np.isnan(b))


def in_range_inputs(fmt: FloatFormat, n: int = 40_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo, hi = math.log2(fmt.min_subnormal) - 3, math.log2(fmt.max)
    mags = np.exp2(rng.uniform(lo, hi, n))
    x = (rng.choice([-1.0, 1.0], n) * mags).astype(np.float32)
    dense_ties = rng.standard_normal(n).astype(ml_dtypes.bfloat16).astype(np.float32) * np.float32(fmt.max / 8)
    return np.concatenate([x, dense_ties, rng.standard_normal(n).astype(np.float32)])


def grid(fmt: FloatFormat) -> np.ndarray:
    """Every finite value of a <= 16-bit format, sorted, unique (as float64)."""
    t = float_code_table(fmt)
    return np.unique(t[np.isfinite(t)])


@pytest.mark.parametrize("fmt,dt", ORACLES, ids=IDS)
def test_random_inputs_match_ml_dtypes(fmt, dt):
    x = in_range_inputs(fmt)
    x = x[np.abs(x) <= fmt.max]  # specials and overflow are tested separately, per policy
    ref = x.astype(dt).astype(np.float32)
    assert same_bits(quantize(x, fmt), ref).all()


@pytest.mark.parametrize("fmt,dt", ORACLES, ids=IDS)
def test_grid_points_midpoints_and_neighbours(fmt, dt):
    g = grid(fmt)
    assert np.array_equal(g.astype(np.float32), quantize(g.astype(np.float32), fmt))  # each value maps to itself
    mids = ((g[1:] + g[:-1]) / 2).astype(np.float32)
    mids = mids[np.abs(mids) <= fmt.max]
    for x in (mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))):
        assert same_bits(quantize(x, fmt), x.astype(dt).astype(np.float32)).all()


@pytest.mark.parametrize("fmt,dt", ORACLES, ids=IDS)
def test_boundary_values(fmt, dt):
    s, mn = fmt.min_subnormal, fmt.min_normal
    vals = np.array([0.0, -0.0, s, -s, s / 2, -s / 2, s * 0.75, s / 2 * 1.0001, mn, np.nextafter(np.float32(mn), 0),
                     np.nextafter(np.float32(mn), 1e9), fmt.max, -fmt.max], np.float32)
    got = quantize(vals, fmt)
    assert same_bits(got, vals.astype(dt).astype(np.float32)).all()
    assert got[4] == 0.0  # half the smallest subnormal ties to even (zero) under RNE


@pytest.mark.parametrize("fmt,dt", ORACLES, ids=IDS)
def test_matches_float64_reference_on_wide_inputs(fmt, dt):
    with np.errstate(over="ignore"):
        x = torch.from_numpy(in_range_inputs(fmt, 5000, seed=3) * np.float32(4))  # some overflow to Inf
    for mode in ("nearest", "nearest_away", "toward_zero", "nearest_up"):
        fast = quantize(x, fmt, mode)
        ref = quantize_float_reference(x, fmt, mode)
        assert same_bits(fast.numpy(), ref.numpy()).all(), mode


def test_fp64_input_rounds_directly():
    x = torch.tensor([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11], dtype=torch.float64)
    y = quantize(x, FP16)
    assert y.dtype == torch.float64
    # a double-rounding path via fp32 would see an exact tie for the first value and round it to even (1.0)
    assert y.tolist() == [1 + 2.0 ** -10, 1.0]


def test_all_bf16_and_fp16_patterns_and_midpoints_match_torch_casts():
    hi = torch.arange(2 ** 16, dtype=torch.int32) << 16
    lows = torch.tensor([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=torch.int32)
    x = (hi[:, None] | lows[None, :]).reshape(-1).view(torch.float32)
    got = quantize(x, BF16)
    ref = x.to(torch.bfloat16).float()
    assert same_bits(got.numpy(), ref.numpy()).all()

    halves = torch.arange(2 ** 16, dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    fin = halves[torch.isfinite(halves)].double().unique()
    mids = ((fin[1:] + fin[:-1]) / 2).float()
    cand = torch.cat([halves, mids, torch.nextafter(mids, torch.tensor(math.inf)),
                      torch.nextafter(mids, torch.tensor(-math.inf))])
    assert same_bits(quantize(cand, FP16).numpy(), cand.half().float().numpy()).all()
    # and every bf16 value fed to fp16, against torch's fp16 cast
    xb = hi.view(torch.float32)
    assert same_bits(quantize(xb, FP16).numpy(), xb.half().float().numpy()).all()


def test_output_dtype_follows_input():
    x16 = torch.tensor([1.2345, -3.5], dtype=torch.bfloat16)
    assert quantize(x16, FP8_E4M3FN).dtype == torch.bfloat16
    assert quantize(np.float64(1.0001), BF16).dtype == np.float64
    assert quantize(np.array([1.0], np.float32), "fp4").dtype == np.float32


@pytest.mark.parametrize("fmt", [FloatFormat(3, 2, "finite", subnormals=False), FloatFormat(6, 5),
                                 FloatFormat(9, 4), FloatFormat(4, 0, "finite"), FloatFormat(11, 20)], ids=str)
def test_exotic_formats_match_reference(fmt):
    rng = np.random.default_rng(5)
    x = torch.from_numpy((rng.standard_normal(20000) * np.exp2(rng.uniform(-140, 40, 20000))).astype(np.float32))
    x = torch.cat([x, torch.tensor([1e-45, -1e-45, 2.0 ** -126, 3e-39])])
    for mode in ("nearest", "toward_zero", "nearest_away"):
        assert same_bits(quantize(x, fmt, mode).numpy(), quantize_float_reference(x, fmt, mode).numpy()).all()


def test_no_subnormals_rounds_onto_zero_or_min_normal():
    fmt = FloatFormat(3, 2, "finite", subnormals=False)  # min normal 0.25
    x = np.array([0.1, 0.125, 0.13, -0.2, 0.3], np.float32)
    assert quantize(x, fmt).tolist() == [0.0, 0.0, 0.25, -0.25, 0.3125]


def test_rounding_modes_on_a_tie():
    x = np.array([1 + 2 ** -11, -(1 + 2 ** -11), 1 + 3 * 2 ** -11, 1 + 1.5 * 2 ** -10], np.float32)
    ulp = 2 ** -10
    assert quantize(x, FP16, "nearest").tolist() == [1.0, -1.0, 1 + 2 * ulp, 1 + 2 * ulp]
    assert quantize(x, FP16, "nearest_away").tolist() == [1 + ulp, -(1 + ulp), 1 + 2 * ulp, 1 + 2 * ulp]
    assert quantize(x, FP16, "nearest_up").tolist() == [1 + ulp, -1.0, 1 + 2 * ulp, 1 + 2 * ulp]
    assert quantize(x, FP16, "toward_zero").tolist() == [1.0, -1.0, 1 + ulp, 1 + ulp]
    pow2 = FloatFormat(5, 0)  # powers of two only: ties go away from zero (no even mantissa bit)
    assert quantize(np.array([3.0, -6.0, 2.9, 0.75], np.float32), pow2).tolist() == [4.0, -8.0, 2.0, 1.0]


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="rounding"):
        quantize(np.ones(2, np.float32), BF16, "up")
    with pytest.raises(UnknownNameError, match=r"unknown number format 'fp7' \(did you mean 'fp8'\?\)"):
        quantize(np.ones(2, np.float32), "fp7")
    with pytest.raises(ValueError, match="exp_bits"):
        FloatFormat(0, 3)
    with pytest.raises(ValueError, match="overflow='inf'"):
        FloatFormat(4, 3, "fn", overflow="inf")
    with pytest.raises(TypeError, match="floating-point"):
        quantize(torch.ones(2, dtype=torch.int32), BF16)


# ---------------------------------------------------------------- properties over random formats
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

formats = st.builds(lambda e, m, sp, sub: FloatFormat(e, m, sp, subnormals=sub),
                    st.integers(2, 8), st.integers(0, 10), st.sampled_from(["ieee", "fn", "fnuz", "finite"]),
                    st.booleans()).filter(lambda f: f.specials != "fn" or f.exp_bits + f.man_bits >= 2)
finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=50, deadline=None)
@given(formats, st.lists(finite32, min_size=2, max_size=64))
# found by hypothesis: fn without mantissa bits has no finite top binade (1.0 became NaN)
@example(FloatFormat(2, 0, "fn", overflow="nan", subnormals=False), [0.0, 0.75])
# the 0 / min_normal tie of an m=0 format whose emin is float32's goes to even 0
@example(FloatFormat(8, 0, "fn"), [2.0**-127, -(2.0**-127), 3 * 2.0**-128])
def test_nearest_is_idempotent_monotone_and_matches_reference(fmt, values):
    x = torch.tensor(values, dtype=torch.float32)
    q = quantize(x, fmt)
    assert same_bits(quantize(q, fmt).numpy(), q.numpy()).all()  # grid points map to themselves
    xs, order = torch.sort(x)
    qs = q[order]
    fin = torch.isfinite(qs)
    assert torch.all(qs[fin][1:] >= qs[fin][:-1])  # rounding to nearest is monotone
    assert same_bits(q.numpy(), quantize_float_reference(x, fmt).numpy()).all()


@settings(max_examples=50, deadline=None)
@given(formats, finite32)
def test_stochastic_results_are_the_two_neighbours(fmt, v):
    if abs(v) > fmt.max:
        return  # overflow policies are tested separately
    x = torch.full((256,), v, dtype=torch.float32)
    lo = float(quantize(x[:1], fmt, "toward_zero"))
    vals = sorted(set(quantize(x, fmt, "stochastic", generator=0).tolist()), key=abs)
    assert abs(lo) <= abs(v) and vals[0] in (lo, vals[-1]) and len(vals) <= 2
    if len(vals) == 2:
        assert vals[0] == lo and abs(vals[1]) > abs(v)
        mid = torch.tensor([(vals[0] + vals[1]) / 2], dtype=torch.float64)
        assert float(quantize(mid, fmt)) in vals  # no grid point lies between the two outcomes


@pytest.mark.parametrize("fmt", [FloatFormat(5, 7), FloatFormat(6, 5), FloatFormat(8, 10), FloatFormat(3, 6),
                                 FloatFormat(7, 12)], ids=str)
def test_ieee_formats_without_ml_dtypes_match_gmpy2(fmt):
    gmpy2 = pytest.importorskip("gmpy2")
    rng = np.random.default_rng(11)
    lo, hi = math.log2(fmt.min_subnormal) - 2, min(math.log2(fmt.max) + 1, 127.9)  # includes overflow to Inf
    x = (rng.choice([-1.0, 1.0], 3000) * np.exp2(rng.uniform(lo, hi, 3000))).astype(np.float32)
    ctx = gmpy2.context(precision=fmt.man_bits + 1, emax=fmt.emax + 1, emin=fmt.emin - fmt.man_bits + 1,
                        subnormalize=True, round=gmpy2.RoundToNearest)
    with ctx:
        ref = np.array([float(gmpy2.mpfr(float(v))) for v in x], np.float32)
    assert same_bits(quantize(x, fmt), ref).all()

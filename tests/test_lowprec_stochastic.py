"""Exact stochastic rounding: unbiasedness z-tests, symmetry, reproducibility, saturation bias."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from embstab.lowprec import BF16, FP8_E4M3FN, FP8_E5M2, FixedFormat, BlockFloatFormat, MXFP4, quantize

N = 1_000_000


def _check_fraction(fmt, lo: float, hi: float, x: float, seed: int = 0):
    """Round N copies of x; the count of round-ups must be within 5 sigma of N*p."""
    p = (x - lo) / (hi - lo)
    xs = torch.full((N,), x, dtype=torch.float32)
    assert float(xs[0]) == x
    y = quantize(xs, fmt, "stochastic", generator=seed)
    assert set(torch.unique(y).tolist()) <= {lo, hi}
    k = int((y == hi).sum())
    assert abs(k - N * p) <= 5 * math.sqrt(N * p * (1 - p)) + 1e-9, (k, N * p)


@pytest.mark.parametrize("p", [1 / 16, 1 / 4, 1 / 3, 1 / 2, 0.9])
def test_unbiased_in_normal_range_fast_path(p):
    # bf16 around 1.0: gap 2**-7; x is the fp32 value nearest to 1 + p*gap
    x = float(np.float32(1 + p * 2 ** -7))
    _check_fraction(BF16, 1.0, 1 + 2 ** -7, x)


@pytest.mark.parametrize("p", [1 / 16, 1 / 3, 0.9])
def test_unbiased_in_subnormal_range_exact_path(p):
    s = 2.0 ** -9  # e4m3fn subnormal spacing
    x = float(np.float32(s * (3 + p)))
    _check_fraction(FP8_E4M3FN, 3 * s, 4 * s, x)


def test_unbiased_deep_below_the_grid():
    s = 2.0 ** -16  # e5m2 smallest subnormal; x = s/4096 rounds up with probability 1/4096
    _check_fraction(FP8_E5M2, 0.0, s, s / 4096)


def test_unbiased_fixed_point_and_block():
    _check_fraction(FixedFormat(8, 4), 0.25, 0.3125, float(np.float32(0.25 + 0.0625 * 0.3)))
    x = torch.randn(200_000, generator=torch.Generator().manual_seed(1))
    ys = torch.stack([quantize(x, BlockFloatFormat(4), "stochastic", generator=s) for s in range(20)])
    inside = x.abs() < 2.0 ** (math.floor(math.log2(float(x.abs().max())))) # clipped extremes excluded
    err = (ys.mean(0) - x)[inside]
    step = 2.0 ** (math.floor(math.log2(float(x.abs().max()))) - 2)
    assert abs(float(err.mean())) < 0.01 * step


def test_mean_bias_over_a_vector():
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(2))
    g = torch.Generator().manual_seed(3)
    mean = torch.stack([quantize(x, FP8_E4M3FN, "stochastic", g) for _ in range(8)]).mean(0)
    rel = (mean - x).sum() / x.abs().sum()
    assert abs(float(rel)) < 1e-3
    assert abs(float(((quantize(x, FP8_E4M3FN) - x).sum() / x.abs().sum()))) < 1e-2  # sanity for the scale


def test_sr_of_negation_is_negated_sr():
    x = torch.randn(50_000, generator=torch.Generator().manual_seed(4)) * torch.logspace(-12, 2, 50_000)
    for fmt in (BF16, FP8_E4M3FN, FixedFormat(12, 6, symmetric=True)):  # symmetric range: clamping is odd too
        a = quantize(-x, fmt, "stochastic", generator=7)
        b = quantize(x, fmt, "stochastic", generator=7)
        assert torch.equal(a, -b)


def test_seed_reproducible_across_thread_counts():
    x = torch.randn(300_000, generator=torch.Generator().manual_seed(5))
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a = quantize(x, FP8_E5M2, "stochastic", generator=11)
        torch.set_num_threads(max(2, old))
        b = quantize(x, FP8_E5M2, "stochastic", generator=11)
    finally:
        torch.set_num_threads(old)
    assert torch.equal(a, b)
    assert not torch.equal(a, quantize(x, FP8_E5M2, "stochastic", generator=12))
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert np.array_equal(quantize(x.numpy(), MXFP4, "stochastic", g1), quantize(x.numpy(), MXFP4, "stochastic", g2))


def test_saturation_bias_at_max_is_documented_behaviour():
    fmt = FP8_E4M3FN.replace(overflow="saturate")
    y = quantize(torch.full((10_000,), 460.0), fmt, "stochastic", generator=0)
    assert torch.all(y == 448.0)  # 480 does not exist, so every round-up saturates: biased low by 12
    y = quantize(torch.full((10_000,), 60000.0), FP8_E5M2, "stochastic", generator=0)
    frac_inf = float(torch.isinf(y).float().mean())
    assert 0.30 < frac_inf < 0.35  # p = (60000-57344)/8192 ≈ 0.32 of round-ups become Inf under the ieee policy


def test_subnormal_ties_beyond_the_drawn_bits_are_settled_exactly():
    # e5m20 keeps 20 of fp32's 23 mantissa bits, so only d = 3 random bits are drawn per element;
    # a subnormal-range fraction with many more bits ties with them 1/8 of the time.
    from embstab.lowprec import FloatFormat
    fmt = FloatFormat(5, 20)
    q = 2.0 ** (fmt.emin - 20)
    x = float(np.float32(q * 5.3))
    frac = x / q - 5
    assert (frac * 8) % 1 != 0
    _check_fraction(fmt, 5 * q, 6 * q, x)
    assert abs(frac - 0.3) < 1e-5

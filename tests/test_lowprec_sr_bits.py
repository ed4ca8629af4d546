"""Stochastic rounding with K random bits ("stochastic:K", spec lowprec.md §4.1 ``sr_bits(k)``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from embstab.lowprec import BlockFloatFormat, FixedFormat, FloatFormat, quantize
from embstab.lowprec.rounding import check_rounding

N = 200_000


def _p_up(frac: float, k: int) -> float:
    """Hardware SR with K bits: the fraction truncated to K bits."""
    return math.floor(frac * 2**k) / 2**k


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("frac", [0.05, 0.3, 0.7, 0.999])
def test_probability_is_the_fraction_truncated_to_k_bits(k, frac):
    x = torch.full((N,), 5.0 + frac, dtype=torch.float64)
    q = quantize(x, FixedFormat(16, 0), f"stochastic:{k}", generator=k)
    assert set(q.unique().tolist()) <= {5.0, 6.0}
    p = _p_up(frac, k)
    got = float((q - 5.0).mean())
    if p == 0.0:
        assert got == 0.0  # fewer bits than the fraction needs: never rounds up
    else:
        assert abs(got - p) < 5 * math.sqrt(p * (1 - p) / N) + 1e-12
    # the bias is toward zero and below one K-bit step
    assert -(2.0**-k) < p - frac <= 0.0


def test_enough_bits_match_exact_stochastic_rounding():
    x = torch.full((N,), 0.3, dtype=torch.float64)
    q = quantize(x, FixedFormat(16, 0), "stochastic:52", generator=3)
    assert abs(float(q.mean()) - 0.3) < 5 * math.sqrt(0.21 / N)


@pytest.mark.parametrize("fmt", [FloatFormat(4, 3, "fn", "saturate"), FloatFormat(8, 7),
                                 FloatFormat(5, 2), FixedFormat(8, 4), BlockFloatFormat(8, block_size=16)],
                         ids=str)
def test_results_are_a_grid_neighbour_and_mirror_under_negation(fmt):
    rng = np.random.default_rng(0)
    # normal range, the subnormal range of the float formats, zero and values beyond max
    x = torch.tensor(np.concatenate([rng.standard_normal(4096), rng.standard_normal(512) * 2.0**-8,
                                     [0.0, 1e6, -1e6]]), dtype=torch.float32)
    q = quantize(x, fmt, "stochastic:3", generator=11)
    assert torch.equal(quantize(q, fmt, "nearest"), q)  # every result is a grid value
    if isinstance(fmt, BlockFloatFormat):
        return  # a block's grid depends on its largest element; the checks below are per element
    inside = x.abs() <= quantize(x.abs(), fmt, "toward_zero").abs().max()
    inside[-2:] = False  # the two saturating values (asymmetric fixed point clamps differently)
    neg = quantize(-x, fmt, "stochastic:3", generator=11)
    assert torch.equal(neg[inside], -q[inside])  # the rule acts on magnitudes with the same draws
    tz = quantize(x, fmt, "toward_zero")
    away = inside & (q != tz)
    # rounded away from zero: exactly one grid step, i.e. the grid value just below q is tz
    below = quantize(torch.nextafter(q[away], torch.zeros_like(q[away])), fmt, "toward_zero")
    assert torch.equal(below, tz[away])
    assert bool((q[away].abs() > x[away].abs()).all())
    assert 0.05 < away.double().mean() < 0.6  # both outcomes happen


def test_grid_values_never_move_and_seeds_reproduce():
    grid = quantize(torch.randn(10_000), "bf16")
    assert torch.equal(quantize(grid, "bf16", "stochastic:4", generator=1), grid)
    x = torch.randn(10_000)
    a = quantize(x, "fp8_e4m3fn", "stochastic:4", generator=7)
    b = quantize(x, "fp8_e4m3fn", "stochastic:4", generator=7)
    c = quantize(x, "fp8_e4m3fn", "stochastic:4", generator=8)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_few_bits_bias_float_rounding_toward_zero():
    """bf16 keeps 7 fraction bits; x = 1 + 0.3 ulp rounds up 30% exactly, 25% with 2 or 4 bits."""
    ulp = 2.0**-7
    x = torch.full((N,), 1.0 + 0.3 * ulp, dtype=torch.float32)
    exact = float(((quantize(x, "bf16", "stochastic", generator=2) - 1.0) / ulp).mean())
    for k in (2, 4):
        few = float(((quantize(x, "bf16", f"stochastic:{k}", generator=2) - 1.0) / ulp).mean())
        assert abs(few - 0.25) < 5 * math.sqrt(0.25 * 0.75 / N)
    assert abs(exact - float(np.float32(1.0 + 0.3 * ulp) - 1.0) / ulp) < 5 * math.sqrt(0.21 / N)


def test_rounding_names():
    assert check_rounding("stochastic:8") == "stochastic:8"
    assert check_rounding("SR:8") == "stochastic:8"
    assert check_rounding("sr_bits(3)") == "stochastic:3"
    for bad in ("stochastic:0", "stochastic:53", "stochastic:x", "sr_bits(two)"):
        with pytest.raises(ValueError, match="K"):
            check_rounding(bad)

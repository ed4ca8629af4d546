"""Uniform quantization: the golden-section clip, reference values, rounding and memory accounting."""

from __future__ import annotations

import numpy as np
import pytest

from embstab.compress import bits_per_entry, memory_bits, memory_table, optimal_clip, quantization_error, uniform_quantize
from embstab.errors import ShapeError


@pytest.fixture(scope="module")
def gauss():
    return np.random.default_rng(0).standard_normal((20000, 100))


def test_reference_clips_of_the_spec(gauss):
    # measures spec §3: r*(1) = 0.797, r*(2) = 1.495, r*(4) = 2.516, r*(8) = 3.977, r*(16) = r*(32) = max|X|
    expected = {1: 0.797, 2: 1.495, 4: 2.516, 8: 3.977}
    for bits, r in expected.items():
        assert optimal_clip(gauss, bits) == pytest.approx(r, abs=0.006)
    assert optimal_clip(gauss, 32) == np.abs(gauss).max()
    rel = quantization_error(gauss, 4, optimal_clip(gauss, 4)) / np.square(gauss).sum()
    assert rel == pytest.approx(0.0116, abs=5e-4)


@pytest.mark.parametrize("bits", [1, 2, 3, 5])
def test_golden_section_matches_brute_force_grid(bits):
    X = np.random.default_rng(bits).standard_t(5, size=(400, 50))
    r_gs = optimal_clip(X, bits)
    grid = np.linspace(0, np.abs(X).max(), 801)
    errs = np.array([quantization_error(X, bits, r) for r in grid])
    best = grid[errs.argmin()]
    assert quantization_error(X, bits, r_gs) <= errs.min() * (1 + 2e-3)
    assert abs(r_gs - best) < 0.05 * np.abs(X).max()


def test_quantizer_levels_and_endpoints():
    X = np.array([[-3.0, -1.0, -0.2, 0.2, 1.0, 3.0]])
    q = uniform_quantize(X, 2, clip=1.0)
    assert np.allclose(q, [[-1.0, -1.0, -1 / 3, 1 / 3, 1.0, 1.0]], rtol=0, atol=1e-15)
    assert uniform_quantize(X, 1, clip=0.5).tolist() == [[-0.5, -0.5, -0.5, 0.5, 0.5, 0.5]]
    assert np.array_equal(uniform_quantize(X, 32, clip=2.0), np.clip(X, -2, 2))  # 32 bits: clip only
    assert not uniform_quantize(X, 4, clip=0.0).any()


def test_half_to_even_ties_like_numpy_round():
    # with 3 levels... use 2 bits on [-1, 1]: levels -1, -1/3, 1/3, 1; index = round(1.5 * (x + 1))
    X = np.array([[0.0]])  # index 1.5 exactly -> 2 (even) -> 1/3
    assert uniform_quantize(X, 2, clip=1.0)[0, 0] == pytest.approx(1 / 3)
    assert uniform_quantize(np.array([[-1 / 3]]), 1, clip=1.0)[0, 0] == -1.0  # index 1/3 rounds down


def test_stochastic_rounding_is_unbiased_and_seeded():
    X = np.random.default_rng(1).uniform(-1, 1, (200, 50))
    a = uniform_quantize(X, 2, clip=1.0, rounding="stochastic", seed=5)
    b = uniform_quantize(X, 2, clip=1.0, rounding="stochastic", seed=5)
    assert np.array_equal(a, b)
    mean = np.mean([uniform_quantize(X, 2, clip=1.0, rounding="stochastic", seed=s) for s in range(200)], axis=0)
    assert np.abs(mean - X).max() < 0.15 and abs((mean - X).mean()) < 0.005


def test_dtype_kept_and_errors():
    X = np.random.default_rng(2).standard_normal((10, 4)).astype(np.float32)
    assert uniform_quantize(X, 4).dtype == np.float32
    with pytest.raises(ValueError, match="bits"):
        optimal_clip(X, 0)
    with pytest.raises(ShapeError, match="NaN"):
        optimal_clip(np.array([[np.nan, 1.0]]), 4)
    with pytest.raises(ShapeError, match="2-D"):
        uniform_quantize(np.ones(3), 4)


def test_memory_accounting():
    assert memory_bits(300, 4) == 1200
    assert bits_per_entry("mxfp4") == 4.25
    assert bits_per_entry("bfp8", dim=64) == 8.25
    t = memory_table([25, 50], [1, 32])
    assert list(t.columns) == ["dim", "bitrate", "memory"] and t["memory"].tolist() == [25, 800, 50, 1600]


@pytest.mark.parametrize("scale", [1e-6, 1e-3, 0.05])
@pytest.mark.parametrize("bits", [1, 2, 4])
def test_clip_search_is_as_good_for_embeddings_of_small_entries(scale, bits):
    # every entry under the paper's absolute tolerance (0.01): the search must still run, and
    # find a clip as good, relative to the scale, as for the same matrix at unit scale
    X = np.random.default_rng(bits).standard_t(5, size=(2000, 50))
    unit = quantization_error(X, bits, optimal_clip(X, bits)) / np.square(X).sum()
    small = X * scale
    r = optimal_clip(small, bits)
    assert 0 < r <= np.abs(small).max()
    assert np.abs(uniform_quantize(small, bits, clip=r)).max() > 0
    rel = quantization_error(small, bits, r) / np.square(small).sum()
    assert rel <= unit * 1.01

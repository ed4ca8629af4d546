"""h-MDS (spec §2): exact recovery, the README reproduction, precision, PGA."""

from __future__ import annotations


import numpy as np
import pytest

from embstab.errors import ShapeError
from embstab.hyperbolic import HyperbolicError, PrecisionError, evaluate
from embstab.hyperbolic.geometry import hyperboloid_distance
from embstab.hyperbolic.hmds import hmds, karcher_mean, pga_refine

from _graphs import load_graph as _graph


def _random_hyperboloid(rng, n, r, spread=1.0):
    v = rng.standard_normal((n, r)) * spread
    x0 = np.sqrt(1 + np.sum(v * v, axis=1, keepdims=True))
    return np.hstack([x0, v])


@pytest.mark.parametrize("r", [2, 5])
def test_recovers_random_points_of_hr(r):
    rng = np.random.default_rng(r)
    x = _random_hyperboloid(rng, 60, r, spread=0.5)
    d = hyperboloid_distance(x[:, None], x[None])
    np.fill_diagonal(d, 0)
    d = (d + d.T) / 2
    emb = hmds(d, r, scale=1.0)
    assert emb.metadata["dims_kept"] == r
    assert emb.metadata["n_positive"] >= r
    rec = emb.distance_matrix()
    np.testing.assert_allclose(rec, d, atol=1e-8)


def test_phylo_readme_reproduction():
    """Spec §2.5: phylo, s = 0.1, k = 100, the original top-|λ| selection, Poincaré decoding:
    82 dims, d_avg 0.0326, d_wc 4.336, 762 collapsed ordered pairs, MAP 0.617 (README)."""
    g = _graph("phylo_tree")
    emb = hmds(g, 100, scale=0.1, selection="magnitude")
    m = emb.metadata
    assert (m["dims_kept"], m["n_positive"], m["n_negative"]) == (82, 214, 130)
    res = evaluate(g, emb.astype_float64(check=False), progress=False)  # the repo's decoding
    assert res.bad == 762
    assert res.d_avg == pytest.approx(0.0326, abs=5e-5)
    assert res.d_wc == pytest.approx(4.336, abs=5e-3)
    assert res.map == pytest.approx(0.617, abs=2e-3)
    # the recommended selection keeps all 100 requested dimensions and ranks better
    pos = hmds(g, 100, scale=0.1)
    assert pos.metadata["dims_kept"] == 100
    res_pos = evaluate(g, pos.astype_float64(check=False), progress=False)
    assert res_pos.map == pytest.approx(0.680, abs=2e-3)
    assert res_pos.d_wc == pytest.approx(3.85, abs=5e-3)


def test_balanced_tree_scales_and_the_mpmath_solver():
    g = _graph("smalltree")
    e1 = hmds(g, 39, scale=1.0)
    assert (e1.metadata["n_positive"], e1.metadata["n_negative"]) == (26, 14)
    r5 = evaluate(g, hmds(g, 39, scale=5.0), progress=False)
    assert r5.map == 1.0 and r5.d_avg == pytest.approx(0.0043, abs=5e-5)
    # float64 breaks down at s = 10 (spec: MAP 0.29) ...
    r10 = evaluate(g, hmds(g, 39, scale=10.0), progress=False)
    assert r10.map < 0.4
    # ... while 128-bit arithmetic recovers the tree (spec: d_avg 0.0021, MAP 1.0)
    mp_emb = hmds(g, 39, scale=10.0, solver="mpmath", precision_bits=128)
    assert mp_emb.multiprecision and mp_emb.precision_bits == 128
    r = evaluate(g, mp_emb, progress=False)
    assert r.map == 1.0 and r.d_avg == pytest.approx(0.0021, abs=5e-5)


def test_auto_scale_and_overflow_refusal():
    g = _graph("smalltree")
    emb = hmds(g, 5)
    assert emb.scale == pytest.approx(15.0 / 6.0)  # diameter 6
    with pytest.raises(PrecisionError, match="overflows cosh"):
        hmds(g, 5, scale=200.0)


def test_input_validation():
    with pytest.raises(ShapeError, match="square"):
        hmds(np.zeros((3, 4)), 2)
    with pytest.raises(ShapeError, match="symmetric"):
        hmds(np.array([[0, 1.0], [2.0, 0]]), 1)
    with pytest.raises(HyperbolicError, match="dim must be"):
        hmds(np.array([[0, 1.0], [1.0, 0]]), 3)


def test_pga_refinement_beats_truncation():
    rng = np.random.default_rng(4)
    x = _random_hyperboloid(rng, 40, 6, spread=0.8)
    refined, info = pga_refine(x, 2, steps=150)
    assert info["objective"] <= info["objective_truncated"]
    assert refined.shape == (40, 3)
    # on the sheet
    np.testing.assert_allclose(refined[:, 0] ** 2 - np.sum(refined[:, 1:] ** 2, axis=1), 1, atol=1e-9)
    m = karcher_mean(x)
    assert m[0] ** 2 - np.sum(m[1:] ** 2) == pytest.approx(1.0)


def test_pga_via_hmds():
    g = _graph("smalltree")
    emb = hmds(g, 3, scale=2.0, pga=True, pga_steps=50)
    assert emb.dim == 3 and "pga" in emb.metadata

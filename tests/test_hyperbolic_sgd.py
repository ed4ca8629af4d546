"""Riemannian SGD on geoopt (spec §3)."""

from __future__ import annotations

import numpy as np
import pytest

from embstab.hyperbolic import HyperbolicError, evaluate
from embstab.hyperbolic.hmds import hmds
from embstab.hyperbolic.sgd import LOSSES, fit_sgd, pair_loss

from _graphs import load_graph


@pytest.fixture(scope="module")
def smalltree():
    return load_graph("smalltree")


@pytest.mark.parametrize("manifold", ["poincare", "lorentz"])
def test_loss_decreases_and_is_deterministic(smalltree, manifold):
    a = fit_sgd(smalltree, 2, manifold=manifold, epochs=30, seed=3, progress=False)
    b = fit_sgd(smalltree, 2, manifold=manifold, epochs=30, seed=3, progress=False)
    hist = a.metadata["loss_history"]
    assert hist[-1] < 0.5 * hist[0]
    np.testing.assert_array_equal(a.coords, b.coords)
    if manifold == "lorentz":
        x = a.coords
        np.testing.assert_allclose(x[:, 0] ** 2 - np.sum(x[:, 1:] ** 2, axis=1), 1, atol=1e-8)
    else:
        assert np.all(np.linalg.norm(a.coords, axis=1) < 1)


def _rel2(graph, emb):
    d = graph.shortest_paths(np.arange(graph.n_nodes))
    dh = emb.distance_matrix()
    off = ~np.eye(len(d), dtype=bool)
    return float(np.mean((dh[off] / d[off] - 1) ** 2))


def test_warm_start_from_hmds_keeps_scale_and_improves(smalltree):
    start = hmds(smalltree, 5)
    emb = fit_sgd(smalltree, init=start, manifold="lorentz", epochs=40, lr=0.1, progress=False)
    assert emb.dim == 5 and emb.scale == pytest.approx(start.scale)
    # the objective it optimises (mean (d̂/d − 1)² over pairs) goes down from the warm start
    assert _rel2(smalltree, emb) < _rel2(smalltree, start)
    # rank-5 h-MDS collapses some nodes (MAP ≈ 0.53); refinement separates them
    assert (evaluate(smalltree, emb, progress=False).map
            > evaluate(smalltree, start, progress=False).map + 0.05)


def test_warm_start_from_construction_and_learned_scale(smalltree):
    emb = fit_sgd(smalltree, 2, init="comb", learn_scale=True, epochs=20, progress=False)
    assert emb.metadata["init"] == "comb"
    assert emb.metadata["loss_history"][-1] <= emb.metadata["loss_history"][0]


def test_loss_menu_values():
    torch = pytest.importorskip("torch")
    dh, y = torch.tensor([2.0]), torch.tensor([1.0])
    expect = {"rel2": 1.0, "sym": 1.25, "abs": 1.0, "square": 3.0,
              "log": float(np.log(4.0) ** 2), "mse": 1.0}
    for name in LOSSES:
        assert float(pair_loss(dh, y, name)) == pytest.approx(expect[name])


def test_bad_arguments(smalltree):
    with pytest.raises(HyperbolicError, match="manifold"):
        fit_sgd(smalltree, manifold="sphere", progress=False)
    with pytest.raises(HyperbolicError, match="loss"):
        fit_sgd(smalltree, loss="hinge", progress=False)
    with pytest.raises(HyperbolicError, match="init"):
        fit_sgd(smalltree, init="pca", progress=False)


def test_subsampled_pairs_for_large_graphs(smalltree, monkeypatch):
    emb = fit_sgd(smalltree, 2, subsample=8, epochs=20, seed=1, progress=False)
    hist = emb.metadata["loss_history"]
    assert hist[-1] < hist[0]
    import embstab.hyperbolic.sgd as sgd_mod

    monkeypatch.setattr(sgd_mod, "MAX_ALL_PAIRS_NODES", 10)
    with pytest.raises(HyperbolicError, match="too many for all pairs"):
        fit_sgd(smalltree, 2, epochs=1, progress=False)

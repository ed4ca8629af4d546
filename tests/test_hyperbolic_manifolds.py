"""One contract over every manifold (geoopt's manifold tests are the model), plus name lookup."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embstab.errors import UnknownNameError
from embstab.hyperbolic import (HyperbolicEmbedding, HyperbolicError, Lorentz, PoincareBall, ProductManifold,
                                Sphere, convert, get_manifold)
from embstab.hyperbolic.manifolds import ALIASES, MANIFOLDS, Euclidean

DIM = 3
PRODUCT = ProductManifold([("poincare", 2), ("lorentz", 2), ("euclidean", 2), ("sphere", 1)])
ALL = [*MANIFOLDS.values(), PRODUCT, ProductManifold([("poincare", 2), ("sphere", 2)], combine="l1")]


def _points(man, rng: np.random.Generator, n: int) -> np.ndarray:
    """Valid points spread over the manifold (not projected: built from each model's definition)."""
    if isinstance(man, ProductManifold):
        return np.hstack([_points_dim(m, rng, n, d) for m, d in man.factors])
    return _points_dim(man, rng, n, DIM)


def _points_dim(man, rng, n, dim):
    if isinstance(man, PoincareBall):
        x = rng.normal(size=(n, dim))
        return x / np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(0, 0.9, size=(n, 1))
    if isinstance(man, Lorentz):
        space = rng.normal(scale=1.5, size=(n, dim))
        return np.hstack([np.sqrt(1 + np.sum(space ** 2, axis=1, keepdims=True)), space])
    if isinstance(man, Sphere):
        x = rng.normal(size=(n, dim + 1))
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    return rng.normal(scale=2.0, size=(n, dim))


@pytest.mark.parametrize("man", ALL, ids=repr)
def test_distance_is_a_metric_on_samples(man):
    x = _points(man, np.random.default_rng(0), 25)
    assert man.contains(x).all()
    d = man.distance(x[:, None, :], x[None, :, :])
    assert d.shape == (25, 25)
    np.testing.assert_array_equal(np.diag(d), 0.0)
    np.testing.assert_allclose(d, d.T, rtol=1e-12, atol=1e-12)
    assert (d[~np.eye(25, dtype=bool)] > 0).all()
    # d(i, k) ≤ d(i, j) + d(j, k) for every triple
    slack = d[:, None, :] - (d[:, :, None] + d[None, :, :])
    assert slack.max() <= 1e-9 * max(1.0, d.max())


@pytest.mark.parametrize("man", ALL, ids=repr)
def test_projection_is_idempotent_and_lands_on_the_manifold(man):
    rng = np.random.default_rng(1)
    raw = rng.normal(scale=3.0, size=(40, man.width(DIM) if not isinstance(man, ProductManifold) else man.width()))
    p = man.project(raw)
    assert man.contains(p).all()
    np.testing.assert_allclose(man.project(p), p, rtol=1e-14, atol=1e-15)
    valid = _points(man, rng, 10)  # valid points barely move
    np.testing.assert_allclose(man.project(valid), valid, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("man", ALL, ids=repr)
def test_torch_distance_on_the_geoopt_manifold_agrees_with_float64(man):
    x = _points(man, np.random.default_rng(2), 12)
    t = torch.from_numpy(x)
    got = man.torch_distance(t[:, None, :], t[None, :, :]).numpy()
    np.testing.assert_allclose(got, man.distance(x[:, None, :], x[None, :, :]), rtol=1e-7, atol=1e-7)
    geo = man.geoopt()
    np.testing.assert_allclose(geo.projx(t).numpy(), man.project(x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("man", ALL, ids=repr)
def test_initial_points_lie_on_the_manifold(man):
    gen = torch.Generator().manual_seed(0)
    x = man.initial_points(7, DIM, gen).numpy()
    assert x.shape == (7, man.width() if isinstance(man, ProductManifold) else man.width(DIM))
    assert man.contains(x).all()


def test_models_of_hyperbolic_space_convert_both_ways_within_1e_10():
    rng = np.random.default_rng(3)
    p = _points_dim(PoincareBall(), rng, 50, 4)
    x = convert(p, "poincare", "lorentz")
    assert Lorentz().contains(x).all()
    np.testing.assert_allclose(convert(x, "hyperboloid", "poincare"), p, rtol=0, atol=1e-10)
    h = _points_dim(Lorentz(), rng, 50, 4)
    np.testing.assert_allclose(convert(convert(h, "lorentz", "poincare"), "poincare", "lorentz"), h,
                               rtol=1e-10, atol=1e-10)
    # an isometry: the distances agree in both models
    np.testing.assert_allclose(PoincareBall().distance(p[:, None], p[None]), Lorentz().distance(x[:, None], x[None]),
                               rtol=1e-10, atol=1e-10)
    with pytest.raises(HyperbolicError, match="Poincaré"):
        convert(h, "lorentz", "sphere")
    with pytest.raises(HyperbolicError):
        Euclidean().to_poincare(p)


def test_one_name_per_model_and_one_lookup():
    assert get_manifold("hyperboloid") is get_manifold("lorentz") is MANIFOLDS["lorentz"]
    assert ALIASES == {"hyperboloid": "lorentz"} and "hyperboloid" not in MANIFOLDS
    assert get_manifold(PRODUCT) is PRODUCT
    with pytest.raises(UnknownNameError, match="did you mean 'poincare'"):
        get_manifold("poincaré")
    with pytest.raises(UnknownNameError):
        get_manifold(3)


def test_embedding_takes_a_manifold_and_refuses_flat_ones():
    x = _points_dim(Lorentz(), np.random.default_rng(4), 5, 2)
    e = HyperbolicEmbedding(x, manifold="hyperboloid")
    assert e.manifold == Lorentz() and e.dim == 2
    f = HyperbolicEmbedding(x, manifold=Lorentz())
    np.testing.assert_array_equal(e.distance_matrix(), f.distance_matrix())
    with pytest.raises(HyperbolicError, match="hyperbolic space"):
        HyperbolicEmbedding(x, manifold="sphere")
    with pytest.raises(UnknownNameError):
        HyperbolicEmbedding(x, manifold="klein")


def test_product_manifold_checks_its_parts():
    assert PRODUCT.signature == "H2,L2,E2,S1" and PRODUCT.width() == 2 + 3 + 2 + 2 and PRODUCT.dim == 7
    assert PRODUCT == ProductManifold([("poincare", 2), ("hyperboloid", 2), ("euclidean", 2), ("sphere", 1)])
    with pytest.raises(HyperbolicError, match="combine"):
        ProductManifold([("poincare", 2)], combine="max")
    with pytest.raises(HyperbolicError, match="at least one"):
        ProductManifold([])

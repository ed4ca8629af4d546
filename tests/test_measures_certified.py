"""The shortcuts of the measures give the float64 answers: certified float32 k-NN scores, stacked
cross products, the eigendecomposition route to the Procrustes rotation, and the displacement
mean without the rotated copy."""

import sys

import numpy as np
import pytest
import torch

from embstab import measures
from embstab.measures import _backend
from embstab.measures._backend import cross, crosses, namespace, shared_products
from embstab.measures.knn import nearest_neighbors, score_error_bound

knn_module = sys.modules["embstab.measures.knn"]
displacement_module = sys.modules["embstab.measures.displacement"]


def float64_scan(x, queries, k):
    """The plain float64 scan the certified one must reproduce."""
    xp = namespace(x)
    q = knn_module._unit_rows(xp, _backend.as_float(xp, x[queries, :], "float64"))
    return knn_module._scan(xp, x, q, min(k + 1, x.shape[0]), "float64", None)[1]


def decaying(rng, n, d):
    return rng.standard_normal((n, d)) / np.sqrt(np.arange(1, d + 1))


@pytest.mark.parametrize("d", [3, 50, 300])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_certified_neighbours_are_the_float64_ones(d, seed):
    rng = np.random.default_rng(100 * d + seed)
    x = decaying(rng, 3000, d)
    queries = np.sort(rng.choice(3000, 400, replace=False))
    assert np.array_equal(nearest_neighbors(namespace(x), x, queries, 5), float64_scan(x, queries, 5))


def test_certified_neighbours_of_float32_storage_and_torch():
    rng = np.random.default_rng(7)
    x = decaying(rng, 2500, 64).astype(np.float32)
    queries = np.arange(0, 2500, 5)
    want = float64_scan(x, queries, 10)
    assert np.array_equal(nearest_neighbors(namespace(x), x, queries, 10), want)
    xt = torch.from_numpy(x)
    got = nearest_neighbors(namespace(xt), xt, torch.from_numpy(queries), 10)
    assert np.array_equal(got.numpy(), want)


def test_ties_are_not_certified_and_fall_back_to_float64(monkeypatch):
    # a hundred copies of two rows, coarse values and a zero row: exact ties at the k-th place,
    # which no float32 gap can separate; and near copies, which only float64 can order
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((2000, 12)), 1)
    x[1000:1100] = x[0]
    x[1100:1200] = 2.0 * x[4]
    x[1200:1300] = x[200:300] + 1e-7 * rng.standard_normal((100, 12))  # near ties: rescored in float64
    x[17] = 0.0
    queries = np.arange(0, 2000, 4)
    calls = []
    scan = knn_module._scan

    def counting(xp, x_, q, kk, dtype, block_bytes, **kwargs):
        calls.append((dtype, kwargs.get("certified", False), q.shape[0]))
        return scan(xp, x_, q, kk, dtype, block_bytes, **kwargs)

    rescored = []
    rescore = knn_module._rescore

    def counting_rescore(xp, x_, q64, idx, kk, block_bytes):
        rescored.append(q64.shape[0])
        return rescore(xp, x_, q64, idx, kk, block_bytes)

    monkeypatch.setattr(knn_module, "_scan", counting)
    monkeypatch.setattr(knn_module, "_rescore", counting_rescore)
    got = nearest_neighbors(namespace(x), x, queries, 5)
    fallbacks = [c for c in calls if c[0] == "float64"]
    assert fallbacks and 0 < fallbacks[0][2] < len(queries)  # some queries, not all
    assert rescored and 0 < rescored[0] < len(queries)  # the three cases all occur here
    monkeypatch.setattr(knn_module, "_scan", scan)
    # equally good neighbours: where rows tie exactly at the last place, the float64 scan's
    # matrix product may round equal rows apart and keep either (the certified path keeps the
    # lower index); the cosines of the rows kept are the same
    want = float64_scan(x, queries, 5)
    unit = x / np.where(np.linalg.norm(x, axis=1, keepdims=True) == 0, 1.0, np.linalg.norm(x, axis=1, keepdims=True))
    cosines = [np.sort(unit[idx] @ unit[q]) for idx, q in zip(got, queries)]
    expected = [np.sort(unit[idx] @ unit[q]) for idx, q in zip(want, queries)]
    np.testing.assert_allclose(cosines, expected, rtol=0, atol=1e-12)
    assert (got == want).all(axis=1).mean() > 0.95


def test_no_room_for_a_gap_means_every_query_is_scanned_in_float64(monkeypatch):
    rng = np.random.default_rng(4)
    x = decaying(rng, 1500, 20)
    queries = np.arange(0, 1500, 3)
    monkeypatch.setattr(knn_module, "CERTIFY_EXTRA", 0)
    assert np.array_equal(nearest_neighbors(namespace(x), x, queries, 5), float64_scan(x, queries, 5))


def test_the_score_error_bound_holds_and_is_useful():
    rng = np.random.default_rng(5)
    for d in (2, 100, 800):
        # heavy-tailed entries spanning six orders of magnitude: cancellation-prone dot products
        x = rng.standard_normal((300, d)) * 10.0 ** rng.uniform(-3, 3, size=(300, d))
        unit = x / np.linalg.norm(x, axis=1, keepdims=True)
        exact = unit @ unit.T
        inv32 = (1.0 / np.linalg.norm(x, axis=1)).astype(np.float32)
        q32 = unit.astype(np.float32)
        approx = (q32 @ x.astype(np.float32).T) * inv32[None, :]
        worst = np.abs(approx.astype(np.float64) - exact).max()
        assert worst <= score_error_bound(d)
    assert score_error_bound(800) < 1e-4  # narrower than typical gaps between neighbours


def test_stacked_crosses_equal_single_crosses_and_are_remembered():
    rng = np.random.default_rng(6)
    x, y, e = rng.standard_normal((4000, 30)), rng.standard_normal((4000, 50)), rng.standard_normal((4000, 200))
    xp = namespace(x)
    with shared_products():
        xe, ye = crosses(xp, [x, y], e, None)
        assert cross(xp, x, e, None) is xe and cross(xp, y, e, None) is ye  # made once
    np.testing.assert_allclose(xe, x.T @ e, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(ye, y.T @ e, rtol=1e-12, atol=1e-9)
    wide = [rng.standard_normal((500, 200)), rng.standard_normal((500, 200))]  # over the stacking width
    got = crosses(xp, wide, e[:500], None)
    for a, g in zip(wide, got):
        np.testing.assert_allclose(g, a.T @ e[:500], rtol=1e-12, atol=1e-9)


def test_the_rotation_is_the_svd_rotation_or_comes_from_the_svd():
    rng = np.random.default_rng(8)
    q1, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    q2, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    xp = namespace(q1)
    for cond in (1.0, 1e2, 1e4):
        m = (q1 * np.logspace(0, -np.log10(cond), 60)) @ q2.T
        np.testing.assert_allclose(displacement_module._rotation(xp, m), q1 @ q2.T, atol=1e-9)
    singular = (q1 * np.r_[np.ones(59), 0.0]) @ q2.T  # eigh would divide by zero: the SVD answers
    omega = displacement_module._rotation(xp, singular)
    np.testing.assert_allclose(omega.T @ omega, np.eye(60), atol=1e-12)
    u, _, vt = np.linalg.svd(singular)
    np.testing.assert_allclose(omega, u @ vt, atol=1e-12)


@pytest.mark.parametrize("align", [True, False])
def test_mean_displacement_is_the_mean_of_the_per_word_distances(align):
    rng = np.random.default_rng(9)
    x = decaying(rng, 3000, 25)
    y = x @ np.linalg.qr(rng.standard_normal((25, 25)))[0] + 0.2 * rng.standard_normal((3000, 25))
    x[5] = 0.0
    y[9] = 0.0
    per_word = measures.semantic_displacement(x, y, align=align, average=False)
    assert np.isnan(per_word[5]) and np.isnan(per_word[9])
    assert measures.semantic_displacement(x, y, align=align) == pytest.approx(np.nanmean(per_word), rel=1e-12)

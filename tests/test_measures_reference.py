"""Every measure against a literal float64 evaluation of its definition (n×n matrices)."""

import numpy as np
import pytest

import _reference as ref
from embstab import measures


def pair(seed, n=120, d=8, dy=None, noise=0.3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = x @ rng.normal(size=(d, dy or d)) + noise * rng.normal(size=(n, dy or d))
    return x, y


def anchors(seed, n=120, k=15):
    rng = np.random.default_rng(seed + 100)
    e = rng.normal(size=(n, k))
    return e, e + 0.2 * rng.normal(size=(n, k))


def close(a, b, rtol=1e-10):
    assert a == pytest.approx(b, rel=rtol, abs=1e-13)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0, 1, 1.5, 2, 3])
def test_eis_matches_literal(seed, alpha):
    x, y = pair(seed, dy=5)
    ex, ey = anchors(seed)
    close(measures.eis(x, y, ex, ey, alpha=alpha), ref.eis(x, y, ex, ey, alpha))


def test_eis_rank_deficient_uses_span_not_garbage():
    x, y = pair(1)
    ex, ey = anchors(1)
    x_def = np.hstack([x, x[:, :2] @ np.array([[1.0], [2.0]])])  # a dependent column
    close(measures.eis(x_def, y, ex, ey), ref.eis(x, y, ex, ey))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [1, 5, 10])
def test_knn_matches_literal(seed, k):
    x, y = pair(seed, d=6, dy=9, noise=1.0)
    queries = np.sort(np.random.default_rng(99).choice(len(x), size=40, replace=False))
    close(measures.knn(x, y, k=k, n_queries=40, seed=99), ref.knn(x, y, k, queries))
    close(measures.knn(x, y, k=k, n_queries=None), ref.knn(x, y, k, range(len(x))))


def test_knn_blocked_scan_equals_single_block(monkeypatch):
    x, y = pair(3, n=500, noise=1.0)
    whole = measures.knn(x, y, k=7, n_queries=None)
    import sys

    knn_module = sys.modules["embstab.measures.knn"]

    monkeypatch.setattr(knn_module, "BLOCK_BYTES", 500 * 8 * 16)  # 16 candidate columns per block
    assert measures.knn(x, y, k=7, n_queries=None) == whole


@pytest.mark.parametrize("seed", range(3))
def test_semantic_displacement_matches_literal(seed):
    x, y = pair(seed)
    close(measures.semantic_displacement(x, y), ref.semantic_displacement(x, y))


def test_semantic_displacement_skips_zero_rows_like_nanmean():
    x, y = pair(2)
    x[5] = 0
    with np.errstate(invalid="ignore"):
        expected = ref.semantic_displacement(x, y)
    close(measures.semantic_displacement(x, y), expected)
    per_word = measures.semantic_displacement(x, y, average=False)
    assert np.isnan(per_word[5]) and np.isfinite(np.delete(per_word, 5)).all()


@pytest.mark.parametrize("seed", range(3))
def test_pip_loss_matches_literal(seed):
    x, y = pair(seed, dy=11)
    close(measures.pip_loss(x, y), ref.pip_loss(x, y))


@pytest.mark.parametrize("seed", range(3))
def test_eigenspace_overlaps_match_literal(seed):
    x, y = pair(seed, dy=5)
    close(measures.eigenspace_overlap(x, y), ref.eigenspace_overlap(x, y))
    close(measures.weighted_eigenspace_overlap(x, y, 2.0), ref.weighted_eigenspace_overlap(x, y, 2.0))


@pytest.mark.parametrize("shape", [(10, 20, 20), (12, 5, 30), (30, 40, 8)])
@pytest.mark.parametrize("method", ["auto", "qr", "gram"])
def test_fewer_rows_than_dimensions(shape, method):
    # col(X) lies in R^n when n < d: the rank is at most n, never one of the d×d Gram matrix's
    # round-off eigenvalues (the overlap of two spans that are all of R^n is 1)
    n, d, dy = shape
    rng = np.random.default_rng(n + d)
    x, y = rng.normal(size=(n, d)), rng.normal(size=(n, dy))
    assert measures.eigenspace_overlap(x, y, method=method) == pytest.approx(ref.eigenspace_overlap(x, y), rel=1e-9)
    ex, ey = anchors(n, n=n)
    assert measures.eis(x, y, ex, ey, method=method) == pytest.approx(ref.eis(x, y, ex, ey), rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_similarity_measures_match_literal(seed):
    x, y = pair(seed)
    close(measures.fro_distance(x, y), np.linalg.norm(x - y))
    close(measures.linear_cka(x, y), ref.linear_cka(x, y))
    close(measures.procrustes_distance(x, y), ref.procrustes_distance(x, y))


def test_float32_on_request_is_close_to_float64():
    x, y = pair(0)
    ex, ey = anchors(0)
    assert measures.eis(x, y, ex, ey, dtype="float32") == pytest.approx(measures.eis(x, y, ex, ey), rel=1e-3)
    assert measures.pip_loss(x, y, dtype="float32") == pytest.approx(measures.pip_loss(x, y), rel=1e-4)


def test_anchor_factors_are_cached_and_reused():
    x, y = pair(0)
    ex, ey = anchors(0)
    measures.clear_anchor_cache()
    f1 = measures.anchor_factors(ex)
    assert measures.anchor_factors(ex).k_mat is f1.k_mat  # the factorisation is reused, not recomputed
    ex[0, 0] += 1.0  # mutated in place: the cache must notice
    assert measures.anchor_factors(ex).k_mat is not f1.k_mat
    fx, fy = measures.anchor_factors(ex), measures.anchor_factors(ey)
    close(measures.eis(x, y, fx, fy), ref.eis(x, y, ex, ey))


@pytest.mark.parametrize("seed", range(6))
def test_edits_that_keep_column_sums_still_refresh_the_cache(seed):
    # an edit that leaves every column sum (and the first row) unchanged: a cache keyed on those
    # would serve the old anchor's factors, a value that belongs to neither anchor
    # (entries in eighths: every sum is exact, so the edit leaves the column sums bit for bit)
    rng = np.random.default_rng(seed)
    x, y = pair(seed)
    ex, ey = (rng.integers(-16, 17, size=(120, 15)) / 8.0 for _ in range(2))
    measures.eis(x, y, ex, ey)
    rows = rng.choice(np.arange(1, ex.shape[0]), size=2, replace=False)
    delta = rng.integers(1, 9, size=ex.shape[1]) / 8.0
    ex[rows[0]] += delta
    ex[rows[1]] -= delta
    close(measures.eis(x, y, ex, ey), ref.eis(x, y, ex, ey))


@pytest.mark.parametrize("name", ["eis", "eigenspace_overlap"])
def test_gram_method_agrees_with_qr(name):
    x, y = pair(5, n=400, d=12, dy=9)
    ex, ey = anchors(5, n=400)
    args = (ex, ey) if name == "eis" else ()
    f = getattr(measures, name)
    close(f(x, y, *args, method="gram"), f(x, y, *args, method="qr"), rtol=1e-9)


def test_blocked_products_equal_single_block(monkeypatch):
    import sys

    backend = sys.modules["embstab.measures._backend"]
    x, y = pair(6, n=300, dy=5)
    ex, ey = anchors(6, n=300)
    whole = [measures.eis(x, y, ex, ey), measures.pip_loss(x, y), measures.linear_cka(x, y),
             measures.semantic_displacement(x, x + 0.1)]
    monkeypatch.setattr(backend, "BLOCK_BYTES", 8 * 40 * 7)  # a few rows per block
    measures.clear_anchor_cache()
    blocked = [measures.eis(x, y, ex, ey), measures.pip_loss(x, y), measures.linear_cka(x, y),
               measures.semantic_displacement(x, x + 0.1)]
    for a, b in zip(blocked, whole):
        close(a, b, rtol=1e-11)


def test_float32_storage_float64_work():
    x, y = pair(7)
    ex, ey = anchors(7)
    x32, y32, ex32, ey32 = (a.astype(np.float32) for a in (x, y, ex, ey))
    ref64 = ref.eis(*(a.astype(np.float64) for a in (x32, y32, ex32, ey32)))
    close(measures.eis(x32, y32, ex32, ey32), ref64)


def test_eis_large_singular_values_do_not_overflow_float32():
    x, y = pair(0)
    ex, ey = anchors(0)
    big = measures.eis(x, y, ex * 1e8, ey * 1e8, dtype="float32")
    assert np.isfinite(big) and big == pytest.approx(measures.eis(x, y, ex, ey), rel=1e-3)


def test_ill_conditioned_input_falls_back_to_qr_and_stays_accurate():
    import sys

    backend = sys.modules["embstab.measures._backend"]
    x, y = pair(8, n=200, d=6, dy=6)
    x = x * np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1e-6])  # cond(X) ≈ 1e6: the Gram span is not enough
    assert backend.span(np, x).method == "qr"
    assert backend.span(np, y).method == "gram"
    ex, ey = anchors(8, n=200)
    close(measures.eis(x, y, ex, ey), ref.eis(x, y, ex, ey), rtol=1e-8)
    close(measures.eigenspace_overlap(x, y), ref.eigenspace_overlap(x, y), rtol=1e-8)

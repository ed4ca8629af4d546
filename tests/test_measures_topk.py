"""The compiled top-k selection against a literal sort, and the measures with and without it."""

from __future__ import annotations

import numpy as np
import pytest

from embstab.measures import _backend, _native
from embstab.measures.knn import knn, nearest_neighbors

needs_kernel = pytest.mark.skipif(not _native.available(), reason=f"compiled top-k: {_native.why_unavailable()}")


def literal_topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k best by (value descending, column ascending), by sorting the whole row."""
    idx = np.array([sorted(range(scores.shape[1]), key=lambda j, r=row: (-r[j], j))[:k] for row in scores],
                   dtype=np.int64).reshape(scores.shape[0], k)
    return np.take_along_axis(scores, idx, axis=1), idx


def _rows(rng, kind: str, m: int, c: int, dtype) -> np.ndarray:
    if kind == "normal":
        out = rng.standard_normal((m, c))
    elif kind == "ties":  # a handful of distinct values: ties at the k-th place everywhere
        out = rng.integers(-3, 4, size=(m, c)).astype(np.float64)
    elif kind == "ascending":  # every column beats the ones before it
        out = np.tile(np.arange(c, dtype=np.float64), (m, 1)) + rng.standard_normal((m, 1))
    elif kind == "descending":
        out = np.tile(-np.arange(c, dtype=np.float64), (m, 1))
    elif kind == "infinite":
        out = rng.standard_normal((m, c))
        out[rng.random((m, c)) < 0.1] = np.inf
        out[rng.random((m, c)) < 0.1] = -np.inf
    else:  # "constant"
        out = np.full((m, c), 0.5)
    return out.astype(dtype)


@needs_kernel
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["normal", "ties", "ascending", "descending", "infinite", "constant"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_selection_is_the_literal_sort(dtype, kind, seed):
    rng = np.random.default_rng(seed)
    # widths below, at and around the kernel's blocks (64 float32 / 32 float64 columns), and k from
    # 1 to the whole row, so both the block floor and the "too few blocks" route are taken
    for c in (1, 7, 31, 32, 33, 63, 64, 65, 130, 1000):
        for k in sorted({1, 2, 5, 14, min(c, 40), c}):
            if k > c:
                continue
            scores = _rows(rng, kind, 9, c, dtype)
            values, columns = _native.topk_rows(scores, k)
            want_v, want_i = literal_topk(scores, k)
            assert values.dtype == scores.dtype and columns.dtype == np.int64
            np.testing.assert_array_equal(columns, want_i, err_msg=f"c={c} k={k}")
            np.testing.assert_array_equal(values, want_v)


@needs_kernel
def test_compiled_selection_reads_rows_with_a_stride():
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((20, 700)).astype(np.float32)
    view = wide[:, 50:450]  # rows 700 apart, 400 columns read
    values, columns = _native.topk_rows(view, 9)
    np.testing.assert_array_equal(columns, literal_topk(np.ascontiguousarray(view), 9)[1])


def test_compiled_selection_declines_what_it_cannot_take():
    scores = np.random.default_rng(4).standard_normal((5, 100))
    assert _native.topk_rows(np.asfortranarray(scores), 3) is None  # columns not contiguous
    assert _native.topk_rows(scores[:, ::2], 3) is None
    assert _native.topk_rows(scores.astype(np.float16), 3) is None
    assert _native.topk_rows(scores, 0) is None and _native.topk_rows(scores, 101) is None
    with_nan = scores.copy()
    with_nan[2, 77] = np.nan
    assert _native.topk_rows(with_nan, 3) is None  # NaN has no place in the order: the caller decides


def test_topk_with_nan_falls_back_to_torch():
    scores = np.random.default_rng(5).standard_normal((4, 300))
    scores[1, 10] = np.nan
    import torch

    values, columns = _backend.topk(_backend.namespace(scores), scores, 4)
    want = torch.topk(torch.from_numpy(scores), 4, dim=1)
    assert set(columns[0].tolist()) == set(want.indices[0].tolist())
    assert columns[1, 0] == 10  # torch orders NaN first


@pytest.fixture
def no_kernel(monkeypatch):
    monkeypatch.setattr(_native, "_load", lambda: (None, "switched off for this test"))
    assert not _native.available()


@needs_kernel
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_topk_is_the_same_with_and_without_the_kernel(seed, request):
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((50, 3000))
    scores[:, 100:110] = scores[:, :10]  # exact ties between columns
    xp = _backend.namespace(scores)
    with_kernel = _backend.topk(xp, scores, 12)
    request.getfixturevalue("no_kernel")
    without = _backend.topk(xp, scores, 12)
    np.testing.assert_array_equal(with_kernel[1], without[1])
    np.testing.assert_array_equal(with_kernel[0], without[0])


@needs_kernel
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_knn_neighbours_are_the_same_with_and_without_the_kernel(seed, request):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3000, 40)) / np.sqrt(np.arange(1, 41))
    x[1500:1510] = x[:10]  # duplicate words: tied cosines
    y = x + 0.3 * rng.standard_normal(x.shape) * x.std()
    queries = np.sort(rng.choice(3000, 300, replace=False))
    xp = _backend.namespace(x)
    with_kernel = [np.asarray(nearest_neighbors(xp, m, xp.asarray(queries), 10, dtype)) for m in (x, y)
                   for dtype in (None, "float32")]
    value = knn(x, y, k=10, n_queries=300, seed=seed)
    request.getfixturevalue("no_kernel")
    without = [np.asarray(nearest_neighbors(xp, m, xp.asarray(queries), 10, dtype)) for m in (x, y)
               for dtype in (None, "float32")]
    for a, b in zip(with_kernel, without):
        np.testing.assert_array_equal(a, b)
    assert knn(x, y, k=10, n_queries=300, seed=seed) == value


@pytest.mark.parametrize("backend", ["numpy without the kernel", "torch"])
@pytest.mark.parametrize("k", [1, 4, 17, 299, 300])
@pytest.mark.parametrize("seed", range(4))
def test_every_backend_keeps_the_lowest_columns_among_ties(backend, k, seed, request):
    # a few distinct values: ties at the k-th place in nearly every row, where a selection may
    # keep any of the tied columns; every backend must give the literal sort's
    import torch

    scores = _rows(np.random.default_rng(seed), "ties", 40, 300, np.float64)
    expected = literal_topk(scores, k)
    request.getfixturevalue("no_kernel")
    given = torch.from_numpy(scores) if backend == "torch" else scores
    vals, idx = _backend.topk(_backend.namespace(given), given, k)
    np.testing.assert_array_equal(np.asarray(idx), expected[1])
    np.testing.assert_array_equal(np.asarray(vals), expected[0])


@pytest.mark.parametrize("seed", range(3))
def test_knn_of_one_bit_tables_is_the_same_on_every_backend(seed, monkeypatch):
    # sign vectors: their cosines take a few values, so neighbour lists tie at the k-th place
    import torch

    rng = np.random.default_rng(seed)
    a = np.sign(rng.standard_normal((1000, 16)))
    b = np.sign(a + 0.7 * rng.standard_normal(a.shape))
    values = {"numpy": knn(a, b, n_queries=None),
              "torch": knn(torch.from_numpy(a), torch.from_numpy(b), n_queries=None),
              "torch float32": knn(torch.from_numpy(a).float(), torch.from_numpy(b).float(), n_queries=None,
                                   dtype="float32")}
    monkeypatch.setattr(_native, "_load", lambda: (None, "switched off for this test"))
    values["numpy without the kernel"] = knn(a, b, n_queries=None)
    # (one neighbour more or less moves the value by 1e-4; the means' round-off differs by 1e-17)
    assert max(values.values()) - min(values.values()) < 1e-12, values


@pytest.mark.parametrize("scale", [1e-300, 1e-40, 1e-20, 1e20, 1e40, 1e300])
@pytest.mark.parametrize("d, n_queries", [(30, 200), (60, 40)])  # normalised before or after the product
def test_neighbours_do_not_depend_on_the_rows_magnitude(scale, d, n_queries):
    # cosines are scale-free: at magnitudes where squares underflow or overflow (the row would
    # count as zero, or as infinite) and where float32 holds the rows only as subnormals or
    # infinities, the neighbours must still be the ones of the unscaled rows
    rng = np.random.default_rng(int(abs(np.log10(scale))) + d)
    x = rng.standard_normal((2000, d)) / np.sqrt(np.arange(1, d + 1))
    xp = _backend.namespace(x)
    queries = xp.asarray(np.sort(rng.choice(2000, n_queries, replace=False)))
    # float64 (the certified scan) at every magnitude; float32 working precision where float32 holds the rows
    for dtype in (None, "float32") if 1e-30 < scale < 1e30 else (None,):
        want = np.asarray(nearest_neighbors(xp, x, queries, 10, dtype))
        with np.errstate(all="raise"):  # no warning reaches the user either
            got = np.asarray(nearest_neighbors(xp, x * scale, queries, 10, dtype))
        np.testing.assert_array_equal(got, want)
    y = x + 0.3 * rng.standard_normal(x.shape) * x.std()
    assert knn(x * scale, y * scale, k=10, n_queries=n_queries) == knn(x, y, k=10, n_queries=n_queries)


@pytest.mark.parametrize("scale", [1e-300, 1e-160, 1.0, 1e160, 1e300])
def test_row_norms_at_any_magnitude(scale):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((50, 7))
    x[3] = 0.0
    want = np.linalg.norm(x, axis=1) * scale
    got = _backend.row_norms(_backend.namespace(x), x * scale)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    assert got[3] == 0.0


def test_nearest_neighbors_takes_the_plain_array_modules():
    import torch

    x = np.random.default_rng(0).standard_normal((100, 5))
    via_namespace = np.asarray(nearest_neighbors(_backend.namespace(x), x, np.arange(3), 2))
    np.testing.assert_array_equal(np.asarray(nearest_neighbors(np, x, np.arange(3), 2)), via_namespace)
    np.testing.assert_array_equal(nearest_neighbors(torch, torch.from_numpy(x), torch.arange(3), 2).numpy(),
                                  via_namespace)

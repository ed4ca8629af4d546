"""k-nearest-neighbour overlap (after Wendlandt et al. 2018).

For each query word, the k nearest rows by cosine similarity are found separately in X and in Y
(the query itself excluded) and the overlap of the two neighbour sets is averaged. Top-k is
exact, by blocked matrix products over candidate rows, so memory stays bounded (tens of MB
besides the inputs) at n = 400,000.
"""

from __future__ import annotations

import warnings
from typing import Any

import array_api_compat
import numpy as np

from embstab.measures._backend import as_float, check_pair, one_blas_thread, split_rows, topk

__all__ = ["knn", "nearest_neighbors"]

#: Bytes allowed for one block of query×candidate scores.
BLOCK_BYTES = 128 * 2**20


def _unit_rows(xp, x):
    norms = xp.sqrt(xp.sum(x * x, axis=1, keepdims=True))
    # zero rows stay zero (cosine distance 1 to everything), as scikit-learn does
    return x / xp.where(norms == 0, xp.ones_like(norms), norms)


def nearest_neighbors(xp, x, queries, k: int, dtype: str | None = None, block_bytes: int | None = None):
    """Indices of the ``k + 1`` most cosine-similar rows of ``x`` for each query row index.

    Candidates are scanned in row blocks (cast one block at a time, scores divided by the
    candidates' norms); the running best ``k + 1`` are merged with each block's best, keeping
    (value desc, index asc) order. numpy inputs are scanned by several threads, each over its own
    rows (see :func:`~embstab.measures._backend.split_rows`).

    Parameters
    ----------
    xp : module
        Array-API namespace of ``x``.
    x : array
        ``(n, d)`` matrix.
    queries : array of int
        Row indices of the query rows.
    k : int
        Neighbours wanted; ``k + 1`` are returned (capped at ``n``) because a row is its own nearest.
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default).
    block_bytes : int, optional
        Memory budget of one block of scores (default :data:`BLOCK_BYTES`).

    Returns
    -------
    array
        int64 ``(len(queries), min(k + 1, n))`` row indices, most similar first.
    """
    q = _unit_rows(xp, as_float(xp, x[queries, :], dtype))
    n = x.shape[0]
    m = q.shape[0]
    kk = min(k + 1, n)
    itemsize = 4 if dtype == "float32" else 8
    rows = max(kk, int((block_bytes or BLOCK_BYTES) // max(1, (m + x.shape[1]) * itemsize)))

    def scan(lo: int, hi: int):
        # the best kk of rows lo..hi, in blocks; earlier blocks hold lower indices, so a stable
        # sort keeps "lower index first" on ties
        best_v = best_i = None
        for start in range(lo, hi, rows):
            stop = min(hi, start + rows)
            v, i = _block_best(xp, q, as_float(xp, x[start:stop, :], dtype), kk)
            i = i + start
            if best_v is not None:
                v, i = _merge(xp, (best_v, v), (best_i, i), kk)
            best_v, best_i = v, i
        return best_v, best_i

    parts = split_rows(scan, x)
    best_v, best_i = _merge(xp, [p[0] for p in parts], [p[1] for p in parts], kk) if len(parts) > 1 else parts[0]
    return best_i


def _block_best(xp, q, cand, kk: int):
    """Best ``kk`` cosine scores of the unit query rows ``q`` against the rows of ``cand``."""
    norms = xp.sqrt(xp.sum(cand * cand, axis=1))
    # zero rows stay zero (cosine distance 1 to everything), as scikit-learn does; dividing the
    # scores by the candidates' norms ranks as cosines do without a normalised copy of the block
    inv = 1.0 / xp.where(norms == 0, xp.ones_like(norms), norms)
    scores = q @ cand.T
    scores *= xp.reshape(inv, (1, -1))
    v, i = topk(xp, scores, kk)
    return v, xp.astype(i, xp.int64)


def _merge(xp, values, indices, kk: int):
    """The best ``kk`` of several candidate lists, given in increasing row order."""
    v = xp.concat(list(values), axis=1)
    i = xp.concat(list(indices), axis=1)
    order = xp.argsort(v, axis=1, descending=True, stable=True)[:, :kk]
    return xp.take_along_axis(v, order, axis=1), xp.take_along_axis(i, order, axis=1)


def _drop_self(xp, neighbors, queries, k: int):
    # remove the query from its own list; if ties pushed it out, drop the last neighbour instead
    is_self = neighbors == xp.reshape(queries, (-1, 1))
    has_self = xp.any(is_self, axis=1)
    last = xp.zeros_like(is_self)
    last[:, -1] = True
    drop = xp.where(xp.reshape(has_self, (-1, 1)), is_self, last)
    keep_order = xp.argsort(xp.astype(drop, xp.int8), axis=1, stable=True)[:, :k]
    return xp.take_along_axis(neighbors, keep_order, axis=1)


@one_blas_thread
def knn(
    X: Any,
    Y: Any,
    k: int = 5,
    n_queries: int | None = 1000,
    seed: int | None = 1234,
    *,
    dtype: str | None = None,
    return_per_query: bool = False,
) -> float:
    """Mean overlap of the k cosine-nearest neighbours of query words in X and in Y.

    Parameters
    ----------
    X, Y : (n, d) and (n, d̃) arrays
        Row-aligned embeddings of the same n words (numpy, torch or cupy).
    k : int, default 5
        Neighbours per query.
    n_queries : int or None, default 1000
        Number of query words drawn without replacement from the n rows with a local RNG seeded
        by ``seed`` (the global RNG is never touched); ``None`` uses every row, and so does a
        number larger than n (with a warning).
    seed : int, default 1234
        Seed of the query draw.
    dtype : {"float64", "float32"}, optional
    return_per_query : bool
        Also return the per-query overlaps and the query indices.

    Returns
    -------
    float in [0, 1]; larger = more stable. Invariant to scaling and rotation of either side.
    """
    xp = check_pair(X, Y)
    n = X.shape[0]
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if n < k + 1:
        raise ValueError(f"k-NN with k={k} needs at least {k + 1} rows, got {n}")
    if n_queries is None:
        chosen = np.arange(n)
    else:
        if n_queries < 1:
            raise ValueError(f"n_queries must be >= 1 or None, got {n_queries}")
        if n_queries > n:
            warnings.warn(f"n_queries={n_queries} exceeds the {n} rows: every row is used as a query", stacklevel=2)
            n_queries = n
        chosen = np.sort(np.random.default_rng(seed).choice(n, size=n_queries, replace=False))
    queries = xp.asarray(chosen.astype(np.int64), device=array_api_compat.device(X))
    nx = _drop_self(xp, nearest_neighbors(xp, X, queries, k, dtype), queries, k)
    ny = _drop_self(xp, nearest_neighbors(xp, Y, queries, k, dtype), queries, k)
    # |N(q) ∩ Ñ(q)|: neighbour lists hold distinct indices, so count pairwise matches
    matches = xp.sum(xp.astype(nx[:, :, None] == ny[:, None, :], xp.int64), axis=(1, 2))
    per_query = xp.astype(matches, xp.float64) / k
    value = float(xp.mean(per_query))
    if return_per_query:
        return value, np.asarray(per_query.tolist(), dtype=np.float64), chosen
    return value

"""k-nearest-neighbour overlap (after Wendlandt et al. 2018).

For each query word, the k nearest rows by cosine similarity are found separately in X and in Y
(the query itself excluded) and the overlap of the two neighbour sets is averaged. Top-k is
exact, by blocked matrix products over candidate rows, so memory stays bounded (tens of MB
besides the inputs) at n = 400,000.

In float64 (the default) on the CPU the scores are first computed in float32, at twice the
product rate, and *certified*: every float32 cosine is within a proven bound δ of the exact one
(:func:`score_error_bound`). Where every gap among a query's best k + 1 float32 scores, and the
one after them, is wider than 2δ, the exact scores have the same order and the float32 list is
the float64 one. Where only the (k+1)-th score stands more than 2δ above the last of the k + 9
fetched candidates, the true neighbours are among them, and they are scored again in float64;
any other query is scanned again in float64. The neighbours are the float64 path's, whatever the data.
"""

from __future__ import annotations

import warnings
from typing import Any

import array_api_compat
import numpy as np

from embstab._numbers import is_integer
from embstab.errors import ConfigError
from embstab.measures import _native
from embstab.measures._backend import (as_float, check_pair, namespace, on_gpu, one_blas_thread, row_norms, split_rows,
                                       topk, working)

__all__ = ["knn", "nearest_neighbors"]

#: Bytes allowed for one block of query×candidate scores.
BLOCK_BYTES = 128 * 2**20

#: The same on a GPU: large blocks keep its products and selections near its rates (1000 queries ×
#: 75,000 rows at d = 800: a 120 GFLOP product, 2 ms on an H200).
DEVICE_BLOCK_BYTES = 2**30

#: Candidates fetched per query beyond k + 1 by the certified float32 scan: the room a query's
#: float32 list has to show a gap of 2δ below its (k+1)-th score.
CERTIFY_EXTRA = 8

#: Above this dimension the float32 bound δ ≈ d·2⁻²⁴ is too wide to certify typical gaps, and the
#: scan runs in float64 directly.
CERTIFY_MAX_DIM = 4096

_U32 = 2.0**-24  # unit round-off of float32

#: Inverse row norms within which a candidate row is cast to float32 unscaled: its scores stay far
#: below float32's overflow, and the entries float32 holds only as subnormals (below 2⁻¹²⁶, absolute
#: error 2⁻¹⁵⁰) move its cosine by less than 2⁻⁵⁸ (d ≤ 4096), far inside the bound's 1e-12 allowance.
_SAFE_INVERSE = (2.0**-100, 2.0**80)


def _unit_rows(xp, x):
    norms = row_norms(xp, x)
    # zero rows stay zero (cosine distance 1 to everything), as scikit-learn does
    return x / xp.reshape(xp.where(norms == 0, xp.ones_like(norms), norms), (-1, 1))


def nearest_neighbors(xp, x, queries, k: int, dtype: str | None = None, block_bytes: int | None = None):
    """Indices of the ``k + 1`` most cosine-similar rows of ``x`` for each query row index.

    Candidates are scanned in row blocks (cast one block at a time, scores divided by the
    candidates' norms); the running best ``k + 1`` are merged with each block's best, keeping
    (value desc, index asc) order. numpy inputs are scanned by several threads, each over its own
    rows (see :func:`~embstab.measures._backend.split_rows`). In float64 on the CPU the scan runs
    in float32 and is certified (see the module docstring); the result is the float64 scan's.

    Parameters
    ----------
    xp : module
        The array library of ``x`` (numpy, torch or cupy, or its array-API namespace).
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
    xp = namespace(x)  # the array-API namespace whatever module was given (numpy's own lacks a descending sort)
    q = _unit_rows(xp, as_float(xp, x[queries, :], dtype))
    kk = min(k + 1, x.shape[0])
    if (dtype or "float64") == "float64" and _can_certify(x):
        return _certified_best(xp, x, q, kk, block_bytes)
    return _scan(xp, working(xp, x, dtype), q, kk, dtype, block_bytes)[1]


def _scan(xp, x, q, kk: int, dtype: str | None, block_bytes: int | None, *, certified: bool = False):
    """Values and indices of the best ``kk`` rows of ``x`` for the unit query rows ``q``.

    With ``certified``, ``q`` is float32 and so are the products, while the candidates' norms
    stay float64 (see :func:`score_error_bound`): the scores of the certified scan.

    The rows are scanned in rounds whose scores fit the block budget. Within a round the products
    run on every core (numpy: one single-threaded product per core), each followed by the compiled
    top-k selection of its own scores where it is built; otherwise the selection runs afterwards
    in this thread, so that torch's selection, which brings its own thread team, is never called
    from several threads at once (more teams than cores).
    """
    n, m = x.shape[0], q.shape[0]
    itemsize = 4 if dtype == "float32" else 8
    budget = block_bytes or (DEVICE_BLOCK_BYTES if on_gpu(x) else BLOCK_BYTES)
    rows = max(kk, int(budget // max(1, (m + x.shape[1]) * itemsize)))
    select_in_worker = array_api_compat.is_numpy_array(x) and _native.available()

    def part(chunk, lo: int, hi: int):
        scores = _block_scores(xp, q, chunk[lo:hi, :], dtype, certified)
        found = _native.topk_rows(scores, min(kk, int(scores.shape[1]))) if select_in_worker else None
        return (scores, found)

    best_v = best_i = None
    for start in range(0, n, rows):
        chunk = x[start:min(n, start + rows), :]
        offset = start
        # earlier parts hold lower indices, so the stable merge keeps "lower index first" on ties
        for scores, found in split_rows(lambda lo, hi: part(chunk, lo, hi), chunk):
            v, i = found if found is not None else topk(xp, scores, kk)
            i = xp.astype(i, xp.int64) + offset
            offset += int(scores.shape[1])
            if best_v is not None:
                v, i = _merge(xp, (best_v, v), (best_i, i), kk)
            best_v, best_i = v, i
    return best_v, best_i


def _block_scores(xp, q, block, dtype: str | None, certified: bool):
    """Cosine scores of the unit query rows ``q`` against the rows of ``block`` (queries × rows).

    Dividing the scores by the candidates' norms ranks as cosines do without a normalised copy.
    In the certified scan the division is applied to whichever is smaller, the candidates (before
    the product: rows × d) or the scores (after it: rows × queries); the bound covers both.
    """
    if certified:
        inv = _inverse_norms(xp, block, "float64")
        if bool(xp.any(xp.logical_or(inv < _SAFE_INVERSE[0], inv > _SAFE_INVERSE[1]))):
            # magnitudes float32 would hold as subnormals or infinities: normalised in float64 first
            unit = as_float(xp, block, "float64") * xp.reshape(inv, (-1, 1))
            return q @ xp.astype(unit, xp.float32).T
        cand = as_float(xp, block, "float32")
        if cand.shape[1] < q.shape[0]:
            scale = xp.reshape(xp.astype(inv, xp.float32), (-1, 1))
            if cand is block:  # the caller's own float32 rows: not scaled in place
                cand = cand * scale
            else:
                cand *= scale
            return q @ cand.T
    else:
        cand = as_float(xp, block, dtype)
        inv = _inverse_norms(xp, cand, None if cand.dtype == xp.float64 else "float32")
    scores = q @ cand.T
    scores *= xp.reshape(xp.astype(inv, scores.dtype), (1, -1))
    return scores


def _can_certify(x) -> bool:
    """Whether the float32 bound holds for products on ``x``'s backend (and is narrow enough)."""
    if not 0 < x.shape[1] <= CERTIFY_MAX_DIM or x.shape[0] < 2:
        return False
    if array_api_compat.is_numpy_array(x):
        return True
    if array_api_compat.is_torch_array(x):
        import torch  # noqa: PLC0415

        # on the CPU at "highest" a float32 product rounds in float32 (no bf16 or TF32 passes)
        return x.device.type == "cpu" and torch.get_float32_matmul_precision() == "highest"
    return False  # a GPU library may run float32 products through TF32: its bound does not hold


def score_error_bound(d: int) -> float:
    """A bound on |certified float32 cosine − exact cosine| for rows of dimension ``d``.

    The query (a unit row) and the candidate are rounded to float32 (relative error u = 2⁻²⁴ per
    entry), their dot product is accumulated in float32 in any order, which by the standard model
    errs by at most γ_d = d·u / (1 − d·u) relative to Σ|qᵢ||cᵢ| ≤ ‖c‖ (Cauchy–Schwarz), and
    1/‖c‖ (norm in float64, rounded once to float32) multiplies in float32 either the result or,
    before the product, each entry of the candidate: two more roundings of u either way.
    |error| ≤ ((1+u)²(1+γ_d)(1+u)² − 1) + 2u + u² < (γ_d + 4u)(1 + 8u), plus 1e-12 for the
    float64 rounding of the unit query and of the rescored cosines.
    """
    gamma = d * _U32 / (1.0 - d * _U32)
    return (gamma + 4.0 * _U32) * (1.0 + 8.0 * _U32) + 1e-12


def _certified_best(xp, x, q64, kk: int, block_bytes: int | None):
    """The float64 best ``kk`` for each query, from a certified float32 scan.

    Three cases per query: the float32 list is already the float64 one (every gap among the best
    kk, and the one after them, wider than 2δ: exact scores keep that order); the best kk are
    certainly among the fetched rows but their order is not (they are scored again in float64);
    or neither (the query is scanned again in float64).
    """
    n, d = x.shape
    m = q64.shape[0]
    device = array_api_compat.device(q64)
    fetch = min(kk + CERTIFY_EXTRA, n)
    v32, i32 = _scan(xp, x, xp.astype(q64, xp.float32), fetch, "float32", block_bytes, certified=True)
    v32 = xp.astype(v32, xp.float64)
    two_delta = 2.0 * score_error_bound(int(d))
    span = min(kk, fetch - 1)
    if span:
        ordered = xp.all(v32[:, :span] - v32[:, 1:span + 1] > two_delta, axis=1)
    else:
        ordered = xp.ones((m,), dtype=xp.bool, device=device)
    if fetch == n:
        within = xp.ones((m,), dtype=xp.bool, device=device)
        inside = xp.full((m,), fetch, dtype=xp.int64, device=device)
    else:
        # every row left out scored ≤ v32[:, -1] in float32, so exactly < v32[:, kk-1] − δ ≤ the
        # true kk-th best: a strict gap of 2δ proves that none of them belongs to the best kk
        low = v32[:, kk - 1] - two_delta
        within = low > v32[:, -1]
        # only the fetched rows above that line can be among the best kk
        inside = xp.sum(xp.astype(v32 >= xp.reshape(low, (-1, 1)), xp.int64), axis=1)
    out = i32[:, :kk]
    rescore = xp.nonzero(xp.logical_and(within, xp.logical_not(ordered)))[0]
    if rescore.shape[0]:
        width = int(xp.max(xp.take(inside, rescore)))
        out[rescore, :] = _rescore(xp, x, q64[rescore, :], i32[rescore, :width], kk, block_bytes)
    unsure = xp.nonzero(xp.logical_not(within))[0]
    if unsure.shape[0]:
        out[unsure, :] = _scan(xp, x, q64[unsure, :], kk, "float64", block_bytes)[1]
    return out


def _rescore(xp, x, q64, idx, kk: int, block_bytes: int | None):
    """The best ``kk`` of the candidate rows ``idx`` of each query, scored in float64."""
    m, width = idx.shape
    d = x.shape[1]
    chunk = max(1, int((block_bytes or BLOCK_BYTES) // max(1, width * d * 8)))
    parts = []
    for lo in range(0, m, chunk):
        hi = min(m, lo + chunk)
        cand = idx[lo:hi, :]
        rows = as_float(xp, xp.take(x, xp.reshape(cand, (-1,)), axis=0), "float64")
        # the float64 scan's formula: unit query · row, divided by the row's norm
        # one loop per row, so equal rows get equal scores (a batched matmul's kernels can round them apart)
        dots = xp.vecdot(xp.reshape(rows, (hi - lo, width, d)), q64[lo:hi, None, :], axis=-1)
        scores = dots * xp.reshape(_inverse_norms(xp, rows, "float64"), (hi - lo, width))
        # (value desc, index asc), as the float64 scan orders its lists
        order = xp.argsort(cand, axis=1, stable=True)
        scores, cand = xp.take_along_axis(scores, order, axis=1), xp.take_along_axis(cand, order, axis=1)
        order = xp.argsort(scores, axis=1, descending=True, stable=True)[:, :kk]
        parts.append(xp.take_along_axis(cand, order, axis=1))
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


def _inverse_norms(xp, rows, dtype: str | None):
    """1 / ‖row‖ per row in the working precision (1 for a zero row)."""
    rows = as_float(xp, rows, dtype)
    norms = row_norms(xp, rows)
    # zero rows stay zero (cosine distance 1 to everything), as scikit-learn does
    return 1.0 / xp.where(norms == 0, xp.ones_like(norms), norms)


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
    if not is_integer(k) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if n < k + 1:
        raise ConfigError(f"k-NN with k={k} needs at least {k + 1} rows, got {n}")
    if not is_integer(seed):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    if n_queries is None:
        chosen = np.arange(n)
    else:
        if not is_integer(n_queries) or n_queries < 1:
            raise ConfigError(f"n_queries must be an integer >= 1 or None, got {n_queries!r}")
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

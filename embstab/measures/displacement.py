"""Semantic displacement (after Hamilton et al. 2016)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np

from embstab.measures._backend import (FLOAT32_TRUST, alongside, as_float, check_pair, cross, one_blas_thread,
                                       row_blocks, row_norms, rows_matmul, split_rows, working)

__all__ = ["semantic_displacement", "zero_rows"]


def zero_rows(X: Any) -> np.ndarray:
    """Indices of the rows of ``X`` that are all zeros: words with no direction, hence no cosine.

    :func:`semantic_displacement` skips a word whose vector is zero on either side;
    :func:`embstab.compare` counts these rows with this function and says how many were skipped.

    Parameters
    ----------
    X : (n, d) array
        numpy, torch or cupy.

    Returns
    -------
    numpy.ndarray
        int64 row indices, ascending.
    """
    xp = array_api_compat.array_namespace(X)
    nonzero = xp.any(X != 0, axis=1)
    if not array_api_compat.is_numpy_array(nonzero):
        nonzero = np.asarray(nonzero.tolist(), dtype=bool)
    return np.flatnonzero(~nonzero)


@one_blas_thread
def semantic_displacement(X: Any, Y: Any, *, align: bool = True, average: bool = True,
                          dtype: str | None = None) -> float | np.ndarray:
    """Mean cosine distance between each word's vectors after orthogonal Procrustes alignment.

    X is rotated onto Y by Ω = U Vᵀ from the SVD of XᵀY (the rotation minimising ‖XΩ − Y‖_F),
    then ``1 − cos(x_i Ω, y_i)`` is averaged over words; words with a zero vector on either side
    have no cosine and are skipped (as ``nanmean`` does in the reference; :func:`zero_rows` finds
    them, and :func:`embstab.compare` warns how many it skipped). Vectorised over row blocks (the
    reference loops over words in Python).

    Parameters
    ----------
    X, Y : (n, d) arrays of equal dimension, row-aligned.
    align : bool, default True
        Rotate X onto Y first.
    average : bool, default True
        Return the mean; with False, the per-word distances (numpy, NaN for zero rows).
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default). A float32 mean distance under 1e-3 is measured
        again in float64: float32 cosines cannot resolve it.

    Returns
    -------
    float in [0, 2]; smaller = more stable. Invariant to a global scale and rotations of either side.
    NaN when every word has a zero vector on one side or the other (nothing to average).
    """
    xp = check_pair(X, Y, same_dim=True)
    if average:
        # the rotation meets the rows only in a final d×d inner product: on the host it is found
        # alongside the pass over the rows
        rotation = alongside(_rotation, xp, cross(xp, X, Y, dtype), side=array_api_compat.is_numpy_array(X)) \
            if align else None
        value = _mean_distance(xp, working(xp, X, dtype), working(xp, Y, dtype), rotation, dtype)
        if (dtype or "float64") != "float64" and value < FLOAT32_TRUST:
            # 1 − cos of nearly equal vectors: float32 cosines carry ~1e-7, so a mean distance
            # below the trust ratio may be all round-off (it can read 0): measured again in float64
            return semantic_displacement(X, Y, align=align, average=True, dtype="float64")
        return value
    omega = _rotation(xp, cross(xp, X, Y, dtype)) if align else None
    X, Y = working(xp, X, dtype), working(xp, Y, dtype)

    def rows(lo: int, hi: int):
        per_word = []
        for xb, yb in row_blocks(X[lo:hi], Y[lo:hi]):
            x, y = as_float(xp, xb, dtype), as_float(xp, yb, dtype)
            if omega is not None:
                x = x @ omega
            dots = xp.sum(x * y, axis=1)
            norms = xp.sqrt(xp.sum(x * x, axis=1)) * xp.sqrt(xp.sum(y * y, axis=1))
            valid = norms > 0
            dist = 1.0 - dots / xp.where(valid, norms, xp.ones_like(norms))
            block = np.asarray(dist.tolist(), dtype=np.float64)
            block[~np.asarray(valid.tolist(), dtype=bool)] = np.nan
            per_word.append(block)
        return per_word

    return np.concatenate([block for part in split_rows(rows, X) for block in part])


#: The rotation comes from the eigendecomposition of MᵀM when cond(M) is at most this. Its error
#: grows as eps·cond²: measured on 300×300 matrices, 1.3e-12 at cond 1e3 and 8e-11 at 1e4
#: (7.6e-9 at 1e5); better-conditioned matrices than the bound all give < 1e-10. Worse ones take the SVD.
EIGH_MAX_COND = 1e4


def _rotation(xp, m: Any):
    """Ω = U Vᵀ for M = U S Vᵀ: the orthogonal Ω maximising ⟨Ω, M⟩ (orthogonal Procrustes).

    Ω = M (MᵀM)^{-1/2}, so an eigendecomposition of the symmetric MᵀM gives it in about half
    the time of an SVD of M (0.11 s against 0.24 s at d = 800 on one core); the eigenvalues
    certify cond(M) first, and an ill-conditioned or singular M takes the SVD, as does any M in
    float32 (its error, eps·cond², starts at 1e-7).
    """
    if m.dtype == xp.float64:
        lam, v = xp.linalg.eigh(m.T @ m)
        lo, hi = float(lam[0]), float(lam[-1])
        if lo > 0 and hi <= EIGH_MAX_COND**2 * lo:
            return rows_matmul(xp, rows_matmul(xp, m, v) * xp.reshape(1.0 / xp.sqrt(lam), (1, -1)), v.T)
    u, _, vt = xp.linalg.svd(m, full_matrices=False)
    return u @ vt


def _mean_distance(xp, X: Any, Y: Any, rotation: Callable[[], Any] | None, dtype: str | None) -> float:
    """Mean of ``1 − cos(xᵢΩ, yᵢ)`` over words with two non-zero vectors, without forming XΩ.

    Ω is orthogonal, so ‖xᵢΩ‖ = ‖xᵢ‖ and the sum of the cosines is ⟨Ω, Xᵀ D Y⟩ with
    D = diag(1 / (‖xᵢ‖ ‖yᵢ‖)): one d×d product over the rows instead of the rotated n×d copy and
    three passes over it. Without alignment (``rotation`` None) only the diagonal, Σ dᵢ xᵢ·yᵢ, is
    needed. ``rotation()`` gives Ω, and is asked for only once the rows are summed.
    """

    def rows(lo: int, hi: int):
        total, count = None, 0
        for xb, yb in row_blocks(X[lo:hi], Y[lo:hi]):
            x, y = as_float(xp, xb, dtype), as_float(xp, yb, dtype)
            norms = row_norms(xp, x) * row_norms(xp, y)
            valid = norms > 0
            scale = xp.where(valid, 1.0 / xp.where(valid, norms, xp.ones_like(norms)), xp.zeros_like(norms))
            if rotation is None:
                part = xp.sum(scale * xp.vecdot(x, y, axis=1))
            else:
                part = x.T @ (y * xp.reshape(scale, (-1, 1)))
            total = part if total is None else total + part
            count = count + xp.sum(xp.astype(valid, xp.int64))  # stays on the device: no wait per block
        return total, count

    parts = split_rows(rows, X)  # numpy: rows split over threads, their sums added in order
    omega = None if rotation is None else rotation()  # (awaited even when unused: it ends inside this call)
    count = sum(int(part[1]) for part in parts)
    if not count:
        return float("nan")
    total = parts[0][0]
    for part in parts[1:]:
        total = total + part[0]
    cosines = total if omega is None else xp.sum(omega * total)
    return 1.0 - float(cosines) / count

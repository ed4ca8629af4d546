"""Semantic displacement (after Hamilton et al. 2016)."""

from __future__ import annotations

from typing import Any

import numpy as np

from embstab.measures._backend import as_float, check_pair, cross, one_blas_thread, row_blocks, split_rows

__all__ = ["semantic_displacement"]


@one_blas_thread
def semantic_displacement(X: Any, Y: Any, *, align: bool = True, average: bool = True,
                          dtype: str | None = None) -> float | np.ndarray:
    """Mean cosine distance between each word's vectors after orthogonal Procrustes alignment.

    X is rotated onto Y by Ω = U Vᵀ from the SVD of XᵀY (the rotation minimising ‖XΩ − Y‖_F),
    then ``1 − cos(x_i Ω, y_i)`` is averaged over words; words with a zero vector on either side
    have no cosine and are skipped (as ``nanmean`` does in the reference). Vectorised over row
    blocks (the reference loops over words in Python).

    Parameters
    ----------
    X, Y : (n, d) arrays of equal dimension, row-aligned.
    align : bool, default True
        Rotate X onto Y first.
    average : bool, default True
        Return the mean; with False, the per-word distances (numpy, NaN for zero rows).
    dtype : {"float64", "float32"}, optional

    Returns
    -------
    float in [0, 2]; smaller = more stable. Invariant to a global scale and rotations of either side.
    """
    xp = check_pair(X, Y, same_dim=True)
    omega = None
    if align:
        u, _, vt = xp.linalg.svd(cross(xp, X, Y, dtype), full_matrices=False)
        omega = u @ vt

    def rows(lo: int, hi: int):
        total, count, per_word = 0.0, 0, []
        for xb, yb in row_blocks(X[lo:hi], Y[lo:hi]):
            x, y = as_float(xp, xb, dtype), as_float(xp, yb, dtype)
            if omega is not None:
                x = x @ omega
            dots = xp.sum(x * y, axis=1)
            norms = xp.sqrt(xp.sum(x * x, axis=1)) * xp.sqrt(xp.sum(y * y, axis=1))
            valid = norms > 0
            dist = 1.0 - dots / xp.where(valid, norms, xp.ones_like(norms))
            if average:
                total += float(xp.sum(xp.where(valid, dist, xp.zeros_like(dist))))
                count += int(xp.sum(xp.astype(valid, xp.int64)))
            else:
                block = np.asarray(dist.tolist(), dtype=np.float64)
                block[~np.asarray(valid.tolist(), dtype=bool)] = np.nan
                per_word.append(block)
        return total, count, per_word

    parts = split_rows(rows, X)  # numpy: rows split over threads, their sums added in order
    if not average:
        return np.concatenate([block for part in parts for block in part[2]])
    count = sum(part[1] for part in parts)
    return sum(part[0] for part in parts) / count if count else float("nan")

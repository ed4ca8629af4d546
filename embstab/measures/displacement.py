"""Semantic displacement (spec measures.md §2.3, after Hamilton et al. 2016)."""

from __future__ import annotations

from typing import Any

import numpy as np

from embstab.measures._backend import check_pair

__all__ = ["semantic_displacement"]


def semantic_displacement(X: Any, Y: Any, *, align: bool = True, average: bool = True,
                          dtype: str | None = None) -> float | np.ndarray:
    """Mean cosine distance between each word's vectors after orthogonal Procrustes alignment.

    X is rotated onto Y by Ω = U Vᵀ from the SVD of XᵀY (the rotation minimising ‖XΩ − Y‖_F),
    then ``1 − cos(x_i Ω, y_i)`` is averaged over words; words with a zero vector on either side
    have no cosine and are skipped (as ``nanmean`` does in the reference).

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
    xp, x, y = check_pair(X, Y, dtype, same_dim=True)
    if align:
        u, _, vt = xp.linalg.svd(x.T @ y, full_matrices=False)
        x = x @ (u @ vt)
    dots = xp.sum(x * y, axis=1)
    norms = xp.sqrt(xp.sum(x * x, axis=1)) * xp.sqrt(xp.sum(y * y, axis=1))
    valid = norms > 0
    dist = 1.0 - dots / xp.where(valid, norms, xp.ones_like(norms))
    if not average:
        out = np.asarray(dist.tolist(), dtype=np.float64)
        out[~np.asarray(valid.tolist(), dtype=bool)] = np.nan
        return out
    count = int(xp.sum(xp.astype(valid, xp.int64)))
    if count == 0:
        return float("nan")
    return float(xp.sum(xp.where(valid, dist, xp.zeros_like(dist)))) / count

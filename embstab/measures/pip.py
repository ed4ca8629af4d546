"""Pairwise-inner-product (PIP) loss (Yin & Shen 2018)."""

from __future__ import annotations

import math
from typing import Any

from embstab.measures._backend import FLOAT32_TRUST, check_pair, cross, one_blas_thread, sq_norm

__all__ = ["pip_loss"]


@one_blas_thread
def pip_loss(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """``‖X Xᵀ − Y Yᵀ‖_F``, computed exactly through d×d Gram matrices.

    ‖XXᵀ − YYᵀ‖²_F = ‖XᵀX‖²_F + ‖YᵀY‖²_F − 2‖XᵀY‖²_F, so the n×n matrices of the reference are
    never formed (memory O(d²) instead of O(n²)).

    Parameters
    ----------
    X, Y : array
        Row-aligned ``(n, d)`` and ``(n, d̃)`` matrices (numpy, torch or cupy; one library, one
        device).
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default).

    Returns
    -------
    float
        ≥ 0; smaller = more stable. Rotation-invariant but scale-dependent.

    Raises
    ------
    ShapeError
        If the inputs are not non-empty finite 2-D arrays with the same number of rows.
    """
    xp = check_pair(X, Y)
    size = float(sq_norm(xp, cross(xp, X, X, dtype)) + sq_norm(xp, cross(xp, Y, Y, dtype)))
    sq = size - 2 * float(sq_norm(xp, cross(xp, X, Y, dtype)))
    if (dtype or "float64") != "float64" and sq < FLOAT32_TRUST * size:
        # X ≈ Y: the loss is a small difference of large terms, which float32 cannot resolve
        return pip_loss(X, Y, dtype="float64")
    # cancellation can leave a tiny negative when X ≈ Y
    return math.sqrt(max(sq, 0.0))

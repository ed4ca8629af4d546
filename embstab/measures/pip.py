"""Pairwise-inner-product (PIP) loss (Yin & Shen 2018)."""

from __future__ import annotations

import math
from typing import Any

from embstab.measures._backend import check_pair, cross, sq_norm

__all__ = ["pip_loss"]


def pip_loss(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """``‖X Xᵀ − Y Yᵀ‖_F``, computed exactly through d×d Gram matrices.

    ‖XXᵀ − YYᵀ‖²_F = ‖XᵀX‖²_F + ‖YᵀY‖²_F − 2‖XᵀY‖²_F, so the n×n matrices of the reference are
    never formed (memory O(d²) instead of O(n²)).

    Returns
    -------
    float ≥ 0; smaller = more stable. Rotation-invariant but scale-dependent.
    """
    xp = check_pair(X, Y)
    sq = float(sq_norm(xp, cross(xp, X, X, dtype)) + sq_norm(xp, cross(xp, Y, Y, dtype))
               - 2 * sq_norm(xp, cross(xp, X, Y, dtype)))
    # cancellation can leave a tiny negative when X ≈ Y
    return math.sqrt(max(sq, 0.0))

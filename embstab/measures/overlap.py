"""Eigenspace overlap score (spec measures.md §2.5, May et al. 2019) and its weighted variant."""

from __future__ import annotations

from typing import Any

from embstab.measures._backend import check_pair, orthonormal_basis, sq_norm

__all__ = ["eigenspace_overlap", "weighted_eigenspace_overlap"]


def eigenspace_overlap(X: Any, Y: Any, *, dtype: str | None = None, rtol: float | None = None) -> float:
    """``‖Uᵀ Ũ‖²_F / max(r, r̃)`` with U, Ũ orthonormal bases of the column spans.

    r and r̃ are the numerical ranks (= d and d̃ for full-rank inputs, as in the reference).

    Returns
    -------
    float in [0, 1]; larger = more stable; 1 means identical column spans.
    """
    xp, x, y = check_pair(X, Y, dtype)
    u, _ = orthonormal_basis(xp, x, rtol)
    v, _ = orthonormal_basis(xp, y, rtol)
    return float(sq_norm(xp, u.T @ v)) / max(u.shape[1], v.shape[1])


def weighted_eigenspace_overlap(X: Any, Y: Any, exponent: float = 1.0, *, dtype: str | None = None,
                                rtol: float | None = None) -> float:
    """``‖Uᵀ Ũ S̃^e‖²_F / Σ s̃ᵢ^{2e}``: overlap weighted by the singular values of Y (asymmetric).

    Returns
    -------
    float in [0, 1]; larger = more stable.
    """
    xp, x, y = check_pair(X, Y, dtype)
    u, _ = orthonormal_basis(xp, x, rtol)
    v, s = orthonormal_basis(xp, y, rtol)
    w = (s / s[0]) ** exponent  # scaled by s_max: the ratio is unchanged, the powers stay finite
    return float(sq_norm(xp, (u.T @ v) * w)) / float(xp.sum(w * w))

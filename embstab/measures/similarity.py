"""Representation-similarity measures beyond the reference code: Frobenius distance, linear CKA
and the orthogonal-Procrustes shape distance."""

from __future__ import annotations

import math
from typing import Any

from embstab.measures._backend import check_pair, sq_norm

__all__ = ["fro_distance", "linear_cka", "procrustes_distance"]


def fro_distance(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """``‖X − Y‖_F`` with no alignment (spec §2.6). Smaller = more stable; needs equal dimensions."""
    xp, x, y = check_pair(X, Y, dtype, same_dim=True)
    return math.sqrt(float(sq_norm(xp, x - y)))


def _centered(xp, a):
    return a - xp.mean(a, axis=0, keepdims=True)


def linear_cka(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019).

    CKA = ‖YcᵀXc‖²_F / (‖XcᵀXc‖_F ‖YcᵀYc‖_F) with column-centred Xc, Yc; computed from d×d
    products. Returns a float in [0, 1]; larger = more stable. Invariant to rotations and
    isotropic scaling of either side. Defined as 0 when either side is constant.
    """
    xp, x, y = check_pair(X, Y, dtype)
    xc, yc = _centered(xp, x), _centered(xp, y)
    den = math.sqrt(float(sq_norm(xp, xc.T @ xc))) * math.sqrt(float(sq_norm(xp, yc.T @ yc)))
    if den == 0:
        return 0.0
    return min(float(sq_norm(xp, yc.T @ xc)) / den, 1.0)


def procrustes_distance(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """Orthogonal-Procrustes shape distance (Williams et al. 2021, Euclidean form).

    Both sides are column-centred and scaled to unit Frobenius norm; the distance is
    ``min_Ω ‖X̂Ω − Ŷ‖_F = sqrt(2 − 2‖X̂ᵀŶ‖_*)`` (nuclear norm; different widths are zero-padded).
    Returns a float in [0, √2]; smaller = more stable. Invariant to translation, isotropic
    scaling and rotation of either side.
    """
    xp, x, y = check_pair(X, Y, dtype)
    xc, yc = _centered(xp, x), _centered(xp, y)
    nx, ny = math.sqrt(float(sq_norm(xp, xc))), math.sqrt(float(sq_norm(xp, yc)))
    if nx == 0 or ny == 0:
        raise ValueError("procrustes_distance is undefined when one side has all rows equal")
    nuclear = float(xp.sum(xp.linalg.svdvals(xc.T @ yc))) / (nx * ny)
    return math.sqrt(max(2.0 - 2.0 * min(nuclear, 1.0), 0.0))

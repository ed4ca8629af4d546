"""Representation-similarity measures beyond the reference code: Frobenius distance, linear CKA
and the orthogonal-Procrustes shape distance."""

from __future__ import annotations

import math
from typing import Any

from embstab.errors import ShapeError
from embstab.measures._backend import FLOAT32_TRUST, as_float, check_pair, column_mean, cross, row_blocks, sq_norm

__all__ = ["fro_distance", "linear_cka", "procrustes_distance"]


def fro_distance(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """``‖X − Y‖_F`` with no alignment, accumulated over row blocks.

    Parameters
    ----------
    X, Y : array
        Row-aligned ``(n, d)`` matrices of equal width (numpy, torch or cupy; one library, one
        device).
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default).

    Returns
    -------
    float
        ≥ 0; smaller = more stable.

    Raises
    ------
    ShapeError
        If the inputs are not non-empty finite 2-D arrays with the same shape.
    """
    xp = check_pair(X, Y, same_dim=True)
    total = 0.0
    for xb, yb in row_blocks(X, Y):
        total += float(sq_norm(xp, as_float(xp, xb, dtype) - as_float(xp, yb, dtype)))
    return math.sqrt(total)


def _centered_cross(xp, a, b, dtype):
    # (A − 1μ_aᵀ)ᵀ(B − 1μ_bᵀ) = AᵀB − n μ_aᵀ μ_b: centring without an n×d copy
    n = a.shape[0]
    return cross(xp, a, b, dtype) - n * (column_mean(xp, a, dtype).T @ column_mean(xp, b, dtype))


def linear_cka(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019).

    CKA = ‖YcᵀXc‖²_F / (‖XcᵀXc‖_F ‖YcᵀYc‖_F) with column-centred Xc, Yc; computed from d×d
    products. Invariant to rotations and isotropic scaling of either side.

    Parameters
    ----------
    X, Y : array
        Row-aligned ``(n, d)`` and ``(n, d̃)`` matrices (numpy, torch or cupy; one library, one
        device).
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default). A float32 CKA within 1e-3 of 1 is measured again
        in float64: float32 cannot resolve the distance 1 − CKA there.

    Returns
    -------
    float
        In [0, 1]; larger = more stable. Defined as 0 when either side is constant.

    Raises
    ------
    ShapeError
        If the inputs are not non-empty finite 2-D arrays with the same number of rows.
    """
    xp = check_pair(X, Y)
    xx, yy = _centered_cross(xp, X, X, dtype), _centered_cross(xp, Y, Y, dtype)
    den = math.sqrt(float(sq_norm(xp, xx))) * math.sqrt(float(sq_norm(xp, yy)))
    if den == 0:
        return 0.0
    value = min(float(sq_norm(xp, _centered_cross(xp, X, Y, dtype))) / den, 1.0)
    if (dtype or "float64") != "float64" and 1.0 - value < FLOAT32_TRUST:
        # nearly identical representations: 1 − CKA is below float32's resolution of the terms
        return linear_cka(X, Y, dtype="float64")
    return value


def procrustes_distance(X: Any, Y: Any, *, dtype: str | None = None) -> float:
    """Orthogonal-Procrustes shape distance (Williams et al. 2021, Euclidean form).

    Both sides are column-centred and scaled to unit Frobenius norm; the distance is
    ``min_Ω ‖X̂Ω − Ŷ‖_F = sqrt(2 − 2‖X̂ᵀŶ‖_*)`` (nuclear norm; different widths are zero-padded).
    Invariant to translation, isotropic scaling and rotation of either side.

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
        In [0, √2]; smaller = more stable.

    Raises
    ------
    ShapeError
        If the inputs are not non-empty finite 2-D arrays with the same number of rows.
    ValueError
        If one side has all rows equal (the distance is undefined).
    """
    xp = check_pair(X, Y)
    nx = math.sqrt(max(float(xp.linalg.trace(_centered_cross(xp, X, X, dtype))), 0.0))
    ny = math.sqrt(max(float(xp.linalg.trace(_centered_cross(xp, Y, Y, dtype))), 0.0))
    if nx == 0 or ny == 0:
        raise ShapeError("procrustes_distance is undefined when one side has all rows equal")
    nuclear = float(xp.sum(xp.linalg.svdvals(_centered_cross(xp, X, Y, dtype)))) / (nx * ny)
    if (dtype or "float64") != "float64" and 1.0 - nuclear < FLOAT32_TRUST:
        # near-identical shapes: 1 − ‖X̂ᵀŶ‖_* is a small difference that float32 cannot resolve
        return procrustes_distance(X, Y, dtype="float64")
    return math.sqrt(max(2.0 - 2.0 * min(nuclear, 1.0), 0.0))

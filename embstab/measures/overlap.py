"""Eigenspace overlap score (May et al. 2019) and its weighted variant."""

from __future__ import annotations

import math
from typing import Any

from embstab._numbers import is_real
from embstab.errors import ConfigError
from embstab.measures._backend import FLOAT32_TRUST, basis_overlap, check_pair, cross, one_blas_thread, span, sq_norm

__all__ = ["eigenspace_overlap", "weighted_eigenspace_overlap"]


@one_blas_thread
def eigenspace_overlap(X: Any, Y: Any, *, dtype: str | None = None, rtol: float | None = None,
                       method: str = "auto") -> float:
    """``‖Uᵀ Ũ‖²_F / max(r, r̃)`` with U, Ũ orthonormal bases of the column spans.

    r and r̃ are the numerical ranks (= d and d̃ for full-rank inputs, as in the reference).

    Parameters
    ----------
    X, Y : array
        Row-aligned ``(n, d)`` and ``(n, d̃)`` matrices (numpy, torch or cupy; one library, one
        device).
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default). A float32 overlap within 1e-3 of 1 is measured
        again in float64: float32 cannot resolve the distance 1 − overlap there.
    rtol : float, optional
        Singular values below ``rtol · s_max`` count as rank deficiency (default ``max(n, d)·eps``).
    method : {"auto", "qr", "gram"}, default "auto"
        How the spans are computed (see :func:`embstab.measures._backend.span`).

    Returns
    -------
    float
        In [0, 1]; larger = more stable; 1 means identical column spans.

    Raises
    ------
    ShapeError
        If the inputs are not non-empty finite 2-D arrays with the same number of rows.
    """
    xp = check_pair(X, Y)
    # ‖UᵀŨ‖² depends on the bases only through their projectors: any orthonormal basis will do
    su, sv, c = basis_overlap(xp, X, Y, dtype, rtol, method)
    value = min(float(sq_norm(xp, c)) / max(su.rank, sv.rank), 1.0)
    if (dtype or "float64") != "float64" and 1.0 - value < FLOAT32_TRUST:
        # nearly equal spans: the distance 1 − overlap is below float32's resolution of the terms
        return eigenspace_overlap(X, Y, dtype="float64", rtol=rtol, method=method)
    return value


@one_blas_thread
def weighted_eigenspace_overlap(X: Any, Y: Any, exponent: float = 1.0, *, dtype: str | None = None,
                                rtol: float | None = None, method: str = "auto") -> float:
    """``‖Uᵀ Ũ S̃^e‖²_F / Σ s̃ᵢ^{2e}``: overlap weighted by the singular values of Y (asymmetric).

    Parameters
    ----------
    X, Y : array
        Row-aligned ``(n, d)`` and ``(n, d̃)`` matrices (numpy, torch or cupy; one library, one
        device).
    exponent : float, default 1.0
        Exponent e of Y's singular values in the weights.
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default). A float32 overlap within 1e-3 of 1 is measured
        again in float64: float32 cannot resolve the distance 1 − overlap there.
    rtol : float, optional
        Singular values below ``rtol · s_max`` count as rank deficiency (default ``max(n, d)·eps``).
    method : {"auto", "qr", "gram"}, default "auto"
        How the spans are computed (see :func:`embstab.measures._backend.span`).

    Returns
    -------
    float
        In [0, 1]; larger = more stable.

    Raises
    ------
    ShapeError
        If the inputs are not non-empty finite 2-D arrays with the same number of rows.
    """
    xp = check_pair(X, Y)
    if not is_real(exponent) \
            or not math.isfinite(exponent):
        raise ConfigError(f"exponent must be a finite number, got {exponent!r}")
    su, sv = span(xp, X, dtype, rtol, method), span(xp, Y, dtype, rtol, method)
    w = (sv.s / sv.s[0]) ** exponent  # scaled by s_max: the ratio is unchanged, the powers stay finite
    c = su.w.T @ cross(xp, X, Y, dtype) @ sv.w
    value = min(float(sq_norm(xp, c * w)) / float(xp.sum(w * w)), 1.0)
    if (dtype or "float64") != "float64" and 1.0 - value < FLOAT32_TRUST:  # as in eigenspace_overlap
        return weighted_eigenspace_overlap(X, Y, exponent, dtype="float64", rtol=rtol, method=method)
    return value

"""Poincaré-ball and hyperboloid primitives, in float64 (NumPy) and multiprecision (mpmath).

Curvature is −1 throughout. The float64 functions work on arrays of
points (last axis = coordinates); the ``mp_`` functions work on lists of :class:`mpmath.mpf`
at the caller's working precision (``mpmath.mp.prec``, in *bits*; mpmath uses gmpy2 when
installed).
"""

from __future__ import annotations

from typing import Sequence

import mpmath
import numpy as np

__all__ = [
    "poincare_distance", "lorentz_inner", "hyperboloid_distance", "poincare_to_hyperboloid",
    "hyperboloid_to_poincare", "reflect_to_origin",
    "mp_poincare_distance", "mp_reflect_to_origin", "mp_norm2", "acosh1p_from_log",
]


def poincare_distance(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """d(u, v) = acosh(1 + 2‖u−v‖² / ((1−‖u‖²)(1−‖v‖²))) in the Poincaré ball (broadcasts).

    Parameters
    ----------
    u, v : numpy.ndarray
        Points ``(..., d)`` inside the unit ball, broadcastable against each other.

    Returns
    -------
    numpy.ndarray
        float64 distances of shape ``(...)`` (inf or NaN for points on or outside the boundary).
    """
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    nu = np.sqrt(np.sum(u * u, axis=-1))
    nv = np.sqrt(np.sum(v * v, axis=-1))
    # (1-|u|)(1+|u|) keeps more digits than 1-|u|^2 near the boundary
    den = (1 - nu) * (1 + nu) * (1 - nv) * (1 + nv)
    num = 2 * np.sum((u - v) ** 2, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.arccosh(1 + num / den)


def lorentz_inner(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """⟨x, y⟩_L = x₀y₀ − x⃗·y⃗ (time coordinate first; broadcasts).

    Parameters
    ----------
    x, y : numpy.ndarray
        Vectors ``(..., d+1)``, x₀ first.

    Returns
    -------
    numpy.ndarray
        float64 inner products of shape ``(...)``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    return x[..., 0] * y[..., 0] - np.sum(x[..., 1:] * y[..., 1:], axis=-1)


def hyperboloid_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """d(x, y) = acosh(⟨x, y⟩_L), evaluated as 2·asinh(√δ/2) with δ = 2(⟨x, y⟩_L − 1).

    δ = ‖x⃗−y⃗‖² − (x₀−y₀)² and x₀−y₀ = (x⃗−y⃗)·(x⃗+y⃗)/(x₀+y₀): no cancellation between two
    cosh-sized numbers, so coincident points give exactly 0 and near points keep their digits.

    Parameters
    ----------
    x, y : numpy.ndarray
        Points ``(..., d+1)`` on the hyperboloid, x₀ first (broadcasts).

    Returns
    -------
    numpy.ndarray
        float64 distances of shape ``(...)``.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    dv = x[..., 1:] - y[..., 1:]
    sv = x[..., 1:] + y[..., 1:]
    dt = np.sum(dv * sv, axis=-1) / (x[..., 0] + y[..., 0])
    delta = np.maximum(np.sum(dv * dv, axis=-1) - dt * dt, 0.0)
    return 2.0 * np.arcsinh(np.sqrt(delta) / 2.0)


def poincare_to_hyperboloid(p: np.ndarray) -> np.ndarray:
    """x⃗ = 2p/(1−‖p‖²), x₀ = (1+‖p‖²)/(1−‖p‖²).

    Parameters
    ----------
    p : numpy.ndarray
        Points ``(..., d)`` in the Poincaré ball.

    Returns
    -------
    numpy.ndarray
        float64 ``(..., d+1)`` hyperboloid coordinates, x₀ first.
    """
    p = np.asarray(p, dtype=np.float64)
    n2 = np.sum(p * p, axis=-1, keepdims=True)
    den = 1 - n2
    return np.concatenate([(1 + n2) / den, 2 * p / den], axis=-1)


def hyperboloid_to_poincare(x: np.ndarray) -> np.ndarray:
    """p = x⃗ / (1 + x₀).

    Parameters
    ----------
    x : numpy.ndarray
        Points ``(..., d+1)`` on the hyperboloid, x₀ first.

    Returns
    -------
    numpy.ndarray
        float64 ``(..., d)`` Poincaré coordinates.
    """
    x = np.asarray(x, dtype=np.float64)
    return x[..., 1:] / (1 + x[..., :1])


def reflect_to_origin(mu: np.ndarray, z: np.ndarray) -> np.ndarray:
    """R_μ(z): the inversion that swaps μ and the origin (an involutive isometry of the ball).

    R_μ(z) = a + ρ²(z − a)/‖z − a‖² with a = μ/‖μ‖², ρ² = ‖a‖² − 1. For μ = 0 it is the
    identity.

    Parameters
    ----------
    mu : numpy.ndarray
        The point ``(d,)`` sent to the origin.
    z : numpy.ndarray
        Points ``(..., d)`` to reflect.

    Returns
    -------
    numpy.ndarray
        float64 reflected points, shaped like ``z``.
    """
    mu = np.asarray(mu, dtype=np.float64)
    z = np.asarray(z, dtype=np.float64)
    m2 = float(np.sum(mu * mu))
    if m2 == 0.0:
        return z.copy()
    a = mu / m2
    rho2 = (1.0 - m2) / m2  # = ‖a‖² − 1 without the cancellation
    diff = z - a
    return a + rho2 * diff / np.sum(diff * diff, axis=-1, keepdims=True)


def acosh1p_from_log(logq: np.ndarray) -> np.ndarray:
    """acosh(1 + q) given log q, accurate for tiny and astronomically large q alike.

    Parameters
    ----------
    logq : numpy.ndarray
        Natural logarithms of q > 0 (``-inf`` gives 0).

    Returns
    -------
    numpy.ndarray
        float64 acosh(1 + q), shaped like ``logq``.
    """
    logq = np.asarray(logq, dtype=np.float64)
    out = np.empty_like(logq)
    big = logq > 40.0  # acosh(1+q) = ln(2q) + O(1/q) and 1/q < 1e-17 here
    out[big] = logq[big] + np.log(2.0)
    small = ~big
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.exp(logq[small])
        out[small] = np.log1p(q + np.sqrt(q * (q + 2.0)))
    return out


# --- multiprecision -----------------------------------------------------------------------------

def mp_norm2(x: Sequence) -> mpmath.mpf:
    """‖x‖² at the current mpmath precision.

    Parameters
    ----------
    x : sequence of mpmath.mpf
        The vector.

    Returns
    -------
    mpmath.mpf
        The squared Euclidean norm.
    """
    return mpmath.fsum(c * c for c in x)


def mp_reflect_to_origin(mu: Sequence, z: Sequence) -> list:
    """R_μ(z) on lists of mpf at the current mpmath precision (see :func:`reflect_to_origin`).

    Parameters
    ----------
    mu : sequence of mpmath.mpf
        The point sent to the origin.
    z : sequence of mpmath.mpf
        The point to reflect.

    Returns
    -------
    list of mpmath.mpf
        The reflected point.
    """
    m2 = mp_norm2(mu)
    if m2 == 0:
        return list(z)
    a = [c / m2 for c in mu]
    rho2 = (1 - m2) / m2
    diff = [zc - ac for zc, ac in zip(z, a)]
    f = rho2 / mp_norm2(diff)
    return [ac + f * dc for ac, dc in zip(a, diff)]


def mp_poincare_distance(u: Sequence, v: Sequence) -> mpmath.mpf:
    """Poincaré distance of two points given as lists of mpf, at the working precision.

    Parameters
    ----------
    u, v : sequence of mpmath.mpf
        Points inside the unit ball.

    Returns
    -------
    mpmath.mpf
        The hyperbolic distance.
    """
    num = 2 * mpmath.fsum((a - b) ** 2 for a, b in zip(u, v))
    den = (1 - mp_norm2(u)) * (1 - mp_norm2(v))
    return mpmath.acosh(1 + num / den)

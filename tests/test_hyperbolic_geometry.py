"""Geometry primitives: reflections, model conversions, stable distance formulas."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.geometry import (acosh1p_from_log, hyperboloid_distance,
                                         hyperboloid_to_poincare, mp_poincare_distance,
                                         mp_reflect_to_origin, poincare_distance,
                                         poincare_to_hyperboloid, reflect_to_origin)


def _ball_points(rng, n, d, rmax=0.95):
    x = rng.standard_normal((n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * rng.uniform(0, rmax, size=(n, 1))


def test_reflection_swaps_mu_and_origin_and_is_involution():
    rng = np.random.default_rng(0)
    for d in (2, 5):
        mu = _ball_points(rng, 1, d)[0]
        z = _ball_points(rng, 20, d)
        np.testing.assert_allclose(reflect_to_origin(mu, mu), 0, atol=1e-12)
        np.testing.assert_allclose(reflect_to_origin(mu, np.zeros(d)), mu, atol=1e-12)
        np.testing.assert_allclose(reflect_to_origin(mu, reflect_to_origin(mu, z)), z, atol=1e-10)


def test_reflection_is_an_isometry():
    rng = np.random.default_rng(1)
    mu = _ball_points(rng, 1, 3)[0]
    u, v = _ball_points(rng, 10, 3), _ball_points(rng, 10, 3)
    np.testing.assert_allclose(poincare_distance(reflect_to_origin(mu, u), reflect_to_origin(mu, v)),
                               poincare_distance(u, v), rtol=1e-9)


def test_mp_reflection_involution_at_high_precision():
    with mpmath.workprec(512):
        mu = [mpmath.mpf(1) - mpmath.mpf(2) ** -300, mpmath.mpf(0)]  # very deep point
        mu = [c * mpmath.cos(mpmath.mpf("0.3")) for c in (mu[0],)] + [mu[0] * mpmath.sin(mpmath.mpf("0.3"))]
        z = [mpmath.mpf("0.2"), mpmath.mpf("-0.4")]
        back = mp_reflect_to_origin(mu, mp_reflect_to_origin(mu, z))
        assert max(abs(a - b) for a, b in zip(back, z)) < mpmath.mpf(2) ** -150
        zero = mp_reflect_to_origin(mu, mu)
        assert max(abs(c) for c in zero) < mpmath.mpf(2) ** -150
        d0 = mp_poincare_distance(mu, z)
        d1 = mp_poincare_distance(mp_reflect_to_origin(mu, mu), mp_reflect_to_origin(mu, z))
        assert abs(d0 - d1) < mpmath.mpf(2) ** -100


def test_model_conversions_roundtrip_and_agree():
    rng = np.random.default_rng(2)
    p = _ball_points(rng, 30, 4)
    x = poincare_to_hyperboloid(p)
    # on the sheet: x0² − ‖x⃗‖² = 1
    np.testing.assert_allclose(x[:, 0] ** 2 - np.sum(x[:, 1:] ** 2, axis=1), 1, rtol=1e-9)
    np.testing.assert_allclose(hyperboloid_to_poincare(x), p, atol=1e-12)
    np.testing.assert_allclose(hyperboloid_distance(x[:, None], x[None]),
                               poincare_distance(p[:, None], p[None]), rtol=1e-7, atol=1e-7)


def test_distance_from_origin_is_two_atanh():
    r = np.array([0.1, 0.5, 0.9, 0.999])
    p = np.column_stack([r, np.zeros_like(r)])
    np.testing.assert_allclose(poincare_distance(np.zeros(2), p), 2 * np.arctanh(r), rtol=1e-12)


def test_hyperboloid_distance_of_identical_points_is_exactly_zero():
    x = poincare_to_hyperboloid(np.array([[0.999999, 0.0]]))
    assert hyperboloid_distance(x, x)[0] == 0.0


def test_acosh1p_from_log_matches_mpmath():
    logs = np.array([-700.0, -30.0, -1.0, 0.0, 3.0, 39.0, 41.0, 800.0, 5000.0])
    got = acosh1p_from_log(logs)
    with mpmath.workprec(1200):  # 1 + e^-700 needs ~1010 bits
        ref = [float(mpmath.acosh(1 + mpmath.exp(mpmath.mpf(v)))) for v in logs]
    np.testing.assert_allclose(got, ref, rtol=1e-13)


def test_multiprecision_rows_match_literal_mpmath_reference():
    """The fixed-point fast path agrees with a literal per-pair mpmath evaluation."""
    rng = np.random.default_rng(3)
    prec = 600
    with mpmath.workprec(prec):
        pts = []
        for _ in range(12):
            theta = mpmath.mpf(float(rng.uniform(0, 2 * math.pi)))
            depth = mpmath.mpf(float(rng.uniform(0, 350)))  # up to ~500 bits deep
            r = mpmath.tanh(depth / 2)
            pts.append([r * mpmath.cos(theta), r * mpmath.sin(theta), mpmath.mpf(0)])
        emb = HyperbolicEmbedding(np.array(pts, dtype=object), scale=3.0, precision_bits=prec)
        for i in (0, 5):
            ref = [float(mp_poincare_distance(pts[i], q)) / 3.0 for q in pts]
            np.testing.assert_allclose(emb.distances_from(i), ref, rtol=1e-12, atol=1e-12)

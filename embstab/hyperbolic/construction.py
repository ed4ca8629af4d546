"""The geometric building blocks of the combinatorial construction, shared by trees and forests.

:func:`sarkar_2d` places a rooted tree in the Poincaré disk (children spread on circles around
each node, reflected to the origin); :func:`combinatorial_rd` does the same in r dimensions with
:func:`simplex_codewords` or :func:`sphere_points` as the directions of the children. Everything
is computed in multiprecision at the caller's precision.
"""

from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import numpy as np
from tqdm.auto import tqdm

from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.geometry import mp_norm2, mp_reflect_to_origin
from embstab.hyperbolic.graph import RootedTree

__all__ = ["sarkar_2d", "combinatorial_rd", "simplex_codewords", "sphere_points"]


@lru_cache(maxsize=4096)
def _roots_of_unity(m: int, prec: int) -> tuple:
    with mpmath.workprec(prec):
        return tuple(mpmath.expjpi(mpmath.mpf(2 * k) / m) for k in range(m))


def sarkar_2d(tree: RootedTree, tau: float, precision_bits: int,
              progress: bool = False) -> np.ndarray:
    """Sarkar's 2-D construction of a rooted tree in the Poincaré disc.

    Parameters
    ----------
    tree : RootedTree
        The tree; its root goes to the origin.
    tau : float
        Scale τ: an edge of weight w spans hyperbolic length τ·w.
    precision_bits : int
        Working precision of the mpmath arithmetic.
    progress : bool, default False
        Show a tqdm bar over the nodes.

    Returns
    -------
    numpy.ndarray
        ``(n, 2)`` object array of :class:`mpmath.mpf`, one row per tree node id.
    """
    n = tree.n_nodes
    pos: list = [None] * n
    radius: dict = {}
    with mpmath.workprec(int(precision_bits)):
        tau_mp = mpmath.mpf(tau)

        def rad(w: float):
            if w not in radius:
                radius[w] = mpmath.tanh(tau_mp * w / 2)
            return radius[w]

        pos[tree.root] = mpmath.mpc(0)
        kids = tree.children[tree.root]
        roots = _roots_of_unity(len(kids), precision_bits) if kids else ()
        for k, c in enumerate(kids):
            pos[c] = rad(tree.weight[c]) * roots[k]
        it = tree.order[1:]
        for h in tqdm(it, desc="2-D construction", disable=not progress, mininterval=1):
            kids = tree.children[h]
            if not kids:
                continue
            mu = pos[h]
            m2 = abs(mu) ** 2
            a = mu / m2
            rho2 = (1 - m2) / m2  # |a|² − 1, written to avoid cancelling |a|² against 1
            z = a + rho2 / mpmath.conj(pos[tree.parent[h]] - a)  # parent seen from h
            s = z / abs(z)
            roots = _roots_of_unity(len(kids) + 1, precision_bits)
            for k, c in enumerate(kids, 1):
                pt = rad(tree.weight[c]) * s * roots[k]
                pos[c] = a + rho2 / mpmath.conj(pt - a)
        out = np.empty((n, 2), dtype=object)
        for i, p in enumerate(pos):
            out[i, 0] = mpmath.mpf(p.real)
            out[i, 1] = mpmath.mpf(p.imag)
    return out


def simplex_codewords(count: int, dim: int) -> np.ndarray:
    """``count`` unit vectors in R^dim from the simplex code, tiled to length ``dim``.

    Codeword i has bit j (j = 1..2^k−1) equal to the parity of ``i & j`` (the k-bit expansion
    of i times the generator whose columns are the expansions of j), k = ⌈log₂ count⌉; bits
    map to ±1/√dim. Distinct codewords are nearly orthogonal.

    Parameters
    ----------
    count : int
        Number of codewords (≥ 1).
    dim : int
        Length of each vector.

    Returns
    -------
    numpy.ndarray
        float64 ``(count, dim)`` array of exact ±1/√dim entries.

    Raises
    ------
    HyperbolicError
        If ``count`` < 1.
    """
    if count < 1:
        raise HyperbolicError("need at least one codeword")
    k = max(1, math.ceil(math.log2(count)))
    nk = 2 ** k - 1
    js = np.arange(1, nk + 1)
    idx = np.arange(count)[:, None] & js[None, :]
    bits = np.array([[bin(int(v)).count("1") & 1 for v in row] for row in idx])
    reps = -(-dim // nk)
    tiled = np.tile(bits, (1, reps))[:, :dim]
    return np.where(tiled == 1, -1.0, 1.0) / math.sqrt(dim)


@lru_cache(maxsize=256)
def sphere_points(count: int, dim: int, seed: int = 0, iters: int = 300) -> np.ndarray:
    """``count`` well-separated unit vectors in R^dim (point 0 first), by repulsion.

    Deterministic for a seed: random start from a local generator, then projected gradient
    steps on the Riesz energy Σ 1/‖x_i−x_j‖². Used when a node has more slots than the code
    placement can separate.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for _ in range(iters):
        diff = x[:, None, :] - x[None, :, :]
        d2 = np.sum(diff * diff, axis=-1) + np.eye(count)
        force = np.sum(diff / d2[..., None] ** 2, axis=1)
        x = x + 0.5 * force / max(1.0, float(np.abs(force).max())) / math.sqrt(count)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _mp_unit(v) -> list:
    nv = mpmath.sqrt(mp_norm2(v))
    return [c / nv for c in v]


def _rotate_onto(vectors: list, u: list, s: list) -> list:
    """Rotate every vector by the rotation in span{u, s} that takes unit u to unit s."""
    cos = mpmath.fsum(a * b for a, b in zip(u, s))
    w = [b - cos * a for a, b in zip(u, s)]
    sin = mpmath.sqrt(mp_norm2(w))
    if sin == 0:
        if cos > 0:
            return [list(v) for v in vectors]
        # s = −u: rotate by π in a plane containing u (any orthogonal partner will do)
        w = [mpmath.mpf(0)] * len(u)
        j = int(np.argmin([abs(float(c)) for c in u]))
        w[j] = mpmath.mpf(1)
        dot = u[j]
        w = _mp_unit([wc - dot * uc for wc, uc in zip(w, u)])
        cos, sin = mpmath.mpf(-1), mpmath.mpf(0)
    else:
        w = [c / sin for c in w]
    out = []
    for x in vectors:
        a = mpmath.fsum(p * q for p, q in zip(u, x))
        b = mpmath.fsum(p * q for p, q in zip(w, x))
        na, nb = cos * a - sin * b, sin * a + cos * b
        out.append([xc + (na - a) * uc + (nb - b) * wc for xc, uc, wc in zip(x, u, w)])
    return out


def combinatorial_rd(tree: RootedTree, tau: float, dim: int, precision_bits: int,
                     placement: str = "codes", seed: int = 0,
                     progress: bool = False) -> np.ndarray:
    """r-D combinatorial construction of a rooted tree in the Poincaré ball H^dim.

    With ``placement="codes"`` a node's parent+children slots are simplex codewords when
    they fit (slots ≤ dim); otherwise (or with ``"sphere"``) near-uniform sphere points.
    A single child goes antipodal to the parent.

    Parameters
    ----------
    tree : RootedTree
        The tree; its root goes to the origin.
    tau : float
        Scale τ: an edge of weight w spans hyperbolic length τ·w.
    dim : int
        Dimension of the ball.
    precision_bits : int
        Working precision of the mpmath arithmetic.
    placement : {"codes", "sphere"}, default "codes"
        How child directions are chosen.
    seed : int, default 0
        Seed of the sphere-point optimiser.
    progress : bool, default False
        Show a tqdm bar over the nodes.

    Returns
    -------
    numpy.ndarray
        ``(n, dim)`` object array of :class:`mpmath.mpf`, one row per tree node id.

    Raises
    ------
    HyperbolicError
        If ``placement`` is not one of the two choices.
    """
    if placement not in ("codes", "sphere"):
        raise HyperbolicError(f"placement must be 'codes' or 'sphere', got {placement!r}")
    n = tree.n_nodes
    pos: list = [None] * n
    with mpmath.workprec(int(precision_bits)):
        tau_mp = mpmath.mpf(tau)
        radius: dict = {}

        def rad(w: float):
            if w not in radius:
                radius[w] = mpmath.tanh(tau_mp * w / 2)
            return radius[w]

        def slots(m: int) -> list:
            if placement == "codes" and m <= dim:
                pts = simplex_codewords(m, dim)
            else:
                pts = sphere_points(m, dim, seed)
            return [_mp_unit([mpmath.mpf(float(c)) for c in p]) for p in pts]

        pos[tree.root] = [mpmath.mpf(0)] * dim
        kids = tree.children[tree.root]
        if kids:
            dirs = slots(len(kids)) if len(kids) > 1 else [_mp_unit([mpmath.mpf(1)] +
                                                                    [mpmath.mpf(0)] * (dim - 1))]
            for c, d in zip(kids, dirs):
                r = rad(tree.weight[c])
                pos[c] = [r * x for x in d]
        for h in tqdm(tree.order[1:], desc=f"{dim}-D construction", disable=not progress,
                      mininterval=1):
            kids = tree.children[h]
            if not kids:
                continue
            z = mp_reflect_to_origin(pos[h], pos[tree.parent[h]])
            s = _mp_unit(z)
            if len(kids) == 1:
                dirs = [[-c for c in s]]
            else:
                base = slots(len(kids) + 1)
                dirs = _rotate_onto(base, base[0], s)[1:]
            for c, d in zip(kids, dirs):
                r = rad(tree.weight[c])
                pos[c] = mp_reflect_to_origin(pos[h], [r * x for x in d])
        out = np.empty((n, dim), dtype=object)
        for i, p in enumerate(pos):
            out[i, :] = p
    return out

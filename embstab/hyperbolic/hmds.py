"""Hyperbolic multidimensional scaling (h-MDS, Sala et al. 2018).

Y = cosh(s·D); the top-k **positive** eigenpairs of −Y give hyperboloid spatial coordinates
X = U_k·diag(√λ_k), x₀ = √(1+‖x⃗‖²). No centring is needed: −Y is invariant under isometries
and its positive eigenvectors already span the centred configuration. Distances are
decoded from hyperboloid coordinates, d̂ = acosh(x₀ᵢx₀ⱼ − x⃗ᵢ·x⃗ⱼ)/s, better conditioned than
the Poincaré formula. Float64 is the default with an automatic scale s·diam = 15; an mpmath
eigensolver is offered for small n, and PGA can refine a low-rank solution.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import mpmath
import numpy as np
import scipy.linalg

from embstab.errors import ShapeError
from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import HyperbolicError, PrecisionError
from embstab.hyperbolic.geometry import lorentz_inner
from embstab.hyperbolic.graph import Graph, as_graph

__all__ = ["hmds", "graph_distances", "pga_refine", "karcher_mean"]

#: Largest s·D for which cosh(s·D) is finite in float64.
_COSH_MAX = 709.0


def graph_distances(graph: Graph) -> np.ndarray:
    """All-pairs shortest-path matrix of a graph (hops, or weighted lengths; edges taken as undirected).

    Parameters
    ----------
    graph : Graph
        The graph.

    Returns
    -------
    numpy.ndarray
        float64 ``(n, n)`` distances, ``inf`` between components.
    """
    return graph.shortest_paths(np.arange(graph.n_nodes))


def _check_distances(d: Any) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] < 2:
        raise ShapeError(f"distances must be a square (n, n) matrix with n ≥ 2, got {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ShapeError("distances contain NaN or inf (is the graph disconnected?)")
    if np.any(d < 0) or np.any(np.diag(d) != 0):
        raise ShapeError("distances must be non-negative with a zero diagonal")
    if not np.allclose(d, d.T, rtol=1e-10, atol=1e-12):
        raise ShapeError("distances must be symmetric")
    return d


def hmds(distances: Any, dim: int, scale: float | str = "auto", *,
         selection: str = "positive", solver: str = "numpy", precision_bits: int = 128,
         max_extent: float = 15.0, pga: bool = False, pga_steps: int = 200,
         nodes: Sequence[Any] | None = None) -> HyperbolicEmbedding:
    """Embed a distance matrix (or a graph's shortest paths) in H^dim by h-MDS.

    Parameters
    ----------
    distances : numpy.ndarray, Graph or networkx.Graph
        Symmetric ``(n, n)`` distances, or a connected graph.
    dim : int
        Target rank k (the number of positive eigenpairs kept).
    scale : float or "auto", default "auto"
        s; the embedding reproduces s·D, decoded distances are divided by s. ``"auto"`` picks
        s = max_extent / max(D) so cosh stays well inside float64's dynamic range.
    selection : {"positive", "magnitude"}, default "positive"
        "positive": the k largest positive eigenvalues. "magnitude": the original code's top-k
        by |λ| with non-positive ones dropped afterwards (returns fewer than k dimensions;
        kept to reproduce published numbers).
    solver : {"numpy", "mpmath"}, default "numpy"
        "mpmath" runs :func:`mpmath.eigsy` at ``precision_bits`` (O(n³) pure Python; n ≲ 500)
        and returns a multiprecision embedding.
    precision_bits : int, default 128
        Precision of the mpmath solver.
    max_extent : float, default 15.0
        Target s·max(D) of the automatic scale.
    pga : bool, default False
        Refine by hyperbolic PGA: embed with all positive eigenpairs, then find the best
        k-dimensional geodesic subspace (float64 only).
    pga_steps : int, default 200
        Optimiser steps of the PGA refinement.
    nodes : sequence, optional
        Node labels (default: the graph's labels, or ``0..n-1``).

    Returns
    -------
    HyperbolicEmbedding
        Hyperboloid coordinates (float64) or multiprecision Poincaré coordinates, with
        ``scale = s``. ``metadata`` holds ``n_positive``, ``n_negative`` (eigenvalue signs of
        −Y), ``eigenvalues`` (kept), ``dims_requested`` and ``dims_kept``.
    """
    if not isinstance(distances, (np.ndarray, list, tuple)):
        distances = as_graph(distances)  # a Graph, or a networkx graph converted here
    if isinstance(distances, Graph):
        nodes = distances.labels if nodes is None else nodes
        distances = graph_distances(distances)
    d = _check_distances(distances)
    n = d.shape[0]
    if not 1 <= dim < n:
        raise HyperbolicError(f"dim must be between 1 and n-1 = {n - 1}, got {dim}")
    if selection not in ("positive", "magnitude"):
        raise HyperbolicError(f"selection must be 'positive' or 'magnitude', got {selection!r}")
    dmax = float(d.max())
    if isinstance(scale, str):
        if scale != "auto":
            raise HyperbolicError(f"scale must be a number or 'auto', got {scale!r}")
        s = max_extent / dmax if dmax > 0 else 1.0
    else:
        s = float(scale)
        if not s > 0:
            raise HyperbolicError(f"scale must be > 0, got {s}")
    meta: dict[str, Any] = {"method": "hmds", "scale": s, "selection": selection,
                            "dims_requested": int(dim), "solver": solver}
    if solver == "mpmath":
        if pga:
            raise HyperbolicError("PGA refinement is float64 only; use solver='numpy'")
        return _hmds_mpmath(d, dim, s, selection, int(precision_bits), nodes, meta)
    if solver != "numpy":
        raise HyperbolicError(f"solver must be 'numpy' or 'mpmath', got {solver!r}")
    if s * dmax > _COSH_MAX:
        raise PrecisionError(f"s·max(D) = {s * dmax:.4g} overflows cosh in float64 (limit "
                             f"{_COSH_MAX}); lower the scale or use solver='mpmath'")
    w, u = scipy.linalg.eigh(-np.cosh(s * d))
    tol = 0.0  # the sign decides, as in the original; rounding noise shows up as tiny λ
    n_pos, n_neg = int(np.sum(w > tol)), int(np.sum(w < -tol))
    k = n_pos if pga else dim
    idx = _select(w, k, selection, tol)
    x = u[:, idx] * np.sqrt(w[idx])
    meta.update(n_positive=n_pos, n_negative=n_neg, eigenvalues=w[idx].tolist())
    x0 = np.sqrt(1.0 + np.sum(x * x, axis=1, keepdims=True))
    hyp = np.hstack([x0, x])
    if pga and len(idx) > dim:
        hyp, info = pga_refine(hyp, dim, steps=pga_steps)
        meta.update(pga=info)
    meta["dims_kept"] = hyp.shape[1] - 1
    return HyperbolicEmbedding(hyp, manifold="lorentz", scale=s, nodes=nodes, metadata=meta)


def _select(w: np.ndarray, k: int, selection: str, tol: float) -> np.ndarray:
    order = np.argsort(-w) if selection == "positive" else np.argsort(-np.abs(w), kind="stable")
    top = order[:k] if selection == "magnitude" else order
    return np.asarray([int(i) for i in top if w[i] > tol][:k], dtype=np.int64)


def _hmds_mpmath(d: np.ndarray, dim: int, s: float, selection: str, prec: int,
                 nodes: Any, meta: dict) -> HyperbolicEmbedding:
    n = d.shape[0]
    with mpmath.workprec(prec):
        sm = mpmath.mpf(s)
        m = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                m[i, j] = -mpmath.cosh(sm * mpmath.mpf(float(d[i, j])))
        e, q = mpmath.eigsy(m)
        w = np.array([float(x) for x in e])
        tol = 0.0
        idx = [int(j) for j in _select(w, dim, selection, tol)]
        coords = np.empty((n, len(idx)), dtype=object)
        logc = np.empty(n)
        for i in range(n):
            xs = [q[i, j] * mpmath.sqrt(e[j]) for j in idx]
            x0 = mpmath.sqrt(1 + mpmath.fsum(c * c for c in xs))
            coords[i, :] = [c / (1 + x0) for c in xs]
            logc[i] = float(mpmath.log(2 / (1 + x0)))  # 1−‖p‖² without cancellation
    meta.update(n_positive=int(np.sum(w > tol)), n_negative=int(np.sum(w < -tol)),
                eigenvalues=w[idx].tolist(), dims_kept=len(idx), precision_bits=prec)
    return HyperbolicEmbedding(coords, scale=s, nodes=nodes, precision_bits=prec,
                               log_conformal=logc, metadata=meta)


def karcher_mean(x: np.ndarray, iters: int = 100, tol: float = 1e-12) -> np.ndarray:
    """Fréchet (Karcher) mean of hyperboloid points by Riemannian gradient descent.

    Parameters
    ----------
    x : numpy.ndarray
        ``(n, d+1)`` float64 points on the hyperboloid, x₀ first.
    iters : int, default 100
        Most gradient steps.
    tol : float, default 1e-12
        Stop when the Riemannian gradient's norm falls below this.

    Returns
    -------
    numpy.ndarray
        ``(d+1,)`` mean point on the hyperboloid.
    """
    m = x.mean(axis=0)
    m = m / math.sqrt(lorentz_inner(m, m))  # normalise the Euclidean mean onto the sheet
    for _ in range(iters):
        ip = np.maximum(lorentz_inner(m[None, :], x), 1.0)
        dist = np.arccosh(ip)
        v = x - ip[:, None] * m[None, :]
        vn = np.sqrt(np.maximum(-lorentz_inner(v, v), 0.0))
        coef = np.divide(dist, vn, out=np.zeros_like(dist), where=vn > 0)
        g = (coef[:, None] * v).mean(axis=0)
        gn = math.sqrt(max(-float(lorentz_inner(g, g)), 0.0))
        if gn < tol:
            break
        m = math.cosh(gn) * m + math.sinh(gn) * g / gn
        m = m / math.sqrt(lorentz_inner(m, m))
    return m


def _boost_to_origin(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Apply the Lorentz boost that takes m to the origin (1, 0, ..., 0) to every row of x."""
    m0, mv = m[0], m[1:]
    mn2 = float(mv @ mv)
    if mn2 == 0.0:
        return x.copy()
    # boost with velocity −mv/m0: t' = m0 t − mv·y, y' = y − mv t + (m0−1)(mv·y)mv/‖mv‖²
    t, y = x[:, 0], x[:, 1:]
    my = y @ mv
    t2 = m0 * t - my
    y2 = y - np.outer(t, mv) + np.outer((m0 - 1) * my / mn2, mv)
    return np.hstack([t2[:, None], y2])


def pga_refine(hyp: np.ndarray, dim: int, steps: int = 200,
               lr: float = 0.01) -> tuple[np.ndarray, dict]:
    """Hyperbolic PGA: best k-dim geodesic subspace through the Karcher mean.

    Minimises Σᵢ asinh²(‖(I−VVᵀ)x⃗ᵢ‖) over orthonormal V (Stiefel manifold, geoopt's
    RiemannianAdam), starting from the truncated (PCA) solution, and projects each point onto
    the subspace along geodesics. Non-convex: the best iterate seen is kept.

    Parameters
    ----------
    hyp : numpy.ndarray
        ``(n, D+1)`` float64 hyperboloid points, x₀ first.
    dim : int
        Dimension k of the subspace.
    steps : int, default 200
        Optimiser steps.
    lr : float, default 0.01
        RiemannianAdam learning rate.

    Returns
    -------
    points : numpy.ndarray
        ``(n, dim+1)`` hyperboloid points.
    info : dict
        ``objective_truncated`` (the PCA start) and ``objective`` (the best reached).
    """
    import geoopt
    import torch

    centred = _boost_to_origin(hyp, karcher_mean(hyp))
    xv = torch.as_tensor(centred[:, 1:], dtype=torch.float64)
    # truncated start: top principal directions of the centred spatial coordinates
    _, _, vt = torch.linalg.svd(xv, full_matrices=False)
    v = geoopt.ManifoldParameter(vt[:dim].T.clone(), manifold=geoopt.EuclideanStiefel())
    opt = geoopt.optim.RiemannianAdam([v], lr=lr)

    def objective() -> torch.Tensor:
        resid = xv - (xv @ v) @ v.T
        return torch.asinh(torch.linalg.norm(resid, dim=1)).pow(2).sum()

    with torch.no_grad():
        before = float(objective())
    best, best_v = before, v.detach().clone()
    for _ in range(steps):
        opt.zero_grad()
        loss = objective()
        loss.backward()
        opt.step()
        with torch.no_grad():
            val = float(objective())
        if val < best:  # non-convex: keep the best iterate seen
            best, best_v = val, v.detach().clone()
    y = (xv @ best_v).numpy()
    t = centred[:, 0]
    norm = np.sqrt(np.maximum(t * t - np.sum(y * y, axis=1), 1e-300))
    out = np.hstack([t[:, None], y]) / norm[:, None]  # geodesic projection, back on the sheet
    return out, {"objective_truncated": before, "objective": best}

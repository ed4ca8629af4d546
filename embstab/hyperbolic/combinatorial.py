"""Combinatorial (Sarkar-style) construction of hyperbolic tree embeddings (Sala et al. 2018).

Each node sits at the centre of its own cone: move node h to the origin with the reflection R_h,
spread its parent and children evenly around it at radius tanh(τw/2), and map back. In 2-D the
slots are roots of unity; in r-D they are simplex-code (Hadamard) codewords tiled to length r,
or, when a node has more slots than the code placement allows, near-uniform sphere points.
All arithmetic runs in mpmath at ``precision_bits`` bits.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import mpmath
import numpy as np
from tqdm.auto import tqdm

from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.geometry import mp_norm2, mp_reflect_to_origin
from embstab.hyperbolic.graph import Graph, RootedTree, tree_from_graph
from embstab.hyperbolic.steiner import SteinerTree, steiner_tree
from embstab.hyperbolic.tau import GUARD_BITS, bits_needed, check_precision, choose_tau

__all__ = ["embed_combinatorial", "sarkar_2d", "combinatorial_rd", "simplex_codewords",
           "sphere_points"]


def embed_combinatorial(graph: Graph | RootedTree | SteinerTree, dim: int = 2,
                        eps: float | None = None, tau: float | None = None,
                        precision_bits: int = 256, root: Any = "max_degree", *,
                        bits: int | None = None, placement: str = "codes", seed: int = 0,
                        forest: bool = False, tree: str = "bfs",
                        progress: bool = False) -> HyperbolicEmbedding:
    """Embed a graph's BFS (or Steiner) tree in the Poincaré ball H^dim with the combinatorial
    construction.

    Parameters
    ----------
    graph : Graph, RootedTree or SteinerTree
        A connected graph (its BFS or Steiner tree from ``root`` is embedded; metrics should
        still be computed against the graph), a ready rooted tree, or a ready
        :class:`~embstab.hyperbolic.steiner.SteinerTree` (embedded as with ``tree="steiner"``).
    dim : int, default 2
        Dimension of the hyperbolic space (≥ 2).
    eps : float, optional
        Target worst-case distortion 1+ε; picks τ by the comb.jl rule. Default ε = 0.1 when
        neither ``tau`` nor ``bits`` is given.
    tau : float, optional
        Use this τ.
    precision_bits : int, default 256
        Working precision in bits. Refused (:class:`PrecisionError`) when too low for τ.
    root : {"max_degree", "center", "first"} or node label, default "max_degree"
        Root of the BFS tree (ignored for a :class:`RootedTree`).
    bits : int, optional
        Bit-budget rule ("-a"): τ so that the deepest node uses 1/1.3 of the radius
        representable with ``bits`` bits. ``bits=precision_bits`` reproduces ``comb.jl -a -p``.
    placement : {"codes", "sphere"}, default "codes"
        Child directions for ``dim > 2``.
    seed : int, default 0
        Seed of the sphere-point optimiser (``placement="sphere"`` or large fan-outs).
    forest : bool, default False
        Accept a disconnected graph: embed each component separately around its own centre
        (:func:`embstab.hyperbolic.forest.embed_forest`). Otherwise it is refused.
    tree : {"bfs", "steiner"}, default "bfs"
        Which tree of a :class:`Graph` to embed: its BFS tree, or the Gromov-product Steiner
        tree of :func:`~embstab.hyperbolic.steiner.steiner_tree` (graphs up to
        :data:`~embstab.hyperbolic.steiner.MAX_NODES` nodes). The Steiner nodes are embedded
        too but dropped from the result, which holds only the graph's nodes, in graph order.
    progress : bool, default False
        Show a tqdm bar.

    Returns
    -------
    HyperbolicEmbedding
        Multiprecision Poincaré coordinates with ``scale = τ``; ``metadata`` records the rule,
        root, Δ, height, bits needed, the tree kind and (Steiner) the number of Steiner nodes.
    """
    if dim < 2:
        raise HyperbolicError(f"dim must be ≥ 2, got {dim}")
    if tree not in ("bfs", "steiner"):
        raise HyperbolicError(f"tree must be 'bfs' or 'steiner', got {tree!r}")
    if isinstance(graph, SteinerTree) or tree == "steiner":
        return _embed_steiner(graph, dim, eps=eps, tau=tau, precision_bits=precision_bits,
                              root=root, bits=bits, placement=placement, seed=seed,
                              forest=forest, progress=progress)
    if forest and isinstance(graph, Graph) and graph.n_components() > 1:
        from embstab.hyperbolic.forest import embed_forest

        return embed_forest(graph, dim, eps=eps, tau=tau, precision_bits=precision_bits,
                            root=root, bits=bits, placement=placement, seed=seed)
    rooted = graph if isinstance(graph, RootedTree) else tree_from_graph(graph, root)
    if rooted.n_nodes < 2:
        raise HyperbolicError("the graph needs at least two nodes")
    t = choose_tau(rooted, eps=eps, bits=bits, tau=tau)
    check_precision(t, rooted.height, int(precision_bits))
    rule = "tau" if tau is not None else "bits" if bits is not None else "eps"
    if dim == 2:
        coords = sarkar_2d(rooted, t, precision_bits, progress=progress)
    else:
        coords = combinatorial_rd(rooted, t, dim, precision_bits, placement=placement, seed=seed,
                                  progress=progress)
    meta = {"method": "combinatorial", "tau": t, "tau_rule": rule,
            "eps": (0.1 if eps is None else eps) if rule == "eps" else None,
            "root": rooted.graph.labels.tolist()[rooted.root],
            "max_degree": rooted.max_degree, "height": rooted.height,
            "bits_needed": bits_needed(t, rooted.height), "guard_bits": GUARD_BITS,
            "placement": placement if dim > 2 else "circle",
            "tree": "given" if isinstance(graph, RootedTree) else "bfs"}
    return HyperbolicEmbedding(coords, scale=t, nodes=rooted.graph.labels,
                               precision_bits=int(precision_bits), metadata=meta)


def _embed_steiner(graph: Graph | RootedTree | SteinerTree, dim: int, *, eps: float | None,
                   tau: float | None, precision_bits: int, root: Any, bits: int | None,
                   placement: str, seed: int, forest: bool,
                   progress: bool) -> HyperbolicEmbedding:
    """``embed_combinatorial(..., tree="steiner")``: embed the Steiner tree, keep graph nodes."""
    if isinstance(graph, RootedTree):
        raise HyperbolicError("tree='steiner' needs a Graph (or a SteinerTree), not a ready "
                              "RootedTree")
    if isinstance(graph, Graph) and forest and graph.n_components() > 1:
        raise HyperbolicError("tree='steiner' does not support forests (forest=True on a "
                              "disconnected graph); embed each component separately or use "
                              "tree='bfs'")
    st = graph if isinstance(graph, SteinerTree) else steiner_tree(graph, root,
                                                                   progress=progress)
    n = st.n_original
    emb = embed_combinatorial(st.tree, dim, eps=eps, tau=tau, precision_bits=precision_bits,
                              bits=bits, placement=placement, seed=seed, progress=progress)
    meta = dict(emb.metadata, tree="steiner", n_steiner=st.n_steiner,
                root=st.graph.labels.tolist()[st.root])
    # Steiner nodes only shape the tree; rows 0..n-1 are the graph's nodes in graph order
    return HyperbolicEmbedding(emb.coords[:n], scale=emb.scale, nodes=st.graph.labels,
                               precision_bits=emb.precision_bits, metadata=meta)


@lru_cache(maxsize=4096)
def _roots_of_unity(m: int, prec: int) -> tuple:
    with mpmath.workprec(prec):
        return tuple(mpmath.expjpi(mpmath.mpf(2 * k) / m) for k in range(m))


def sarkar_2d(tree: RootedTree, tau: float, precision_bits: int,
              progress: bool = False) -> np.ndarray:
    """2-D construction; returns an ``(n, 2)`` object array of mpf."""
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
    map to ±1/√dim. Distinct codewords are nearly orthogonal. Returns a float64 ``(count, dim)``
    array of exact ±1/√dim entries.
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
    """r-D construction; returns an ``(n, dim)`` object array of mpf.

    With ``placement="codes"`` a node's parent+children slots are simplex codewords when
    they fit (slots ≤ dim); otherwise (or with ``"sphere"``) near-uniform sphere points.
    A single child goes antipodal to the parent.
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

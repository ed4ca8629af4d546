"""Combinatorial embedding of a disconnected graph (forests).

Each connected component is embedded on its own with one shared τ (so decoded distances mean
the same everywhere), its root at the origin; then component k is moved by the reflection
R_{c_k}, which sends the origin to a centre c_k. Centres are well-separated directions (roots
of unity in 2-D, simplex codewords or sphere points in r-D). The original put them at
Euclidean radius 0.9 (``centre_radius=0.9``); then, for large τ, nodes of *other* components sit
nearer than a node's own neighbours and MAP suffers. By default the centres are pushed out far
enough that every cross-component pair is farther apart than any within-component pair, at the
cost of about twice the bits. Distances between components carry no meaning (the graph distance
is infinite); :func:`embstab.hyperbolic.evaluate` skips them in the distortion.
"""

from __future__ import annotations

import math
from typing import Any

import mpmath
import numpy as np
from scipy.sparse import csgraph

from embstab.hyperbolic.construction import combinatorial_rd, sarkar_2d, simplex_codewords, sphere_points
from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import GraphError, HyperbolicError, PrecisionError
from embstab.hyperbolic.geometry import mp_reflect_to_origin
from embstab.hyperbolic.graph import Graph, RootedTree, tree_from_graph
from embstab.hyperbolic.tau import (GUARD_BITS, bits_needed, check_precision, tau_for_bits,
                                   tau_for_eps)

__all__ = ["embed_forest", "components"]

def components(graph: Graph) -> list[np.ndarray]:
    """Node ids of each connected component, largest first (ties: lowest first id).

    Parameters
    ----------
    graph : Graph
        The graph (edges taken as undirected).

    Returns
    -------
    list of numpy.ndarray
        One sorted array of node ids per component.
    """
    _, lab = csgraph.connected_components(graph.csr(), directed=False)
    comps = [np.flatnonzero(lab == c) for c in range(lab.max() + 1)]
    return sorted(comps, key=lambda c: (-len(c), int(c[0])))


def _component_tree(graph: Graph, nodes: np.ndarray, root: Any) -> RootedTree:
    keep = np.zeros(graph.n_nodes, dtype=bool)
    keep[nodes] = True
    e = graph.edge_list()
    src = np.repeat(np.arange(graph.n_nodes), graph.degrees())
    w = graph.weights if graph.directed else graph.weights[src < graph.indices]
    mask = keep[e[:, 0]] & keep[e[:, 1]]
    labels = graph.labels.tolist()
    sub = Graph.from_edges([(labels[a], labels[b], float(x))
                            for (a, b), x in zip(e[mask], w[mask])],
                           directed=graph.directed, name=graph.name,
                           nodes=[labels[i] for i in nodes])
    try:
        return tree_from_graph(sub, root)
    except GraphError:  # the given root lives in another component: use this one's hub
        return tree_from_graph(sub, "max_degree")


def _directions(k: int, dim: int, seed: int) -> np.ndarray:

    if dim == 2:
        ang = 2 * np.pi * np.arange(k) / k
        return np.column_stack([np.cos(ang), np.sin(ang)])
    return simplex_codewords(k, dim) if k <= dim else sphere_points(k, dim, seed)


def _centres(dirs: np.ndarray, dist: float, prec: int) -> list:
    """Points at hyperbolic distance ``dist`` from the origin along ``dirs``."""
    with mpmath.workprec(prec):
        r = mpmath.tanh(mpmath.mpf(dist) / 2)
        out = []
        for p in dirs:
            v = [mpmath.mpf(float(c)) for c in p]
            nv = mpmath.sqrt(mpmath.fsum(c * c for c in v))
            out.append([r * c / nv for c in v])
        return out


def embed_forest(graph: Graph, dim: int = 2, eps: float | None = None,
                 tau: float | None = None, precision_bits: int = 256,
                 root: Any = "max_degree", *, bits: int | None = None,
                 placement: str = "codes", seed: int = 0,
                 centre_radius: float | None = None) -> HyperbolicEmbedding:
    """Embed every component of ``graph`` around its own centre with one shared τ (see the module docstring).

    Parameters
    ----------
    graph : Graph
        The graph, possibly disconnected.
    dim : int, default 2
        Dimension of the hyperbolic space.
    eps : float, optional
        Target worst-case distortion 1+ε (default 0.1 when neither ``tau`` nor ``bits`` is given);
        τ follows from the largest degree over all components.
    tau : float, optional
        Use this τ.
    precision_bits : int, default 256
        Working precision in bits.
    root : {"max_degree", "center", "first"} or node label, default "max_degree"
        Root of each component's BFS tree.
    bits : int, optional
        Bit-budget rule for τ, on the largest height over all components.
    placement : {"codes", "sphere"}, default "codes"
        Child directions for ``dim > 2``.
    seed : int, default 0
        Seed of the sphere-point optimiser and of the centre directions.
    centre_radius : float, optional
        Euclidean radius (in [0, 1)) of the component centres, as the original code did (0.9).
        The default (None) pushes the centres out so that components are fully separated.

    Returns
    -------
    HyperbolicEmbedding
        Multiprecision Poincaré embedding of all nodes, in graph order; ``metadata`` records τ, its
        rule, the number of components and the centre distance.

    Raises
    ------
    PrecisionError
        If more than one of ``eps``, ``bits`` and ``tau`` is given, or ``precision_bits`` is too low.
    HyperbolicError
        If ``centre_radius`` is outside [0, 1).
    """

    comps = components(graph)
    trees = [_component_tree(graph, c, root) for c in comps]
    delta = max(t.max_degree for t in trees)
    height = max(t.height for t in trees)
    w_min = min(t.min_weight for t in trees)
    given = sum(x is not None for x in (eps, tau, bits))
    if given > 1:
        raise PrecisionError("give at most one of eps, bits and tau")
    t = (float(tau) if tau is not None else tau_for_bits(int(bits), height + 3.0)
         if bits is not None else tau_for_eps(0.1 if eps is None else eps, delta, w_min))
    dirs = _directions(len(comps), dim, seed)
    if len(comps) == 1:
        centre_dist = 0.0
    elif centre_radius is not None:
        if not 0 <= centre_radius < 1:
            raise HyperbolicError(f"centre_radius must be in [0, 1), got {centre_radius}")
        centre_dist = 2 * math.atanh(centre_radius)
    else:
        # two centres at distance R along directions at angle θ are ≥ 2R + 2 ln sin(θ/2) − 1
        # apart; make that exceed every component's diameter plus one edge
        gram = dirs @ dirs.T
        cos_min = float(np.max(gram[~np.eye(len(dirs), dtype=bool)]))
        sin_half = math.sqrt(max((1 - cos_min) / 2, 1e-300))
        centre_dist = t * (2 * height + 1) / 2 + t * height - math.log(sin_half) + 1.0
    # the centre offset adds centre_dist to every root distance
    reach = height + centre_dist / t
    check_precision(t, reach, int(precision_bits))
    centres = _centres(dirs, centre_dist, int(precision_bits))
    coords = np.empty((graph.n_nodes, dim), dtype=object)
    with mpmath.workprec(int(precision_bits)):
        for nodes, tree, c in zip(comps, trees, centres):
            if tree.n_nodes == 1:
                part = np.array([[mpmath.mpf(0)] * dim], dtype=object)
            elif dim == 2:
                part = sarkar_2d(tree, t, precision_bits)
            else:
                part = combinatorial_rd(tree, t, dim, precision_bits, placement=placement,
                                        seed=seed)
            moved = [mp_reflect_to_origin(c, list(row)) for row in part]
            # tree ids follow the component's own labels; map them back to graph ids
            for sub_id, row in enumerate(moved):
                coords[graph.index(tree.graph.labels.tolist()[sub_id])] = row
    meta = {"method": "combinatorial", "forest": True, "components": len(comps), "tau": t,
            "centre_distance": centre_dist,
            "tau_rule": "tau" if tau is not None else "bits" if bits is not None else "eps",
            "max_degree": delta, "height": height,
            "bits_needed": bits_needed(t, reach), "guard_bits": GUARD_BITS}
    return HyperbolicEmbedding(coords, scale=t, nodes=graph.labels,
                               precision_bits=int(precision_bits), metadata=meta)

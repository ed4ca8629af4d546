"""Steiner-tree alternative to the BFS tree: a weighted tree fitted to the graph metric by
Gromov products (the Steiner-tree alternative to a BFS tree).

Construction on the graph's shortest-path metric d, with a fixed root r and the Gromov products
(p|q)_r = ½(d(p,r) + d(q,r) − d(p,q)):

1. **Removal.** Repeatedly take the pair (p, q) of remaining nodes with the largest (p|q)_r,
   remove the one farther from r and remember the other as its *partner*, until only r is left
   (r is never removed: every product with r is 0 and r is nearest to itself).
2. **Re-insertion** in reverse order. Node p with partner q is attached through the centre s of
   the tripod (p, q, r): s lies on the tree path from q to r at distance (p|r)_q from q (i.e.
   at depth (p|q)_r below r), and p hangs off s by an edge of length (q|r)_p.

Choices made here (documented because the spec leaves them open):

* **Ties** are broken by lowest ids: the pair (a, b), a < b, with the smallest a, then smallest
  b; of two nodes equally far from r the one with the larger id is removed.
* **Products are not updated** after a removal: partners are chosen on the graph's own products
  (the spec's wording). A Gromov-closure update (max-merging the removed node's row into its
  partner's) can put two distinct graph nodes at tree distance 0 (e.g. on a 4-cycle), which no
  positive-weight embedding can represent. Without it, the pendant edge (q|r)_p is always
  ≥ d(p,q)/2 > 0, because p is the farther node of the pair.
* **Walking the path instead of rewiring neighbours.** The original code moves all tree
  neighbours of the partner onto the new Steiner node, shortening their edges and clipping at 0;
  that shortens paths between those neighbours. Here s is placed on the single path from q
  towards r: it splits the edge it falls inside, so every tripod is realised exactly and every
  graph node keeps its true distance to r (so the tree's height equals the BFS tree's).
* **Zero-length edges are contracted.** When s falls on an existing tree node (within
  1e-12·max(1, height), so rounding in weighted graphs cannot create near-zero edges), no
  Steiner node is created and p is attached to that node. All emitted
  weights are therefore > 0, as the combinatorial construction needs. On a tree graph every s
  falls on a graph node, so no Steiner node is created and the tree metric is the graph metric.

Node ids: graph nodes keep ids ``0..n-1`` (and their labels); Steiner nodes get ids ``n, n+1, …``
in creation order and the labels :class:`SteinerNode` ``(k)``, which compare equal to nothing
but themselves, so they cannot clash with any graph label.

Cost: O(n²) memory for the product matrix (float64, in place of the distance matrix) and, with
per-row cached maxima, O(n²) work per removal only in the worst case. Graphs above
:data:`MAX_NODES` nodes are refused.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse import csgraph
from tqdm.auto import tqdm

from embstab.hyperbolic.errors import GraphError
from embstab.hyperbolic.graph import Graph, RootedTree, as_graph, find_root

__all__ = ["MAX_NODES", "SteinerNode", "SteinerTree", "steiner_tree"]

#: Largest graph accepted: the n×n product matrix takes 8·n² bytes (200 MB at 5,000 nodes).
MAX_NODES = 5000

#: Two tree points closer than this times max(1, tree height) are the same point.
COINCIDE_RTOL = 1e-12


@dataclass(frozen=True, order=True)
class SteinerNode:
    """Label of the ``index``-th Steiner node (tree id ``n + index``)."""

    index: int

    def __str__(self) -> str:
        return f"steiner:{self.index}"


@dataclass(frozen=True, eq=False)
class SteinerTree:
    """A weighted tree over a graph's nodes plus Steiner nodes, fitted by Gromov products.

    Attributes
    ----------
    graph : Graph
        The original graph (metrics are computed against it).
    tree : RootedTree
        The tree over ``n + n_steiner`` nodes, rooted at the graph's root; ``tree.graph`` is
        a :class:`Graph` of the tree edges whose first ``n`` labels are the graph's labels and
        whose remaining labels are :class:`SteinerNode` objects.
    n_steiner : int
        Number of Steiner nodes (ids ``n..n+n_steiner-1``).
    partner : numpy.ndarray
        Partner of each graph node at its removal (-1 for the root).
    removal_order : numpy.ndarray
        Graph nodes in removal order (the root, never removed, is not included).
    """

    graph: Graph
    tree: RootedTree
    n_steiner: int
    partner: np.ndarray
    removal_order: np.ndarray

    @property
    def n_original(self) -> int:
        """Number of graph nodes n (the first n tree nodes)."""
        return self.graph.n_nodes

    @property
    def root(self) -> int:
        return self.tree.root

    def distances(self, rows: Any = None) -> np.ndarray:
        """Tree distances between graph nodes (Steiner nodes left out).

        Parameters
        ----------
        rows : array_like of int, optional
            Internal ids of the source graph nodes (default: all ``n``).

        Returns
        -------
        numpy.ndarray
            float64 ``(len(rows), n)`` weighted tree distances.
        """
        n = self.n_original
        rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
        d = csgraph.shortest_path(self.tree.graph.csr(), directed=False, indices=rows)
        return d.reshape(len(rows), -1)[:, :n]


def steiner_tree(graph: Any, root: Any = "max_degree", *,
                 progress: bool = False) -> SteinerTree:
    """Fit a weighted Steiner tree to a graph's shortest-path metric by Gromov products.

    See the module docstring for the construction and its documented choices.

    Parameters
    ----------
    graph : Graph or networkx.Graph
        A connected graph with at most :data:`MAX_NODES` nodes (directed graphs are measured
        as undirected; weights are used).
    root : {"max_degree", "center", "first"} or node label, default "max_degree"
        The root r, see :func:`embstab.hyperbolic.graph.find_root`.
    progress : bool, default False
        Show a tqdm bar over the removals.

    Returns
    -------
    SteinerTree
        Graph nodes keep ids ``0..n-1``; Steiner nodes get ids ≥ n. All edge weights are > 0
        and every graph node's tree distance to the root equals its graph distance.

    Raises
    ------
    GraphError
        If the graph is empty, larger than :data:`MAX_NODES` or disconnected.
    """
    graph = as_graph(graph)
    n = graph.n_nodes
    if n == 0:
        raise GraphError("the graph has no nodes")
    if n > MAX_NODES:
        raise GraphError(f"graph {graph.name or ''} has {n} nodes; the Steiner tree keeps an "
                         f"n×n Gromov-product matrix and is limited to {MAX_NODES} nodes "
                         "(use the BFS tree, tree='bfs', for larger graphs)")
    ncomp = graph.n_components()
    if ncomp > 1:
        raise GraphError(f"graph {graph.name or ''} is disconnected ({ncomp} components); the "
                         "Steiner tree needs a connected graph: embed its components "
                         "separately")
    r = find_root(graph, root)
    dist = csgraph.shortest_path(graph.csr(), directed=False, unweighted=not graph.weighted)
    _symmetrize_min(dist)
    depth = dist[r].copy()  # d(x, r)
    partner, product, order = _removal_order(dist, depth, progress)  # dist is overwritten
    parent, weight, n_steiner = _reinsert(partner, product, order, depth)
    return _assemble(graph, r, parent, weight, n_steiner, partner, order)


def _symmetrize_min(dist: np.ndarray, block: int = 256) -> None:
    """Make ``dist`` exactly symmetric in place, keeping the shorter of d(a,b) and d(b,a).

    Dijkstra sums a weighted path in a different order from each end, so the two can differ
    in the last bit; the tie-breaking argument and the products need one value per pair.
    """
    n = len(dist)
    for lo in range(0, n, block):
        for lo2 in range(lo, n, block):
            a = np.minimum(dist[lo:lo + block, lo2:lo2 + block],
                           dist[lo2:lo2 + block, lo:lo + block].T)
            dist[lo:lo + block, lo2:lo2 + block] = a
            dist[lo2:lo2 + block, lo:lo + block] = a.T


def _removal_order(dist: np.ndarray, depth: np.ndarray,
                   progress: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy removals by largest Gromov product.

    Returns the partner of each node, the product (p|partner)_r at its removal, and the
    removal order.

    ``dist`` is turned into the product matrix in place to keep memory at one n×n array.
    """
    n = len(depth)
    g = dist
    # ½((d(a,r) + d(b,r)) − d(a,b)) in this order, so the matrix is exactly symmetric; row
    # blocks keep the extra memory small
    for lo in range(0, n, 256):
        blk = g[lo:lo + 256]
        np.subtract(depth[lo:lo + 256, None] + depth[None, :], blk, out=blk)
        blk *= 0.5
    np.fill_diagonal(g, -np.inf)  # a node is not its own partner
    # per-row cache of the best remaining partner: argmax returns the lowest id on ties
    best = np.argmax(g, axis=1)
    best_val = g[np.arange(n), best]
    alive = np.ones(n, dtype=bool)
    partner = np.full(n, -1, dtype=np.int64)
    product = np.zeros(n, dtype=np.float64)
    order = np.empty(max(n - 1, 0), dtype=np.int64)
    for step in tqdm(range(n - 1), desc="Steiner removals", disable=not progress,
                     mininterval=1):
        # lowest pair (a, b), a < b, among the largest products: a is the first row holding the
        # maximum, and its cached argmax b cannot be below a (row b would then come first)
        a = int(np.argmax(best_val))
        b = int(best[a])
        # remove the node farther from r; on equal distance the larger id (never r: depth 0)
        p, q = (a, b) if depth[a] > depth[b] else (b, a)
        partner[p] = q
        product[p] = best_val[a]
        order[step] = p
        alive[p] = False
        g[:, p] = -np.inf
        best_val[p] = -np.inf
        stale = np.flatnonzero(alive & (best == p))
        if len(stale):
            sub = g[stale]
            best[stale] = np.argmax(sub, axis=1)
            best_val[stale] = sub[np.arange(len(stale)), best[stale]]
    return partner, product, order


def _reinsert(partner: np.ndarray, product: np.ndarray, order: np.ndarray,
              depth: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Re-insert nodes in reverse removal order through their tripod centres.

    Returns parent and weight-into-node arrays over ``n + n_steiner`` ids, and n_steiner.
    """
    n = len(depth)
    cap = 2 * n  # at most n-1 Steiner nodes
    parent = np.full(cap, -1, dtype=np.int64)
    weight = np.zeros(cap, dtype=np.float64)
    tdepth = np.zeros(cap, dtype=np.float64)  # distance to r in the tree
    tdepth[:n] = depth
    tol = COINCIDE_RTOL * max(1.0, float(depth.max()) if n else 1.0)
    nxt = n
    for p in order[::-1]:
        p = int(p)
        q = int(partner[p])
        # the tripod centre sits at depth (p|q)_r on q's path to r, (p|r)_q above q; clamp
        # so rounding cannot push it outside that path
        g = min(max(float(product[p]), 0.0), tdepth[q])
        x, below = q, -1
        while tdepth[x] > g + tol:  # climb from q until at or above the centre
            x, below = int(parent[x]), x
        if tdepth[x] >= g - tol:  # the centre is an existing node: contract, no Steiner node
            s = x
        else:  # the centre splits the edge x — below
            s = nxt
            nxt += 1
            parent[s], weight[s], tdepth[s] = x, g - tdepth[x], g
            parent[below], weight[below] = s, tdepth[below] - g
        parent[p], weight[p] = s, depth[p] - tdepth[s]
    return parent[:nxt], weight[:nxt], nxt - n


def _assemble(graph: Graph, r: int, parent: np.ndarray, weight: np.ndarray, n_steiner: int,
              partner: np.ndarray, order: np.ndarray) -> SteinerTree:
    """Wrap parent/weight arrays as a :class:`RootedTree` over a labelled tree :class:`Graph`."""
    n = graph.n_nodes
    m = n + n_steiner
    labels = np.empty(m, dtype=object)
    for i, lab in enumerate(graph.labels.tolist()):  # element-wise: tuple labels stay whole
        labels[i] = lab
    for k in range(n_steiner):
        labels[n + k] = SteinerNode(k)
    child = np.flatnonzero(parent >= 0)
    tree_graph = Graph._from_arrays(labels, parent[child], child, weight[child], False,
                                    f"{graph.name}-steiner" if graph.name else "steiner")
    children: list[list[int]] = [[] for _ in range(m)]
    for c in child.tolist():  # ascending ids: graph nodes first, then Steiner nodes
        children[int(parent[c])].append(c)
    bfs = [r]
    queue = deque([r])
    while queue:
        h = queue.popleft()
        bfs.extend(children[h])
        queue.extend(children[h])
    rooted = RootedTree(tree_graph, r, parent.copy(), children, weight.copy(),
                        np.asarray(bfs, dtype=np.int64))
    return SteinerTree(graph, rooted, int(n_steiner), partner, order)

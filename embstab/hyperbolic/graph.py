"""Graphs and rooted trees for the hyperbolic constructions.

A :class:`Graph` keeps each node's neighbours in **edge-file order** (as networkx does), because the
combinatorial construction places children in that order and the golden values depend on it.
Shortest paths use :mod:`scipy.sparse.csgraph` (BFS when unweighted, Dijkstra when weighted).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from embstab.hyperbolic.errors import GraphError
from embstab.hyperbolic.io import parse_label

__all__ = ["Graph", "RootedTree", "as_graph", "load_edgelist", "tree_from_graph", "find_root",
           "closure_weighted_tree"]


@dataclass(frozen=True, eq=False)
class Graph:
    """An (un)directed, optionally weighted graph on nodes ``0..n-1`` with labels.

    Parameters
    ----------
    labels : numpy.ndarray
        Node labels; ``labels[i]`` names internal node ``i``.
    indptr, indices, weights : numpy.ndarray
        Adjacency in CSR layout, each row in first-appearance (edge-file) order. An undirected
        graph stores both directions.
    directed : bool
        Whether edges are one-way (e.g. a transitive closure ``child -> ancestor``).
    name : str, optional
        Display name (e.g. the file stem).
    """

    labels: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    directed: bool = False
    name: str | None = None
    _index: dict = field(default_factory=dict, repr=False)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_edges(cls, edges: Iterable[Sequence[Any]], *, directed: bool = False,
                   name: str | None = None, nodes: Iterable[Any] | None = None) -> "Graph":
        """Build a graph from ``(u, v)`` or ``(u, v, w)`` tuples.

        Integer labels are numbered in sorted order (so ``0..n-1`` files keep their ids); other
        labels in order of first appearance. Duplicate edges keep the first weight; self-loops
        are dropped because no metric or construction uses them.

        Parameters
        ----------
        edges : iterable of sequence
            ``(u, v)`` pairs of node labels, or ``(u, v, w)`` with a positive finite weight (default 1).
        directed : bool, default False
            Whether the edges are directed.
        name : str, optional
            A name for messages and results.
        nodes : iterable, optional
            Node labels to include first (isolated nodes included).

        Returns
        -------
        Graph
            The graph.

        Raises
        ------
        GraphError
            If an edge has the wrong number of fields or a weight that is not positive and finite.
        """
        us, vs, ws = [], [], []
        for e in edges:
            if len(e) not in (2, 3):
                raise GraphError(f"an edge needs 2 or 3 fields (u v [w]), got {len(e)}: {e!r}")
            w = float(e[2]) if len(e) == 3 else 1.0
            if not np.isfinite(w) or w <= 0:
                raise GraphError(f"edge {e[0]!r}-{e[1]!r} has weight {w}; weights must be > 0")
            us.append(e[0]); vs.append(e[1]); ws.append(w)
        seen = list(nodes) if nodes is not None else []
        order: dict[Any, None] = dict.fromkeys(seen)
        for u, v in zip(us, vs):
            order.setdefault(u); order.setdefault(v)
        labels = list(order)
        if labels and all(isinstance(x, (int, np.integer)) for x in labels):
            labels = sorted(labels)
        index = {lab: i for i, lab in enumerate(labels)}
        u = np.fromiter((index[x] for x in us), dtype=np.int64, count=len(us))
        v = np.fromiter((index[x] for x in vs), dtype=np.int64, count=len(vs))
        w = np.asarray(ws, dtype=np.float64)
        ints = bool(labels) and isinstance(labels[0], (int, np.integer))
        return cls._from_arrays(np.asarray(labels, dtype=np.int64 if ints else object),
                                u, v, w, directed, name, index)

    @classmethod
    def _from_arrays(cls, labels, u, v, w, directed, name, index=None) -> "Graph":
        n = len(labels)
        keep = u != v
        u, v, w = u[keep], v[keep], w[keep]
        if directed:
            src, dst, wt = u, v, w
        else:  # interleave (u->v, v->u) so a stable sort keeps edge-file order per node
            src = np.column_stack([u, v]).ravel()
            dst = np.column_stack([v, u]).ravel()
            wt = np.repeat(w, 2)
        # drop duplicate (src, dst) pairs, keeping the first occurrence
        key = src * max(n, 1) + dst
        _, first = np.unique(key, return_index=True)
        first.sort()
        src, dst, wt = src[first], dst[first], wt[first]
        order = np.argsort(src, kind="stable")
        src, dst, wt = src[order], dst[order], wt[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        np.cumsum(indptr, out=indptr)
        if index is None:
            index = {lab: i for i, lab in enumerate(labels.tolist())}
        return cls(labels, indptr, dst.astype(np.int64), wt, directed, name, index)

    @classmethod
    def from_networkx(cls, g: Any, name: str | None = None) -> "Graph":
        """Convert a networkx graph (edge attribute ``weight`` is used when present).

        Parameters
        ----------
        g : networkx.Graph or networkx.DiGraph
            The graph; isolated nodes are kept.
        name : str, optional
            A name for messages and results.

        Returns
        -------
        Graph
            The graph.
        """
        edges = [(u, v, d.get("weight", 1.0)) for u, v, d in g.edges(data=True)]
        return cls.from_edges(edges, directed=g.is_directed(), name=name, nodes=list(g.nodes))

    # -- basic queries --------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    def __len__(self) -> int:
        return self.n_nodes

    @property
    def n_edges(self) -> int:
        """Number of edges (unordered pairs when undirected)."""
        m = len(self.indices)
        return m if self.directed else m // 2

    @property
    def weighted(self) -> bool:
        return bool(len(self.weights)) and not np.all(self.weights == 1.0)

    def neighbors(self, i: int) -> np.ndarray:
        """Internal ids of the neighbours of node ``i`` (out-neighbours when directed).

        Parameters
        ----------
        i : int
            Internal node id.

        Returns
        -------
        numpy.ndarray
            int64 ids (a view into the adjacency, not to be modified).
        """
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def degrees(self) -> np.ndarray:
        """Number of neighbours of every node (out-degree when directed).

        Returns
        -------
        numpy.ndarray
            int64 ``(n_nodes,)`` degrees, by internal id.
        """
        return np.diff(self.indptr)

    def index(self, label: Any) -> int:
        """Internal id of a node label (an int label may also be given as its string, and vice versa).

        Parameters
        ----------
        label : object
            The node label.

        Returns
        -------
        int
            The internal id.

        Raises
        ------
        GraphError
            If the label is not a node of the graph.
        """
        try:
            return self._index[label]
        except KeyError:
            # edge files give ints, command lines give strings: accept either spelling
            for alt in (_as_int(label), str(label)):
                if alt is not None and alt in self._index:
                    return self._index[alt]
        raise GraphError(f"node {label!r} is not in graph {self.name or ''}".rstrip())

    def edge_list(self) -> np.ndarray:
        """The edges as internal id pairs, each undirected edge once (``u < v``).

        Returns
        -------
        numpy.ndarray
            int64 ``(m, 2)`` array.
        """
        src = np.repeat(np.arange(self.n_nodes), self.degrees())
        e = np.column_stack([src, self.indices])
        return e if self.directed else e[e[:, 0] < e[:, 1]]

    def csr(self, symmetric: bool = True) -> sp.csr_array:
        """Weighted adjacency as a SciPy CSR array.

        Parameters
        ----------
        symmetric : bool, default True
            Symmetrise a directed graph's adjacency (elementwise maximum with its transpose).

        Returns
        -------
        scipy.sparse.csr_array
            ``(n_nodes, n_nodes)`` float64 adjacency.
        """
        a = sp.csr_array((self.weights, self.indices, self.indptr),
                         shape=(self.n_nodes, self.n_nodes))
        if symmetric and self.directed:
            a = a.maximum(a.T).tocsr()
        return a

    def n_components(self) -> int:
        """Number of connected components (edges taken as undirected).

        Returns
        -------
        int
            The component count.
        """
        return int(csgraph.connected_components(self.csr(), directed=False)[0])

    def shortest_paths(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """Graph distances (hops, or weighted lengths) from each node in ``rows`` to all nodes.

        Directed graphs are measured as undirected (distortion compares metric distances).

        Parameters
        ----------
        rows : sequence of int or numpy.ndarray
            Internal ids of the source nodes.

        Returns
        -------
        numpy.ndarray
            float64 ``(len(rows), n_nodes)`` distances, ``inf`` between components.
        """
        rows = np.asarray(rows, dtype=np.int64)
        return csgraph.shortest_path(self.csr(), directed=False, unweighted=not self.weighted,
                                     indices=rows).reshape(len(rows), self.n_nodes)

    def subgraph_edges_removed(self, removed: np.ndarray) -> "Graph":
        """A copy without the given undirected edges.

        Parameters
        ----------
        removed : numpy.ndarray
            ``(k, 2)`` internal id pairs, in either order.

        Returns
        -------
        Graph
            The graph with the same nodes and the remaining edges.
        """
        e = self.edge_list()
        drop = {(int(a), int(b)) for a, b in np.sort(np.asarray(removed), axis=1)}
        keep = np.array([(int(a), int(b)) not in drop for a, b in np.sort(e, axis=1)], dtype=bool)
        src = np.repeat(np.arange(self.n_nodes), self.degrees())
        w = self.weights if self.directed else self.weights[src < self.indices]
        return Graph._from_arrays(self.labels, e[keep, 0], e[keep, 1], w[keep], self.directed,
                                  self.name, dict(self._index))


def as_graph(graph: Any) -> "Graph":
    """A :class:`Graph` from a Graph (returned as is) or a networkx graph (converted once).

    Parameters
    ----------
    graph : Graph or networkx.Graph
        Any networkx graph class (``Graph``, ``DiGraph``, ``MultiGraph``, ...); the edge attribute
        ``weight`` is used when present.

    Returns
    -------
    Graph

    Raises
    ------
    GraphError
        If ``graph`` is neither.
    """
    if isinstance(graph, Graph):
        return graph
    # recognised by class lineage, so networkx is never imported here (subclasses count too)
    if any(c.__module__.split(".")[0] == "networkx" and c.__name__ == "Graph" for c in type(graph).__mro__):
        return Graph.from_networkx(graph)
    raise GraphError(f"expected an embstab.hyperbolic.Graph or a networkx graph, got {type(graph).__name__}")


def _as_int(x: Any) -> int | None:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def load_edgelist(path: str | os.PathLike, *, directed: bool = False,
                  comments: str = "#") -> Graph:
    """Load a whitespace-separated edge list ``u v [w]`` (the hyperbolics ``.edges`` format).

    Labels written as integers (``-?[0-9]+`` without leading zeros) become ints, other text stays
    text, and a label that looks numeric but is not written that way (``01``, ``+1``) is refused
    with its line: two spellings must not name one node. Blank lines and lines starting with ``comments`` are
    skipped. Errors name the file and line.

    Parameters
    ----------
    path : str or os.PathLike
        The edge-list file.
    directed : bool, default False
        Read ``u v`` as the one-way edge ``u -> v`` (e.g. a closure ``child ancestor``).
    comments : str, default "#"
        Comment prefix.

    Returns
    -------
    Graph

    Raises
    ------
    GraphError
        If the file is missing or empty, or a line has the wrong fields, a label written in two
        ways, or a weight that is not a number (naming the file and line).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise GraphError(f"{path}: no such edge-list file")
    edges = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            s = line.strip()
            if not s or s.startswith(comments):
                continue
            parts = s.split()
            if len(parts) not in (2, 3):
                raise GraphError(f"{path}, line {lineno}: expected 'u v [weight]', "
                                 f"got {len(parts)} fields")
            try:  # parsed once, by the rule of embedding files: `1` and `01` cannot both name node 1
                e: list[Any] = [parse_label(parts[0]), parse_label(parts[1])]
            except ValueError as exc:
                raise GraphError(f"{path}, line {lineno}: {exc}") from None
            if len(parts) == 3:
                try:
                    e.append(float(parts[2]))
                except ValueError:
                    raise GraphError(f"{path}, line {lineno}: weight {parts[2]!r} is not a "
                                     "number") from None
            edges.append(e)
    if not edges:
        raise GraphError(f"{path}: no edges found")
    try:
        return Graph.from_edges(edges, directed=directed,
                                name=os.path.splitext(os.path.basename(path))[0])
    except GraphError as exc:
        raise GraphError(f"{path}: {exc}") from None


@dataclass(frozen=True, eq=False)
class RootedTree:
    """A rooted spanning tree of a graph, in BFS order.

    Attributes
    ----------
    graph : Graph
        The graph it spans (metrics are computed against this graph, not the tree).
    root : int
        Internal id of the root.
    parent : numpy.ndarray
        Parent id per node (-1 for the root).
    children : list of list of int
        Children per node, in the graph's neighbour order.
    weight : numpy.ndarray
        Weight of the edge into each node from its parent (0 for the root).
    order : numpy.ndarray
        Nodes in BFS order (root first).
    """

    graph: Graph
    root: int
    parent: np.ndarray
    children: list
    weight: np.ndarray
    order: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.parent)

    @property
    def max_degree(self) -> int:
        """Δ: the largest number of tree edges at a node (children plus the parent edge)."""
        deg = np.fromiter((len(c) for c in self.children), dtype=np.int64, count=self.n_nodes)
        deg = deg + (self.parent >= 0)
        return int(deg.max()) if len(deg) else 0

    @property
    def depth_hops(self) -> np.ndarray:
        d = np.zeros(self.n_nodes, dtype=np.int64)
        for v in self.order[1:]:
            d[v] = d[self.parent[v]] + 1
        return d

    @property
    def root_distance(self) -> np.ndarray:
        """Weighted distance of each node from the root."""
        d = np.zeros(self.n_nodes, dtype=np.float64)
        for v in self.order[1:]:
            d[v] = d[self.parent[v]] + self.weight[v]
        return d

    @property
    def height(self) -> float:
        """L: the largest weighted root distance (hops when unweighted)."""
        return float(self.root_distance.max()) if self.n_nodes else 0.0

    @property
    def min_weight(self) -> float:
        w = self.weight[self.parent >= 0]
        return float(w.min()) if len(w) else 1.0


def find_root(graph: Graph, root: Any = "max_degree") -> int:
    """Resolve a root choice to an internal node id.

    Parameters
    ----------
    graph : Graph
        The graph (measured as undirected).
    root : {"max_degree", "center", "first"} or node label, default "max_degree"
        ``"max_degree"`` takes the node of largest degree (lowest id on ties), ``"center"`` the
        middle of a longest BFS path found by a double sweep (exact for trees, a heuristic
        otherwise), ``"first"`` node 0 (the original code's hard-coded root); anything else is a
        node label.

    Returns
    -------
    int
        The internal id of the root.

    Raises
    ------
    GraphError
        If the graph has no nodes or the label is unknown.
    """
    if graph.n_nodes == 0:
        raise GraphError("the graph has no nodes")
    graph = _undirected(graph)
    if isinstance(root, str) and root == "max_degree":
        return int(np.argmax(graph.degrees()))
    if isinstance(root, str) and root == "first":
        return 0
    if isinstance(root, str) and root == "center":
        a = int(np.argmax(_hops(graph, 0)))
        da = _hops(graph, a)
        b = int(np.argmax(da))
        # walk back from b to a along decreasing distance to a, stop halfway
        path = [b]
        while path[-1] != a:
            nb = graph.neighbors(path[-1])
            path.append(int(nb[np.argmin(np.where(da[nb] < 0, np.inf, da[nb]))]))
        return path[len(path) // 2]
    return graph.index(root)


def _undirected(graph: Graph) -> Graph:
    """The graph itself, or for a directed graph its undirected version (same labels)."""
    if not graph.directed:
        return graph
    e = graph.edge_list()
    return Graph._from_arrays(graph.labels, e[:, 0], e[:, 1], graph.weights, False,
                              graph.name, dict(graph._index))


def _hops(graph: Graph, src: int) -> np.ndarray:
    d = csgraph.shortest_path(graph.csr(), directed=False, unweighted=True, indices=[src])[0]
    return np.where(np.isfinite(d), d, -1)


def tree_from_graph(graph: Any, root: Any = "max_degree") -> RootedTree:
    """BFS spanning tree of a connected graph (networkx ``bfs_tree`` order), with edge weights.

    Parameters
    ----------
    graph : Graph or networkx.Graph
        A connected graph (directed graphs are traversed as undirected).
    root : {"max_degree", "center", "first"} or node label, default "max_degree"
        See :func:`find_root`.

    Returns
    -------
    RootedTree

    Raises
    ------
    GraphError
        If the graph is disconnected (embed each component separately).
    """
    graph = as_graph(graph)
    n = graph.n_nodes
    graph_u = _undirected(graph)  # a closure's one-way edges are still tree edges
    r = find_root(graph_u, root)
    parent = np.full(n, -1, dtype=np.int64)
    weight = np.zeros(n, dtype=np.float64)
    children: list[list[int]] = [[] for _ in range(n)]
    seen = np.zeros(n, dtype=bool)
    seen[r] = True
    order = [r]
    queue = deque([r])
    indptr, indices, weights = graph_u.indptr, graph_u.indices, graph_u.weights
    while queue:
        h = queue.popleft()
        for pos in range(indptr[h], indptr[h + 1]):
            v = int(indices[pos])
            if not seen[v]:
                seen[v] = True
                parent[v] = h
                weight[v] = weights[pos]
                children[h].append(v)
                order.append(v)
                queue.append(v)
    if len(order) != n:
        raise GraphError(f"graph {graph.name or ''} is disconnected ({graph.n_components()} "
                         f"components; {n - len(order)} nodes unreachable from the root); "
                         "embed its components separately: --forest on the command line, forest=True in Python")
    return RootedTree(graph, r, parent, children, weight, np.asarray(order, dtype=np.int64))


def closure_weighted_tree(tree: RootedTree) -> RootedTree:
    """The same tree with weight 2^(s−1) on the edge into depth s (Sala et al., Prop. D.2).

    With these weights every ancestor of a node is strictly nearer to it than every
    non-ancestor, so an embedding of the tree can be scored (MAP) against the transitive
    closure. Root distances grow like 2^depth: mind the bits (τ·(2^L − 1)/ln 2).

    Parameters
    ----------
    tree : RootedTree
        The tree (its own weights are replaced).

    Returns
    -------
    RootedTree
        The re-weighted tree, with the same nodes, root and order.
    """
    depth = tree.depth_hops
    weight = np.where(tree.parent >= 0, np.ldexp(1.0, np.maximum(depth - 1, 0)), 0.0)
    return RootedTree(tree.graph, tree.root, tree.parent, tree.children, weight, tree.order)

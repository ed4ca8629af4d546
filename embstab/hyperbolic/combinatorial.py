"""Combinatorial (Sarkar-style) construction of hyperbolic tree embeddings (Sala et al. 2018).

Each node sits at the centre of its own cone: move node h to the origin with the reflection R_h,
spread its parent and children evenly around it at radius tanh(τw/2), and map back. In 2-D the
slots are roots of unity; in r-D they are simplex-code (Hadamard) codewords tiled to length r,
or, when a node has more slots than the code placement allows, near-uniform sphere points.
All arithmetic runs in mpmath at ``precision_bits`` bits.
"""

from __future__ import annotations

from typing import Any


from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.construction import combinatorial_rd, sarkar_2d, simplex_codewords, sphere_points
from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.forest import embed_forest
from embstab.hyperbolic.graph import Graph, RootedTree, as_graph, tree_from_graph
from embstab.hyperbolic.steiner import SteinerTree, steiner_tree
from embstab.hyperbolic.tau import GUARD_BITS, bits_needed, check_precision, choose_tau

__all__ = ["embed_combinatorial", "sarkar_2d", "combinatorial_rd", "simplex_codewords",
           "sphere_points"]


def embed_combinatorial(graph: Any, dim: int = 2,
                        eps: float | None = None, tau: float | None = None,
                        precision_bits: int = 256, root: Any = "max_degree", *,
                        bits: int | None = None, placement: str = "codes", seed: int = 0,
                        forest: bool = False, tree: str = "bfs",
                        progress: bool = False) -> HyperbolicEmbedding:
    """Embed a graph's BFS (or Steiner) tree in the Poincaré ball H^dim with the combinatorial
    construction.

    Parameters
    ----------
    graph : Graph, networkx.Graph, RootedTree or SteinerTree
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
    if not isinstance(graph, (RootedTree, SteinerTree)):
        graph = as_graph(graph)
    if dim < 2:
        raise HyperbolicError(f"dim must be ≥ 2, got {dim}")
    if tree not in ("bfs", "steiner"):
        raise HyperbolicError(f"tree must be 'bfs' or 'steiner', got {tree!r}")
    if isinstance(graph, SteinerTree) or tree == "steiner":
        return _embed_steiner(graph, dim, eps=eps, tau=tau, precision_bits=precision_bits,
                              root=root, bits=bits, placement=placement, seed=seed,
                              forest=forest, progress=progress)
    if forest and isinstance(graph, Graph) and graph.n_components() > 1:
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

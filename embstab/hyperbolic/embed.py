"""``embed(graph, method=...)``: the one entry from a graph to a hyperbolic (or product) embedding.

It converts the graph once (a networkx graph becomes a :class:`Graph`), picks the method and owns
the precision policy: the combinatorial construction runs at just enough bits for its scale τ
(never fewer than 256, the original default), and a forest — whose reach depends on how far apart
the component centres must sit — is probed from 256 bits up, doubling until it fits.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from embstab.errors import lookup
from embstab.hyperbolic.base import ManifoldEmbedding
from embstab.hyperbolic.combinatorial import embed_combinatorial
from embstab.hyperbolic.errors import HyperbolicError, PrecisionError
from embstab.hyperbolic.graph import Graph, RootedTree, as_graph, tree_from_graph
from embstab.hyperbolic.hmds import hmds
from embstab.hyperbolic.sgd import fit_product_sgd, fit_sgd
from embstab.hyperbolic.steiner import SteinerTree, steiner_tree
from embstab.hyperbolic.tau import GUARD_BITS, MAX_PRECISION_BITS, bits_needed, check_precision_bits, choose_tau

__all__ = ["METHODS", "embed", "MIN_PRECISION_BITS", "MAX_PRECISION_BITS"]

#: The fewest working bits the combinatorial construction is run at (the original code's default).
MIN_PRECISION_BITS = 256
# MAX_PRECISION_BITS (imported from embstab.hyperbolic.tau, and exported here too) bounds every
# precision: a method's, a multiprecision embedding's and a file header's.
#: float64 carries this many bits; the float methods accept no other precision.
_FLOAT_BITS = 53


def _combinatorial(graph: Any, dim: int, precision: int | None, progress: bool,
                   options: dict[str, Any]) -> ManifoldEmbedding:
    root = options.get("root", "max_degree")
    tree = options.get("tree", "bfs")
    eps, tau, bits = options.get("eps"), options.get("tau"), options.get("bits")
    kwargs = {**options, "progress": progress}
    forest = bool(options.get("forest")) and isinstance(graph, Graph) and graph.n_components() > 1
    if forest:
        if tree == "steiner":
            raise HyperbolicError("tree='steiner' does not support forests (forest=True on a disconnected graph); "
                                  "embed each component separately or use tree='bfs'")
        if precision is not None:
            return embed_combinatorial(graph, dim, precision_bits=precision, **kwargs)
        prec = MIN_PRECISION_BITS
        while True:  # the forest's reach depends on τ and the centre spacing: probe
            try:
                return embed_combinatorial(graph, dim, precision_bits=prec, **kwargs)
            except PrecisionError:
                if prec >= MAX_PRECISION_BITS:
                    raise
                prec *= 2
    source = graph
    if tree == "steiner" and isinstance(graph, Graph):  # built once: for τ/precision and for the embedding
        source = steiner_tree(graph, root, progress=progress)
    if precision is None:  # enough for the chosen τ, never below the original default
        rooted = (source.tree if isinstance(source, SteinerTree)
                  else source if isinstance(source, RootedTree) else tree_from_graph(source, root))
        t = choose_tau(rooted, eps=eps, bits=bits, tau=tau)
        precision = max(MIN_PRECISION_BITS, bits or 0, bits_needed(t, rooted.height, GUARD_BITS))
        if precision > MAX_PRECISION_BITS:
            asked, advice = ((f"bits={bits}", "fewer bits") if bits and bits >= precision else
                             (f"tau={t:.6g} on a tree of height {rooted.height:g}",
                              "a smaller tau" if tau is not None else "a larger eps"))
            need = f"{precision}" if precision < 10**12 else f"{float(precision):.3g}"
            raise PrecisionError(f"{asked} needs {need} bits of working precision, more than the "
                                 f"{MAX_PRECISION_BITS} bits embstab computes at; ask for {advice}")
    return embed_combinatorial(source, dim, precision_bits=precision, **kwargs)


def _float_only(method: str, precision: int | None) -> None:
    if precision is not None and precision != _FLOAT_BITS:
        raise PrecisionError(f"method {method!r} computes in float64 ({_FLOAT_BITS} bits); got precision={precision}")


def _hmds(graph: Any, dim: int, precision: int | None, progress: bool, options: dict[str, Any]) -> ManifoldEmbedding:
    # more than float64's bits means the multiprecision eigensolver at that precision
    if precision is not None and precision > _FLOAT_BITS:
        return hmds(graph, dim, solver="mpmath", precision_bits=precision, **options)
    _float_only("hmds", precision)
    return hmds(graph, dim, **options)


def _sgd(graph: Any, dim: int, precision: int | None, progress: bool, options: dict[str, Any]) -> ManifoldEmbedding:
    _float_only("sgd", precision)
    return fit_sgd(graph, dim, progress=progress, **options)


def _product_sgd(graph: Any, dim: int, precision: int | None, progress: bool,
                 options: dict[str, Any]) -> ManifoldEmbedding:
    _float_only("product_sgd", precision)
    return fit_product_sgd(graph, progress=progress, **options)


#: Each method: (runner, the function whose keyword arguments are its options).
METHODS: dict[str, tuple[Callable, Callable]] = {
    "combinatorial": (_combinatorial, embed_combinatorial),
    "hmds": (_hmds, hmds),
    "sgd": (_sgd, fit_sgd),
    "product_sgd": (_product_sgd, fit_product_sgd),
}
#: Arguments ``embed`` sets itself, so they are not options.
_OWN = {"graph", "distances", "dim", "precision_bits", "progress", "solver"}


def embed(graph: Any, method: str = "combinatorial", *, dim: int = 2, precision: int | None = None,
          progress: bool = False, **options: Any) -> ManifoldEmbedding:
    """Embed a graph's nodes by one of the methods, at the precision that method needs.

    Parameters
    ----------
    graph : Graph, networkx.Graph, RootedTree, SteinerTree or numpy.ndarray
        The graph (networkx graphs are converted once, here). The combinatorial construction
        also takes a ready rooted or Steiner tree; h-MDS and SGD also take an ``(n, n)`` distance
        matrix.
    method : {"combinatorial", "hmds", "sgd", "product_sgd"}, default "combinatorial"
        :func:`~embstab.hyperbolic.embed_combinatorial` (multiprecision Poincaré),
        :func:`~embstab.hyperbolic.hmds`, :func:`~embstab.hyperbolic.fit_sgd` (Riemannian SGD in
        the Poincaré ball or the Lorentz model) or :func:`~embstab.hyperbolic.fit_product_sgd`
        (a product of H, L, E and S factors; ``dim`` is then set by ``factors``).
    dim : int, default 2
        Dimension of the hyperbolic space.
    precision : int, optional
        Working precision in bits. Combinatorial: default just enough for τ (at least 256), and for
        a forest the smallest power-of-two multiple of 256 that fits. h-MDS: more than 53 runs the
        multiprecision eigensolver. SGD: float64 only (None or 53).
    progress : bool, default False
        Show progress bars.
    **options
        Keyword arguments of the method's function (e.g. ``eps``, ``tau``, ``bits``, ``root``,
        ``tree``, ``forest`` for the construction; ``scale``, ``pga`` for h-MDS; ``manifold``,
        ``init``, ``epochs``, ``lr``, ``seed`` for SGD; ``factors``, ``combine`` for products).

    Returns
    -------
    ManifoldEmbedding
        A :class:`~embstab.hyperbolic.HyperbolicEmbedding`, or a
        :class:`~embstab.hyperbolic.ProductEmbedding` for ``"product_sgd"``.

    Raises
    ------
    UnknownNameError
        If ``method`` is not a method.
    GraphError
        If ``graph`` is not a graph this method takes.
    HyperbolicError
        If an option does not belong to the method, or the method refuses its input.
    PrecisionError
        If ``precision`` is too low for the scale, more than :data:`MAX_PRECISION_BITS`, or given to a
        float64-only method; or if the scale asked for needs more than :data:`MAX_PRECISION_BITS`.
    """
    runner, func = lookup(METHODS, method, "embedding method")
    allowed = sorted(set(inspect.signature(func).parameters) - _OWN)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise HyperbolicError(f"{', '.join(map(repr, unknown))} is not an option of method {method!r}; its options "
                              f"are: {', '.join(allowed)}")
    if precision is not None:
        check_precision_bits(precision, "precision")
    takes_tree = method == "combinatorial" and isinstance(graph, (RootedTree, SteinerTree))
    takes_matrix = method != "combinatorial" and isinstance(graph, np.ndarray)
    if not (takes_tree or takes_matrix):
        graph = as_graph(graph)
    return runner(graph, int(dim), None if precision is None else int(precision), progress, options)

"""Precision and stability of hyperbolic embeddings.

* **Bits vs quality** — :func:`quantize_coordinates` rounds float64 coordinates through the
  low-precision core (:func:`embstab.lowprec.quantize`); :func:`bits_sweep` builds, for each
  number format, the combinatorial embedding whose τ that format can hold, quantizes it and
  evaluates MAP and distortion.
* **Instability** — between two embeddings of the same nodes (e.g. of a graph and of a copy with
  5% of its edges removed): :func:`embedding_instability` (the hyperbolic measures of
  :mod:`embstab.measures.hyperbolic`: k-NN overlap, neighbour MAP and the distortion between their
  decoded distances, row by row); :func:`stability_study` runs it over edge removals.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from embstab.hyperbolic.base import ManifoldEmbedding
from embstab.hyperbolic.combinatorial import embed_combinatorial
from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import GraphError, HyperbolicError
from embstab.hyperbolic.graph import Graph, as_graph
from embstab.hyperbolic.manifolds import Manifold, get_manifold
from embstab.hyperbolic.metrics import evaluate
from embstab.measures.hyperbolic import embedding_instability

__all__ = ["perturb_graph", "embedding_instability", "stability_study", "quantize_coordinates",
           "format_resolution_bits", "bits_sweep"]


# -- perturbation -------------------------------------------------------------------------------

def perturb_graph(graph: Any, remove: float = 0.05, seed: int = 0,
                  keep_connected: bool = True) -> Graph:
    """A copy of ``graph`` with a random fraction ``remove`` of its edges deleted.

    With ``keep_connected`` (default), removed edges that a spanning forest of the remainder
    needs are put back, so the perturbed graph has the same components (on a tree nothing can
    be removed; :class:`GraphError` says so). The realised fraction is
    ``1 - new.n_edges / graph.n_edges``.

    Parameters
    ----------
    graph : Graph or networkx.Graph
        The graph to perturb.
    remove : float, default 0.05
        Fraction of the edges to drop, in [0, 1).
    seed : int, default 0
        Seed of the (local) random choice.
    keep_connected : bool, default True
        Put back removed edges that would split a component.

    Returns
    -------
    Graph

    Raises
    ------
    GraphError
        If ``remove`` is out of range, or nothing can be removed without disconnecting.
    """
    graph = as_graph(graph)
    if not 0 <= remove < 1:
        raise GraphError(f"remove must be in [0, 1), got {remove}")
    edges = graph.edge_list()
    m = len(edges)
    rng = np.random.default_rng(seed)
    drop = rng.permutation(m)[:int(round(remove * m))]
    if keep_connected and len(drop):
        keep_mask = np.ones(m, dtype=bool)
        keep_mask[drop] = False
        parent = np.arange(graph.n_nodes)

        def find(a: int) -> int:
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for a, b in edges[keep_mask]:
            ra, rb = find(int(a)), find(int(b))
            if ra != rb:
                parent[ra] = rb
        restored = []
        for e in drop:  # re-add dropped edges that join two pieces (in random order)
            ra, rb = find(int(edges[e, 0])), find(int(edges[e, 1]))
            if ra != rb:
                parent[ra] = rb
                restored.append(e)
        drop = np.setdiff1d(drop, restored)
        if remove > 0 and len(drop) == 0:
            raise GraphError("no edge can be removed without disconnecting the graph (is it a "
                             "tree?); pass keep_connected=False")
    return graph.subgraph_edges_removed(edges[drop])


def stability_study(graph: Any, embed: Callable[[Graph], ManifoldEmbedding], *,
                    remove: float = 0.05, seeds: Iterable[int] = (0, 1, 2), k: int = 10,
                    rows: int | None = None, progress: bool = True) -> pd.DataFrame:
    """Instability of an embedding method under edge removal: one tidy row per seed.

    For each seed, ``remove`` of the edges are dropped (:func:`perturb_graph`), both graphs are
    embedded with ``embed`` and compared by :func:`embedding_instability`; each embedding is also
    scored against its own graph with :func:`evaluate`.

    Parameters
    ----------
    graph : Graph or networkx.Graph
        The original graph.
    embed : callable
        Graph → embedding, e.g. ``lambda g: embstab.hyperbolic.embed(g, eps=1.0)``.
    remove : float, default 0.05
        Fraction of the edges removed per seed.
    seeds : iterable of int, default (0, 1, 2)
        One perturbation per seed.
    k : int, default 10
        Neighbours per node of the k-NN measures.
    rows : int, optional
        Evaluate a random sample of this many rows (default all).
    progress : bool, default True
        tqdm bar over the seeds.

    Returns
    -------
    pandas.DataFrame
        Columns ``seed``, ``removed`` (realised fraction), ``knn_overlap``, ``d_avg``, ``d_wc``,
        ``map_original``, ``map_perturbed``.
    """
    graph = as_graph(graph)
    base = embed(graph)
    base_eval = evaluate(graph, base, rows=rows, progress=False)
    out = []
    for seed in tqdm(list(seeds), desc="stability", disable=not progress):
        g2 = perturb_graph(graph, remove=remove, seed=seed)
        other = embed(g2)
        inst = embedding_instability(base, other, k=k, rows=rows, seed=seed)
        out.append({"seed": int(seed), "removed": 1 - g2.n_edges / graph.n_edges,
                    "knn_overlap": inst.knn_overlap, "d_avg": inst.d_avg,
                    "d_wc": inst.d_wc, "map_original": base_eval.map,
                    "map_perturbed": evaluate(g2, other, rows=rows, progress=False).map})
    return pd.DataFrame(out)


# -- precision through the low-precision core ---------------------------------------------------

def quantize_coordinates(embedding: HyperbolicEmbedding, fmt: Any, rounding: str = "nearest",
                         generator: Any = None, manifold: str | Manifold = "poincare") -> HyperbolicEmbedding:
    """Round an embedding's float64 coordinates onto a number format of :mod:`embstab.lowprec`.

    Points pushed onto or outside the unit ball stay there, so their distances come out
    inf/NaN and :func:`evaluate` counts them as bad pairs — exactly the failure too few bits
    cause.

    Parameters
    ----------
    embedding : HyperbolicEmbedding
        Exported to float64 (without the boundary check) in ``manifold`` coordinates.
    fmt : embstab.lowprec.Format or str
        e.g. ``FixedFormat(16, 14)``, ``FloatFormat(5, 10)`` or ``"bf16"``.
    rounding : str, default "nearest"
        A rounding mode of :func:`embstab.lowprec.quantize` (e.g. "stochastic").
    generator : torch.Generator or int, optional
        Seed for stochastic rounding.
    manifold : {"poincare", "lorentz"} or Manifold, default "poincare"
        The model whose coordinates are quantized.

    Returns
    -------
    HyperbolicEmbedding
        The rounded coordinates in that model; ``metadata["format"]`` names the format.
    """
    from embstab.lowprec import quantize  # torch is loaded only when a format is used

    man = get_manifold(manifold)
    x = man.from_poincare(embedding.poincare64(check=False))
    q = np.asarray(quantize(x, fmt, rounding=rounding, generator=generator), dtype=np.float64)
    # the container rejects NaN/inf; a clamped point at ‖x‖ ≥ 1 is kept (it evaluates as bad)
    q = np.nan_to_num(q, nan=0.0, posinf=1.0, neginf=-1.0) if man.extra == 0 else q
    return HyperbolicEmbedding(q, manifold=man, scale=embedding.scale, nodes=embedding.nodes,
                               metadata={**embedding.metadata, "format": str(fmt)})


def format_resolution_bits(fmt: Any) -> int:
    """Bits of resolution just below 1 (the spacing there is 2^-bits) of a lowprec format.

    Parameters
    ----------
    fmt : embstab.lowprec.Format or str
        A fixed-point or floating-point format (or its name).

    Returns
    -------
    int
    """
    from embstab.lowprec import FixedFormat, FloatFormat, get_format

    f = get_format(fmt) if isinstance(fmt, str) else fmt
    if isinstance(f, FixedFormat):
        return int(f.frac_bits)
    if isinstance(f, FloatFormat):
        return int(f.man_bits) + 1  # values in [1/2, 1) are spaced 2^-(man_bits+1)
    raise HyperbolicError(f"cannot tell the resolution of format {fmt!r}; use FixedFormat or "
                          "FloatFormat")


def bits_sweep(graph: Any, formats: Sequence[Any], *, dim: int = 2,
               root: Any = "max_degree", rounding: str = "nearest",
               rows: int | None = None, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Bits vs MAP/distortion: per format, embed with the τ it can hold, quantize, evaluate.

    For a format with b bits of resolution below 1, τ follows the bit-budget rule for b bits
    (the deepest node at 1/1.3 of the representable radius); the construction runs at a
    working precision of max(64, b + 16) bits, is exported to float64 and rounded through
    :func:`quantize_coordinates`.

    Parameters
    ----------
    graph : Graph or networkx.Graph
        A connected graph.
    formats : sequence of embstab.lowprec.Format or str
        Fixed- or floating-point formats.
    dim : int, default 2
        Dimension of the construction.
    root : {"max_degree", "center", "first"} or node label, default "max_degree"
        Root of the BFS tree.
    rounding : str, default "nearest"
        Rounding mode of :func:`embstab.lowprec.quantize`.
    rows : int, optional
        Evaluate a random sample of this many rows (default all).
    seed : int, default 0
        Seed of stochastic rounding and of the row sample.
    progress : bool, default True
        tqdm bar over the formats.

    Returns
    -------
    pandas.DataFrame
        One row per format: ``format``, ``bits`` (total bits per coordinate),
        ``resolution_bits``, ``memory`` (bits per node = dim·bits), ``tau``, ``map``,
        ``d_avg``, ``d_wc``, ``bad``.
    """
    from embstab.compress.memory import memory_bits
    from embstab.lowprec import get_format

    graph = as_graph(graph)
    out = []
    for fmt in tqdm(list(formats), desc="bits sweep", disable=not progress):
        f = get_format(fmt) if isinstance(fmt, str) else fmt
        res = format_resolution_bits(f)
        if res > 50:
            raise HyperbolicError(f"{f} resolves {res} bits below 1, more than float64 carries")
        emb = embed_combinatorial(graph, dim=dim, bits=res, precision_bits=max(64, res + 16),
                                  root=root)
        q = quantize_coordinates(emb, f, rounding=rounding, generator=seed)
        m = evaluate(graph, q, rows=rows, seed=seed, progress=False)
        total = int(getattr(f, "bits", getattr(f, "word_bits", 0)) or 0)
        out.append({"format": str(f), "bits": total, "resolution_bits": res,
                    "memory": memory_bits(dim, total) if total else 0, "tau": emb.scale, "map": m.map,
                    "d_avg": m.d_avg, "d_wc": m.d_wc, "bad": m.bad})
    return pd.DataFrame(out)

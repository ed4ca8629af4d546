"""Precision and stability of hyperbolic embeddings.

* **Bits vs quality** — :func:`quantize_coordinates` rounds float64 coordinates through the
  low-precision core (:func:`embstab.lowprec.quantize`); :func:`bits_sweep` builds, for each
  number format, the combinatorial embedding whose τ that format can hold, quantizes it and
  evaluates MAP and distortion.
* **Instability** — between two embeddings of the same nodes (e.g. of a graph and of a copy with
  5% of its edges removed): hyperbolic k-NN overlap and the distortion between their decoded
  distance matrices, row by row.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import GraphError, HyperbolicError
from embstab.hyperbolic.graph import Graph
from embstab.hyperbolic.metrics import evaluate, row_distortion, select_rows

__all__ = ["perturb_graph", "knn_overlap", "distance_distortion", "embedding_instability",
           "stability_study", "quantize_coordinates", "format_resolution_bits", "bits_sweep"]


# -- perturbation -------------------------------------------------------------------------------

def perturb_graph(graph: Graph, remove: float = 0.05, seed: int = 0,
                  keep_connected: bool = True) -> Graph:
    """A copy of ``graph`` with a random fraction ``remove`` of its edges deleted.

    With ``keep_connected`` (default), removed edges that a spanning forest of the remainder
    needs are put back, so the perturbed graph has the same components (on a tree nothing can
    be removed; :class:`GraphError` says so). The realised fraction is
    ``1 - new.n_edges / graph.n_edges``.
    """
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


# -- instability between two embeddings ---------------------------------------------------------

def _check_pair(a: HyperbolicEmbedding, b: HyperbolicEmbedding) -> None:
    if len(a) != len(b):
        raise HyperbolicError(f"the embeddings have {len(a)} and {len(b)} points")
    if [str(x) for x in a.nodes.tolist()] != [str(x) for x in b.nodes.tolist()]:
        raise HyperbolicError("the embeddings list different nodes (or in another order)")


def _knn(d: np.ndarray, self_index: int, k: int) -> np.ndarray:
    """k nearest by decoded distance; distances equal to 9 decimals tie and the lower node id
    wins, so two evaluations of one geometry (e.g. multiprecision vs float64) agree."""
    d = np.round(np.where(np.isnan(d), np.inf, d), 9)
    d[self_index] = np.inf
    return np.lexsort((np.arange(len(d)), d))[:k]


def knn_overlap(a: HyperbolicEmbedding, b: HyperbolicEmbedding, k: int = 10,
                rows: int | Sequence[int] | None = None, seed: int = 0) -> float:
    """Mean |kNN_a(i) ∩ kNN_b(i)|/k over rows, by decoded hyperbolic distance (1 = stable)."""
    return embedding_instability(a, b, k=k, rows=rows, seed=seed)["knn_overlap"]


def distance_distortion(a: HyperbolicEmbedding, b: HyperbolicEmbedding,
                        rows: int | Sequence[int] | None = None, seed: int = 0) -> dict:
    """D_avg and D_wc of b's decoded distances measured against a's (a is the reference)."""
    out = embedding_instability(a, b, k=1, rows=rows, seed=seed)
    return {key: out[key] for key in ("d_avg", "d_wc", "bad")}


def embedding_instability(a: HyperbolicEmbedding, b: HyperbolicEmbedding, k: int = 10,
                          rows: int | Sequence[int] | None = None, seed: int = 0,
                          progress: bool = False) -> dict[str, float]:
    """k-NN overlap and distance distortion between two embeddings of the same nodes.

    Parameters
    ----------
    a, b : HyperbolicEmbedding
        Same nodes in the same order (any models, precisions and scales).
    k : int, default 10
        Neighbours per node.
    rows : int or sequence of int, optional
        All rows, a random sample of this many, or these rows.
    seed : int, default 0
        Seed of the row sample.
    progress : bool, default False
        tqdm bar.

    Returns
    -------
    dict
        ``knn_overlap`` (0–1), ``d_avg``, ``d_wc`` and ``bad`` (pairs with an unusable distance).
    """
    _check_pair(a, b)
    n = len(a)
    if not 1 <= k < n:
        raise HyperbolicError(f"k must be between 1 and n-1 = {n - 1}, got {k}")
    sel = select_rows(n, rows, seed)
    overlaps, avgs = [], []
    expand = contract = 0.0
    bad = 0
    for i in tqdm(sel, desc="instability", disable=not progress, mininterval=1):
        da, db = a.distances_from(int(i)), b.distances_from(int(i))
        na, nb = _knn(da, int(i), k), _knn(db, int(i), k)
        overlaps.append(len(np.intersect1d(na, nb)) / k)
        da = da.copy()
        da[int(i)] = 0.0  # the reference's zero marks the self pair, skipped below
        mean_rel, ex, co, used, nbad = row_distortion(da, db)
        bad += nbad
        if used:
            avgs.append(mean_rel)
            expand, contract = max(expand, ex), max(contract, co)
    return {"knn_overlap": float(np.mean(overlaps)), "d_avg": float(np.mean(avgs)),
            "d_wc": float(expand * contract), "bad": int(bad)}


def stability_study(graph: Graph, embed: Callable[[Graph], HyperbolicEmbedding], *,
                    remove: float = 0.05, seeds: Iterable[int] = (0, 1, 2), k: int = 10,
                    rows: int | None = None, progress: bool = True) -> pd.DataFrame:
    """Instability of an embedding method under edge removal: one tidy row per seed.

    For each seed, ``remove`` of the edges are dropped (:func:`perturb_graph`), both graphs are
    embedded with ``embed`` and compared by :func:`embedding_instability`; each embedding is also
    scored against its own graph with :func:`evaluate`.

    Returns
    -------
    pandas.DataFrame
        Columns ``seed``, ``removed`` (realised fraction), ``knn_overlap``, ``d_avg``, ``d_wc``,
        ``map_original``, ``map_perturbed``.
    """
    base = embed(graph)
    base_eval = evaluate(graph, base, rows=rows, progress=False)
    out = []
    for seed in tqdm(list(seeds), desc="stability", disable=not progress):
        g2 = perturb_graph(graph, remove=remove, seed=seed)
        other = embed(g2)
        inst = embedding_instability(base, other, k=k, rows=rows, seed=seed)
        out.append({"seed": int(seed), "removed": 1 - g2.n_edges / graph.n_edges,
                    "knn_overlap": inst["knn_overlap"], "d_avg": inst["d_avg"],
                    "d_wc": inst["d_wc"], "map_original": base_eval["map"],
                    "map_perturbed": evaluate(g2, other, rows=rows, progress=False)["map"]})
    return pd.DataFrame(out)


# -- precision through the low-precision core ---------------------------------------------------

def quantize_coordinates(embedding: HyperbolicEmbedding, fmt: Any, rounding: str = "nearest",
                       generator: Any = None, model: str = "poincare") -> HyperbolicEmbedding:
    """Round an embedding's float64 coordinates onto a number format of :mod:`embstab.lowprec`.

    Points pushed onto or outside the unit ball stay there, so their distances come out
    inf/NaN and :func:`evaluate` counts them as bad pairs — exactly the failure too few bits
    cause.

    Parameters
    ----------
    embedding : HyperbolicEmbedding
        Exported to float64 (without the boundary check) in ``model`` coordinates.
    fmt : embstab.lowprec.Format or str
        e.g. ``FixedFormat(16, 14)``, ``FloatFormat(5, 10)`` or ``"bf16"``.
    rounding : str, default "nearest"
        A rounding mode of :func:`embstab.lowprec.quantize` (e.g. "stochastic").
    generator : torch.Generator or int, optional
        Seed for stochastic rounding.
    model : {"poincare", "hyperboloid"}, default "poincare"
        Coordinates to quantize.
    """
    from embstab.lowprec import quantize

    x = (embedding.poincare64(check=False) if model == "poincare"
         else embedding.hyperboloid64(check=False))
    q = np.asarray(quantize(x, fmt, rounding=rounding, generator=generator), dtype=np.float64)
    if model == "poincare":
        return HyperbolicEmbedding(_finite_inside(q), scale=embedding.scale,
                                   nodes=embedding.nodes,
                                   metadata={**embedding.metadata, "format": str(fmt)})
    return HyperbolicEmbedding(q, model="hyperboloid", scale=embedding.scale,
                               nodes=embedding.nodes,
                               metadata={**embedding.metadata, "format": str(fmt)})


def _finite_inside(q: np.ndarray) -> np.ndarray:
    # the container rejects NaN/inf; a clamped point at ‖x‖ ≥ 1 is kept (it evaluates as bad)
    return np.nan_to_num(q, nan=0.0, posinf=1.0, neginf=-1.0)


def format_resolution_bits(fmt: Any) -> int:
    """Bits of resolution just below 1 (the spacing there is 2^-bits) of a lowprec format."""
    from embstab.lowprec import FixedFormat, FloatFormat, get_format

    f = get_format(fmt) if isinstance(fmt, str) else fmt
    if isinstance(f, FixedFormat):
        return int(f.frac_bits)
    if isinstance(f, FloatFormat):
        return int(f.man_bits) + 1  # values in [1/2, 1) are spaced 2^-(man_bits+1)
    raise HyperbolicError(f"cannot tell the resolution of format {fmt!r}; use FixedFormat or "
                          "FloatFormat")


def bits_sweep(graph: Graph, formats: Sequence[Any], *, dim: int = 2,
               root: Any = "max_degree", rounding: str = "nearest",
               rows: int | None = None, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """Bits vs MAP/distortion: per format, embed with the τ it can hold, quantize, evaluate.

    For a format with b bits of resolution below 1, τ follows the bit-budget rule for b bits
    (the deepest node at 1/1.3 of the representable radius); the construction runs at a
    working precision of max(64, b + 16) bits, is exported to float64 and rounded through
    :func:`quantize_coordinates`.

    Returns
    -------
    pandas.DataFrame
        One row per format: ``format``, ``bits`` (total bits per coordinate),
        ``resolution_bits``, ``memory`` (bits per node = dim·bits), ``tau``, ``map``,
        ``d_avg``, ``d_wc``, ``bad``.
    """
    from embstab.hyperbolic.combinatorial import embed_combinatorial
    from embstab.lowprec import get_format

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
                    "memory": dim * total, "tau": emb.scale, "map": m["map"],
                    "d_avg": m["d_avg"], "d_wc": m["d_wc"], "bad": m["bad"]})
    return pd.DataFrame(out)

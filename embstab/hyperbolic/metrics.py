"""Graph-reconstruction metrics of an embedding: MAP, average and worst-case distortion.

Everything is streamed row by row: for each evaluated node a, the graph distances from a
(BFS/Dijkstra) and the decoded embedding distances from a (at the embedding's working
precision) are computed, scored and dropped, so memory is O(n). Rows may be sampled; MAP and
D_avg are then unbiased estimates and D_wc a lower bound.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import GraphError
from embstab.hyperbolic.graph import Graph

__all__ = ["evaluate", "average_precision", "row_distortion", "select_rows", "aligned_order",
           "snap", "TIE_BITS"]

#: Rows whose graph distances are computed in one scipy call.
_CHUNK = 64


#: Decoded distances are compared after rounding to this many mantissa bits (~1e-12 relative),
#: so pairs that are equal in exact arithmetic tie however the evaluation path rounded them.
TIE_BITS = 40


def snap(d: np.ndarray, bits: int | None = TIE_BITS) -> np.ndarray:
    """Round positive floats to ``bits`` mantissa bits (relative grid); NaN becomes +inf."""
    d = np.where(np.isnan(d), np.inf, np.asarray(d, dtype=np.float64))
    if bits is None:
        return d
    m, e = np.frexp(d)
    with np.errstate(invalid="ignore"):
        out = np.ldexp(np.round(m * 2.0 ** bits) / 2.0 ** bits, e)
    return np.where(np.isfinite(d), out, d)


def average_precision(dist: np.ndarray, self_index: int, neighbors: np.ndarray,
                      ties: str = "pessimistic", tie_bits: int | None = TIE_BITS) -> float:
    """AP of one node: how well the ranking by ``dist`` puts its graph neighbours first.

    AP = mean over neighbours b of |neighbours ranked ≤ b| / rank(b), self excluded. Ties
    (distances equal to ``tie_bits`` mantissa bits) are resolved by ``ties``:

    * ``"pessimistic"`` (default): every node tied with b counts as ranked before
      it — the ball form |N(a) ∩ ball| / |ball| with ball = {v ≠ a: d̂(a,v) ≤ d̂(a,b)};
    * ``"optimistic"``: only strictly closer nodes count before b;
    * ``"order"``: ties broken by node id, as the original code's ``argsort`` did.

    NaN distances rank last.
    """
    d = snap(dist, tie_bits)
    if ties == "order":
        keep = np.ones(len(d), dtype=bool)
        keep[self_index] = False
        ids = np.flatnonzero(keep)
        order = ids[np.lexsort((ids, d[ids]))]
        is_nb = np.zeros(len(d), dtype=bool)
        is_nb[neighbors] = True
        hit = is_nb[order]
        ranks = np.flatnonzero(hit) + 1
        return float(np.mean(np.arange(1, len(ranks) + 1) / ranks))
    others = np.sort(np.delete(d, self_index))
    dn = np.sort(d[neighbors])
    if ties == "pessimistic":
        ball = np.searchsorted(others, dn, side="right")
        hits = np.searchsorted(dn, dn, side="right")
    elif ties == "optimistic":
        ball = np.searchsorted(others, dn, side="left") + 1
        hits = np.searchsorted(dn, dn, side="left") + 1
    else:
        raise GraphError(f"ties must be 'pessimistic', 'optimistic' or 'order', got {ties!r}")
    return float(np.mean(hits / ball))


def row_distortion(d_true: np.ndarray, d_hat: np.ndarray) -> tuple[float, float, float, int, int]:
    """Distortion terms of one row: (mean |d̂−d|/d, max d̂/d, max d/d̂, n_used, n_bad).

    Pairs with d = 0 (self) or d = inf (other component) are skipped; pairs with d̂ ∈ {0, NaN,
    ±inf} are skipped and counted as bad.
    """
    ok_true = np.isfinite(d_true) & (d_true > 0)
    good = ok_true & np.isfinite(d_hat) & (d_hat > 0)
    n_bad = int(np.count_nonzero(ok_true & ~good))
    if not good.any():
        return np.nan, np.nan, np.nan, 0, n_bad
    r = d_hat[good] / d_true[good]
    return float(np.mean(np.abs(r - 1))), float(r.max()), float((1 / r).max()), int(r.size), n_bad


def select_rows(n: int, rows: int | Sequence[int] | None, seed: int = 0) -> np.ndarray:
    """All rows (``None``), ``rows`` distinct random rows (an int; local RNG), or given ids."""
    if rows is None:
        return np.arange(n)
    if isinstance(rows, (int, np.integer)):
        if rows <= 0:
            raise GraphError(f"rows must be positive, got {rows}")
        if rows >= n:
            return np.arange(n)
        return np.sort(np.random.default_rng(seed).choice(n, size=int(rows), replace=False))
    r = np.asarray(rows, dtype=np.int64)
    if r.size and (r.min() < 0 or r.max() >= n):
        raise GraphError(f"row ids must be in [0, {n}), got range [{r.min()}, {r.max()}]")
    return r


def aligned_order(graph: Graph, embedding: HyperbolicEmbedding) -> np.ndarray | None:
    """Permutation mapping graph node i to its embedding row (None when already aligned)."""
    if len(embedding) != graph.n_nodes:
        raise GraphError(f"the embedding has {len(embedding)} points but the graph has "
                         f"{graph.n_nodes} nodes")
    glab = [str(x) for x in graph.labels.tolist()]
    elab = [str(x) for x in embedding.nodes.tolist()]
    if glab == elab:
        return None
    pos = {lab: i for i, lab in enumerate(elab)}
    missing = [lab for lab in glab if lab not in pos]
    if missing:
        raise GraphError(f"{len(missing)} graph nodes have no embedding row (e.g. "
                         f"{missing[0]!r})")
    return np.array([pos[lab] for lab in glab], dtype=np.int64)


def evaluate(graph: Graph, embedding: HyperbolicEmbedding,
             rows: int | Sequence[int] | None = None, *, seed: int = 0,
             ties: str = "pessimistic", tie_bits: int | None = TIE_BITS,
             progress: bool = True) -> dict[str, Any]:
    """MAP, average distortion and global worst-case distortion of an embedding of ``graph``.

    Parameters
    ----------
    graph : Graph
        The **original** graph: its neighbours define MAP, its shortest paths the distortion
        (an embedding of a BFS tree is still scored against the graph).
    embedding : HyperbolicEmbedding
        One point per graph node (matched by label).
    rows : int or sequence of int, optional
        Evaluate all rows (default), a random sample of this many rows, or these node ids.
    seed : int, default 0
        Seed of the row sample.
    ties : {"pessimistic", "optimistic", "order"}, default "pessimistic"
        MAP tie rule, see :func:`average_precision`.
    tie_bits : int or None, default 40
        Distances equal to this many mantissa bits tie (None: exact float equality).
    progress : bool, default True
        Show a tqdm bar.

    Returns
    -------
    dict
        ``map`` (mean AP over evaluated non-isolated nodes), ``d_avg`` (mean over rows of the
        row mean of |d̂−d|/d), ``d_wc`` (max d̂/d · max d/d̂, global over evaluated pairs),
        ``bad`` (ordered pairs with d̂ ∈ {0, NaN, inf}), ``rows`` (rows evaluated),
        ``isolated`` (evaluated nodes without neighbours), ``sampled`` (bool), ``map_se``
        (standard error of the MAP estimate) and ``map_by_ties`` (MAP under each tie rule;
        the original code's numbers correspond to ``"order"``).
    """
    n = graph.n_nodes
    perm = aligned_order(graph, embedding)
    sel = select_rows(n, rows, seed)
    rules = ("pessimistic", "optimistic", "order")
    if ties not in rules:
        raise GraphError(f"ties must be one of {rules}, got {ties!r}")
    aps: dict[str, list] = {r: [] for r in rules}
    avgs = []
    expand = contract = 0.0
    bad = isolated = 0
    bar = tqdm(total=len(sel), desc="evaluate", disable=not progress, mininterval=1)
    for start in range(0, len(sel), _CHUNK):
        chunk = sel[start:start + _CHUNK]
        dg = graph.shortest_paths(chunk)
        for a, d_true in zip(chunk, dg):
            a = int(a)
            if perm is None:
                d_hat = embedding.distances_from(a)
            else:
                d_hat = embedding.distances_from(int(perm[a]), perm)
            nb = graph.neighbors(a)
            if len(nb):
                for r in rules:  # cheap next to the distances, so report every rule
                    aps[r].append(average_precision(d_hat, a, nb, r, tie_bits))
            else:
                isolated += 1
            mean_rel, ex, co, used, nbad = row_distortion(d_true, d_hat)
            bad += nbad
            if used:
                avgs.append(mean_rel)
                expand, contract = max(expand, ex), max(contract, co)
            bar.update(1)
    bar.close()
    aps_a = np.asarray(aps[ties])
    return {
        "map": float(aps_a.mean()) if len(aps_a) else float("nan"),
        "d_avg": float(np.mean(avgs)) if avgs else float("nan"),
        "d_wc": float(expand * contract) if avgs else float("nan"),
        "bad": int(bad),
        "rows": int(len(sel)),
        "isolated": int(isolated),
        "sampled": bool(len(sel) < n),
        "map_se": float(aps_a.std(ddof=1) / np.sqrt(len(aps_a))) if len(aps_a) > 1 else 0.0,
        "map_by_ties": {r: float(np.mean(v)) if v else float("nan") for r, v in aps.items()},
    }

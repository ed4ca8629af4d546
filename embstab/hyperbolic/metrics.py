"""Graph-reconstruction metrics of an embedding: MAP, average and worst-case distortion.

Everything is streamed row by row: for each evaluated node a, the graph distances from a
(BFS/Dijkstra) and the decoded embedding distances from a (at the embedding's working
precision) are computed, scored and dropped, so memory is O(n). Rows may be sampled; MAP and
D_avg are then unbiased estimates and D_wc a lower bound.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from embstab.errors import lookup
from embstab.hyperbolic.base import ManifoldEmbedding
from embstab.hyperbolic.errors import GraphError
from embstab.hyperbolic.graph import Graph, as_graph
from embstab.measures.hyperbolic import (TIE_BITS, TIE_RULES, average_precision, row_distortion,
                                         select_rows, snap)

# the ranking and distortion primitives live with the measures; they are re-exported here for
# the graph evaluation's readers
__all__ = ["GraphEvaluation", "evaluate", "average_precision", "row_distortion", "select_rows",
           "aligned_order", "snap", "TIE_BITS"]

#: Rows whose graph distances are computed in one scipy call.
_CHUNK = 64


@dataclass(frozen=True)
class GraphEvaluation:
    """How well an embedding reconstructs a graph (see :func:`evaluate`).

    Attributes
    ----------
    map : float
        Mean AP over evaluated non-isolated nodes, under the requested tie rule.
    d_avg : float
        Mean over rows of the row mean of ``|d̂−d|/d``.
    d_wc : float
        max d̂/d · max d/d̂, global over the evaluated pairs.
    bad : int
        Ordered pairs with d̂ ∈ {0, NaN, inf}.
    rows : int
        Rows evaluated.
    isolated : int
        Evaluated nodes without neighbours (left out of MAP).
    sampled : bool
        Whether the rows are a sample (MAP and d_avg are then estimates, d_wc a lower bound).
    map_se : float
        Standard error of the MAP estimate.
    map_by_ties : dict
        MAP under each tie rule (the original code's numbers correspond to ``"order"``).
    """

    map: float
    d_avg: float
    d_wc: float
    bad: int
    rows: int
    isolated: int
    sampled: bool
    map_se: float
    map_by_ties: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON-ready).

        Returns
        -------
        dict
        """
        return asdict(self)

    def to_frame(self) -> pd.DataFrame:
        """One row with a column per scalar field and one ``map_<rule>`` column per tie rule.

        Returns
        -------
        pandas.DataFrame
        """
        flat = {k: v for k, v in self.to_dict().items() if k != "map_by_ties"}
        flat.update({f"map_{rule}": v for rule, v in self.map_by_ties.items()})
        return pd.DataFrame([flat])


def aligned_order(graph: Graph, embedding: ManifoldEmbedding) -> np.ndarray | None:
    """Permutation mapping graph node i to its embedding row (None when already aligned).

    Parameters
    ----------
    graph : Graph
        The graph.
    embedding : ManifoldEmbedding
        One point per graph node, labelled like the graph's nodes.

    Returns
    -------
    numpy.ndarray or None

    Raises
    ------
    GraphError
        If the sizes differ or a graph node has no embedding row.
    """
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


def evaluate(graph: Any, embedding: ManifoldEmbedding,
             rows: int | Sequence[int] | None = None, *, seed: int = 0,
             ties: str = "pessimistic", tie_bits: int | None = TIE_BITS,
             progress: bool = True) -> GraphEvaluation:
    """MAP, average distortion and global worst-case distortion of an embedding of ``graph``.

    Parameters
    ----------
    graph : Graph or networkx.Graph
        The **original** graph: its neighbours define MAP, its shortest paths the distortion
        (an embedding of a BFS tree is still scored against the graph).
    embedding : HyperbolicEmbedding or ProductEmbedding
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
    GraphEvaluation

    Raises
    ------
    GraphError
        If the embedding does not hold one point per graph node.
    UnknownNameError
        If ``ties`` is not a tie rule.
    """
    graph = as_graph(graph)
    ties = lookup(TIE_RULES, ties, "tie rule")
    n = graph.n_nodes
    perm = aligned_order(graph, embedding)
    sel = select_rows(n, rows, seed)
    rules = tuple(TIE_RULES)
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
    return GraphEvaluation(
        map=float(aps_a.mean()) if len(aps_a) else float("nan"),
        d_avg=float(np.mean(avgs)) if avgs else float("nan"),
        d_wc=float(expand * contract) if avgs else float("nan"),
        bad=int(bad),
        rows=int(len(sel)),
        isolated=int(isolated),
        sampled=bool(len(sel) < n),
        map_se=float(aps_a.std(ddof=1) / np.sqrt(len(aps_a))) if len(aps_a) > 1 else 0.0,
        map_by_ties={r: float(np.mean(v)) if v else float("nan") for r, v in aps.items()},
    )

"""Scores of a knowledge-graph model: all candidate answers of a query, filtered; single triples.

Queries are ``(h, r, ?)`` ("tail") and ``(?, r, t)`` ("head"). Filtered ranking removes every
known true answer (of the train, validation and test splits) except the query's own target, which
is what PyKEEN's filtered evaluator does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from embstab.kg.graph import KnowledgeGraph
from embstab.kg.training import check_model_fits

__all__ = ["as_model", "KnownAnswers", "score_queries", "score_triples", "top_k"]


def as_model(x: Any, graph: KnowledgeGraph) -> Any:
    """The PyKEEN model inside ``x`` (a KGTrainResult, a QuantizedKGModel or a model), checked to fit ``graph``.

    The model is put in evaluation mode.

    Parameters
    ----------
    x : KGTrainResult, QuantizedKGModel or pykeen.models.Model
    graph : KnowledgeGraph
        The graph the model must embed.

    Returns
    -------
    pykeen.models.Model

    Raises
    ------
    TypeError
        If ``x`` holds no KG model.
    ShapeError
        If the model's entity or relation count differs from the graph's.
    """
    model = x.model if hasattr(x, "model") and not hasattr(x, "score_hrt") else x
    if not hasattr(model, "score_hrt"):
        raise TypeError(f"expected a trained KG model (KGTrainResult, QuantizedKGModel or a PyKEEN model), "
                        f"got {type(x).__name__}")
    check_model_fits(model, graph)
    model.eval()
    return model


class KnownAnswers:
    """Every known answer of each ``(h, r)`` tail query and ``(r, t)`` head query of a graph."""

    def __init__(self, graph: KnowledgeGraph) -> None:
        known = graph.known_triples()
        self.n_entities = graph.n_entities
        self._tails = self._group(known[:, 0] * graph.n_relations + known[:, 1], known[:, 2])
        self._heads = self._group(known[:, 1] * graph.n_entities + known[:, 2], known[:, 0])
        self._n_relations = graph.n_relations

    @staticmethod
    def _group(keys: np.ndarray, values: np.ndarray) -> dict[int, np.ndarray]:
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        cuts = np.flatnonzero(np.diff(keys)) + 1
        return {int(k[0]): v for k, v in zip(np.split(keys, cuts), np.split(values, cuts))}

    def answers(self, triple: np.ndarray, side: str) -> np.ndarray:
        """Known entities answering the query of ``triple`` on ``side`` ("tail" or "head").

        Parameters
        ----------
        triple : array_like of 3 ints
            ``(h, r, t)``; the tail query uses ``(h, r)``, the head query ``(r, t)``.
        side : {"tail", "head"}

        Returns
        -------
        numpy.ndarray
            Entity ids of every known triple completing the query (the target included); empty if none.
        """
        h, r, t = (int(v) for v in triple)
        if side == "tail":
            return self._tails.get(h * self._n_relations + r, np.empty(0, np.int64))
        return self._heads.get(r * self.n_entities + t, np.empty(0, np.int64))

    def mask(self, triples: np.ndarray, side: str) -> np.ndarray:
        """Boolean (n, n_entities): True where an entity is filtered out (known, not the target).

        Parameters
        ----------
        triples : numpy.ndarray of shape (n, 3)
            Query triples; the target is the tail (``side="tail"``) or head.
        side : {"tail", "head"}

        Returns
        -------
        numpy.ndarray
            bool array of shape (n, n_entities).
        """
        out = np.zeros((len(triples), self.n_entities), dtype=bool)
        target_col = 2 if side == "tail" else 0
        for i, tr in enumerate(triples):
            out[i, self.answers(tr, side)] = True
            out[i, tr[target_col]] = False
        return out

    def is_known(self, triples: np.ndarray) -> np.ndarray:
        """Whether each ``(h, r, t)`` row is a known triple.

        Parameters
        ----------
        triples : numpy.ndarray of shape (n, 3)

        Returns
        -------
        numpy.ndarray
            bool array of shape (n,).
        """
        return np.array([t in self.answers(np.array([h, r, t]), "tail") for h, r, t in triples], dtype=bool)


def score_queries(model: Any, triples: np.ndarray, side: str) -> np.ndarray:
    """Scores (n, n_entities) of every entity as the answer of each triple's query on ``side``.

    Parameters
    ----------
    model : pykeen.models.Model
        A model in evaluation mode (see :func:`as_model`).
    triples : numpy.ndarray of shape (n, 3)
        Query triples; ``(h, r)`` is the tail query, ``(r, t)`` the head query.
    side : {"tail", "head"}

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n, n_entities); larger is better.
    """
    import torch

    batch = torch.as_tensor(np.array(triples, dtype=np.int64), dtype=torch.long)
    with torch.no_grad():
        s = model.score_t(batch[:, :2]) if side == "tail" else model.score_h(batch[:, 1:])
    return s.detach().cpu().numpy().astype(np.float64)


def score_triples(model: Any, triples: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """The model's score of each ``(h, r, t)`` row, shape (n,).

    Parameters
    ----------
    model : pykeen.models.Model
    triples : numpy.ndarray of shape (n, 3)
    batch_size : int
        Triples scored at once.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n,); empty when ``triples`` is.
    """
    import torch

    out = []
    with torch.no_grad():
        for s in range(0, len(triples), batch_size):
            batch = torch.as_tensor(np.array(triples[s:s + batch_size], dtype=np.int64), dtype=torch.long)
            out.append(model.score_hrt(batch).reshape(-1).detach().cpu().numpy().astype(np.float64))
    return np.concatenate(out) if out else np.empty(0)


def top_k(scores: np.ndarray, filtered: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best candidates of each row, best first; filtered entries excluded.

    Candidates whose scores are equal as computed (in the model's float32) go to the lower entity
    id (a stable sort), so the answer is deterministic even for quantized models whose scores tie;
    scores that would tie in exact arithmetic but differ in their float32 rounding are ordered by
    that rounding. Rows with fewer than ``k`` candidates are padded with -1.

    Parameters
    ----------
    scores : numpy.ndarray of shape (n, n_entities)
    filtered : numpy.ndarray of bool, shape (n, n_entities)
        True for entries never to be picked (see :meth:`KnownAnswers.mask`).
    k : int

    Returns
    -------
    numpy.ndarray
        int array of shape (n, min(k, n_entities)): entity ids, -1 for padding.
    """
    s = np.where(filtered, -np.inf, scores)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    picked_filtered = np.take_along_axis(filtered, order, axis=1)
    return np.where(picked_filtered, -1, order)

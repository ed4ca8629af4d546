"""Downstream disagreement of two knowledge-graph models: link prediction and triple classification.

**Link prediction.** Each test triple ``(h, r, t)`` asks two queries, ``(h, r, ?)`` and ``(?, r, t)``.
A model's answer is its best-scoring entity after filtering (every known true answer except the
target is removed; equal float32 scores go to the lower entity id). Disagreement is the percentage of queries whose
answers differ between the two models; the top-k overlap is the mean share of each query's ``k``
best answers that both models list (over ``min(k, candidates)`` when a query has fewer).

**Triple classification.** One negative per validation and test triple, made by replacing its head
or tail (a fair coin) with a uniformly drawn entity that forms no known triple. Each model decides
"true" when its score reaches the threshold of the triple's relation, fitted on validation to
maximise accuracy (relations without validation triples use one threshold fitted on all of
validation). Disagreement is the percentage of test decisions (positives and the same negatives
for both models) that differ.

**Intervals.** Either disagreement carries its sampling interval over the test queries or
decisions (``disagreement_interval``: exact Clopper–Pearson at 95 %, the one function
:func:`embstab.downstream.intervals.disagreement_interval` every disagreement uses). The head and
tail queries of one triple are not independent, so the interval of link prediction is a little
narrow.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from embstab._threads import torch_threads
from embstab.downstream.intervals import INTERVAL_LEVEL, disagreement_interval
from embstab.errors import ConfigError, EmbstabError, lookup
from embstab.kg import KG_TASKS
from embstab.kg.graph import KnowledgeGraph
from embstab.kg.scoring import KnownAnswers, as_model, score_queries, score_triples, top_k
from embstab.kg.training import LinkPredictionMetrics, evaluate
from embstab.pair import MISSING, unpack_pair

__all__ = ["KG_TASKS", "LinkPredictionDisagreement", "TripleClassificationDisagreement", "kg_disagreement",
           "link_prediction_disagreement", "triple_classification_disagreement", "corrupt", "fit_thresholds",
           "query_answers", "random_ranking_mrr"]


@dataclass
class LinkPredictionDisagreement:
    """How many filtered link-prediction answers differ between the old and the new model.

    Attributes
    ----------
    disagreement : float
        Percent of queries (head and tail) whose filtered top-1 answer differs.
    top_k_overlap : float
        Mean share, in [0, 1], of each query's ``k`` best answers that both models list.
    k : int
    metrics_old, metrics_new : LinkPredictionMetrics
        Each model's filtered MRR and Hits@1/3/10 on the same split (PyKEEN's evaluator).
    n_queries : int
    graph, split : str
    settings : dict
        ``batch_size`` and ``chance_mrr``: the filtered MRR, in [0, 1], of a uniformly random
        ranking of each query's candidates (:func:`random_ranking_mrr` of the candidate counts).
    answers_old, answers_new : numpy.ndarray, optional
        Each query's top-1 answer (tail queries first, then head queries), when kept.
    disagreement_interval : tuple of (float, float)
        The disagreement's 95 % sampling interval over the queries, ``(low, high)`` in percent
        (exact Clopper–Pearson); left out, it is computed from ``disagreement`` and ``n_queries``.
    """

    disagreement: float
    top_k_overlap: float
    k: int
    metrics_old: LinkPredictionMetrics
    metrics_new: LinkPredictionMetrics
    n_queries: int
    graph: str
    split: str
    settings: dict[str, Any] = field(default_factory=dict)
    answers_old: np.ndarray | None = field(default=None, repr=False)
    answers_new: np.ndarray | None = field(default=None, repr=False)
    disagreement_interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.disagreement_interval is None:
            self.disagreement_interval = _interval_of(self.disagreement, self.n_queries)

    def to_dict(self) -> dict[str, Any]:
        """A flat dict (metrics suffixed ``_old``/``_new``, answers left out) for a DataFrame row.

        Returns
        -------
        dict
            The task, disagreement and its interval (``disagreement_low``, ``disagreement_high``),
            overlap and query counts, each model's metrics, then the settings (a setting never
            overrides a field).
        """
        low, high = self.disagreement_interval  # type: ignore[misc]
        out: dict[str, Any] = {"task": "link_prediction", "disagreement": self.disagreement,
                               "disagreement_low": float(low), "disagreement_high": float(high),
                               "top_k_overlap": self.top_k_overlap, "k": self.k, "n_queries": self.n_queries,
                               "graph": self.graph, "split": self.split}
        for tag, m in (("old", self.metrics_old), ("new", self.metrics_new)):
            for key in ("mrr", "hits_at_1", "hits_at_3", "hits_at_10"):
                out[f"{key}_{tag}"] = getattr(m, key)
        for k, v in self.settings.items():
            out.setdefault(k, v)
        return out


@dataclass
class TripleClassificationDisagreement:
    """How many triple-classification decisions differ between the old and the new model.

    Attributes
    ----------
    disagreement : float
        Percent of test decisions (positives and negatives) that differ.
    accuracy_old, accuracy_new : float
        Test accuracy of each model, in percent.
    n_test : int
        Test decisions (positives plus negatives).
    graph : str
    settings : dict
        Negative seed, numbers of positives and negatives, validation accuracies.
    decisions_old, decisions_new : numpy.ndarray, optional
        Each model's test decisions (positives first, then negatives), when kept.
    disagreement_interval : tuple of (float, float)
        The disagreement's 95 % sampling interval over the test decisions, ``(low, high)`` in
        percent (exact Clopper–Pearson); left out, it is computed from ``disagreement`` and ``n_test``.
    """

    disagreement: float
    accuracy_old: float
    accuracy_new: float
    n_test: int
    graph: str
    settings: dict[str, Any] = field(default_factory=dict)
    decisions_old: np.ndarray | None = field(default=None, repr=False)
    decisions_new: np.ndarray | None = field(default=None, repr=False)
    disagreement_interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.disagreement_interval is None:
            self.disagreement_interval = _interval_of(self.disagreement, self.n_test)

    def to_dict(self) -> dict[str, Any]:
        """A flat dict (decisions left out) for a DataFrame row.

        Returns
        -------
        dict
            The task and fields (the interval as ``disagreement_low`` and ``disagreement_high``, after
            ``disagreement``), then the settings (a setting never overrides a field).
        """
        low, high = self.disagreement_interval  # type: ignore[misc]
        out: dict[str, Any] = {"task": "triple_classification"}
        for k, v in asdict(self).items():
            if k in ("settings", "decisions_old", "decisions_new", "disagreement_interval"):
                continue
            out[k] = v
            if k == "disagreement":
                out["disagreement_low"], out["disagreement_high"] = float(low), float(high)
        for k, v in self.settings.items():
            out.setdefault(k, v)
        return out


def _share(flipped: int, n: int) -> float:
    """``flipped`` of ``n`` items in percent (NaN without items)."""
    return float(100.0 * flipped / n) if n else float("nan")


def _interval_of(share: float, n: int) -> tuple[float, float]:
    """The 95 % interval of a disagreement of ``share`` percent of ``n`` items (NaN without items)."""
    n = int(n)
    return disagreement_interval(int(round(share * n / 100.0)), n) if n > 0 else (float("nan"), float("nan"))


def query_answers(model: Any, graph: KnowledgeGraph, triples: np.ndarray, side: str, k: int,
                  known: KnownAnswers | None = None) -> np.ndarray:
    """The filtered ``k`` best answers (n, k) of each triple's query on ``side`` ("tail"/"head").

    Parameters
    ----------
    model : pykeen.models.Model
    graph : KnowledgeGraph
        The graph whose known triples are filtered out (the query's own target is kept).
    triples : numpy.ndarray of shape (n, 3)
    side : {"tail", "head"}
    k : int
    known : KnownAnswers, optional
        The graph's known answers, when already built.

    Returns
    -------
    numpy.ndarray
        int array of shape (n, k), best first; -1 pads rows with fewer than ``k`` candidates.
    """
    known = known or KnownAnswers(graph)
    return top_k(score_queries(model, triples, side), known.mask(triples, side), k)


def random_ranking_mrr(candidates: Any) -> float:
    """Mean reciprocal rank of a uniformly random ranking, from each query's number of candidates.

    A query with ``c`` candidates (after filtering, the target included) puts the target at each
    rank 1..c with probability 1/c, so its expected reciprocal rank is the harmonic number
    H(c) = 1 + 1/2 + ... + 1/c divided by c; the MRR is the mean of H(c)/c over the queries.

    Parameters
    ----------
    candidates : array_like of int
        Candidates of each query, each at least 1.

    Returns
    -------
    float
        The MRR, in (0, 1].

    Raises
    ------
    ValueError
        If there are no queries or a query has fewer than one candidate.
    """
    c = np.asarray(candidates, dtype=np.int64).ravel()
    if c.size == 0 or c.min() < 1:
        raise ConfigError("random_ranking_mrr needs at least one query, each with at least one candidate")
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, int(c.max()) + 1))])
    return float(np.mean(harmonic[c] / c))


def link_prediction_disagreement(old: Any, new: Any = MISSING, graph: KnowledgeGraph = MISSING, *, split: str = "test",
                                 k: int = 10, batch_size: int = 256, keep_answers: bool = False,
                                 progress: bool = False) -> LinkPredictionDisagreement:
    """Share of filtered link-prediction answers that differ between an old and a new model of one graph.

    Symmetric in the two models but for the names of the result's fields.

    Parameters
    ----------
    old, new : KGTrainResult or QuantizedKGModel or pykeen.models.Model
        Models over ``graph``'s vocabulary (e.g. trained on two versions of it, or quantized);
        ``old`` may instead be an :class:`embstab.Pair` of both, with ``graph`` second.
    graph : KnowledgeGraph
        Whose ``split`` triples are the queries and whose three splits form the filter.
    split : {"test", "valid"}
    k : int
        Depth of the top-k overlap (10 by default).
    batch_size : int
        Queries scored at once.
    keep_answers : bool
        Store both models' top-1 answers in the result.
    progress : bool

    Returns
    -------
    LinkPredictionDisagreement

    Raises
    ------
    ShapeError
        If a model does not fit the graph (other entity or relation counts).
    """
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    old, new, (graph,) = unpack_pair(old, new, (graph,), (MISSING,))
    ma, mb = as_model(old, graph), as_model(new, graph)
    triples = graph.split(split)
    known = KnownAnswers(graph)
    top1: dict[str, list[np.ndarray]] = {"a": [], "b": []}
    overlaps: list[np.ndarray] = []
    candidates: list[np.ndarray] = []
    batches = [(side, s) for side in ("tail", "head") for s in range(0, len(triples), batch_size)]
    for side, s in tqdm(batches, desc="link prediction", unit="batch", disable=not progress):
        part = triples[s:s + batch_size]
        mask = known.mask(part, side)
        ta = top_k(score_queries(ma, part, side), mask, k)
        tb = top_k(score_queries(mb, part, side), mask, k)
        top1["a"].append(ta[:, 0])
        top1["b"].append(tb[:, 0])
        candidates.append((~mask).sum(axis=1))
        depth = np.minimum(k, candidates[-1])
        for i in range(len(part)):
            d = int(depth[i])
            overlaps.append(np.array(len(set(ta[i, :d].tolist()) & set(tb[i, :d].tolist())) / d))
    a, b = np.concatenate(top1["a"]), np.concatenate(top1["b"])
    flipped = int(np.sum(a != b))
    return LinkPredictionDisagreement(
        _share(flipped, len(a)), float(np.mean(overlaps)), int(k), evaluate(ma, graph, split, batch_size),
        evaluate(mb, graph, split, batch_size), int(len(a)), graph.name, split,
        {"batch_size": batch_size, "chance_mrr": random_ranking_mrr(np.concatenate(candidates)),
         "interval_level": INTERVAL_LEVEL},
        a if keep_answers else None, b if keep_answers else None)


def corrupt(graph: KnowledgeGraph, triples: np.ndarray, seed: int = 0,
            known: KnownAnswers | None = None) -> np.ndarray:
    """One negative per triple: its head or tail (a fair coin) replaced so that no known triple forms.

    When the chosen side has no such replacement, the other side is corrupted; a triple whose both
    sides are saturated (every entity forms a known triple) gets no negative, so the result may be
    shorter than ``triples``. Deterministic under ``seed``.

    Parameters
    ----------
    graph : KnowledgeGraph
    triples : numpy.ndarray of shape (n, 3)
        The positive triples.
    seed : int
    known : KnownAnswers, optional
        The graph's known answers, when already built.

    Returns
    -------
    numpy.ndarray
        int64 array of shape (m, 3), m <= n.
    """
    known = known or KnownAnswers(graph)
    rng = np.random.default_rng(seed)
    out = []
    everyone = np.arange(graph.n_entities)
    for tr in triples:
        first = "tail" if rng.random() < 0.5 else "head"
        for side in (first, "head" if first == "tail" else "tail"):
            taken = known.answers(tr, side)
            if len(taken) >= graph.n_entities:
                continue
            # rejection sampling is fast on sparse graphs; the explicit set guards dense ones
            for _ in range(20):
                e = int(rng.integers(graph.n_entities))
                if e not in taken:
                    break
            else:
                e = int(rng.choice(np.setdiff1d(everyone, taken)))
            neg = tr.copy()
            neg[2 if side == "tail" else 0] = e
            out.append(neg)
            break
    return np.array(out, dtype=np.int64).reshape(-1, 3)


def _best_threshold(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold θ maximising the accuracy of "true iff score ≥ θ"; ties go to the smallest θ.

    Candidates are the distinct scores and +inf (everything false).
    """
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order].astype(bool)
    pos_before = np.concatenate([[0], np.cumsum(y)])        # positives strictly before position j
    neg_before = np.concatenate([[0], np.cumsum(~y)])
    first = np.concatenate([[True], s[1:] != s[:-1]])       # first position of each distinct score
    idx = np.flatnonzero(first)
    correct = (y.sum() - pos_before[idx]) + neg_before[idx]  # θ = s[j]: j.. are "true", before "false"
    all_false = (~y).sum()
    best = int(np.argmax(correct))
    return float(s[idx[best]]) if correct[best] >= all_false else float("inf")


def fit_thresholds(scores: np.ndarray, labels: np.ndarray, relations: np.ndarray,
                   n_relations: int) -> np.ndarray:
    """Per-relation thresholds (n_relations,) maximising validation accuracy (see module docstring).

    A triple is classified true iff its score is at least its relation's threshold. Relations without
    validation triples get the threshold fitted on all of them.

    Parameters
    ----------
    scores : numpy.ndarray of shape (n,)
        Scores of the validation positives and negatives.
    labels : numpy.ndarray of shape (n,)
        True for a positive.
    relations : numpy.ndarray of shape (n,)
        Relation id of each triple.
    n_relations : int

    Returns
    -------
    numpy.ndarray
        float64 array of shape (n_relations,); +inf where classifying everything false is best.

    Raises
    ------
    EmbstabError
        If there are no validation triples.
    """
    if len(scores) == 0:
        raise EmbstabError("no validation triples to fit the classification thresholds on")
    fallback = _best_threshold(scores, labels)
    out = np.full(n_relations, fallback)
    for r in np.unique(relations):
        sel = relations == r
        out[r] = _best_threshold(scores[sel], labels[sel])
    return out


def _decide(model: Any, triples: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    return score_triples(model, triples) >= thresholds[triples[:, 1]]


def triple_classification_disagreement(old: Any, new: Any = MISSING, graph: KnowledgeGraph = MISSING, *, seed: int = 0,
                                       keep_decisions: bool = False) -> TripleClassificationDisagreement:
    """Share of triple-classification decisions that differ between an old and a new model of one graph.

    Each model fits its own thresholds; symmetric in the two models but for the result's names.

    Parameters
    ----------
    old, new : KGTrainResult or QuantizedKGModel or pykeen.models.Model
        ``old`` may instead be an :class:`embstab.Pair` of both, with ``graph`` second.
    graph : KnowledgeGraph
    seed : int
        Seed of the negatives (the same negatives for both models).
    keep_decisions : bool
        Store both models' test decisions in the result.

    Returns
    -------
    TripleClassificationDisagreement
    """
    old, new, (graph,) = unpack_pair(old, new, (graph,), (MISSING,))
    ma, mb = as_model(old, graph), as_model(new, graph)
    known = KnownAnswers(graph)
    v_neg = corrupt(graph, graph.valid, seed, known)
    t_neg = corrupt(graph, graph.test, seed + 1, known)
    valid = np.concatenate([graph.valid, v_neg])
    v_lab = np.concatenate([np.ones(len(graph.valid), bool), np.zeros(len(v_neg), bool)])
    test = np.concatenate([graph.test, t_neg])
    t_lab = np.concatenate([np.ones(len(graph.test), bool), np.zeros(len(t_neg), bool)])
    decisions, accs, v_accs = [], [], []
    for m in (ma, mb):
        th = fit_thresholds(score_triples(m, valid), v_lab, valid[:, 1], graph.n_relations)
        d = _decide(m, test, th)
        decisions.append(d)
        accs.append(float(100.0 * np.mean(d == t_lab)))
        v_accs.append(float(100.0 * np.mean(_decide(m, valid, th) == v_lab)))
    da, db = decisions
    settings = {"negative_seed": seed, "n_positives": int(len(graph.test)), "n_negatives": int(len(t_neg)),
                "valid_accuracy_old": v_accs[0], "valid_accuracy_new": v_accs[1], "interval_level": INTERVAL_LEVEL}
    flipped = int(np.sum(da != db))
    return TripleClassificationDisagreement(_share(flipped, len(test)), accs[0], accs[1], int(len(test)),
                                            graph.name, settings, da if keep_decisions else None,
                                            db if keep_decisions else None)


def kg_disagreement(old: Any, new: Any = MISSING, graph: KnowledgeGraph = MISSING, task: str = MISSING, *,
                    bits: int | None = None, seed: int = 0, k: int = 10, batch_size: int = 256,
                    progress: bool = False, threads: int | None = 1
                    ) -> LinkPredictionDisagreement | TripleClassificationDisagreement:
    """Downstream disagreement of an old and a new KG model on one of :data:`KG_TASKS`, optionally quantized first.

    The one entry point the command line uses (``embstab downstream OLD NEW --task link_prediction:G``).

    Parameters
    ----------
    old, new : KGTrainResult or QuantizedKGModel or pykeen.models.Model
        Models over ``graph``'s vocabulary, the old one first (its clips quantize both); ``old``
        may instead be an :class:`embstab.Pair` of both, with ``graph`` second. With ``bits`` both
        must be :class:`KGTrainResult`.
    graph : KnowledgeGraph
        The graph whose test split is asked and whose three splits form the filter.
    task : {"link_prediction", "triple_classification"}, default "link_prediction"
    bits : int, optional
        Quantize both models first with the pair protocol (:func:`embstab.kg.quantize_pair`: the
        old model's clips for both); ``settings`` then records the bits, the clips
        (``clips``) and both models' memory.
    seed : int
        Seed of the triple-classification negatives.
    k : int
        Depth of the link-prediction top-k overlap.
    batch_size : int
        Link-prediction queries scored at once.
    progress : bool
    threads : int or None
        torch intra-op threads while scoring (default 1; None leaves torch's setting).

    Returns
    -------
    LinkPredictionDisagreement or TripleClassificationDisagreement

    Raises
    ------
    UnknownNameError
        For a task that is not in :data:`KG_TASKS`.
    ShapeError
        If a model does not fit the graph, or (with ``bits``) the two models have different tables.
    """
    old, new, (graph, task) = unpack_pair(old, new, (graph, task), (MISSING, "link_prediction"))
    lookup({t: None for t in KG_TASKS}, task, "knowledge-graph task")
    with torch_threads(threads):
        return _kg_disagreement(old, new, graph, task, bits, seed, k, batch_size, progress)


def _kg_disagreement(old: Any, new: Any, graph: KnowledgeGraph, task: str, bits: int | None, seed: int,
                     k: int, batch_size: int, progress: bool
                     ) -> LinkPredictionDisagreement | TripleClassificationDisagreement:
    memory: dict[str, Any] = {}
    if bits is not None:
        from embstab.kg.quantize import quantize_pair

        old, new = quantize_pair(old, new, bits)
        memory = {"bits": int(bits), "clips": dict(old.clips), "memory_bits_old": old.memory_bits,
                  "memory_bits_new": new.memory_bits, "compression_ratio": old.compression_ratio}
    if task == "link_prediction":
        res: LinkPredictionDisagreement | TripleClassificationDisagreement = link_prediction_disagreement(
            old, new, graph, k=k, batch_size=batch_size, progress=progress)
    else:
        res = triple_classification_disagreement(old, new, graph, seed=seed)
    res.settings.update({"bits": None, **memory})
    return res

"""Downstream prediction disagreement between two embeddings."""

from __future__ import annotations

import functools
import html
import inspect
import itertools
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from embstab._limits import check_learning_rate, check_threads
from embstab._numbers import is_integer
from embstab._threads import torch_threads
from embstab.data.tasks import (
    ClassificationData,
    TaggingData,
    fold_splits,
    load_classification,
    load_tagging,
)
from embstab.downstream.catalog import FOLDS, MODELS, TASKS, default_model
from embstab.downstream.intervals import INTERVAL_LEVEL, disagreement_interval
from embstab.downstream.lookup import TaskVocabulary, lookup_table
from embstab.downstream.retrieval import (
    RetrievalData,
    chance_levels,
    check_index,
    index_flips,
    load_retrieval,
    retrieval_token_counts,
    search,
    text_vectors,
    top_k_churn,
)
from embstab.downstream.training import (
    MEAN_MODELS,
    NETWORKS,
    fit_classifier,
    fit_tagger,
    mean_features,
    tagging_score,
)
from embstab.embedding import Embedding
from embstab.errors import (
    ConfigError,
    EmbstabError,
    ShapeError,
    VocabularyError,
    did_you_mean,
    lookup,
)
from embstab.pair import MISSING, unpack_pair
from embstab.recipes.training import training_recipe

__all__ = ["TASKS", "MODELS", "FOLDS", "DisagreementResult", "disagreement", "seed_baseline", "load_task",
           "train_and_predict", "TrainResult", "token_coverage", "LowCoverageError", "MIN_COVERAGE", "chance_level",
           "disagreement_interval", "INTERVAL_LEVEL", "default_folds", "default_model", "RetrievalData"]

#: Default floor on the share of task tokens an embedding must know: below it most inputs are
#: random vectors and "0 % of predictions differ" would be a meaningless, plausible-looking answer.
MIN_COVERAGE = 0.5


class LowCoverageError(VocabularyError, ValueError):
    """An embedding knows too few of a task's tokens for its disagreement to mean anything."""


def token_coverage(emb: Embedding, data: ClassificationData | TaggingData) -> float:
    """Fraction of the task's tokens (train, dev and test, with repeats) that ``emb`` knows.

    Parameters
    ----------
    emb : Embedding
    data : ClassificationData or TaggingData

    Returns
    -------
    float
        In [0, 1]; 1.0 for a task without tokens.
    """
    return _coverage(emb, _token_counts(data))


def _token_counts(data: ClassificationData | TaggingData) -> Counter:
    return Counter(itertools.chain.from_iterable(itertools.chain(data.train_x, data.dev_x, data.test_x)))


def _coverage(emb: Embedding, counts: Counter) -> float:
    # per word type, not per token: a task's million tokens hold a few ten thousand types
    total = sum(counts.values())
    known = sum(c for w, c in counts.items() if w in emb)
    return known / total if total else 1.0


@dataclass
class _Prepared:
    """What every model of one task shares, whatever the embedding: its vocabulary, encoded splits
    and token counts."""

    vocab: TaskVocabulary
    counts: Counter
    encoded: dict = field(default_factory=dict)  # max_len -> (train, dev, test) index arrays

    def splits(self, data: ClassificationData | TaggingData, max_len: int | None):
        if max_len not in self.encoded:
            self.encoded[max_len] = tuple(self.vocab.encode(xs, max_len) for xs in (data.train_x, data.dev_x,
                                                                                    data.test_x))
        return self.encoded[max_len]


def _prepare(data: ClassificationData | TaggingData) -> _Prepared:
    return _Prepared(TaskVocabulary(data.train_x, data.dev_x, data.test_x), _token_counts(data))


@functools.lru_cache(maxsize=8)
def _prepared_task(name: str, split_seed: int, limit: int | None) -> _Prepared:
    # a task loaded by name is never modified, so its preparation is shared by every model trained
    # on it in this process (a study trains hundreds)
    return _prepare(load_task(name, split_seed, limit))


def _check_coverage(data, min_coverage: float, counts: Counter | None = None, **embs: Embedding) -> dict[str, float]:
    if not 0.0 <= min_coverage <= 1.0:
        raise EmbstabError(f"the coverage floor (--min-coverage) must be in [0, 1], got {min_coverage}")
    counts = _token_counts(data) if counts is None else counts
    out = {}
    for label, emb in embs.items():
        cov = _coverage(emb, counts)
        if cov < min_coverage:
            raise LowCoverageError(f"the {label} embedding ({emb.name}) knows {cov:.1%} of the tokens of task "
                                   f"{data.name!r}, below the floor of {min_coverage:.0%}: its disagreement would "
                                   "be meaningless (wrong language, casing or tokenisation?); lower the floor with "
                                   "--min-coverage (Python: min_coverage=) to run anyway")
        out[label] = cov
    return out

def chance_level(data: ClassificationData | TaggingData, folds: int = 1, split_seed: int = 0) -> float:
    """Test quality (percent, in the task's own metric) of the best prediction that ignores the inputs.

    What a model that learned nothing from its inputs scores. For classification, the best
    constant prediction on the test items: the share of their most frequent label (a balanced
    binary task is never below 50 %, whatever the training split holds). For tagging, the score
    :func:`~embstab.downstream.training.tagging_score` gives a tagger that puts the most frequent
    training tag on every token (token accuracy without an outside tag; with one, the entity F1,
    which is 0 when that tag is the outside tag).

    Parameters
    ----------
    data : ClassificationData or TaggingData
        The task.
    folds : int, default 1
        1: the task's own test split. From 2: every item is a test item once, as :func:`disagreement`
        evaluates with ``folds`` (classification: the most frequent label's share of all items;
        tagging: each fold's most frequent training tag on that fold's test tokens).
    split_seed : int, default 0
        Seed of the folds (as for :func:`disagreement`); unused with one fold.

    Returns
    -------
    float
        The chance level in percent, 0 to 100.

    Raises
    ------
    ConfigError
        If ``folds`` is not a positive integer or exceeds the task's items.
    """
    _check_folds(folds)
    return _chance(data, _plan(data, folds, split_seed))


def _chance(data: ClassificationData | TaggingData, plan: _Plan) -> float:
    """The chance level over the items ``plan`` tests (see :func:`chance_level`)."""
    if isinstance(data, ClassificationData):
        gold = plan.y[plan.tested]
        return float(100.0 * np.bincount(gold).max() / len(gold)) if len(gold) else 0.0
    empty = np.zeros(0, np.int64)
    per_item: dict[int, np.ndarray] = {}
    for train, _, test in plan.folds:
        seen = np.concatenate([empty, *(plan.y[i] for i in train)])
        top = int(np.bincount(seen, minlength=len(data.tags)).argmax())
        per_item.update({int(i): np.full(len(plan.y[i]), top) for i in test})
    pred = np.concatenate([empty, *(per_item[int(i)] for i in plan.tested)])
    gold = np.concatenate([empty, *(plan.y[i] for i in plan.tested)])
    outside = data.tags.index(data.outside_tag) if data.outside_tag else None
    return float(tagging_score(pred, np.asarray(gold, np.int64), outside))


@dataclass
class _Plan:
    """Which items (of train, dev and test pooled in that order) each fold trains, selects and tests on.

    With one fold the train, dev and test items are the task's own splits.
    """

    y: Any                      # pooled labels: an int array (classification), a list of tag arrays
    folds: list                 # (train, dev, test) index arrays into the pooled items
    tested: np.ndarray          # every tested item, sorted: the layout of the predictions

    @property
    def n_items(self) -> int:
        return len(self.y)


def _plan(data: ClassificationData | TaggingData, folds: int, split_seed: int) -> _Plan:
    n_tr, n_dv, n_te = len(data.train_y), len(data.dev_y), len(data.test_y)
    if isinstance(data, ClassificationData):
        y: Any = np.concatenate([np.asarray(part, np.int64) for part in (data.train_y, data.dev_y, data.test_y)])
    else:
        y = [*data.train_y, *data.dev_y, *data.test_y]
    n = n_tr + n_dv + n_te
    if folds == 1:
        arange = lambda a, b: np.arange(a, b, dtype=np.int64)  # noqa: E731
        split = (arange(0, n_tr), arange(n_tr, n_tr + n_dv), arange(n_tr + n_dv, n))
        return _Plan(y, [split], split[2])
    if folds > n:
        raise ConfigError(f"folds must be at most the number of items of task {data.name!r} ({n}), got {folds}")
    # classification folds and dev carves keep the label shares; sentences of a tagging task are drawn at random
    plan = fold_splits(n, folds, split_seed, labels=y if isinstance(data, ClassificationData) else None)
    return _Plan(y, plan, np.arange(n, dtype=np.int64))


def _check_folds(folds: Any) -> None:
    if not is_integer(folds) or folds < 1:
        raise ConfigError(f"folds must be a positive integer (1: the task's fixed split), got {folds!r}")


def default_folds(task: str | ClassificationData | TaggingData) -> int:
    """How many folds :func:`disagreement` evaluates ``task`` with when not told.

    A task named in :data:`FOLDS` (the small ones, whose test split alone would hold a couple of
    hundred items) gets its entry there; task data built by the caller keeps its own split (1).

    Parameters
    ----------
    task : str or ClassificationData or TaggingData
        A name from :data:`TASKS`, or task data.

    Returns
    -------
    int
        The fold count, 1 for the fixed train/dev/test split.
    """
    return int(FOLDS.get(task, 1)) if isinstance(task, str) else 1


_TRAIN_KEYS = ("lr", "epochs", "batch_size", "patience", "max_len", "threads")


def _model_options(model: str) -> tuple[str, ...]:
    """The options of ``model``'s network (its constructor's settings beyond the table and the classes)."""
    listed = list(inspect.signature(NETWORKS[model].__init__).parameters.values())[3:]
    return tuple(p.name for p in listed if p.name != "crf")


def _check_training(model: str, kwargs: dict[str, Any], seeds: dict[str, Any], limit: Any) -> None:
    """Refuse settings no model can train with, before any training (each named, with its value)."""
    known = (*_TRAIN_KEYS, *_model_options(model))
    for key in kwargs:
        if key not in known:
            raise ConfigError(f"model {model!r} has no setting {key!r}{did_you_mean(key, known)}; "
                              f"its settings: {', '.join(known)}")
    for name, value in seeds.items():
        if not is_integer(value):
            raise ConfigError(f"{name} must be an integer, got {value!r}")
    counts = {"epochs": kwargs.get("epochs", 1), "batch_size": kwargs.get("batch_size", 1),
              "patience": kwargs.get("patience"), "max_len": kwargs.get("max_len"), "threads": kwargs.get("threads"),
              "limit": limit}
    for name, value in counts.items():
        if value is not None and (not is_integer(value) or value < 1):
            optional = "" if name in ("epochs", "batch_size") else " or None"
            raise ConfigError(f"{name} must be a positive integer{optional}, got {value!r}")
    if "lr" in kwargs:
        check_learning_rate(kwargs["lr"])  # one rule with the command line's --lr
    if kwargs.get("threads") is not None:
        check_threads(kwargs["threads"])


@dataclass
class TrainResult:
    """One downstream model trained on one embedding: its test predictions and quality.

    With k-fold evaluation (``settings["folds"]`` above 1) one model is trained per fold and every
    item of the task is predicted once, by the model of the fold that tests it.

    Attributes
    ----------
    pred : numpy.ndarray
        Test predictions (tagging: the tokens of all test sentences, concatenated), in the order of
        the task's items (train, dev, then test split; with one fold the test split alone).
    gold : numpy.ndarray
        The gold labels in the same layout.
    quality : float
        Test accuracy (or F1·100 for tagging with an outside tag), in percent, over every tested item.
    dev_score : float
        Best development score (the one early stopping selected); with folds, their mean.
    best_epoch, epochs_run : int
        Selected epoch and epochs actually run; with folds, the median selected epoch (rounded down)
        and the most epochs a fold ran.
    seconds : float
        Training time (with folds, of all of them).
    coverage : float
        Fraction of the task's word types the embedding knows.
    settings : dict
        Training settings and model options used, and ``folds``.
    """

    pred: np.ndarray = field(repr=False)
    gold: np.ndarray = field(repr=False)
    quality: float
    dev_score: float
    best_epoch: int
    epochs_run: int
    seconds: float
    coverage: float
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (predictions as lists), ready for JSON.

        Returns
        -------
        dict of str to Any
            ``quality``, ``dev_score``, ``best_epoch``, ``epochs_run``, ``seconds``, ``coverage``,
            ``settings``, ``pred`` and ``gold``.
        """
        out = {k: getattr(self, k) for k in ("quality", "dev_score", "best_epoch", "epochs_run", "seconds",
                                            "coverage", "settings")}
        out["pred"], out["gold"] = self.pred.tolist(), self.gold.tolist()
        return out


@dataclass
class DisagreementResult:
    """Outcome of training one downstream model on the old and one on the new embedding of a pair.

    Attributes
    ----------
    disagreement : float
        Percent of test predictions that differ (tagging: over tokens whose gold tag is not the
        outside tag; all tokens for POS; retrieval: over queries, those whose top-k *set* of
        documents differs).
    quality_old, quality_new : float
        Test accuracy (or F1·100; retrieval: recall@k) of the model on the old and on the new
        embedding, in percent.
    n_test : int
        Test items the disagreement is computed over (examples, tokens or queries): with k-fold
        evaluation every item of the task.
    task, model : str
    seed : int
        Model seed of the old member's model (the new member's uses ``settings["seed_b"]``, equal
        by default).
    settings : dict
        Everything else: training settings, split seed, ``folds`` (1: the task's fixed split; k:
        k-fold, every item tested once) and ``n_items`` (the task's items), coverage of each
        embedding, dev scores, selected epochs, seconds per model, ``interval_level``, ``chance``:
        the quality of the best prediction that ignores the inputs (:func:`chance_level`: for
        classification the most frequent test label's share) and, for classification,
        ``majority_rate``: that same share. Per-member entries end in ``_old`` and ``_new``.
        A retrieval task (model ``search``) adds ``k``, ``precision`` (``binary`` with the binary
        index), ``quality_metric`` (``"recall@k"``), ``overlap_at_k`` (the mean share of the top k
        both searches keep, 0 to 1), ``mrr_old`` / ``mrr_new`` (0 to 1), ``mrr_depth`` (None: the
        relevant document ranked among all; k for a faiss index, which ranks only what it returns:
        MRR truncated at k), ``n_documents``, ``chance`` (a random ranking's recall@k, k/N in
        percent), ``chance_mrr`` (its MRR, H_N/N), ``chance_rule``, ``ties_at_k_old`` / ``_new``
        (queries whose k-th and (k+1)-th documents score alike) and ``empty_queries_*`` /
        ``empty_documents_*`` (texts left with the zero vector); it has no dev scores or epochs.
        Its search settings are there too: ``index`` (``exact``, or the faiss index ``flat``,
        ``hnsw``, ``ivf``, ``binary``), ``hnsw_m``, ``ef_construction``, ``ef_search``, ``nlist``,
        ``nprobe``, ``batch_size``. The flips an index adds on its own stand beside the pair's:
        ``index_disagreement``, the percent of queries whose top k from the index differs from
        exact search's on the *same* (old) vectors (ties at the k-th score are no flip; see
        :func:`~embstab.downstream.retrieval.index_flips`), with its 95 % interval
        ``index_disagreement_low`` / ``index_disagreement_high`` over the queries, and
        ``index_recall_at_k``, the mean share of the index's top k that belongs in exact search's
        (0 to 1). For ``index="exact"`` they are 0, its interval and 1 (nothing to separate).
    predictions_old, predictions_new : numpy.ndarray, optional
        Each model's test predictions, when kept (retrieval: the ``(n_queries, k)`` top-k tables).
    disagreement_interval : tuple of (float, float)
        The disagreement's sampling interval over the test items, ``(low, high)`` in percent, at
        ``settings["interval_level"]`` (95 % unless stated; exact Clopper–Pearson, see
        :func:`~embstab.downstream.intervals.disagreement_interval`). Left out, it is computed
        from ``disagreement`` and ``n_test`` at 95 %.
    """

    disagreement: float
    quality_old: float
    quality_new: float
    n_test: int
    task: str
    model: str
    seed: int
    settings: dict[str, Any] = field(default_factory=dict)
    predictions_old: np.ndarray | None = field(default=None, repr=False)
    predictions_new: np.ndarray | None = field(default=None, repr=False)
    disagreement_interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.disagreement_interval is None:
            n = int(self.n_test)
            # the flips behind a percentage of n items: exact for any n a task has
            self.disagreement_interval = (disagreement_interval(int(round(self.disagreement * n / 100.0)), n)
                                          if n > 0 else (float("nan"), float("nan")))

    def to_dict(self) -> dict[str, Any]:
        """A flat dict (settings prefixed with nothing, predictions left out) for a DataFrame row.

        Returns
        -------
        dict of str to Any
            The scalar fields (the interval as ``disagreement_low`` and ``disagreement_high``, after
            ``disagreement``), then each setting under its own name (a field of the same name wins).
        """
        low, high = self.disagreement_interval  # type: ignore[misc]
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            if k in ("settings", "predictions_old", "predictions_new", "disagreement_interval"):
                continue
            out[k] = v
            if k == "disagreement":
                out["disagreement_low"], out["disagreement_high"] = float(low), float(high)
        for k, v in self.settings.items():
            out.setdefault(k, v)
        return out

    def _repr_html_(self) -> str:
        """The result at a glance in a notebook: the flips with their interval, both models beside chance."""
        low, high = self.disagreement_interval  # type: ignore[misc]
        level = self.settings.get("interval_level", INTERVAL_LEVEL)
        chance = self.settings.get("chance")
        folds = int(self.settings.get("folds", 1) or 1)
        over = f"{self.n_test:,} test items" + (f" ({folds}-fold: every item tested once)" if folds > 1 else "")
        rows = [("predictions that flip", f"<b>{self.disagreement:.2f} %</b> [{low:.2f}, {high:.2f}] "
                                          f"({level:.0%} interval over the test items)"),
                ("quality, old model", f"{self.quality_old:.2f} %"),
                ("quality, new model", f"{self.quality_new:.2f} %")]
        if "quality_metric" in self.settings:  # a quality that is not an accuracy says which it is
            rows[1:] = [(f"{label} ({self.settings['quality_metric']})", value) for label, value in rows[1:]]
        if chance is not None:
            rule = self.settings.get("chance_rule", "best constant prediction")
            rows.append((f"chance ({rule})", f"{float(chance):.2f} %"))
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
        return (f"<p><b>DisagreementResult</b>: {html.escape(self.task)}, model {html.escape(self.model)}, "
                f"seed {self.seed}, over {over}</p><table>{cells}</table>")


@functools.lru_cache(maxsize=8)
def _cached_task(name: str, split_seed: int, limit: int | None) -> ClassificationData | TaggingData | RetrievalData:
    if TASKS[name][0] == "retrieval":
        return load_retrieval(name, split_seed=split_seed, limit=limit)
    if TASKS[name][0] == "tagging":
        return load_tagging(name, split_seed=split_seed, max_sentences=limit)
    return load_classification(name, split_seed=split_seed, max_examples=limit)


def load_task(task: str, split_seed: int = 0, limit: int | None = None
              ) -> ClassificationData | TaggingData | RetrievalData:
    """Load (and cache in memory) a task from :data:`TASKS`.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS`.
    split_seed : int
        Seed of the fixed train/dev/test split.
    limit : int, optional
        Keep at most this many examples (classification), sentences (tagging) or query–document
        pairs (retrieval).

    Returns
    -------
    ClassificationData or TaggingData or RetrievalData
    """
    lookup(TASKS, task, "task")
    return _cached_task(task, split_seed, limit)


#: Fewest test items (examples, or tokens for tagging) a disagreement is reported on: below it one
#: flipped prediction moves the percentage by more than 10 points.
MIN_TEST_ITEMS = 10


def _check_splits(data: ClassificationData | TaggingData, kind: str, limit: int | None, plan: _Plan) -> None:
    """Refuse task data with an empty split (no epoch to select, or nothing to compare) or too few test items."""
    unit = "examples" if kind == "classification" else "sentences"
    where = f" with limit={limit}" if limit is not None else ""
    tokens = (lambda idx: len(idx)) if kind == "classification" else (lambda idx: sum(len(plan.y[i]) for i in idx))
    items = tokens(plan.tested)
    sizes = [(len(tr), len(dv), len(te)) for tr, dv, te in plan.folds]
    if min(min(f) for f in sizes) > 0 and items >= MIN_TEST_ITEMS:
        return
    hint = "; raise the limit" if limit is not None else ""
    need = f"at least {MIN_TEST_ITEMS} {'examples' if kind == 'classification' else 'tokens'}"
    if len(sizes) == 1:
        (n_tr, n_dv, n_te), = sizes
        raise ConfigError(f"task {data.name!r}{where} splits into {n_tr} train, {n_dv} dev and {n_te} test {unit}: "
                          f"every split needs some, and the test split {need}{hint}")
    raise ConfigError(f"task {data.name!r}{where} has {plan.n_items} {unit}, too few for {len(sizes)} folds each "
                      f"with train, dev and test {unit} and {need} tested in all: use fewer folds{hint}")


def _resolve(task, model: str, split_seed: int, limit: int | None, folds: int | None):
    folds = default_folds(task) if folds is None else folds
    _check_folds(folds)  # before loading anything
    data = load_task(task, split_seed, limit) if isinstance(task, str) else task
    if isinstance(data, RetrievalData):
        raise ConfigError(f"task {data.name!r} is a retrieval task: no model is trained for it, the vectors rank "
                          "the documents themselves; use disagreement(old, new, task) for its flips")
    if not isinstance(data, (ClassificationData, TaggingData)):
        raise EmbstabError(f"task must be a name from TASKS or a ClassificationData/TaggingData, got {type(task)}")
    lookup(MODELS, model, "model")
    kind = "tagging" if isinstance(data, TaggingData) else "classification"
    plan = _plan(data, folds, split_seed)
    _check_splits(data, kind, limit, plan)
    if MODELS[model][0] != kind:
        fits = [m for m, (k, _) in MODELS.items() if k == kind]
        raise EmbstabError(f"model {model!r} is for {MODELS[model][0]}, but task {data.name!r} is {kind}; "
                           f"use one of {', '.join(fits)}")
    # data built by the caller may change between calls: prepared afresh each time
    prepared = _prepared_task(task, split_seed, limit) if isinstance(task, str) else _prepare(data)
    return data, kind, prepared, plan


def train_and_predict(emb: Embedding, task: str | ClassificationData | TaggingData = "rt_sentiment",
                      model: str = "linear", seed: int = 0, *, split_seed: int = 0, limit: int | None = None,
                      progress: bool = False, recipe: str | None = None, folds: int | None = None,
                      **kwargs: Any) -> TrainResult:
    """Train one downstream model on ``emb`` and return its test predictions and quality.

    Parameters
    ----------
    emb : Embedding
        The embedding whose (frozen) vectors feed the model.
    task : str or ClassificationData or TaggingData
        A name from :data:`TASKS`, or task data built by the caller.
    model : str
        A name from :data:`MODELS` matching the task kind.
    seed : int
        Model seed (initialisation, dropout, batch order, vectors of unknown words).
    split_seed : int
        Seed of the train/dev/test split.
    limit : int, optional
        Use at most this many examples or sentences.
    progress : bool
        Show per-epoch progress bars.
    recipe : str, optional
        Training recipe of the model's trainable weights, a name of
        :data:`embstab.recipes.TRAINING_RECIPES` (default ``"fp32"``): e.g. ``"bf16-nearest"``,
        ``"bf16-stochastic"``, ``"bf16-kahan"`` keep them in bfloat16 with that update rounding,
        ``"swalp"`` in 8-bit block floating point with the second half's epoch-end iterates
        averaged (the dev set then scores the average). Recorded in ``settings["recipe"]``.
    folds : int, optional
        1: train on the task's train split and predict its test split; k: k-fold, one model per
        fold, every item predicted once (as for :func:`disagreement`, whose default it shares).
    **kwargs
        Training settings and model options, as for :func:`disagreement`.

    Returns
    -------
    TrainResult

    Raises
    ------
    UnknownNameError
        For a recipe name that is not registered (the message suggests the closest).
    """
    recipe_name = training_recipe(recipe).name  # refuse a bad name before loading anything
    data, kind, prepared, plan = _resolve(task, model, split_seed, limit, folds)
    return _train(emb, data, kind, prepared, plan, model, seed, progress, recipe_name, kwargs)


def _train(emb: Embedding, data: ClassificationData | TaggingData, kind: str, prepared: _Prepared, plan: _Plan,
           model: str, seed: int, progress: bool, recipe_name: str, kwargs: dict[str, Any]) -> TrainResult:
    kwargs = dict(kwargs)
    settings = {**MODELS[model][1], **{k: kwargs.pop(k) for k in list(kwargs) if k in _TRAIN_KEYS}}
    model_kwargs = kwargs
    # one table for every fold: the random rows of unknown words depend on the seed alone
    table, coverage = lookup_table(emb, prepared.vocab, seed)
    x = [seq for split in prepared.splits(data, settings.get("max_len")) for seq in split]
    train_args = dict(seed=seed, lr=settings["lr"], epochs=settings["epochs"], batch_size=settings["batch_size"],
                      patience=settings["patience"], threads=settings.get("threads", 1), progress=progress,
                      recipe=recipe_name, **model_kwargs)
    outside = data.tags.index(data.outside_tag) if kind == "tagging" and data.outside_tag else None
    if model in MEAN_MODELS and len(plan.folds) > 1:
        # the folds read the same texts: their mean vectors once, not once per fold
        with torch_threads(settings.get("threads", 1)):
            means = mean_features(table, x).numpy()
        pick = lambda idx: torch.from_numpy(means[idx])  # noqa: E731
    else:
        pick = lambda idx: [x[i] for i in idx]  # noqa: E731
    pred: dict[int, Any] = {}
    fits = []
    for train, dev, test in plan.folds:
        if kind == "classification":
            fit = fit_classifier(model, table, len(data.labels), (pick(train), plan.y[train]),
                                 (pick(dev), plan.y[dev]), pick(test), **train_args)
            pred.update(zip(test.tolist(), fit.test_pred.tolist()))
        else:
            fit = fit_tagger(model, table, len(data.tags), (pick(train), [plan.y[i] for i in train]),
                             (pick(dev), [plan.y[i] for i in dev]), pick(test), outside=outside, **train_args)
            # the fold's tokens, back into one array per sentence
            ends = np.cumsum([len(plan.y[i]) for i in test])
            pred.update(zip(test.tolist(), np.split(fit.test_pred, ends[:-1])))
        fits.append(fit)
    if kind == "classification":
        all_pred = np.asarray([pred[i] for i in plan.tested.tolist()], dtype=np.int64)
        gold = np.asarray(plan.y[plan.tested])
        quality = float(100.0 * np.mean(all_pred == gold))
    else:
        empty = np.zeros(0, np.int64)
        all_pred = np.concatenate([empty, *(pred[i] for i in plan.tested.tolist())])
        gold = np.concatenate([empty, *(plan.y[i] for i in plan.tested.tolist())])
        quality = tagging_score(all_pred, gold, outside)
    best_epoch = int(np.median([f.best_epoch for f in fits])) if len(fits) > 1 else fits[0].best_epoch
    return TrainResult(all_pred, gold, quality, float(np.mean([f.dev_score for f in fits])), best_epoch,
                       max(f.epochs_run for f in fits), float(sum(f.seconds for f in fits)), coverage,
                       {**settings, "recipe": recipe_name, **model_kwargs, "folds": len(plan.folds)})


def disagreement(old: Embedding, new: Embedding = MISSING, task: str | ClassificationData | TaggingData = MISSING,
                 model: str = MISSING, seed: int = MISSING, *, seed_b: int | None = None, split_seed: int = 0,
                 limit: int | None = None, progress: bool = False, keep_predictions: bool = False,
                 min_coverage: float = MIN_COVERAGE, recipe: str | None = None, folds: int | None = None,
                 **kwargs: Any) -> DisagreementResult:
    """Train the same downstream model on an old and a new embedding and count the test predictions that flip.

    The two models differ only in the embedding (the same-seed protocol): same data split, same
    initialisation and batch order (both seeded with ``seed``), same random vectors for words that
    neither embedding knows. With ``seed_b`` the new member's model uses another seed instead,
    which with ``new = old`` measures the seed-only baseline (see :func:`seed_baseline`). The
    disagreement is symmetric; the order names the result's fields.

    Small tasks are evaluated k-fold, so that every item is a test item exactly once: the items
    (train, dev and test split pooled) are dealt into ``folds`` folds, stratified by label for
    classification; each fold trains both models on the other folds, less a dev share of 10 % of
    all items carved from them (stratified too) for epoch selection, and predicts its own items.
    Disagreement, qualities and chance level are then counted over all items, and each fold's
    models share the seeds. The default comes from :data:`~embstab.downstream.catalog.FOLDS`: 5
    folds for ``rt_subjectivity`` and ``bbc_topic`` (about 2,200 items each, whose 10 % test split
    alone would hold 217 and 222: one item 0.46 points, and a 5 % disagreement uncertain by 1.5
    points), 1 (the fixed 80/10/10 split) for the larger tasks and for task data built by the
    caller. Five rather than ten folds: the default study trains its linear models in a few tenths
    of a second, and ten folds multiplied that time by about 6 where five stay near 3.

    Every disagreement carries its 95 % sampling interval over the test items
    (``disagreement_interval``, exact Clopper–Pearson): what the share could be on another draw
    of as many test items, for the same two models.

    Parameters
    ----------
    old, new : Embedding
        The embeddings of the old and the new corpus, old first (or one :class:`embstab.Pair`
        of both, with ``task`` second). Any dimensions (each model has its own).
    task : str or ClassificationData or TaggingData or RetrievalData, default "rt_sentiment"
        A name from :data:`TASKS`, or task data built by the caller. A retrieval task
        (``wiki_retrieval``, ``bbc_retrieval``) trains nothing: each member's vectors rank the
        documents for every query by exact cosine search, and the disagreement is the share of
        queries whose top-k set of documents changes (see
        :mod:`embstab.downstream.retrieval`); there the members may also be text encoders
        (callables from a list of texts to one row each), settings are ``k``, ``precision``,
        ``batch_size`` and the search ``index`` with its settings (see
        :func:`~embstab.downstream.retrieval.search`), and the seeds play no part (the search is
        deterministic).
    model : str, optional
        A name from :data:`MODELS` matching the task kind: "linear" (the reference bag-of-words
        model, the default), "mlp", "cnn", "lstm" for classification; "bilstm" (the default),
        "bilstm_crf" for tagging; "search" for retrieval.
    seed : int, default 0
        Model seed (initialisation, dropout, batch order, OOV vectors).
    seed_b : int, optional
        Model seed for the new member (default: ``seed``).
    split_seed : int
        Seed of the train/dev/test split (kept fixed across a study).
    limit : int, optional
        Use at most this many examples (classification) or sentences (tagging).
    progress : bool
        Show per-epoch progress bars.
    keep_predictions : bool
        Store both models' test predictions in the result.
    min_coverage : float
        Refuse (before training) when an embedding knows less than this fraction of the task's
        tokens (default :data:`MIN_COVERAGE`; 0 disables). The coverages are reported in
        ``settings["token_coverage_old"]`` / ``["token_coverage_new"]``.
    recipe : str, optional
        Training recipe of both models' trainable weights (see :func:`train_and_predict`; default
        ``"fp32"``), so a pair can be compared under 16-bit or SWALP training.
    folds : int, optional
        1: the task's fixed train/dev/test split; from 2: k-fold evaluation over every item (see
        above). Default :func:`default_folds` (the catalogue's entry for a task given by name, 1
        for task data). Recorded in ``settings["folds"]``.
    **kwargs
        Training settings overriding :data:`MODELS` defaults (``lr``, ``epochs``, ``batch_size``,
        ``patience``, ``max_len``, ``threads`` = torch threads, default 1: these models are small
        and one thread avoids the heavy slow-down of OpenMP on shared cores; results are
        reproducible for a fixed thread count) and model options (``hidden``, ``dropout``,
        ``filters``...).

    Returns
    -------
    DisagreementResult

    Raises
    ------
    LowCoverageError
        An embedding knows less than ``min_coverage`` of the task's tokens.
    ConfigError
        For settings the model does not take, or values it cannot use (retrieval: a ``k`` outside
        1 to the number of documents).
    """
    old, new, (task, model, seed) = unpack_pair(old, new, (task, model, seed), ("rt_sentiment", None, 0))
    model = _default_model(task) if model is None else model
    if isinstance(task, RetrievalData) or (isinstance(task, str) and TASKS.get(task, ("",))[0] == "retrieval"):
        if recipe is not None or folds not in (None, 1):
            raise ConfigError(f"{'recipe' if recipe is not None else 'folds'} applies to trained tasks; retrieval "
                              "trains nothing (the vectors rank the documents)")
        return _retrieval_disagreement(old, new, task, model, seed, seed if seed_b is None else seed_b, split_seed,
                                       limit, keep_predictions, min_coverage, kwargs)
    for name, emb in (("old", old), ("new", new)):
        if not isinstance(emb, Embedding):
            raise ShapeError(f"the {name} member must be an embstab.Embedding, got {type(emb).__name__}")
    seed_b = seed if seed_b is None else seed_b
    recipe_name = training_recipe(recipe).name  # refuse a bad recipe name before any training
    if isinstance(model, str) and model in NETWORKS:  # (an unknown name is refused with the task)
        _check_training(model, kwargs, {"seed": seed, "seed_b": seed_b, "split_seed": split_seed}, limit)
    data, kind, prepared, plan = _resolve(task, model, split_seed, limit, folds)
    coverage = _check_coverage(data, min_coverage, prepared.counts, old=old, new=new)
    ra = _train(old, data, kind, prepared, plan, model, seed, progress, recipe_name, kwargs)
    rb = _train(new, data, kind, prepared, plan, model, seed_b, progress, recipe_name, kwargs)
    gold = ra.gold
    if kind == "tagging" and data.outside_tag is not None:
        counted = gold != data.tags.index(data.outside_tag)
    else:
        counted = np.ones(len(gold), dtype=bool)
    n_test = int(counted.sum())
    if n_test == 0:
        raise EmbstabError(f"task {data.name!r} has no test items to compare")
    flipped = int(np.sum((ra.pred != rb.pred) & counted))
    flips = float(100.0 * flipped / n_test)
    settings = {**ra.settings, "seed_b": seed_b, "split_seed": split_seed, "limit": limit,
                "n_items": plan.n_items, "interval_level": INTERVAL_LEVEL,
                "coverage_old": ra.coverage, "coverage_new": rb.coverage,
                "token_coverage_old": coverage["old"], "token_coverage_new": coverage["new"],
                "dev_score_old": ra.dev_score, "dev_score_new": rb.dev_score,
                "best_epoch_old": ra.best_epoch, "best_epoch_new": rb.best_epoch,
                "seconds_old": ra.seconds, "seconds_new": rb.seconds,
                "dim_old": old.dim, "dim_new": new.dim}
    # in the unit of quality_old/quality_new: what a model that learned nothing scores, on the same items
    settings["chance"] = _chance(data, plan)
    if kind == "classification":
        settings["majority_rate"] = settings["chance"]  # the most frequent test label's share, by its old name
    return DisagreementResult(flips, ra.quality, rb.quality, n_test, data.name, model, seed, settings,
                              ra.pred if keep_predictions else None, rb.pred if keep_predictions else None,
                              disagreement_interval(flipped, n_test))


def _default_model(task: Any) -> str:
    """The model of a task when none is named (see :func:`~embstab.downstream.catalog.default_model`)."""
    if isinstance(task, str) and task in TASKS:
        return default_model(task)
    kind = ("retrieval" if isinstance(task, RetrievalData) else "tagging" if isinstance(task, TaggingData)
            else "classification")
    return next((m for m, (k, _) in MODELS.items() if k == kind), "linear")


def _retrieval_disagreement(old: Any, new: Any, task: str | RetrievalData, model: str, seed: int, seed_b: int,
                            split_seed: int, limit: int | None, keep_predictions: bool, min_coverage: float,
                            kwargs: dict[str, Any]) -> DisagreementResult:
    """The flips of a retrieval task: the queries whose top-k set differs between the two members' searches."""
    if lookup(MODELS, model, "model")[0] != "retrieval":
        fits = [m for m, (k, _) in MODELS.items() if k == "retrieval"]
        raise ConfigError(f"model {model!r} is for {MODELS[model][0]}, but task "
                          f"{getattr(task, 'name', task)!r} is retrieval; use one of {', '.join(fits)}")
    defaults = MODELS[model][1]
    for key in kwargs:
        if key not in defaults:
            raise ConfigError(f"model {model!r} has no setting {key!r}{did_you_mean(key, tuple(defaults))}; "
                              f"its settings: {', '.join(defaults)}")
    settings = {**defaults, **kwargs}
    for name, value in {"seed": seed, "seed_b": seed_b, "split_seed": split_seed}.items():
        if not is_integer(value):
            raise ConfigError(f"{name} must be an integer, got {value!r}")
    data = load_task(task, split_seed, limit) if isinstance(task, str) else task
    if data.n_queries < MIN_TEST_ITEMS:
        raise ConfigError(f"task {data.name!r}" + (f" with limit={limit}" if limit is not None else "")
                          + f" has {data.n_queries} queries: at least {MIN_TEST_ITEMS} are needed"
                          + ("; raise the limit" if limit is not None else ""))
    n_docs = data.n_documents
    k = settings["k"]
    chance, chance_mrr = chance_levels(k, n_docs)  # refuses a bad k before any vector is made
    index_settings = {key: settings[key] for key in ("hnsw_m", "ef_construction", "ef_search", "nlist", "nprobe")}
    precision = check_index(settings["index"], settings["precision"], **index_settings)  # and a bad index
    words = {label: m for label, m in (("old", old), ("new", new)) if isinstance(m, Embedding)}
    coverage = _check_coverage(data, min_coverage, retrieval_token_counts(data), **words) if words else {}
    runs, info = {}, {}
    own = None
    for label, member in (("old", old), ("new", new)):
        queries, documents, info[label] = text_vectors(member, data)
        runs[label] = search(queries, documents, k, relevant=data.relevant, precision=precision,
                             batch_size=settings["batch_size"], index=settings["index"], **index_settings)
        info[label]["dim"] = queries.shape[1]
        if label == "old" and settings["index"] != "exact":
            # what the index changes on its own: its top k against exact search of the same old vectors
            own = index_flips(search(queries, documents, k, precision=precision, batch_size=settings["batch_size"]),
                              runs[label])
    ra, rb = runs["old"], runs["new"]
    flipped, overlap = top_k_churn(ra.top_k, rb.top_k)
    n = data.n_queries
    own_flipped, own_recall = (0, 1.0) if own is None else (own.flipped, own.recall)
    own_low, own_high = disagreement_interval(own_flipped, n)
    out = {**settings, "precision": precision, "seed_b": seed_b, "split_seed": split_seed, "limit": limit,
           "folds": 1, "n_items": n, "n_documents": n_docs, "interval_level": INTERVAL_LEVEL,
           "quality_metric": f"recall@{k}", "overlap_at_k": overlap,
           "index_disagreement": float(100.0 * own_flipped / n), "index_disagreement_low": own_low,
           "index_disagreement_high": own_high, "index_recall_at_k": own_recall,
           "mrr_depth": ra.depth, "mrr_old": ra.mrr(), "mrr_new": rb.mrr(), "chance": chance,
           "chance_mrr": chance_mrr, "chance_rule": "a random ranking",
           "ties_at_k_old": ra.ties_at_k, "ties_at_k_new": rb.ties_at_k,
           "seconds_old": ra.seconds, "seconds_new": rb.seconds}
    for label in ("old", "new"):
        out[f"dim_{label}"] = info[label]["dim"]
        out[f"empty_queries_{label}"] = info[label]["empty_queries"]
        out[f"empty_documents_{label}"] = info[label]["empty_documents"]
        if label in coverage:
            out[f"token_coverage_{label}"] = coverage[label]
    return DisagreementResult(float(100.0 * flipped / n), ra.recall(), rb.recall(), n, data.name, model, seed, out,
                              ra.top_k if keep_predictions else None, rb.top_k if keep_predictions else None,
                              disagreement_interval(flipped, n))


def seed_baseline(emb: Embedding, task: str | ClassificationData | TaggingData | RetrievalData = "rt_sentiment",
                  model: str | None = None, seed: int = 0, seed_b: int | None = None, **kwargs: Any
                  ) -> DisagreementResult:
    """Disagreement of two models on the *same* embedding that differ only in their seed.

    The floor a pair's disagreement should be read against (the reference's ``--seed_test``,
    which trains the second model with seed + 1000). For a retrieval task it is 0: exact search has no seed.

    Parameters
    ----------
    emb : Embedding
        The embedding both models use.
    task, model, seed
        As for :func:`disagreement`.
    seed_b : int, optional
        Seed of the second model (default ``seed + 1000``).
    **kwargs
        Passed to :func:`disagreement`.

    Returns
    -------
    DisagreementResult
    """
    return disagreement(emb, emb, task, model, seed, seed_b=seed + 1000 if seed_b is None else seed_b, **kwargs)

"""The study's shared task functions: compress (pair protocol) → measure → row, and what kinds share.

A kind's own task functions (source pair, training, downstream) live with the kind; they use
:func:`guarded` and :data:`GLOBAL_RNG_LOCK` from here.

Each task reads its inputs from the artifact store and writes its output there under the hash of
its configuration, and first checks whether that output already exists (so a restarted study, or
a second worker given the same task, skips the work). The computations themselves come from a
:class:`Steps` bundle, by default the real :mod:`embstab.data`, :mod:`embstab.train`,
:mod:`embstab.compress`, :mod:`embstab.measures` and :mod:`embstab.downstream` functions; the
runner's graph logic never depends on which functions they are.
"""

from __future__ import annotations

import functools
import inspect
import threading
import traceback as tb
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from embstab.compress import compress_pair, memory_bits
from embstab.compress.vectorstore import STORE_PRECISION_OF_BITS, compress_for_store
from embstab.data import load_corpus, make_corpus_pair
from embstab.downstream import disagreement
from embstab.downstream.intervals import disagreement_interval
from embstab.embedding import Embedding, shared_vocabulary
from embstab.errors import EmbstabError, RunError
from embstab.measures import REGISTRY
# from its own module: once imported, the module embstab.measures.compare shadows the lazy function
from embstab.measures.compare import Anchors, compare
from embstab.measures.null import NullLevel, has_signal
from embstab.study.kinds import KINDS
from embstab.study.store import ArtifactStore, config_hash

__all__ = ["Steps", "default_steps", "StudyTaskError", "measure_pair", "run_compress", "run_measures", "assemble_row",
           "NULL_SETTINGS", "nulls_key", "guarded", "stored", "GLOBAL_RNG_LOCK", "STORED_QUALITY_KEYS", "downstream_output",
           "stored_qualities"]

#: Held while a task seeds torch's process-global RNG (``fork_rng`` + ``manual_seed``: downstream
#: models, PyKEEN and BERT trainings), which two threads of one worker would share; serialising
#: those tasks per process keeps each model a function of its seed on multi-threaded Dask workers too.
GLOBAL_RNG_LOCK = threading.Lock()

#: The keys under which a kind's downstream artifact stores each member's quality. They keep the
#: names they were first stored under (the new member's ``quality_a``, the old member's
#: ``quality_b``), so stored artifacts are read as they are; everywhere else, from the downstream
#: model to the result row, the qualities are ``quality_old`` and ``quality_new``.
STORED_QUALITY_KEYS = {"quality_old": "quality_b", "quality_new": "quality_a"}

#: How a study row's nulls are found (:func:`embstab.compare`'s ``null_samples``, ``null_seed`` and
#: ``null_method``): closed forms where they exist, else 3 seeded row shuffles. They name the nulls'
#: artifact, not the measures', so measures stored before nulls existed are reused as they are.
NULL_SETTINGS = {"samples": 3, "seed": 0, "method": "auto"}
#: Bumped when the way nulls are computed changes meaning.
NULLS_VERSION = 1


def nulls_key(measures_key: str) -> str:
    """The artifact name of the nulls of the measures stored under ``measures_key``.

    Parameters
    ----------
    measures_key : str
        The measures task's configuration hash.

    Returns
    -------
    str
        The hash of the measures key and :data:`NULL_SETTINGS`.
    """
    return config_hash({"v": NULLS_VERSION, "stage": "nulls", "measures": measures_key, **NULL_SETTINGS})


class StudyTaskError(RunError):
    """A study task failed; names the stage and keeps the original error and traceback.

    Parameters
    ----------
    stage : str
        ``corpus``, ``train``, ``compress``, ``measures``, ``downstream`` or ``row``.
    message : str
        ``"ExceptionType: message"`` of the original error.
    traceback : str
        The formatted traceback of the original error (kept as text: it must cross processes).
    """

    def __init__(self, stage: str, message: str, traceback: str = "") -> None:
        self.stage = stage
        self.message = message
        self.traceback = traceback
        super().__init__(f"{stage} failed: {message}")

    def __reduce__(self):  # keep the fields when dask pickles the exception between processes
        return (StudyTaskError, (self.stage, self.message, self.traceback))


@dataclass(frozen=True)
class Steps:
    """The computations a study runs; every field is a plain (picklable, module-level) function.

    Attributes
    ----------
    load_corpus : ``(name) -> list[list[str]]``
    make_corpus_pair : ``(docs, kind, fraction, seed) -> (old_docs, new_docs)``
    train_embedding : ``(docs, algo, dim, seed, epochs, min_count, window, progress[, recipe]) -> Embedding``
        (``recipe`` is passed only for a training recipe other than fp32)
    compress_pair : ``(old, new, bits, rounding, seed[, transform]) -> (old_q, new_q)``
        (``transform`` is passed only for a compression transform other than none)
    measure_pair : ``(old, new, anchor_old, anchor_new, measures_config) -> {name: value}``
        (when ``measures_config`` holds ``null``, settings as :data:`NULL_SETTINGS`, the result may
        also hold ``"nulls"``: measure name → ``{"value", "spread", "samples", "method"}``)
    disagreement : ``(old, new, task, model, seed, **options) -> result`` with attributes
        ``disagreement``, ``quality_old``, ``quality_new`` (percent)
    """

    load_corpus: Callable[..., Any]
    make_corpus_pair: Callable[..., Any]
    train_embedding: Callable[..., Any]
    compress_pair: Callable[..., Any]
    measure_pair: Callable[..., Any]
    disagreement: Callable[..., Any]


def default_steps() -> Steps:
    """The real embstab functions: the shared ones, and each registered kind's own.

    A computation that belongs to one kind (the word kind's trainer) comes from that kind's
    :attr:`~embstab.study.kinds.StudyKind.steps` in the registry, so the study engine imports no kind.

    Returns
    -------
    Steps
        :func:`embstab.data.load_corpus`, :func:`embstab.data.make_corpus_pair`,
        :func:`embstab.compress.compress_pair`, :func:`measure_pair`,
        :func:`embstab.downstream.disagreement`, and the kinds' computations
        (:func:`embstab.train.train_embedding`, from the word kind).

    Raises
    ------
    ValueError
        If a kind names a field :class:`Steps` does not have, or two sources give one field
        different functions.
    RunError
        If no registered kind gives a field of :class:`Steps`.
    """
    given: dict[str, Callable[..., Any]] = {"load_corpus": load_corpus, "make_corpus_pair": make_corpus_pair,
                                            "compress_pair": compress_pair, "measure_pair": measure_pair,
                                            "disagreement": disagreement}
    fields = set(Steps.__dataclass_fields__)
    for kind in KINDS.values():
        for name, fn in kind.steps.items():
            if name not in fields:
                raise ValueError(f"study kind {kind.name!r}: steps has no field {name!r} (choose from "
                                 f"{', '.join(sorted(fields))})")
            if given.setdefault(name, fn) is not fn:
                raise ValueError(f"study kind {kind.name!r}: steps.{name} is already given another function")
    missing = sorted(fields - set(given))
    if missing:
        raise RunError(f"no registered study kind gives the computation {', '.join(missing)} of the study's steps")
    return Steps(**given)


def measure_pair(old: Embedding, new: Embedding, anchor_old: Embedding, anchor_new: Embedding,
                 config: Mapping[str, Any]) -> dict[str, float]:
    """Every requested measure of one pair, old member first; the new member's frequency order picks the words.

    The values come from :func:`embstab.compare`, the one path from a pair to measure values.

    Parameters
    ----------
    old, new : Embedding
        The compressed pair, old member first (the new member's frequency order picks the top-n
        words, as in the paper, where the new embedding is the caller).
    anchor_old, anchor_new : Embedding
        The anchors (highest-dimension, full-precision pair of the same algorithm and seed), old first.
    config : mapping
        ``names``, ``top_n`` and ``params`` (per-measure parameters; see
        :class:`embstab.study.schema.MeasureSpec`), and optionally ``null``: ``samples``, ``seed``
        and ``method`` of each measure's null (:func:`embstab.compare`'s ``null_*`` arguments).

    Returns
    -------
    dict
        Measure name → raw value, plus ``"n_words"``: how many words were compared, and with
        ``null`` in ``config``, ``"nulls"``: measure name → its null level (``value``, ``spread``,
        ``samples``, ``method``; see :class:`embstab.measures.null.NullLevel`).
    """
    # anchors come from the same corpora, but a different dimension may in principle keep other
    # words (trainers can drop rare words differently); compare what all four share, up to top_n.
    words = shared_vocabulary(old, new, int(config["top_n"]), rank_by="b", also_in=(anchor_old, anchor_new))
    null = dict(config.get("null") or {"samples": 0})
    df = compare(old, new, anchors=_anchors(anchor_old, anchor_new), measures=list(config["names"]),
                 top_n=len(words), rank_by="new", params=dict(config.get("params") or {}),
                 null_samples=int(null.get("samples", 0)), null_seed=int(null.get("seed", 0)),
                 null_method=str(null.get("method", "auto")))
    out: dict[str, Any] = {"n_words": float(df.attrs["n_words"])}
    out.update({row.measure: float(row.value) for row in df.itertuples()})
    if config.get("null") is not None:
        out["nulls"] = {name: {k: (float(v) if k in ("value", "spread") else v) for k, v in level.items()}
                        for name, level in df.attrs["null_levels"].items()}
    return out


#: The last few anchor pairs a process measured against, by identity (each entry holds them, so an
#: identity is not reused while it is here).
_ANCHORS: dict[tuple[int, int], Anchors] = {}
_ANCHORS_KEPT = 4
_ANCHORS_LOCK = threading.Lock()


def _anchors(anchor_old: Embedding, anchor_new: Embedding) -> Anchors:
    # every pair of an (algorithm, seed) is measured against the same anchors (one object per
    # process, from _embedding's cache) and mostly on the same words: factor them once, not per pair
    key = (id(anchor_old), id(anchor_new))
    with _ANCHORS_LOCK:  # threads of one worker share it
        if key not in _ANCHORS:
            while len(_ANCHORS) >= _ANCHORS_KEPT:
                _ANCHORS.pop(next(iter(_ANCHORS)))
            _ANCHORS[key] = Anchors(anchor_old, anchor_new)
        return _ANCHORS[key]


# --------------------------------------------------------------------------------------------
# task functions: (store, steps, configs...) -> small value; the heavy data stays in the store


def guarded(stage: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a task function: any exception becomes a picklable :class:`StudyTaskError`
    naming the stage (a :class:`StudyTaskError` from upstream passes through unchanged).

    Parameters
    ----------
    stage : str
        The stage the task belongs to (``corpus``, ``train``, ``compress``...).

    Returns
    -------
    callable
        The decorator.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except StudyTaskError:
                raise  # an upstream failure passed through; keep its stage
            except Exception as exc:  # noqa: BLE001 - recorded per task, the study goes on
                raise StudyTaskError(stage, f"{type(exc).__name__}: {exc}", tb.format_exc()) from None

        return inner

    return wrap


#: How :func:`stored` asks the store whether an artifact exists, by the artifact's form.
_PRESENT: dict[str, Callable[..., bool]] = {
    "docs": lambda store, key, name: store.has_docs(name, key),
    "embedding": lambda store, key, name: store.has_embedding(name, key),
    "json": lambda store, key, name: store.has_json(name, key),
    "file": lambda store, key, name, ext: store.exists(name, key, ext),
}


def stored(*artifacts: tuple[str, ...], load: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a task function: skip the work when its output is already in the store.

    The task's ``store`` and ``key`` arguments (positional ``store, steps, key, ...`` or by name)
    name where its output lives; when every artifact of ``artifacts`` exists under ``key``, the
    task returns at once (a restarted study, or a second worker given the same task, skips the
    work), otherwise it runs. Put it under :func:`guarded`, so a failing look-up is recorded with
    the task's stage.

    Parameters
    ----------
    *artifacts : tuple of str
        The artifacts the task writes, each ``(form, name)`` with form ``docs``, ``embedding`` or
        ``json``, or ``("file", name, ext)`` for a file of that extension.
    load : bool
        Return the first artifact's stored value (a ``json`` artifact, read with
        :meth:`~embstab.study.store.ArtifactStore.get_json`) instead of ``key``.

    Returns
    -------
    callable
        The decorator.

    Raises
    ------
    ValueError
        If no artifact is named, one has an unknown form or the wrong length, or ``load`` is asked
        of an artifact that is not ``json``.
    """
    if not artifacts:
        raise ValueError("stored: name at least one artifact the task writes")
    for artifact in artifacts:
        form = artifact[0] if artifact else None
        if form not in _PRESENT or len(artifact) != (3 if form == "file" else 2):
            raise ValueError(f"stored: artifact {artifact!r} is not (form, name) with form docs, embedding or "
                             f"json, nor ('file', name, ext)")
    if load and artifacts[0][0] != "json":
        raise ValueError(f"stored: load reads a json artifact, not {artifacts[0]!r}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind_partial(*args, **kwargs).arguments
            store, key = bound["store"], bound["key"]
            # in the order given, stopping at the first missing one, as a chain of ``and`` would
            if all(_PRESENT[form](store, key, *rest) for form, *rest in artifacts):
                return store.get_json(artifacts[0][1], key) if load else key
            return fn(*args, **kwargs)

        return inner

    return wrap


@functools.lru_cache(maxsize=8)
def _embedding(store: ArtifactStore, kind: str, key: str) -> Embedding:
    # anchors are read by every measure task of their (algo, seed); cache a few per process
    return store.get_embedding(kind, key)


@guarded("compress")
@stored(("embedding", "pair_new"), ("embedding", "pair_old"))
def run_compress(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], old_key: str,
                 new_key: str) -> str:
    """Compress a pair with the pair protocol (artifacts ``pair_old``/``pair_new``).

    Parameters
    ----------
    store : ArtifactStore
        Where the inputs are read and the output is written.
    steps : Steps
        The computations to run.
    key : str
        The configuration hash under which the output is stored.
    config : mapping
        The compression configuration: ``bits``, ``rounding``, ``seed`` and optionally
        ``transform``, ``truncate`` (keep each member's leading dimensions first) and ``scheme``
        (``vector_store``: each member's codes as :func:`embstab.compress.vectorstore.compress_for_store`
        keeps them, instead of the pair protocol); also written as the artifact's sidecar.
    old_key, new_key : str
        Keys of the trained old and new embeddings (:func:`run_train`).

    Returns
    -------
    str
        ``key``.

    Raises
    ------
    StudyTaskError
        Any failure of the task, with stage ``compress`` (an upstream task's error passes through unchanged).
    """
    old, new = _embedding(store, "embedding", old_key), _embedding(store, "embedding", new_key)
    if "truncate" in config:  # each member's own leading dimensions, before the pair is aligned
        old, new = (e.with_vectors(np.asarray(e.vectors)[:, :int(config["truncate"])]) for e in (old, new))
    if config.get("scheme") == "vector_store":  # each member stored on its own, as a vector store keeps it
        precision = STORE_PRECISION_OF_BITS[int(config["bits"])]
        store.put_embedding("pair_old", key, compress_for_store(old, precision), config)
        store.put_embedding("pair_new", key, compress_for_store(new, precision), config)
        return key
    seed = config["seed"] if config["rounding"].startswith("stochastic") else None
    extra = {}
    if "transform" in config:
        extra["transform"] = config["transform"]
        seed = config["seed"]  # the rotation is drawn from the seed, whatever the rounding
    old_q, new_q = steps.compress_pair(old, new, config["bits"], rounding=config["rounding"], seed=seed, **extra)
    # old first, new last: a pair counts as present only once its second half exists
    store.put_embedding("pair_old", key, old_q, config)
    store.put_embedding("pair_new", key, new_q, config)
    return key


@guarded("measures")
def run_measures(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], pair_key: str,
                 anchor_key: str, uncompressed_key: str | None = None) -> dict[str, Any]:
    """All measures of one pair against its anchors, and their nulls (artifacts ``measures`` and
    ``nulls``, JSON).

    With ``uncompressed_key`` (the new member's training), also the k-NN overlap of the compressed
    new member with its uncompressed self, as ``agreement_uncompressed``.

    The nulls (:data:`NULL_SETTINGS`) are stored apart from the values, under :func:`nulls_key`:
    measures stored before nulls existed keep their name and are read as they are, and only their
    nulls are computed (from the stored pair; nothing is trained again).

    Parameters
    ----------
    store : ArtifactStore
        Where the inputs are read and the output is written.
    steps : Steps
        The computations to run.
    key : str
        The configuration hash under which the output is stored.
    config : mapping
        The configuration: ``measures`` (as for :func:`measure_pair`) and ``pair`` (the
        compression configuration, whose ``new`` entry is the new member's training configuration);
        also written as the artifact's sidecar.
    pair_key : str
        Key of the compressed pair (:func:`run_compress`).
    anchor_key : str
        Key of the compressed anchor pair.
    uncompressed_key : str, optional
        Key of the new member's uncompressed training.

    Returns
    -------
    dict
        Measure name → value, plus ``n_words``, ``agreement_uncompressed`` with ``uncompressed_key``,
        ``memory_bits_per_word`` when a transform or a kg/contextual member states its own storage,
        and ``nulls`` (measure name → ``value``, ``spread``, ``samples``, ``method`` and ``signal``)
        when the measure function gives them.

    Raises
    ------
    StudyTaskError
        Any failure of the task, with stage ``measures`` (an upstream task's error passes through unchanged).
    """
    null_key = nulls_key(key)
    have_values, have_nulls = store.has_json("measures", key), store.has_json("nulls", null_key)
    values = store.get_json("measures", key) if have_values else None
    nulls = store.get_json("nulls", null_key) if have_nulls else None
    if values is None or nulls is None:
        old, new = store.get_embedding("pair_old", pair_key), store.get_embedding("pair_new", pair_key)
        anchor_old, anchor_new = _embedding(store, "pair_old", anchor_key), _embedding(store, "pair_new", anchor_key)
        measured = dict(steps.measure_pair(old, new, anchor_old, anchor_new,
                                           {**config["measures"], "null": dict(NULL_SETTINGS)}))
        nulls = measured.pop("nulls", None)
        if values is None:
            values = _measured_values(store, steps, config, new, measured, uncompressed_key)
            store.put_json("measures", key, values, config)
        if nulls is not None:
            store.put_json("nulls", null_key, nulls, {"v": NULLS_VERSION, "stage": "nulls", "measures": key,
                                                      **NULL_SETTINGS})
    out: dict[str, Any] = dict(values)
    if nulls:
        out["nulls"] = {name: {**level, "signal": _signal(name, values.get(name), level)}
                        for name, level in nulls.items()}
    return out


def _measured_values(store: ArtifactStore, steps: Steps, config: Mapping[str, Any], new: Embedding,
                     measured: Mapping[str, Any], uncompressed_key: str | None) -> dict[str, float]:
    """The measures artifact's content: the values, the self-agreement and the stated memory."""
    values = {k: float(v) for k, v in measured.items()}
    if uncompressed_key is not None:
        raw = _embedding(store, "embedding", uncompressed_key)
        params = dict(config["measures"].get("params") or {})
        self_cfg = {"names": ["knn"], "top_n": config["measures"]["top_n"], "params": {"knn": params.get("knn", {})}}
        # the compressed member (new) against itself uncompressed (old): the raw member anchors both
        own = steps.measure_pair(raw, new, raw, raw, self_cfg)
        values["agreement_uncompressed"] = float(own["knn"])
    stored = (new.metadata.get("compression") or {}).get("memory_bits_per_word")
    # a transform stores more (OCS, padding) or less (TT) than dim x bits per word; a member of a
    # kg or contextual study (its training configuration names its kind) states its bits per row
    # (a complex KG model stores two entries per dimension)
    if ("transform" in config["pair"] or "kind" in config["pair"]["new"]) and stored is not None:
        values["memory_bits_per_word"] = float(stored)
    return values


def _signal(name: str, value: Any, level: Mapping[str, Any]) -> bool | None:
    """Whether the stored value is clearly apart from its stored null (None without either)."""
    if name not in REGISTRY or value is None or level.get("value") is None:
        return None
    null = NullLevel(float(level["value"]), float(level.get("spread", 0.0)), int(level.get("samples", 0)),
                     str(level.get("method", "permutation")))
    return has_signal(REGISTRY[name], float(value), null)


def downstream_output(disagreement: float, quality_old: float, quality_new: float, n_test: int,
                      **more: Any) -> dict[str, Any]:
    """What a kind's downstream task stores: the disagreement and both qualities, under their stored keys.

    Parameters
    ----------
    disagreement : float
        The share of flipped predictions, in percent.
    quality_old, quality_new : float
        Each member's downstream quality, in percent (stored under :data:`STORED_QUALITY_KEYS`).
    n_test : int
        The number of test items the disagreement is a share of.
    **more
        Further entries, stored as given (``chance``, ``details``...).

    Returns
    -------
    dict
        ``disagreement``, the two qualities, ``n_test`` and ``more``.
    """
    return {"disagreement": float(disagreement), STORED_QUALITY_KEYS["quality_new"]: float(quality_new),
            STORED_QUALITY_KEYS["quality_old"]: float(quality_old), "n_test": int(n_test), **more}


def stored_qualities(downstream: Mapping[str, Any]) -> tuple[Any, Any]:
    """The old and the new member's quality in a stored downstream output.

    Parameters
    ----------
    downstream : mapping
        The output of a kind's downstream task (:func:`downstream_output`).

    Returns
    -------
    (quality_old, quality_new)
        In percent; None where nothing was run.
    """
    return downstream[STORED_QUALITY_KEYS["quality_old"]], downstream[STORED_QUALITY_KEYS["quality_new"]]


@guarded("row")
def assemble_row(meta: Mapping[str, Any], measures: Mapping[str, float],
                 downstream: Mapping[str, Any]) -> dict[str, Any]:
    """One result row in the shared convention (new embedding's quality as ``quality``).

    Parameters
    ----------
    meta : mapping
        The row's configuration columns (``dim`` and ``bitrate`` at least).
    measures : mapping
        The output of :func:`run_measures`.
    downstream : mapping
        The output of :func:`run_downstream`.

    Returns
    -------
    dict
        ``meta`` plus ``memory`` (the stored bits per word, default dim x bitrate), ``disagreement``,
        ``quality``, ``quality_old``, ``chance`` (the task's chance level in the unit of the qualities;
        None when the downstream output, e.g. one stored by an older embstab, does not state it),
        ``measures`` (the measure values), ``nulls`` (measure name → its null level and ``signal``;
        empty when the measures carry none) and ``extra`` (``n_words``, ``n_test``,
        ``disagreement_low`` and ``disagreement_high``: the disagreement's 95 % sampling interval
        over the ``n_test`` items, when the disagreement is a share of them; and the task's details).

    Raises
    ------
    StudyTaskError
        Any failure of the task, with stage ``row`` (an upstream task's error passes through unchanged).
    """
    measure_values = {k: v for k, v in measures.items() if k not in ("n_words", "memory_bits_per_word", "nulls")}
    # agreement_uncompressed stays with the measures: a column of the results beside them
    memory = measures.get("memory_bits_per_word", memory_bits(int(meta["dim"]), int(meta["bitrate"])))
    quality_old, quality_new = stored_qualities(downstream)
    # "details": what a kind's task reports beside the disagreement (e.g. a KG model's Hits@10)
    return {**meta, "memory": float(memory),
            "disagreement": downstream["disagreement"], "quality": quality_new,
            "quality_old": quality_old, "chance": downstream.get("chance"), "measures": measure_values,
            "nulls": dict(measures.get("nulls") or {}),
            "extra": {"n_words": int(measures.get("n_words", 0)), "n_test": downstream.get("n_test", 0),
                      **_disagreement_interval_columns(downstream), **dict(downstream.get("details") or {})}}


def _disagreement_interval_columns(downstream: Mapping[str, Any]) -> dict[str, float]:
    """A row's ``disagreement_low`` / ``disagreement_high``: the sampling interval of its disagreement.

    Every kind's disagreement is a share of its ``n_test`` items (texts, tokens, queries, nodes), so
    the interval is :func:`embstab.downstream.intervals.disagreement_interval` of that share; a
    downstream output that states the interval itself is taken as it is.

    Parameters
    ----------
    downstream : mapping
        The output of a kind's downstream task (``disagreement`` in percent, ``n_test``).

    Returns
    -------
    dict of str to float
        Both ends in percent; empty when the output has no test items or its disagreement is no
        whole number of them (then there is no binomial interval to give).
    """
    if "disagreement_low" in downstream and "disagreement_high" in downstream:
        return {"disagreement_low": float(downstream["disagreement_low"]),
                "disagreement_high": float(downstream["disagreement_high"])}
    n, share = int(downstream.get("n_test") or 0), downstream.get("disagreement")
    if n <= 0 or share is None or not 0.0 <= float(share) <= 100.0:
        return {}
    flipped = int(round(float(share) * n / 100.0))
    if abs(100.0 * flipped / n - float(share)) > 1e-6:
        return {}
    low, high = disagreement_interval(flipped, n)
    return {"disagreement_low": low, "disagreement_high": high}

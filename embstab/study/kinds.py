"""Study kinds: what a study of word, knowledge-graph or contextual embeddings builds and trains.

A kind says how the *source pair* is built (two versions of a corpus, two versions of a graph, a
corpus pair plus a tokenizer for BERT pretraining), how *one member* of a pair is trained into an
:class:`~embstab.Embedding` (word2vec/GloVe/…, a PyKEEN model's entity table, a BERT model's
word-type features), how a pair is compressed, and which downstream tasks it accepts. Measuring a
compressed pair against its anchors (the largest-dimension full-precision pair of each version,
same seed) and assembling the result row are shared by every kind, so rows of every kind land in
one results table, one report and one ``recommend``.

The registry :data:`KINDS` is the only place that knows which kinds exist; the schema, the plan
and the runner ask it. The word kind's configurations are exactly those of studies written before
kinds existed, so their fingerprints, artifacts and row ids are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import embstab.study.kind_contextual as KC
import embstab.study.kind_kg as KG
import embstab.study.steps as S
from embstab.errors import did_you_mean
from embstab.study.settings import Setting, TaskRule

if TYPE_CHECKING:
    from embstab.study.plan import Variant
    from embstab.study.schema import StudySpec

__all__ = ["StudyKind", "TaskRule", "Setting", "CorpusSpec", "KINDS", "get_kind", "PLAN_VERSION",
           "REFERENCE_RECIPE", "PAIR_KINDS"]

#: Bumped when the meaning of a configuration changes, so old artifacts are not reused.
PLAN_VERSION = 1
#: The training recipe of the anchors (and the recipe axis' default).
REFERENCE_RECIPE = "fp32"
#: How two corpus versions differ (see :func:`embstab.data.make_corpus_pair`).
PAIR_KINDS = ("leave_out", "extend")


@dataclass(frozen=True)
class CorpusSpec:
    """The corpus pair: one corpus from :func:`embstab.data.load_corpus`, split into old/new."""

    name: str
    pair: str = "leave_out"
    fraction: float = 0.05
    seed: int = 0
    max_docs: int | None = None


@dataclass(frozen=True)
class StudyKind:
    """What one kind of embedding study builds, trains and accepts downstream.

    Attributes
    ----------
    name : str
        The value of the study file's ``kind:`` key (reports describe it with
        :data:`embstab.selection.KIND_LABELS`: what the embeddings are, what a memory unit is).
    source_key : str
        Top-level key of the study file that defines the source pair (``corpus`` or ``graph``).
    source_stage : str
        Name of the task that builds the source pair.
    parse_source : callable
        ``(validator, mapping) -> spec`` of the ``source_key`` section.
    algorithms : callable
        ``(validator, value) -> tuple of str``: the validated ``training.algorithms``.
    training : dict or None
        Kind-specific ``training`` settings (:class:`Setting`); None for the word kind, whose
        settings are :class:`~embstab.study.schema.TrainingSpec`'s fields.
    tasks : callable or None
        ``() -> {task: TaskRule}``; None for the word kind (tasks and models of
        :mod:`embstab.downstream`).
    check : callable or None
        ``(validator, spec) -> None``: cross-checks of a parsed study of this kind.
    source_config, train_config : callable
        The configurations (hashed into artifact names) of the source pair and of one member.
    run_source, run_train, run_compress, run_downstream : callable
        The task functions of the plan (module-level, so Dask can pickle them).
    """

    name: str
    source_key: str
    source_stage: str
    parse_source: Callable[[Any, Any], Any]
    algorithms: Callable[[Any, Any], tuple[str, ...]]
    training: dict[str, Setting] | None
    tasks: Callable[[], dict[str, TaskRule]] | None
    check: Callable[[Any, Any], None] | None
    source_config: Callable[[StudySpec], dict[str, Any]]
    train_config: Callable[[StudySpec, str, Variant], dict[str, Any]]
    run_source: Callable[..., Any]
    run_train: Callable[..., Any]
    run_compress: Callable[..., Any]
    run_downstream: Callable[..., Any]


# --------------------------------------------------------------------------------------------
# the word kind: corpus pair -> gensim/torch trainers -> embstab.downstream tasks


def parse_corpus(v: Any, value: Any) -> CorpusSpec:
    """The ``corpus`` section: ``{name*, pair, fraction, seed, max_docs}``.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    value : Any
        The section as read from the study file.
    """
    c = v.mapping(value, "corpus", {"name": True, "pair": False, "fraction": False, "seed": False, "max_docs": False})
    pair = v.string(c.get("pair", "leave_out"), "corpus.pair", PAIR_KINDS)
    return CorpusSpec(
        name=_corpus_name(v, c["name"]),
        pair=pair,
        fraction=v.number(c.get("fraction", 0.05), "corpus.fraction", 0.0, 0.5 if pair == "leave_out" else 1.0,
                          open_low=True, open_high=True),
        seed=v.integer(c.get("seed", 0), "corpus.seed", 0),
        max_docs=None if c.get("max_docs") is None else v.integer(c["max_docs"], "corpus.max_docs", 2),
    )


def _corpus_name(v: Any, value: Any) -> str:
    name = v.string(value, "corpus.name")
    from embstab.data import corpus_names  # noqa: PLC0415

    known = tuple(corpus_names())
    for part in name.split("+"):
        if part not in known:
            hint = did_you_mean(part, known)
            raise v.fail("corpus.name", f"unknown corpus {part!r} (choose from {', '.join(known)}, "
                                        f"or join several with '+'){hint}")
    return name


def _word_algorithms(v: Any, value: Any) -> tuple[str, ...]:
    from embstab.train import ALGOS  # noqa: PLC0415

    return v.str_list(value, "training.algorithms", tuple(ALGOS))


def word_source_config(spec: StudySpec) -> dict[str, Any]:
    """The corpus pair's configuration (every other configuration nests it).

    Parameters
    ----------
    spec : StudySpec
        The study.
    """
    # the embstab version is part of it, so a new release never reuses older artifacts
    import embstab  # noqa: PLC0415 - at call time: embstab/__init__ may itself import this module

    return {"v": PLAN_VERSION, "embstab": embstab.__version__, "stage": "corpus", **asdict(spec.corpus)}


def word_train_config(spec: StudySpec, side: str, v: Variant) -> dict[str, Any]:
    """One word embedding: algorithm, dimension, seed and trainer settings on one corpus version.

    Parameters
    ----------
    spec : StudySpec
        The study.
    side : str
        ``old`` or ``new``.
    v : Variant
        The grid point (algorithm, recipe, seed, dimension...).
    """
    t = spec.training
    cfg = {"v": PLAN_VERSION, "stage": "train", "corpus": word_source_config(spec), "side": side, "algo": v.algo,
           "dim": v.dim, "seed": v.seed, "epochs": t.epochs, "min_count": t.min_count, "window": t.window}
    if v.recipe != REFERENCE_RECIPE:  # the key only when it matters: fp32 trainings keep their names
        cfg["recipe"] = v.recipe
    return cfg


WORD = StudyKind(
    name="word", source_key="corpus", source_stage="corpus",
    parse_source=parse_corpus, algorithms=_word_algorithms, training=None, tasks=None, check=None,
    source_config=word_source_config, train_config=word_train_config,
    run_source=S.run_corpus, run_train=S.run_train, run_compress=S.run_compress, run_downstream=S.run_downstream,
)


# --------------------------------------------------------------------------------------------
# the knowledge-graph and contextual kinds (their settings and tasks live with their task functions)


def _kind_train_config(spec: StudySpec, side: str, v: Variant, source: dict[str, Any]) -> dict[str, Any]:
    # "kind" marks a member whose compressed table states its own memory per row
    return {"v": PLAN_VERSION, "stage": "train", "kind": spec.kind, "source": source, "side": side,
            "algo": v.algo, "dim": v.dim, "seed": v.seed, **spec.training.params_dict()}


def _graph_source_config(spec: StudySpec) -> dict[str, Any]:
    import embstab  # noqa: PLC0415

    return {"v": PLAN_VERSION, "embstab": embstab.__version__, "stage": "graph", "kind": "kg", **asdict(spec.graph)}


def _contextual_source_config(spec: StudySpec) -> dict[str, Any]:
    import embstab  # noqa: PLC0415

    p = spec.training.params_dict()
    # the tokenizer, the held-out text and the word-type sample are made with the corpus pair
    return {"v": PLAN_VERSION, "embstab": embstab.__version__, "stage": "corpus", "kind": "contextual",
            **asdict(spec.corpus), **KC.source_settings(p)}


KG_KIND = StudyKind(
    name="kg", source_key="graph", source_stage="graph",
    parse_source=KG.parse_graph, algorithms=KG.check_algorithms, training=KG.TRAINING, tasks=KG.tasks,
    check=KG.check_study, source_config=_graph_source_config,
    train_config=lambda spec, side, v: _kind_train_config(spec, side, v, _graph_source_config(spec)),
    run_source=KG.run_source, run_train=KG.run_train, run_compress=KG.run_compress,
    run_downstream=KG.run_downstream,
)

CONTEXTUAL = StudyKind(
    name="contextual", source_key="corpus", source_stage="corpus", parse_source=parse_corpus,
    algorithms=KC.check_algorithms, training=KC.TRAINING, tasks=KC.tasks, check=KC.check_study, source_config=_contextual_source_config,
    train_config=lambda spec, side, v: _kind_train_config(spec, side, v, _contextual_source_config(spec)),
    run_source=KC.run_source, run_train=KC.run_train, run_compress=S.run_compress,
    run_downstream=KC.run_downstream,
)

#: Every study kind by name; ``word`` is the default of a study file without ``kind:``.
KINDS: Mapping[str, StudyKind] = {k.name: k for k in (WORD, KG_KIND, CONTEXTUAL)}


def get_kind(name: str) -> StudyKind:
    """The registered kind called ``name``.

    Parameters
    ----------
    name : str
        ``"word"``, ``"kg"`` or ``"contextual"``.

    Returns
    -------
    StudyKind

    Raises
    ------
    UnknownNameError
        For a name that is not registered.
    """
    from embstab.errors import lookup  # noqa: PLC0415

    return lookup(KINDS, name, "study kind")

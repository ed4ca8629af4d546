"""The word study kind: corpus-version pairs, the word trainers, the word downstream tasks.

Source pair: two versions of a corpus (:func:`embstab.data.make_corpus_pair`: a share of the
documents left out, or added). Member: :func:`embstab.train.train_embedding` of one algorithm
(word2vec, fastText, GloVe, matrix completion) on one version, optionally under a reduced-precision
training recipe. Compression: the shared pair protocol, with the compression transforms.
Downstream: the sentence-classification and tagging tasks of :mod:`embstab.downstream`, one model
per member with the same seed. Memory is bits per word.

Its configurations are exactly those of studies written before kinds existed (no ``kind`` key), so
their fingerprints, artifacts and row ids are unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from embstab.study.corpus import PAIR_KINDS, CorpusSpec, parse_corpus
from embstab.study.kinds import StudyKind
from embstab.study.settings import (
    PLAN_VERSION,
    REFERENCE_RECIPE,
    Setting,
    TaskRule,
    source_config,
)
from embstab.study.steps import GLOBAL_RNG_LOCK, Steps, downstream_output, guarded, run_compress, stored
from embstab.study.store import ArtifactStore
from embstab.train.api import train_embedding

if TYPE_CHECKING:
    from embstab.study.plan import Variant
    from embstab.study.schema import StudySpec

__all__ = ["CorpusSpec", "PAIR_KINDS", "TRAINING", "TORCH_ALGORITHMS", "COMMON_TASK_OPTIONS", "KIND",
           "parse_corpus", "check_algorithms", "check_study", "tasks", "word_source_config",
           "word_train_config", "run_corpus", "run_train", "run_downstream"]

#: Trainers that take a training recipe (gensim's C loops update float32 tables with no hook).
TORCH_ALGORITHMS = ("glove", "mc")
#: Options of a downstream entry that every model takes: the data (limit, split_seed, folds: 1 for the
#: fixed split, k for k-fold), the second model's seed, the coverage floor and the training settings.
COMMON_TASK_OPTIONS = ("limit", "split_seed", "folds", "seed_b", "min_coverage", "lr", "epochs", "batch_size",
                       "patience", "max_len", "threads")

#: ``training`` settings of a word study (passed to :func:`embstab.train.train_embedding`).
TRAINING = {
    "epochs": Setting(5, "int", 1, 10_000),
    "min_count": Setting(5, "int", 1),
    "window": Setting(5, "int", 1, 1000),
}


def check_algorithms(v: Any, value: Any) -> tuple[str, ...]:
    """``training.algorithms`` of a word study: names of :data:`embstab.train.ALGOS`.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    value : Any
        The list as read from the study file.

    Returns
    -------
    tuple of str
        The algorithm names.
    """
    from embstab.train import ALGOS  # noqa: PLC0415

    return v.str_list(value, "training.algorithms", tuple(ALGOS))


def check_study(v: Any, spec: Any) -> None:
    """Cross-checks of a word study: a training recipe other than fp32 needs a torch trainer.

    Parameters
    ----------
    v : validator
        The schema's validator.
    spec : StudySpec
        The parsed study.

    Raises
    ------
    StudyDefinitionError
        If a reduced-precision recipe meets a gensim trainer, naming ``training.recipes``.
    """
    reduced = [r for r in spec.training.recipes if r != REFERENCE_RECIPE]
    gensim_algos = [a for a in spec.training.algorithms if a not in TORCH_ALGORITHMS]
    if reduced and gensim_algos:
        raise v.fail("training.recipes", f"recipe {reduced[0]!r} needs a torch trainer "
                                         f"({', '.join(TORCH_ALGORITHMS)}); {gensim_algos[0]} trains only in fp32")


def tasks() -> dict[str, TaskRule]:
    """The downstream tasks of a word study (:data:`embstab.downstream.TASKS`) and their models.

    Returns
    -------
    dict of str to TaskRule
        Per task, the models of its kind (classification or tagging; ``linear`` first for
        classification), the options every model takes, and each model's own constructor arguments
        (``hidden``, ``dropout``, ``filters``...), read from its signature.
    """
    import inspect  # noqa: PLC0415

    from embstab.downstream import MODELS, TASKS  # noqa: PLC0415 (torch: only when a study is parsed)
    from embstab.downstream import models as m  # noqa: PLC0415

    classes = {"linear": m.LinearBoW, "mlp": m.MeanMLP, "cnn": m.KimCNN, "lstm": m.LSTMClassifier,
               "bilstm": m.BiLSTMTagger, "bilstm_crf": m.BiLSTMTagger}
    fixed = {"self", "table", "dim", "n_classes", "n_tags", "crf"}
    own = {model: {p: Setting(None) for p in inspect.signature(classes[model].__init__).parameters if p not in fixed}
           for model in MODELS if model in classes}
    common = {name: Setting(None) for name in COMMON_TASK_OPTIONS}
    out = {}
    for task, (task_kind, *_) in TASKS.items():
        models = tuple(name for name, (model_kind, *_) in MODELS.items() if model_kind == task_kind)
        out[task] = TaskRule(models, common, {name: own.get(name, {}) for name in models})
    return out


def word_source_config(spec: StudySpec) -> dict[str, Any]:
    """The corpus pair's configuration (every other configuration nests it).

    Parameters
    ----------
    spec : StudySpec
        The study.

    Returns
    -------
    dict
        Plan and embstab versions, stage ``corpus`` and the corpus section's fields.
    """
    return source_config("corpus", spec.source_spec)


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

    Returns
    -------
    dict
        The configuration (``recipe`` only for a recipe other than fp32: fp32 trainings keep their names).
    """
    p = spec.training.params_dict()
    cfg = {"v": PLAN_VERSION, "stage": "train", "corpus": word_source_config(spec), "side": side, "algo": v.algo,
           "dim": v.dim, "seed": v.seed, "epochs": p["epochs"], "min_count": p["min_count"], "window": p["window"]}
    if v.recipe != REFERENCE_RECIPE:
        cfg["recipe"] = v.recipe
    return cfg


# --------------------------------------------------------------------------------------------
# task functions


@guarded("corpus")
@stored(("docs", "corpus_new"), ("docs", "corpus_old"))
def run_corpus(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any]) -> str:
    """Load the corpus and split it into the old/new pair (artifacts ``corpus_old``/``corpus_new``).

    Parameters
    ----------
    store : ArtifactStore
        Where the inputs are read and the output is written.
    steps : Steps
        The computations to run.
    key : str
        The configuration hash under which the output is stored.
    config : mapping
        The corpus configuration: ``name``, ``pair``, ``fraction``, ``seed`` and
        optionally ``max_docs`` (keep only the first documents); also written as the artifact's
        sidecar.

    Returns
    -------
    str
        ``key``.

    Raises
    ------
    StudyTaskError
        Any failure of the task, with stage ``corpus`` (an upstream task's error passes through unchanged).
    """
    docs = steps.load_corpus(config["name"])
    if config.get("max_docs"):
        docs = docs[: int(config["max_docs"])]
    old, new = steps.make_corpus_pair(docs, kind=config["pair"], fraction=config["fraction"], seed=config["seed"])
    store.put_docs("corpus_old", key, old, config)
    store.put_docs("corpus_new", key, new, config)
    return key


@functools.lru_cache(maxsize=2)
def _docs(store: ArtifactStore, kind: str, key: str) -> list[list[str]]:
    # both trainings of a worker in a row usually read the same corpus; keep the last two
    return store.get_docs(kind, key)



@guarded("train")
@stored(("embedding", "embedding"))
def run_train(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], corpus_key: str) -> str:
    """Train one embedding on one side of the corpus pair (artifact ``embedding``).

    Parameters
    ----------
    store : ArtifactStore
        Where the inputs are read and the output is written.
    steps : Steps
        The computations to run.
    key : str
        The configuration hash under which the output is stored.
    config : mapping
        The training configuration: ``side`` (``old`` or ``new``), ``algo``, ``dim``,
        ``seed``, ``epochs``, ``min_count``, ``window`` and optionally ``recipe``; also written as the
        artifact's sidecar.
    corpus_key : str
        Key of the corpus pair made by :func:`run_corpus`.

    Returns
    -------
    str
        ``key``.

    Raises
    ------
    StudyTaskError
        Any failure of the task, with stage ``train`` (an upstream task's error passes through unchanged).
    """
    docs = _docs(store, f"corpus_{config['side']}", corpus_key)
    # a recipe is passed only when it is not the fp32 reference (the key is absent then)
    extra = {"recipe": config["recipe"]} if "recipe" in config else {}
    emb = steps.train_embedding(docs, algo=config["algo"], dim=config["dim"], seed=config["seed"],
                                epochs=config["epochs"], min_count=config["min_count"], window=config["window"],
                                progress=False, **extra)
    store.put_embedding("embedding", key, emb, config)
    return key



@guarded("downstream")
@stored(("json", "downstream"), load=True)
def run_downstream(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any],
                   pair_key: str) -> dict[str, Any]:
    """Train the task model on both embeddings of a pair (same seed) and compare predictions.

    Parameters
    ----------
    store : ArtifactStore
        Where the inputs are read and the output is written.
    steps : Steps
        The computations to run.
    key : str
        The configuration hash under which the output is stored.
    config : mapping
        The configuration: ``task``, ``model``, ``seed`` and optionally ``options``
        (passed on to the disagreement function); also written as the artifact's sidecar.
    pair_key : str
        Key of the compressed pair (:func:`run_compress`).

    Returns
    -------
    dict
        ``disagreement`` and both members' qualities in percent (:func:`embstab.study.steps.downstream_output`),
        ``n_test`` and ``chance``: the task's chance level in the unit of the qualities (the
        disagreement result's ``settings["chance"]``; absent when it states none).

    Raises
    ------
    StudyTaskError
        Any failure of the task, with stage ``downstream`` (an upstream task's error passes through unchanged).
    """
    old, new = store.get_embedding("pair_old", pair_key), store.get_embedding("pair_new", pair_key)
    with GLOBAL_RNG_LOCK:
        result = steps.disagreement(old, new, task=config["task"], model=config["model"], seed=config["seed"],
                                    **dict(config.get("options", {})))
    value = downstream_output(result.disagreement, result.quality_old, result.quality_new,
                              int(getattr(result, "n_test", 0) or 0))
    chance = (getattr(result, "settings", None) or {}).get("chance")
    if chance is not None:  # a disagreement function that does not state it leaves the row's chance unknown
        value["chance"] = float(chance)
    store.put_json("downstream", key, value, config)
    return value


KIND = StudyKind(
    name="word", label="word embeddings", memory_unit="bits per word",
    source_key="corpus", parse_source=parse_corpus, algorithms=check_algorithms, training=TRAINING, tasks=tasks,
    check=check_study, source_config=word_source_config, train_config=word_train_config, run_source=run_corpus,
    run_train=run_train, run_compress=run_compress, run_downstream=run_downstream, recipes=True, transforms=True,
    vector_store=True,
    steps={"train_embedding": train_embedding},
)

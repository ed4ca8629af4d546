"""The knowledge-graph study kind: graph-version pairs, PyKEEN models, quantized-model disagreement.

Source pair: :func:`embstab.kg.version_pair` of a named graph (a share of training triples removed,
or added back), both versions over one vocabulary. Member: :func:`embstab.kg.train` of one PyKEEN
model on one version; its entity table is the :class:`~embstab.Embedding` the shared measures
compare. Compression: :func:`embstab.kg.quantize_pair` quantizes *every* table of both models with
the old model's clips and no rotation (rotating the entity table alone would change the scores of
bilinear models); the quantized entity tables are the compressed pair the measures read, and the
quantized tables go back into the scoring function for the downstream tasks, so link prediction and
triple classification run on exactly what a compressed model ships. Memory is bits per entity row.
"""

from __future__ import annotations

import copy
import functools
import io
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from embstab.downstream.pairs import register_pair_source
from embstab.errors import did_you_mean
from embstab.kg import pair_source as kg_pair_source
from embstab.study.kinds import StudyKind
from embstab.study.settings import Setting, TaskRule, member_config, source_config
from embstab.study.steps import GLOBAL_RNG_LOCK, Steps, downstream_output, guarded, stored
from embstab.study.store import ArtifactStore, config_hash

__all__ = ["KIND", "GraphSpec", "TRAINING", "TASK_MODELS", "graph_source_config", "graph_train_config",
           "parse_graph", "check_algorithms", "check_study", "tasks", "run_source", "run_train", "run_compress",
           "run_downstream"]

#: The decision rule of each KG task (the ``model`` column of its rows).
TASK_MODELS = {"link_prediction": "filtered_top1", "triple_classification": "relation_threshold"}


@dataclass(frozen=True)
class GraphSpec:
    """The graph-version pair: a named graph, and how its second version differs."""

    name: str
    change: str = "remove"
    share: float = 0.05
    seed: int = 0
    lost: str = "protect"


#: ``training`` settings of a KG study (passed to :func:`embstab.kg.train`). ``early_stopping``
#: (absent by default: every model trains ``epochs`` epochs) stops a model when its filtered
#: validation MRR stops improving; ``epochs`` is then the most it trains.
TRAINING = {
    "epochs": Setting(50, "int", 1, 100_000),
    "lr": Setting(0.01, "float", 1e-8, 10.0),
    "batch_size": Setting(256, "int", 1, 10_000_000),
    "negatives": Setting(1, "int", 1, 1000),
    "early_stopping": Setting(None, "mapping", nullable=True, optional=True, fields=(
        ("frequency", Setting(10, "int", 1, 100_000)),
        ("patience", Setting(2, "int", 1, 100_000)),
        ("relative_delta", Setting(0.01, "float", 0.0, 0.99)))),
}


def parse_graph(v: Any, value: Any) -> GraphSpec:
    """The ``graph`` section: ``{name*, change: remove|add, share: 0.05, seed: 0, lost: protect}``.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    value : Any
        The section as read from the study file.

    Returns
    -------
    GraphSpec
        The graph section with its defaults filled in.

    Raises
    ------
    StudyDefinitionError
        An unknown graph, change or lost policy, a share outside (0, 1) or a negative seed, naming its key.
    """
    from embstab.kg.datasets import GRAPHS, STANDARD_GRAPHS  # noqa: PLC0415
    from embstab.kg.versions import CHANGES, LOST_POLICIES  # noqa: PLC0415

    g = v.mapping(value, "graph", {"name": True, "change": False, "share": False, "seed": False, "lost": False})
    name = v.string(g["name"], "graph.name")
    known = (*GRAPHS, *STANDARD_GRAPHS)
    if name not in known and not (name.startswith("wordnet_k") and name[9:].isdigit()):
        near = did_you_mean(name, known)
        raise v.fail("graph.name", f"unknown graph {name!r} (choose from {', '.join(known)} or wordnet_kK){near}")
    return GraphSpec(
        name=name,
        change=v.string(g.get("change", "remove"), "graph.change", tuple(CHANGES)),
        share=v.number(g.get("share", 0.05), "graph.share", 0.0, 1.0, open_low=True, open_high=True),
        seed=v.integer(g.get("seed", 0), "graph.seed", 0),
        lost=v.string(g.get("lost", "protect"), "graph.lost", tuple(LOST_POLICIES)),
    )


def check_algorithms(v: Any, value: Any) -> tuple[str, ...]:
    """``training.algorithms`` of a KG study: PyKEEN model names (case-insensitive), e.g. TransE, DistMult.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    value : Any
        The section as read from the study file.

    Returns
    -------
    tuple of str
        The names as written in the study file.

    Raises
    ------
    StudyDefinitionError
        A name that is not a PyKEEN model, or a duplicate, naming its key.
    """
    from embstab.kg.training import model_names  # noqa: PLC0415 (imports PyKEEN: only for KG studies)

    names = model_names()
    items = v.sequence(value, "training.algorithms")
    out: list[str] = []
    for i, item in enumerate(items):
        key = f"training.algorithms[{i}]"
        text = v.string(item, key)
        normal = text.lower().replace("_", "").replace("-", "")
        if normal not in names:
            raise v.fail(key, f"a kg study trains PyKEEN models; {text!r} is none of them "
                              f"(e.g. TransE, DistMult, ComplEx, RotatE){did_you_mean(normal, tuple(names))}")
        if text in out:
            raise v.fail(key, f"duplicate value {text!r}")
        out.append(text)
    return tuple(out)


def check_study(v: Any, spec: Any) -> None:
    """Cross-checks of a KG study: early stopping must evaluate at least once within ``epochs``.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    spec : StudySpec
        The parsed study.

    Raises
    ------
    StudyDefinitionError
        If ``training.early_stopping.frequency`` exceeds ``training.epochs``.
    """
    params = spec.training.params_dict()
    stopping = params.get("early_stopping")
    if stopping is not None and stopping["frequency"] > params["epochs"]:
        raise v.fail("training.early_stopping.frequency",
                     f"evaluating every {stopping['frequency']} epochs never happens within training.epochs = "
                     f"{params['epochs']} (with early stopping, epochs is the most to train); lower the frequency "
                     "or raise epochs")


def tasks() -> dict[str, TaskRule]:
    """The downstream tasks of a KG study and the options each entry may set.

    Returns
    -------
    dict of str to TaskRule
        ``link_prediction`` (options ``k``, ``split``, ``batch_size``) and ``triple_classification``.
    """
    return {
        "link_prediction": TaskRule((TASK_MODELS["link_prediction"],), {
            "k": Setting(10, "int", 1, 1000), "split": Setting("test", "choice", choices=("test", "valid")),
            "batch_size": Setting(256, "int", 1, 1_000_000)}),
        "triple_classification": TaskRule((TASK_MODELS["triple_classification"],), {}),
    }


# --------------------------------------------------------------------------------------------
# store codecs: graph versions and trained models as bytes


def _graph_bytes(graph: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, name=np.array(graph.name), entities=np.array(graph.entities, dtype=str),
             relations=np.array(graph.relations, dtype=str), train=graph.train, valid=graph.valid, test=graph.test)
    return buf.getvalue()


@functools.lru_cache(maxsize=4)
def _graph(store: ArtifactStore, kind: str, key: str) -> Any:
    from embstab.kg import KnowledgeGraph  # noqa: PLC0415

    with np.load(io.BytesIO(store.get_bytes(kind, key, "npz")), allow_pickle=False) as z:
        return KnowledgeGraph(str(z["name"]), tuple(z["entities"].tolist()), tuple(z["relations"].tolist()),
                              z["train"], z["valid"], z["test"])


def _folder_bytes(save: Any) -> bytes:
    """``save(folder)`` into a temporary folder, returned as an uncompressed tar."""
    with tempfile.TemporaryDirectory(prefix="embstab-kg-") as tmp:
        save(tmp)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for path in sorted(Path(tmp).iterdir()):
                tar.add(path, arcname=path.name)
        return buf.getvalue()


@functools.lru_cache(maxsize=4)
def _model(store: ArtifactStore, key: str, graph_kind: str, graph_key: str) -> Any:
    from embstab.kg.training import load_kg_model  # noqa: PLC0415

    graph = _graph(store, graph_kind, graph_key)
    with tempfile.TemporaryDirectory(prefix="embstab-kg-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(store.get_bytes("kg_model", key, "tar")), mode="r") as tar:
            tar.extractall(tmp, filter="data")
        return load_kg_model(tmp, graph)


def _member(store: ArtifactStore, train_cfg: Mapping[str, Any]) -> Any:
    """The trained model of a member configuration (its key and graph key follow from it)."""
    return _model(store, config_hash(train_cfg), f"graph_{train_cfg['side']}", config_hash(train_cfg["source"]))


def _tables_bytes(model: Any) -> bytes:
    from embstab.kg.quantize import embedding_tables  # noqa: PLC0415

    buf = io.BytesIO()
    np.savez(buf, **{name: w.detach().cpu().numpy() for name, w in embedding_tables(model).items()})
    return buf.getvalue()


def _with_tables(trained: Any, data: bytes) -> Any:
    """A copy of the trained model with its embedding tables replaced by the stored (quantized) ones."""
    import torch  # noqa: PLC0415

    from embstab.kg.quantize import embedding_tables  # noqa: PLC0415

    model = copy.deepcopy(trained.model)
    tables = embedding_tables(model)
    with np.load(io.BytesIO(data), allow_pickle=False) as z, torch.no_grad():
        if set(z.files) != set(tables):
            raise ValueError(f"stored tables {sorted(z.files)} do not match the model's {sorted(tables)}")
        for name, weight in tables.items():
            weight.copy_(torch.as_tensor(z[name]))
    model.eval()
    return model


# --------------------------------------------------------------------------------------------
# task functions


@guarded("graph")
@stored(("file", "graph_new", "npz"), ("file", "graph_old", "npz"))
def run_source(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any]) -> str:
    """Load the graph and build its version pair (artifacts ``graph_old``/``graph_new``).

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (the KG kind reads graphs through embstab.kg; it is passed for the
        uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.

    Returns
    -------
    str
        ``key``.
    """
    from embstab.kg import load_graph, version_pair  # noqa: PLC0415

    pair = version_pair(load_graph(config["name"]), change=config["change"], share=config["share"],
                        seed=config["seed"], lost=config["lost"])
    store.put_bytes("graph_old", key, "npz", _graph_bytes(pair.old), config)
    store.put_bytes("graph_new", key, "npz", _graph_bytes(pair.new), config)
    return key


@guarded("train")
@stored(("embedding", "embedding"), ("file", "kg_model", "tar"))
def run_train(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], source_key: str) -> str:
    """Train one PyKEEN model on one graph version (artifacts ``embedding``: its entity table; ``kg_model``).

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (the KG kind reads graphs through embstab.kg; it is passed for the
        uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.
    source_key : str
        The graph-version pair's artifacts.

    Returns
    -------
    str
        ``key``.
    """
    from embstab.kg.training import train  # noqa: PLC0415

    graph = _graph(store, f"graph_{config['side']}", source_key)
    # PyKEEN seeds torch's process-global RNG: one training at a time per process keeps each model
    # a function of its seed on a multi-threaded worker
    with GLOBAL_RNG_LOCK:
        result = train(graph, model=config["algo"], dim=config["dim"], epochs=config["epochs"],
                       seed=config["seed"], lr=config["lr"], batch_size=config["batch_size"],
                       negatives=config["negatives"], evaluate_on=None, progress=False,
                       early_stopping=config.get("early_stopping"))
    store.put_bytes("kg_model", key, "tar", _folder_bytes(result.save), config)
    store.put_embedding("embedding", key, result.entities, config)
    return key


@guarded("compress")
@stored(("embedding", "pair_new"), ("embedding", "pair_old"))
def run_compress(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], old_key: str,
                 new_key: str) -> str:
    """Quantize both models' tables with the old model's clips (artifacts ``pair_old``/``pair_new``:
    the quantized entity tables; ``kgq_old``/``kgq_new``: every quantized table).

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (the KG kind reads graphs through embstab.kg; it is passed for the
        uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.
    old_key, new_key : str
        The trained members' artifacts.

    Returns
    -------
    str
        ``key``.
    """
    from embstab.compress.memory import memory_bits  # noqa: PLC0415
    from embstab.kg.quantize import quantize_pair  # noqa: PLC0415

    old, new = _member(store, config["old"]), _member(store, config["new"])
    seed = config["seed"] if config["rounding"].startswith("stochastic") else None
    q_old, q_new = quantize_pair(old, new, config["bits"], rounding=config["rounding"], seed=seed)
    store.put_bytes("kgq_old", key, "npz", _tables_bytes(q_old.model), config)
    store.put_bytes("kgq_new", key, "npz", _tables_bytes(q_new.model), config)
    for kind, q in (("pair_old", q_old), ("pair_new", q_new)):
        entities = q.entities
        # bits per entity row as stored (a complex model's real view has two entries per dimension)
        compression = {**entities.metadata.get("compression", {}),
                       "memory_bits_per_word": float(memory_bits(entities.dim, min(int(config["bits"]), 32)))}
        store.put_embedding(kind, key, entities.with_vectors(entities.vectors, compression=compression), config)
    return key


def _stopping_details(old: Any, new: Any) -> dict[str, Any]:
    """With early stopping, the epochs each member trained and its validation MRR (%, full precision)."""
    if old.stopping is None or new.stopping is None:
        return {}

    def mrr(member: Any) -> float | None:
        value = member.stopping.get("valid_mrr")
        return None if value is None else 100.0 * float(value)

    return {"epochs_trained": new.epochs_trained, "epochs_trained_old": old.epochs_trained,
            "best_epoch": new.stopping.get("best_epoch"), "best_epoch_old": old.stopping.get("best_epoch"),
            "valid_mrr": mrr(new), "valid_mrr_old": mrr(old)}


@guarded("downstream")
@stored(("json", "downstream"), load=True)
def run_downstream(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any],
                   pair_key: str) -> dict[str, Any]:
    """Link-prediction or triple-classification disagreement of the two *quantized* models.

    Parameters
    ----------
    store : ArtifactStore
        Where inputs are read and outputs written.
    steps : Steps
        The computations bundle (the KG kind reads graphs through embstab.kg; it is passed for the
        uniform task signature).
    key : str
        The task's configuration hash (the name of its artifacts).
    config : mapping
        The task's configuration.
    pair_key : str
        The compressed pair's artifacts.

    Returns
    -------
    dict
        ``disagreement`` and both members' qualities (:func:`embstab.study.steps.downstream_output`),
        in percent (filtered MRR for link prediction, accuracy for triple classification), ``chance``
        (what a model that learned nothing scores, in the same unit: a random ranking's filtered MRR,
        computed exactly from each query's candidate count; the share of the more frequent label),
        ``n_test`` and ``details`` (with early stopping: ``epochs_trained``, ``best_epoch`` and
        ``valid_mrr`` of the new member, and the same with ``_old`` for the old one).
    """
    from embstab.kg.disagreement import (link_prediction_disagreement,  # noqa: PLC0415
                                         triple_classification_disagreement)

    pair = config["pair"]
    old, new = _member(store, pair["old"]), _member(store, pair["new"])
    q_old = _with_tables(old, store.get_bytes("kgq_old", pair_key, "npz"))
    q_new = _with_tables(new, store.get_bytes("kgq_new", pair_key, "npz"))
    # filter with the version that holds every training triple: its known triples are the truth
    graph = old.graph if len(old.graph.train) >= len(new.graph.train) else new.graph
    options = dict(config.get("options") or {})
    if config["task"] == "link_prediction":
        r = link_prediction_disagreement(q_old, q_new, graph, split=options.get("split", "test"),
                                         k=int(options.get("k", 10)), batch_size=int(options.get("batch_size", 256)))
        value = downstream_output(r.disagreement, 100.0 * r.metrics_old.mrr, 100.0 * r.metrics_new.mrr,
                                  int(r.n_queries), chance=100.0 * float(r.settings["chance_mrr"]),
                                  details={"quality_metric": "filtered MRR (%)",
                                           "top_k_overlap": float(r.top_k_overlap), "k": int(r.k), "hits_at_10": 100.0 * r.metrics_new.hits_at_10,
                                           "hits_at_10_old": 100.0 * r.metrics_old.hits_at_10})
        value["details"].update(_stopping_details(old, new))
    else:
        r = triple_classification_disagreement(q_old, q_new, graph, seed=int(config["seed"]))
        # always answering the more frequent label (positives and negatives are nearly balanced)
        n_pos, n_neg = int(r.settings["n_positives"]), int(r.settings["n_negatives"])
        value = downstream_output(r.disagreement, r.accuracy_old, r.accuracy_new, int(r.n_test),
                                  chance=100.0 * max(n_pos, n_neg) / (n_pos + n_neg),
                                  details={"quality_metric": "accuracy (%)", **_stopping_details(old, new)})
    store.put_json("downstream", key, value, config)
    return value


def graph_source_config(spec: Any) -> dict[str, Any]:
    """The graph-version pair's configuration (every other configuration nests it).

    Parameters
    ----------
    spec : StudySpec
        The study.

    Returns
    -------
    dict
        Plan and embstab versions, stage ``graph``, ``kind`` and the graph section's fields.
    """
    return source_config("graph", spec.source_spec, kind="kg")


def graph_train_config(spec: Any, side: str, v: Any) -> dict[str, Any]:
    """One PyKEEN model on one graph version: its algorithm, dimension, seed and training settings.

    Parameters
    ----------
    spec : StudySpec
        The study.
    side : str
        ``old`` or ``new``.
    v : Variant
        The grid point.

    Returns
    -------
    dict
        The member's configuration (:func:`embstab.study.settings.member_config`).
    """
    return member_config(spec, side, v, graph_source_config(spec))


KIND = StudyKind(
    name="kg", label="knowledge-graph embeddings (entity tables)", memory_unit="bits per entity row",
    source_key="graph", parse_source=parse_graph, algorithms=check_algorithms, training=TRAINING, tasks=tasks,
    check=check_study, source_config=graph_source_config, train_config=graph_train_config, run_source=run_source,
    run_train=run_train, run_compress=run_compress, run_downstream=run_downstream,
)


# `embstab downstream OLD NEW` (embstab.downstream.pair_disagreement) reaches this kind's pairs through
# this source: reading embstab.kinds.KINDS imports this module, so the registration is in place first
register_pair_source("kg", kg_pair_source.claims_kg_pair, kg_pair_source.run_kg_pair,
                     label=kg_pair_source.LABEL, members=kg_pair_source.MEMBERS,
                     check=kg_pair_source.check_kg_pair)

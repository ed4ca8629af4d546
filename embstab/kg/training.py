"""Train a knowledge-graph embedding model with PyKEEN's training loop, reproducibly under a seed.

:func:`train` builds the model from PyKEEN's model registry, trains it with PyKEEN's stochastic
local closed-world loop (negative sampling) and Adam, evaluates it with PyKEEN's filtered rank-based
evaluator, and exports its entity and relation tables as :class:`embstab.Embedding` objects.

Determinism: the seed is applied exactly as ``pykeen.pipeline`` applies its ``random_seed``
(global torch, numpy and ``random`` seeding right before the model is built), so the same seed and
settings reproduce the model bit for bit and match the pipeline's own run. The global random states
are saved before and restored after, so calling :func:`train` leaves the caller's RNGs untouched.
Results are reproducible for a fixed torch thread count.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import random
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from embstab._fs import atomic_write
from embstab._limits import check_learning_rate, check_threads
from embstab._numbers import is_integer, is_real
from embstab._resources import check_memory
from embstab._shell import command, quote
from embstab._threads import torch_threads
from embstab.embedding import Embedding
from embstab.errors import ConfigError, EmbstabError, ShapeError, UnknownNameError
from embstab.io.modelfolder import component, read_header, read_json_file
from embstab.kg._pykeen import quiet, require_pykeen
from embstab.kg.graph import KnowledgeGraph

__all__ = ["EarlyStopping", "KGTrainResult", "LinkPredictionMetrics", "train", "evaluate", "export_embeddings",
           "load_kg_model", "convert_legacy_model", "model_names", "check_model_fits", "check_training_fits"]


@dataclass(frozen=True)
class LinkPredictionMetrics:
    """Filtered link-prediction quality (PyKEEN's rank-based evaluator, both sides, realistic rank).

    Attributes
    ----------
    mrr : float
        Mean reciprocal rank, in [0, 1].
    hits_at_1, hits_at_3, hits_at_10 : float
        Share of queries whose true answer ranks within 1, 3, 10, in [0, 1].
    n_queries : int
        Head and tail queries evaluated (twice the number of triples).
    split : str
    """

    mrr: float
    hits_at_1: float
    hits_at_3: float
    hits_at_10: float
    n_queries: int
    split: str = "test"

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict.

        Returns
        -------
        dict
        """
        return {"mrr": self.mrr, "hits_at_1": self.hits_at_1, "hits_at_3": self.hits_at_3,
                "hits_at_10": self.hits_at_10, "n_queries": self.n_queries, "split": self.split}


@dataclass(frozen=True)
class EarlyStopping:
    """Stop training when the validation MRR stops improving (PyKEEN's ``EarlyStopper``).

    Every ``frequency`` epochs the model's filtered MRR on the validation split is computed (every
    known triple filtered except the target, as :func:`evaluate` does); after ``patience``
    evaluations in a row without a relative improvement of more than ``relative_delta``, training
    stops. The model returned is the one of the best evaluation, whether training stopped or ran
    to its maximum number of epochs.

    Attributes
    ----------
    frequency : int
        Epochs between two validation evaluations (PyKEEN's default: 10).
    patience : int
        Evaluations without improvement that stop training (PyKEEN's default: 2).
    relative_delta : float
        Smallest relative improvement of the MRR that counts, in [0, 1) (PyKEEN's default: 0.01).
    """

    frequency: int = 10
    patience: int = 2
    relative_delta: float = 0.01

    def __post_init__(self) -> None:
        for what in ("frequency", "patience"):
            value = getattr(self, what)
            if not is_integer(value) or value < 1:
                raise ConfigError(f"early stopping {what} must be a positive integer, got {value!r}")
        delta = self.relative_delta
        if not is_real(delta) or not 0 <= delta < 1:
            raise ConfigError(f"early stopping relative_delta must be a number in [0, 1), got {delta!r}")

    @classmethod
    def coerce(cls, value: EarlyStopping | dict[str, Any] | None) -> EarlyStopping | None:
        """``value`` as an :class:`EarlyStopping` (a mapping of its fields, or None for none).

        Parameters
        ----------
        value : EarlyStopping, mapping or None

        Returns
        -------
        EarlyStopping or None

        Raises
        ------
        ValueError
            For a mapping with an unknown key or a bad value.
        TypeError
            For anything else.
        """
        if value is None or isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise TypeError(f"early_stopping must be an EarlyStopping, a mapping or None, got {type(value).__name__}")
        unknown = sorted(set(value) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"early stopping has no setting {unknown[0]!r} "
                             f"(settings: {', '.join(cls.__dataclass_fields__)})")
        return cls(**value)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict.

        Returns
        -------
        dict
        """
        return {"frequency": int(self.frequency), "patience": int(self.patience),
                "relative_delta": float(self.relative_delta)}


@dataclass
class KGTrainResult:
    """A trained knowledge-graph embedding model and what embstab measures on it.

    Attributes
    ----------
    model : pykeen.models.Model
        The trained PyKEEN model (scoring function and parameters).
    graph : KnowledgeGraph
        The graph version it was trained on.
    entities, relations : Embedding
        Entity and relation tables, one row per label in graph order (entities in training
        frequency order). Complex-valued models are given as the real view ``[Re, Im]`` (twice the
        complex dimension; ``metadata["complex"]`` is True).
    losses : list of float
        Mean training loss of each epoch.
    metrics : LinkPredictionMetrics or None
        Filtered quality on the test split (None when evaluation was switched off).
    seconds : float
        Training time (without evaluation).
    settings : dict
        Model name, dimension, seed, epochs (the maximum, with early stopping) and every training
        setting.
    stopping : dict or None
        With early stopping: ``stopped`` (whether the stopper ended training before the maximum),
        ``epochs_trained``, ``best_epoch`` (the epoch of the returned model), ``valid_mrr`` (its
        validation MRR) and ``valid_history`` (every evaluation as ``[epoch, mrr]``); None without.
    """

    model: Any = field(repr=False)
    graph: KnowledgeGraph = field(repr=False)
    entities: Embedding = field(repr=False)
    relations: Embedding = field(repr=False)
    losses: list[float]
    metrics: LinkPredictionMetrics | None
    seconds: float
    settings: dict[str, Any] = field(default_factory=dict)
    stopping: dict[str, Any] | None = None

    @property
    def epochs_trained(self) -> int:
        """Epochs actually trained (fewer than ``settings["epochs"]`` when training stopped early)."""
        return len(self.losses) if self.stopping is None else int(self.stopping["epochs_trained"])

    @property
    def seconds_per_epoch(self) -> float:
        return self.seconds / max(1, len(self.losses))

    def to_dict(self) -> dict[str, Any]:
        """Settings, losses, time and metrics as a plain dict, ready for JSON.

        Returns
        -------
        dict
            What ``config.json`` of :meth:`save` holds.
        """
        out = {**self.settings, "graph": self.graph.name, "losses": list(self.losses), "seconds": self.seconds,
               "seconds_per_epoch": self.seconds_per_epoch,
               "metrics": None if self.metrics is None else self.metrics.to_dict()}
        if self.stopping is not None:  # the key only with early stopping: other folders read as before
            out["stopping"] = dict(self.stopping)
        return out

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``entities.npz``, ``relations.npz``, ``model.safetensors`` (the state dict) and ``config.json``.

        The embedding files load with :func:`embstab.load` (so ``embstab compare`` reads them);
        :func:`load_kg_model` rebuilds the model from the folder and the graph.

        Parameters
        ----------
        folder : str or os.PathLike
            Created if missing; files already there are replaced.

        Returns
        -------
        pathlib.Path
            The folder.
        """
        from safetensors.torch import save

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.entities.save(folder / "entities.npz")
        self.relations.save(folder / "relations.npz")
        # safetensors holds plain tensors only (no pickle), so reading a folder never runs code;
        # it wants each tensor contiguous and owning its memory
        state = {k: v.detach().cpu().contiguous().clone() for k, v in self.model.state_dict().items()}
        with atomic_write(folder / WEIGHTS) as fh:
            fh.write(save(state))
        with atomic_write(folder / "config.json", "w") as fh:
            json.dump(self.to_dict(), fh, indent=1, sort_keys=True, default=float)
        # a model.pt left by an older embstab would be stale next to the new weights
        (folder / LEGACY_WEIGHTS).unlink(missing_ok=True)
        return folder


#: The weights file of a model folder, and the pickle file older versions wrote instead (refused).
WEIGHTS = "model.safetensors"
LEGACY_WEIGHTS = "model.pt"


def model_names() -> list[str]:
    """The PyKEEN model names :func:`train` accepts (case-insensitive), e.g. ``transe``, ``complex``.

    Returns
    -------
    list of str
        Sorted lower-case names.

    Raises
    ------
    OptionalDependencyError
        If pykeen is not installed.
    """
    require_pykeen()
    from pykeen.models import model_resolver

    return sorted(model_resolver.lookup_dict)


def _model_class(name: str):
    require_pykeen()
    from pykeen.models import model_resolver

    key = model_resolver.normalize(name)
    if key not in model_resolver.lookup_dict:
        raise UnknownNameError("knowledge-graph model", name, sorted(model_resolver.lookup_dict))
    return model_resolver.lookup(key)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed torch, numpy and ``random`` as PyKEEN does, restoring the caller's states afterwards."""
    import torch
    from pykeen.utils import set_random_seed

    np_state, py_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        set_random_seed(seed)
        try:
            yield
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Keep the objects that exist before training out of the garbage collector's passes.

    PyKEEN's loop calls ``gc.collect()`` after every epoch. A full collection walks every tracked
    object of the process, and with torch, PyKEEN and the caller's data loaded that is hundreds of
    thousands of objects: measured at 0.1–0.3 s per call on 2 cores, 80 % of an epoch on UMLS.
    Freezing the pre-existing heap (:func:`gc.freeze`) leaves the per-epoch collection only the
    objects training creates; nothing is lost, since the frozen objects return to the oldest
    generation afterwards. A caller that froze its own heap keeps it frozen.
    """
    already = gc.get_freeze_count() > 0
    gc.freeze()  # no collection first: it would cost one full pass, and garbage frozen now is freed later
    try:
        yield
    finally:
        if not already:
            gc.unfreeze()


def _table(rep) -> tuple[np.ndarray, bool]:
    """A representation's full table as float32 rows (complex → ``[Re, Im]``), and whether it is complex."""
    import torch

    with torch.no_grad():
        x = rep(indices=None).detach().cpu()
    cplx = torch.is_complex(x)
    x = x.reshape(x.shape[0], -1)
    if cplx:
        x = torch.cat([x.real, x.imag], dim=1)
    return x.numpy().astype(np.float32), bool(cplx)


def export_embeddings(model: Any, graph: KnowledgeGraph, name: str = "kg",
                      metadata: dict[str, Any] | None = None) -> tuple[Embedding, Embedding]:
    """The entity and relation tables of a PyKEEN model as :class:`Embedding` objects.

    Parameters
    ----------
    model : pykeen.models.Model
        A model over ``graph``'s vocabulary, whose first entity and relation representations are
        tables (``pykeen.nn.Embedding``).
    graph : KnowledgeGraph
    name : str
        Prefix of the embeddings' names.
    metadata : dict, optional
        Added to both embeddings' metadata.

    Returns
    -------
    (entities, relations) : tuple of Embedding
        Entity rows carry their training degree as ``counts``.
    """
    check_model_fits(model, graph)
    meta = dict(metadata or {})
    ent, cplx = _table(model.entity_representations[0])
    rel, rcplx = _table(model.relation_representations[0])
    view = "real view [Re, Im] of a complex embedding" if cplx else None
    entities = Embedding(graph.entities, ent, graph.degree("train"), name=f"{name}_entities",
                         source="embstab.kg.train", metadata={**meta, "kind": "kg_entities", "complex": cplx,
                                                              **({"view": view} if view else {})})
    relations = Embedding(graph.relations, rel, np.bincount(graph.train[:, 1], minlength=graph.n_relations),
                          name=f"{name}_relations", source="embstab.kg.train",
                          metadata={**meta, "kind": "kg_relations", "complex": rcplx})
    return entities, relations


def check_model_fits(model: Any, graph: KnowledgeGraph) -> None:
    """Raise :class:`ShapeError` unless ``model`` has one entity and relation row per label of ``graph``.

    Parameters
    ----------
    model : pykeen.models.Model
    graph : KnowledgeGraph

    Raises
    ------
    ShapeError
        If the entity or relation counts differ, or the model has no entity or relation embedding table.
    OptionalDependencyError
        If pykeen is not installed.
    """
    require_pykeen()
    from pykeen.nn import Embedding as PyKEmbedding

    if getattr(model, "num_entities", None) != graph.n_entities or \
            getattr(model, "num_relations", None) != graph.n_relations:
        raise ShapeError(f"the model has {getattr(model, 'num_entities', '?')} entities and "
                         f"{getattr(model, 'num_relations', '?')} relations, but graph {graph.name!r} has "
                         f"{graph.n_entities} and {graph.n_relations}: it was trained on another graph")
    for what, reps in (("entity", model.entity_representations), ("relation", model.relation_representations)):
        if not reps or not isinstance(reps[0], PyKEmbedding):
            raise ShapeError(f"model {type(model).__name__} has no {what} embedding table "
                             f"(its {what} representation is {type(reps[0]).__name__ if reps else 'missing'})")


def evaluate(model: Any, graph: KnowledgeGraph, split: str = "test", batch_size: int = 256,
             threads: int | None = 1) -> LinkPredictionMetrics:
    """Filtered link-prediction quality of ``model`` on one split of ``graph`` (PyKEEN's evaluator).

    Every known triple (:meth:`KnowledgeGraph.known_triples`: the three splits, and for a version
    of a graph the triples it left out of training) is filtered out of the ranking except the
    target, so one model has one MRR whichever version of its graph scores it; ranks are
    realistic (the expected rank under random tie-breaking); head and tail queries both count.

    Parameters
    ----------
    model : pykeen.models.Model
        A model over ``graph``'s vocabulary.
    graph : KnowledgeGraph
    split : {"test", "valid", "train"}
        The triples whose head and tail queries are ranked.
    batch_size : int
        Queries scored at once.
    threads : int or None
        torch intra-op threads while scoring (default 1; None leaves torch's setting).

    Returns
    -------
    LinkPredictionMetrics
    """
    require_pykeen()
    import torch
    from pykeen.evaluation import RankBasedEvaluator

    check_model_fits(model, graph)
    ranked = graph.split(split)
    known = graph.known_triples()
    # every other known triple (the left-out triples of a graph version included) is filtered
    is_ranked = {tuple(t) for t in ranked.tolist()}
    others = [torch.as_tensor(known[[tuple(t) not in is_ranked for t in known.tolist()]].copy())]
    model.eval()
    with quiet(), torch_threads(threads):
        res = RankBasedEvaluator().evaluate(model, torch.as_tensor(graph.split(split).copy()),
                                            batch_size=batch_size, additional_filter_triples=others, use_tqdm=False)

    def get(metric: str) -> float:
        return float(res.get_metric(f"both.realistic.{metric}"))

    return LinkPredictionMetrics(get("inverse_harmonic_mean_rank"), get("hits_at_1"), get("hits_at_3"),
                                 get("hits_at_10"), 2 * len(graph.split(split)), split)


#: Bytes per embedding coordinate counted by the memory estimates: float32, doubled because complex
#: models (ComplEx, RotatE) store a real and an imaginary part.
_COORD_BYTES = 8


def _table_bytes(n_entities: int, n_relations: int, dim: int) -> int:
    """Bytes of the entity and relation tables of a model (an estimate: most models hold one row of
    ``dim`` coordinates per label)."""
    return (n_entities + n_relations) * dim * _COORD_BYTES


def check_training_fits(graph: KnowledgeGraph, model: str, dim: int, batch_size: int, negatives: int) -> None:
    """Refuse training settings whose memory estimate exceeds what the machine has available.

    The estimate counts the tables four times (weights, gradients and Adam's two moments) and one
    batch: ``batch_size`` positives with ``negatives`` corrupted copies each, their ids and the
    gathered head, relation and tail rows with their gradients.

    Parameters
    ----------
    graph : KnowledgeGraph
    model : str
        The model name, for the message.
    dim, batch_size, negatives : int
        The settings of :func:`train`.

    Raises
    ------
    InsufficientMemoryError
        Naming the settings, the estimate and the memory available.
    """
    rows = min(batch_size, len(graph.train)) * (1 + negatives)
    estimate = 4 * _table_bytes(graph.n_entities, graph.n_relations, dim) + rows * (3 * 8 + 3 * 2 * dim * _COORD_BYTES)
    check_memory(estimate, f"training {model} with dim={dim}, negatives={negatives} and batch_size={batch_size} on "
                           f"graph {graph.name!r} ({graph.n_entities} entities, {graph.n_relations} relations)",
                 "lower dim, negatives or batch_size")


def _check_trainable(graph: KnowledgeGraph) -> None:
    # negative sampling corrupts a head or tail into *another* entity: with one there is none
    if graph.n_entities < 2 or len(graph.train) == 0:
        n, t = graph.n_entities, len(graph.train)
        raise ShapeError(f"graph {graph.name!r} has {n} entit{'y' if n == 1 else 'ies'} and {t} training "
                         f"triple{'' if t == 1 else 's'}: a KG embedding needs at least 2 entities and 1 training "
                         "triple (negative sampling replaces a head or tail by another entity)")


def _build(model: str, graph: KnowledgeGraph, dim: int, model_kwargs: dict[str, Any], factory: Any = None):
    cls = _model_class(model)
    try:
        return cls(triples_factory=factory if factory is not None else graph.triples_factory("train"),
                   embedding_dim=dim, **model_kwargs)
    except TypeError as exc:
        raise EmbstabError(f"PyKEEN model {cls.__name__} does not take these options: {exc}") from None


def train(graph: KnowledgeGraph, model: str = "TransE", dim: int = 50, epochs: int = 100, seed: int = 0, *,
          lr: float = 0.01, batch_size: int = 256, negatives: int = 1, evaluate_on: str | None = "test",
          progress: bool = True, model_kwargs: dict[str, Any] | None = None, threads: int | None = 1,
          early_stopping: EarlyStopping | dict[str, Any] | None = None) -> KGTrainResult:
    """Train a knowledge-graph embedding model on ``graph``'s training triples.

    Parameters
    ----------
    graph : KnowledgeGraph
    model : str
        A PyKEEN model name (:func:`model_names`): "TransE", "DistMult", "ComplEx", "RotatE", ...
    dim : int
        Embedding dimension (complex models: complex dimension; their real view has ``2 * dim``).
    epochs : int
        Epochs to train; with ``early_stopping``, the most epochs to train.
    seed : int
        The same seed and settings reproduce the model exactly (early stopping included).
    lr : float
        Adam learning rate.
    batch_size : int
    negatives : int
        Negative triples sampled per positive (PyKEEN's basic negative sampler).
    evaluate_on : {"test", "valid", None}
        Split for the filtered MRR/Hits@k in :attr:`KGTrainResult.metrics` (None: skip).
    progress : bool
        Show PyKEEN's per-epoch progress bar.
    model_kwargs : dict, optional
        More options of the PyKEEN model (``scoring_fct_norm``, a ``loss`` name, ...).
    threads : int or None
        torch intra-op threads for training and evaluation (default 1: these models are small, and
        on shared cores one thread avoids OpenMP spin-waiting, which slows two busy threads many
        times over; None leaves torch's setting). Results are reproducible for a
        fixed thread count.
    early_stopping : EarlyStopping or mapping, optional
        Stop when the filtered validation MRR stops improving (:class:`EarlyStopping`, or a mapping
        of its fields: ``frequency``, ``patience``, ``relative_delta``); the model of the best
        evaluation is returned, and :attr:`KGTrainResult.stopping` says when training stopped.
        Default: train all ``epochs``.

    Returns
    -------
    KGTrainResult

    Raises
    ------
    UnknownNameError
        For a model PyKEEN does not have.
    ShapeError
        For a graph with fewer than 2 entities, or with early stopping and no validation triple.
    ValueError
        For a bad setting (early stopping's included).
    InsufficientMemoryError
        When the tables and one batch (``dim``, ``negatives``, ``batch_size``) would not fit in the
        memory available (:func:`check_training_fits`).
    OptionalDependencyError
        When PyKEEN is not installed.
    """
    for what, value in (("dim", dim), ("epochs", epochs), ("batch_size", batch_size), ("negatives", negatives)):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    lr = check_learning_rate(lr)
    if threads is not None:
        check_threads(threads)
    if not isinstance(graph, KnowledgeGraph):
        raise TypeError(f"graph must be a KnowledgeGraph (embstab.kg.load_graph), got {type(graph).__name__}")
    stopping = EarlyStopping.coerce(early_stopping)
    _model_class(model)
    _check_trainable(graph)
    if stopping is not None and len(graph.valid) == 0:
        raise ShapeError(f"graph {graph.name!r} has no validation triple: early stopping evaluates on them")
    if stopping is not None and stopping.frequency > epochs:
        raise ConfigError(f"early stopping evaluates every {stopping.frequency} epochs, so within epochs={epochs} "
                         "it would never evaluate; lower its frequency or raise epochs")
    check_training_fits(graph, model, int(dim), int(batch_size), int(negatives))
    model_kwargs = dict(model_kwargs or {})
    with torch_threads(threads):
        return _train(graph, model, int(dim), int(epochs), int(seed), lr, int(batch_size), int(negatives),
                      evaluate_on, progress, model_kwargs, stopping)


def _stopper(kge: Any, graph: KnowledgeGraph, factory: Any, stopping: EarlyStopping, batch_size: int,
             folder: str) -> Any:
    """PyKEEN's early stopper on the validation MRR, filtered with every known triple of ``graph``."""
    import torch
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.stoppers import EarlyStopper
    from pykeen.triples import CoreTriplesFactory

    # the stopper filters its ranking with its "training" factory: give it every known triple (the
    # left-out triples of a graph version included), so the validation MRR is the one evaluate()
    # gives, whichever version the model trains on
    known = CoreTriplesFactory(torch.as_tensor(graph.known_triples().copy(), dtype=torch.long),
                               num_entities=graph.n_entities, num_relations=graph.n_relations)
    return EarlyStopper(
        model=kge, training_triples_factory=known,
        # the MRR alone: the default metric set costs 0.3 s per evaluation (scipy statistics of every rank)
        evaluator=RankBasedEvaluator(metrics=["inverse_harmonic_mean_rank"], add_defaults=False),
        evaluation_triples_factory=graph.triples_factory("valid"),
        # a fixed batch size: no memory probing, which is meant for GPUs
        evaluation_batch_size=batch_size, frequency=stopping.frequency, patience=stopping.patience,
        relative_delta=stopping.relative_delta, metric="both.realistic.inverse_harmonic_mean_rank",
        larger_is_better=True,
        # the best weights go to a private folder, not to PyKEEN's checkpoint folder in the home directory
        best_model_path=Path(folder) / "best.pt")


def _train(graph: KnowledgeGraph, model: str, dim: int, epochs: int, seed: int, lr: float, batch_size: int,
           negatives: int, evaluate_on: str | None, progress: bool, model_kwargs: dict[str, Any],
           stopping: EarlyStopping | None = None) -> KGTrainResult:
    import tempfile

    import torch
    from pykeen.training import SLCWATrainingLoop

    with _seeded(int(seed)), quiet(), tempfile.TemporaryDirectory(prefix="embstab-kg-stop-") as tmp:
        factory = graph.triples_factory("train")
        kge = _build(model, graph, int(dim), model_kwargs, factory)
        optimizer = torch.optim.Adam(kge.parameters(), lr=lr)
        loop = SLCWATrainingLoop(model=kge, triples_factory=factory, optimizer=optimizer,
                                 negative_sampler_kwargs={"num_negs_per_pos": int(negatives)})
        stopper = None if stopping is None else _stopper(kge, graph, factory, stopping, batch_size, tmp)
        with _frozen_heap():
            start = time.perf_counter()
            losses = loop.train(triples_factory=factory, num_epochs=int(epochs), batch_size=int(batch_size),
                                use_tqdm=progress, use_tqdm_batch=False, pin_memory=False, stopper=stopper)
            seconds = time.perf_counter() - start
        summary = None
        if stopper is not None:
            summary = _stopping_summary(kge, stopper, stopping, len(losses or []))
    kge.eval()
    settings = {"model": type(kge).__name__, "dim": int(dim), "seed": int(seed), "epochs": int(epochs), "lr": lr,
                "batch_size": int(batch_size), "negatives": int(negatives), "model_kwargs": model_kwargs,
                "torch_threads": torch.get_num_threads()}
    if stopping is not None:  # the key only with early stopping: other models' metadata reads as before
        settings["early_stopping"] = stopping.to_dict()
    name = f"{graph.name}_{type(kge).__name__}_d{dim}_s{seed}"
    entities, relations = export_embeddings(kge, graph, name, {**settings, "graph": graph.name})
    metrics = None if evaluate_on is None else evaluate(kge, graph, evaluate_on, batch_size, threads=None)
    return KGTrainResult(kge, graph, entities, relations, [float(x) for x in (losses or [])], metrics, seconds,
                         settings, summary)


def _stopping_summary(kge: Any, stopper: Any, stopping: EarlyStopping, epochs_trained: int) -> dict[str, Any]:
    """What early stopping did; restores the best evaluation's weights when training ran to the end."""
    import torch

    epochs = [stopping.frequency * (i + 1) for i in range(len(stopper.results))]
    best = stopper.best_epoch
    if not stopper.stopped and best is not None and best != epochs_trained:
        # PyKEEN reloads the best weights when its stopper ends training, not when the epochs run
        # out first: do it here too, so the model is always the one whose validation MRR is recorded
        kge.load_state_dict(torch.load(stopper.best_model_path, weights_only=True))
    return {"stopped": bool(stopper.stopped), "epochs_trained": int(epochs_trained),
            "best_epoch": None if best is None else int(best),
            "valid_mrr": None if best is None else float(stopper.best_metric),
            "valid_history": [[int(e), float(m)] for e, m in zip(epochs, stopper.results)],
            **stopping.to_dict()}


def _model_folder(folder: str | os.PathLike) -> Path:
    """``folder`` if it holds the four files of a model folder, else one line saying what it lacks.

    A folder of an older embstab, whose weights are the pickle ``model.pt``, is refused with the
    command that converts it, quoted for the shell whatever characters the folder's name holds.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise EmbstabError(f"{folder} is not a KG model folder (written by `embstab kg train` / "
                           f"KGTrainResult.save): {'it is a file' if folder.exists() else 'no such folder'}")
    missing = [f for f in ("config.json", "entities.npz", "relations.npz", WEIGHTS)
               if not os.path.lexists(folder / f)]
    if missing == [WEIGHTS] and os.path.lexists(folder / LEGACY_WEIGHTS):
        raise EmbstabError(f"{quote(folder)} was written by an older embstab: its weights are {LEGACY_WEIGHTS} (a "
                           f"pickle, which is no longer read); if you trust the folder, convert it once with: "
                           f"{command('embstab', 'kg', 'convert', folder)} (or retrain with `embstab kg train`)")
    if missing:
        raise EmbstabError(f"{folder} is not a KG model folder (written by `embstab kg train`): "
                           f"it lacks {', '.join(missing)}")
    return folder


def convert_legacy_model(folder: str | os.PathLike) -> Path:
    """Convert a model folder of an older embstab from ``model.pt`` to ``model.safetensors``, in place.

    The pickle is read with torch's restricted loader (``weights_only=True``: tensors and plain
    containers only, never arbitrary objects), once, because the user asked for it; every later read
    of the folder uses the safetensors file. ``model.pt`` is removed after the new file is written.

    Parameters
    ----------
    folder : str or os.PathLike
        A KG model folder holding ``config.json``, ``entities.npz``, ``relations.npz`` and ``model.pt``.

    Returns
    -------
    pathlib.Path
        The written ``model.safetensors``.

    Raises
    ------
    EmbstabError
        If ``folder`` is not such a folder, already holds ``model.safetensors``, or ``model.pt`` does
        not hold a mapping of names to tensors.
    UnsafeWeightsError
        If ``model.pt`` leads outside the folder.
    """
    import torch
    from safetensors.torch import save

    folder = Path(folder)
    if not folder.is_dir():
        what = "it is a file" if folder.exists() else "no such folder"
        raise EmbstabError(f"{folder} is not a KG model folder: {what}")
    if os.path.lexists(folder / WEIGHTS):
        raise EmbstabError(f"{folder} already holds {WEIGHTS}: nothing to convert")
    if not os.path.lexists(folder / LEGACY_WEIGHTS):
        raise EmbstabError(f"{folder} holds no {LEGACY_WEIGHTS} to convert")
    legacy = component(folder, LEGACY_WEIGHTS, "legacy weight file")
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols are not the user's business
            warnings.simplefilter("ignore")
            state = torch.load(legacy, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad or refused pickle
        raise EmbstabError(f"{folder / LEGACY_WEIGHTS} is not a weights file torch reads with weights_only=True "
                           f"({type(exc).__name__})") from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise EmbstabError(f"{folder / LEGACY_WEIGHTS} does not hold a mapping of names to tensors (a state dict)")
    with atomic_write(folder / WEIGHTS) as fh:
        fh.write(save({k: v.detach().contiguous().clone() for k, v in state.items()}))
    (folder / LEGACY_WEIGHTS).unlink()
    return folder / WEIGHTS


def load_kg_model(folder: str | os.PathLike, graph: KnowledgeGraph) -> KGTrainResult:
    """Rebuild a model saved by :meth:`KGTrainResult.save` on ``graph`` (same vocabulary).

    Parameters
    ----------
    folder : str or os.PathLike
        A folder written by :meth:`KGTrainResult.save` (``embstab kg train``).
    graph : KnowledgeGraph
        The graph (or a version of it: same vocabulary) the model embeds.

    Returns
    -------
    KGTrainResult

    Raises
    ------
    ShapeError
        If the saved model's entities or relations are not ``graph``'s.
    InsufficientMemoryError
        If the model that ``config.json`` describes would not fit in the memory available.
    EmbstabError
        If ``folder`` is not a model folder (missing, a file, or lacking one of its four files), its
        ``config.json`` is not a model description (a message naming the key), ``model.safetensors``
        is malformed or does not hold the weights of the model ``config.json`` names, or the folder
        holds only the pickle ``model.pt`` of an older embstab (the message says how to convert it).
    """
    from embstab.io import load

    folder = _model_folder(folder)
    config_path = component(folder, "config.json", "model configuration")
    config = read_json_file(config_path, "model configuration")
    if not isinstance(config, dict) or "model" not in config or "dim" not in config:
        raise EmbstabError(f"{config_path} does not describe a KG model (no 'model'/'dim' keys)")
    name, dim, model_kwargs, losses, metrics, seconds = _config_fields(config, config_path)
    check_memory(2 * _table_bytes(graph.n_entities, graph.n_relations, dim),
                 f"loading the {name} model of {folder} (config.json: dim={dim}) for graph {graph.name!r} "
                 f"({graph.n_entities} entities, {graph.n_relations} relations)",
                 "is config.json the one `embstab kg train` wrote?")
    entities = load(component(folder, "entities.npz", "entity table"))
    relations = load(component(folder, "relations.npz", "relation table"))
    if entities.words != list(graph.entities) or relations.words != list(graph.relations):
        raise ShapeError(f"{folder} holds a model of graph {config.get('graph')!r} whose entities/relations "
                         f"({len(entities)}/{len(relations)}) are not those of graph {graph.name!r} "
                         f"({graph.n_entities}/{graph.n_relations})")
    kge = _build(name, graph, dim, model_kwargs)
    _load_weights(kge, component(folder, WEIGHTS, "weight file"), name, dim)
    kge.eval()
    settings = {k: config[k] for k in ("model", "dim", "seed", "epochs", "lr", "batch_size", "negatives",
                                       "model_kwargs", "early_stopping") if k in config}
    stopping = config.get("stopping")
    if stopping is not None and not isinstance(stopping, dict):
        raise EmbstabError(f"{config_path}: key 'stopping' must be a mapping, got {stopping!r}"[:400])
    return KGTrainResult(kge, graph, entities, relations, losses, metrics, seconds, settings, stopping)


def _config_fields(config: dict[str, Any], path: Path) -> tuple[str, int, dict[str, Any], list[float],
                                                                  LinkPredictionMetrics | None, float]:
    """The fields of a model folder's ``config.json`` that loading uses, checked one by one."""

    def bad(key: str, what: str) -> EmbstabError:
        return EmbstabError(f"{path}: key '{key}' must be {what}, got {config[key]!r}"[:400])

    name, dim = config["model"], config["dim"]
    if not isinstance(name, str) or not name.strip():
        raise bad("model", "a PyKEEN model name such as 'TransE'")
    if not is_real(dim) or not math.isfinite(dim) or dim < 1 or int(dim) != dim:
        raise bad("dim", "a positive integer")
    kwargs = config.get("model_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise bad("model_kwargs", "a mapping of model options")
    losses = config.get("losses", [])
    if not isinstance(losses, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in losses):
        raise bad("losses", "a list of numbers")
    seconds = config.get("seconds", 0.0)
    if not is_real(seconds):
        raise bad("seconds", "a number")
    metrics = None
    if config.get("metrics") is not None:
        try:
            metrics = LinkPredictionMetrics(**config["metrics"])
        except TypeError:
            raise bad("metrics", f"a mapping with the keys {', '.join(LinkPredictionMetrics.__dataclass_fields__)}"
                      ) from None
    return name, int(dim), dict(kwargs), [float(x) for x in losses], metrics, float(seconds)


def _load_weights(kge: Any, path: Path, name: str, dim: int) -> None:
    """Load ``model.safetensors`` into ``kge``, naming any disagreement between the weights and config.json."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    # the header is checked against the file's size first, so a tampered header cannot make the
    # reader allocate or read past the data; shapes are compared before any tensor is read
    given = {k: entry.shape for k, entry in read_header(path).items()}
    expected = {k: tuple(v.shape) for k, v in kge.state_dict().items()}
    if expected != given:
        missing = sorted(set(expected) - set(given))
        extra = sorted(set(given) - set(expected))
        shapes = [f"{k} {list(given[k])} instead of {list(expected[k])}" for k in sorted(set(expected) & set(given))
                  if expected[k] != given[k]]
        parts = ([f"missing {', '.join(missing[:3])}"] if missing else []) + \
                ([f"unexpected {', '.join(extra[:3])}"] if extra else []) + shapes[:3]
        raise EmbstabError(f"{path} does not hold the weights of a {type(kge).__name__} model of dim {dim}, which "
                           f"config.json describes (model: {name!r}): {'; '.join(parts)}; the weights and "
                           "config.json come from different models")
    try:
        state = load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:  # a header that passed but data that does not
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EmbstabError(f"{path} is not a readable safetensors file ({first[:200]})") from None
    kge.load_state_dict(state)

"""The knowledge-graph pair source of :func:`embstab.downstream.pair_disagreement`.

It claims every ``TASK:GRAPH`` task (``link_prediction:umls``) and every pair with a KG model
folder (written by :func:`embstab.kg.KGTrainResult.save`): two folders are loaded on the graph and
scored by :func:`embstab.kg.kg_disagreement`; a folder given to a word-embedding task is refused
with the task it needs. :mod:`embstab.kg.study` registers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from embstab.errors import ConfigError

__all__ = ["LABEL", "MEMBERS", "is_kg_folder", "claims_kg_pair", "check_kg_pair", "run_kg_pair"]

#: What the source compares, and its members, for messages.
LABEL = "KG tasks (TASK:GRAPH)"
MEMBERS = "KG model folders"
# the same names as embstab.kg.KG_TASKS, without importing the package's face here
_FORMS = "link_prediction:GRAPH or triple_classification:GRAPH"


def is_kg_folder(spec: str) -> bool:
    """Whether ``spec`` is a KG model folder (``config.json`` and the weights, no tokenizer).

    A folder of an older embstab (``model.pt``) counts too, so that loading it says how to convert it.

    Parameters
    ----------
    spec : str
        A member's spec.

    Returns
    -------
    bool
    """
    path = Path(spec)
    return path.is_dir() and (path / "config.json").is_file() and not (path / "tokenizer.json").is_file() and \
        any((path / f).is_file() for f in ("model.safetensors", "model.pt"))  # a contextual model has a tokenizer


def claims_kg_pair(spec: str, task: str) -> bool:
    """Whether the KG source takes a pair with member ``spec`` on ``task``: a ``TASK:GRAPH`` task or a KG folder.

    Parameters
    ----------
    spec : str
        A member's spec.
    task : str
        The downstream task.

    Returns
    -------
    bool
    """
    return ":" in task or is_kg_folder(spec)


def check_kg_pair(old: str, new: str | None, task: str, options: Mapping[str, Any],
                  name: Callable[[str], str]) -> None:
    """Refuse KG model folders given to a word-embedding task (and ``bits``, which only KG tasks take).

    Parameters
    ----------
    old, new : str or None
        The members' specs.
    task : str
        The downstream task.
    options : mapping
        The given options.
    name : callable
        How a message names an option.

    Raises
    ------
    ConfigError
        For a task that is not ``TASK:GRAPH``.
    """
    if ":" in task:
        return
    if "bits" in options:
        raise ConfigError(f"{name('bits')} applies to KG tasks ({_FORMS}), not to {task}; compress word embeddings "
                          "first (embstab compress)")
    for label, spec in (("OLD", old), ("NEW", new)):
        if spec is not None and is_kg_folder(spec):
            raise ConfigError(f"{label} ({spec}) is a KG model folder: use {name('task')} {_FORMS}")


def run_kg_pair(old: str, new: str | None, task: str, *, bits: int | None = None, seed: int = 0,
                batch_size: int = 256, progress: bool = False) -> Any:
    """Disagreement of two saved KG models on ``TASK:GRAPH`` (:func:`embstab.kg.kg_disagreement`).

    Parameters
    ----------
    old, new : str
        Model folders written by ``embstab kg train`` for the graph or a version of it, old first.
    task : str
        ``link_prediction:GRAPH`` or ``triple_classification:GRAPH``; GRAPH is a graph name or
        folder (:func:`embstab.kg.load_graph`).
    bits : int, optional
        Quantize both models first, with the old model's clips.
    seed : int
        Seed of the triple-classification negatives.
    batch_size : int
        Link-prediction queries scored at once.
    progress : bool
        Show a progress bar.

    Returns
    -------
    LinkPredictionDisagreement or TripleClassificationDisagreement
    """
    from embstab.kg import kg_disagreement, load_graph, load_kg_model  # noqa: PLC0415  # PyKEEN: on use
    from embstab.pair import Pair  # noqa: PLC0415

    kind, _, graph_name = task.partition(":")
    graph = load_graph(graph_name)
    models = Pair(old, new).map(lambda folder: load_kg_model(folder, graph))
    return kg_disagreement(models, graph, kind, bits=bits, seed=seed, batch_size=batch_size, progress=progress)

"""The contextual pair source of :func:`embstab.downstream.pair_disagreement`.

It claims a pair with a contextual model (``builtin:minilm_l6``, ``hub:...``, or a model folder
with a tokenizer) on a retrieval task: each model's sentence vectors of the queries and documents
are searched (:func:`embstab.contextual.retrieval.contextual_retrieval_disagreement`).
:mod:`embstab.contextual.study` registers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from embstab.downstream.catalog import TASKS
from embstab.downstream.pairs import refuse_training_options
from embstab.errors import ConfigError

__all__ = ["LABEL", "MEMBERS", "is_contextual_model", "claims_contextual_pair", "check_contextual_pair",
           "run_contextual_pair"]

#: What the source compares, and its members, for messages.
LABEL = "contextual models"
MEMBERS = "contextual models"


def is_contextual_model(spec: str) -> bool:
    """Whether ``spec`` names a contextual model rather than an embedding file.

    Parameters
    ----------
    spec : str
        ``builtin:minilm_l6``, ``hub:ORG/NAME``, a model folder with ``config.json`` and
        ``tokenizer.json``, or anything else.

    Returns
    -------
    bool
    """
    if spec.startswith("hub:") or spec == "builtin:minilm_l6":
        return True
    path = Path(spec)
    return path.is_dir() and (path / "config.json").is_file() and (path / "tokenizer.json").is_file()


def claims_contextual_pair(spec: str, task: str) -> bool:
    """Whether the contextual source takes a pair with member ``spec`` on ``task``: a model on a retrieval task.

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
    return task in TASKS and TASKS[task][0] == "retrieval" and is_contextual_model(spec)


def check_contextual_pair(old: str, new: str | None, task: str, options: Mapping[str, Any],
                          name: Callable[[str], str]) -> None:
    """Refuse the options of trained tasks, and a pair of a model and something that is not one.

    Parameters
    ----------
    old, new : str or None
        The members' specs.
    task : str
        The retrieval task.
    options : mapping
        The given options.
    name : callable
        How a message names an option.

    Raises
    ------
    ConfigError
        For ``epochs``, ``lr``, ``recipe`` or ``folds``, or one member that is not a contextual model.
    """
    refuse_training_options(task, options, name)
    if new is None:
        return
    for (label, spec), (other_label, other) in ((("OLD", old), ("NEW", new)), (("NEW", new), ("OLD", old))):
        if is_contextual_model(spec) and not is_contextual_model(other):
            raise ConfigError(f"{label} ({spec}) is a contextual model and {other_label} ({other}) is not: "
                              "compare two models")


def run_contextual_pair(old: str, new: str | None, task: str, *, seed_baseline: bool = False,
                        limit: int | None = None, k: int | None = None, index: str | None = None,
                        precision: str | None = None, new_precision: str | None = None,
                        progress: bool = False) -> Any:
    """The queries whose top-k documents change from the old model's sentence vectors to the new one's.

    Parameters
    ----------
    old, new : str or None
        The models' specs (:func:`embstab.contextual.load_model`), old first; the same spec (or a
        seed baseline, ``new`` None) loads one model: search has no seed.
    task : str
        A retrieval task.
    seed_baseline : bool
        Compare OLD with itself.
    limit : int, optional
        Use at most this many query-document pairs.
    k : int, optional
        Documents returned per query (default 10).
    index : str, optional
        A faiss index to search through.
    precision : str, optional
        How both members' vectors are stored (default float32).
    new_precision : str, optional
        NEW's precision, when it differs.
    progress : bool
        Show a progress bar.

    Returns
    -------
    DisagreementResult
    """
    from embstab.contextual.pretrained import load_model  # noqa: PLC0415  # transformers: on use
    from embstab.contextual.retrieval import contextual_retrieval_disagreement  # noqa: PLC0415

    old_model = load_model(old)
    new_model = old_model if seed_baseline or new == old else load_model(new)
    options = {key: v for key, v in (("k", k), ("limit", limit), ("index", index)) if v is not None}
    return contextual_retrieval_disagreement(old_model, new_model, task, precision=precision or "float32",
                                             new_precision=new_precision, progress=progress, **options)

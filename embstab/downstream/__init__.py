"""Downstream instability: train a task model on each embedding of a pair and count flipped predictions.

:func:`disagreement` is the entry point for two embeddings, :func:`pair_disagreement` for two members named
by spec (embedding files, or what a source added with :func:`register_pair_source` claims: KG model
folders, contextual models); :data:`TASKS` and :data:`MODELS` list what exists,
:data:`FOLDS` which tasks are evaluated k-fold (every item a test item once); :func:`register_task` and
:func:`register_model` add to them. Retrieval tasks (:mod:`embstab.downstream.retrieval`) train
nothing: the vectors rank the documents, and a flip is a query whose top-k set changes. Every disagreement
carries its sampling interval over the test items (:func:`disagreement_interval`).
Models run on CPU with frozen embeddings; each is seeded so that two models of a pair differ only
in their embedding.
"""

from __future__ import annotations

from typing import Any

from embstab.downstream.catalog import FOLDS, KINDS, MODELS, TASKS, default_model, register_model, register_task
from embstab.downstream.intervals import INTERVAL_LEVEL, disagreement_interval
from embstab.downstream.pairs import (PairSource, pair_disagreement, pair_source_for, pair_sources,
                                      register_pair_source, unregister_pair_source)

__all__ = ["MODELS", "TASKS", "FOLDS", "KINDS", "INTERVAL_LEVEL", "RetrievalData", "default_model", "register_model",
           "register_task", "DisagreementResult", "chance_level", "default_folds",
           "disagreement", "disagreement_interval", "load_task", "seed_baseline", "train_and_predict", "TrainResult",
           "PairSource", "pair_disagreement", "pair_source_for", "pair_sources", "register_pair_source",
           "unregister_pair_source"]

_LAZY = {"RetrievalData", "DisagreementResult", "TrainResult", "chance_level", "default_folds", "disagreement", "load_task",
         "seed_baseline", "train_and_predict"}


def __getattr__(name: str) -> Any:
    # The training code imports torch (about a second); load it on first use, not on import.
    if name in _LAZY:
        from embstab.downstream import api

        return getattr(api, name)
    raise AttributeError(f"module 'embstab.downstream' has no attribute {name!r}")

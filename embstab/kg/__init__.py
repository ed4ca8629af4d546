"""Knowledge-graph embeddings: offline graphs, version pairs, PyKEEN training, KG disagreement.

A KG model's entity table is an :class:`embstab.Embedding` (vocabulary = entity labels, rows in
training-frequency order), so it flows through :mod:`embstab.compress`, :func:`embstab.compare`
and the study like a word embedding. Graph loading needs no PyKEEN import; training, scoring and
evaluation need the ``kg`` extra (``pip install "embstab[kg]"``).
"""

from __future__ import annotations

from typing import Any

from embstab.kg.datasets import GRAPHS, STANDARD_GRAPHS, download_graph, list_graphs, load_graph
from embstab.kg.graph import KnowledgeGraph
from embstab.kg.triples import load_triples_graph, read_triples
from embstab.kg.versions import GraphPair, seed_pair, version_pair

#: The downstream tasks of a knowledge-graph model pair (``embstab downstream --task KIND:GRAPH``).
KG_TASKS = ("link_prediction", "triple_classification")

__all__ = ["EarlyStopping", "GRAPHS", "KG_TASKS", "STANDARD_GRAPHS", "GraphPair", "KGTrainResult", "KnowledgeGraph",
           "LinkPredictionMetrics", "LinkPredictionDisagreement", "QuantizedKGModel", "convert_legacy_model",
           "TripleClassificationDisagreement", "download_graph", "evaluate", "kg_disagreement",
           "link_prediction_disagreement", "list_graphs", "load_graph", "load_kg_model", "load_triples_graph",
           "quantize_model", "quantize_pair", "read_triples", "seed_pair", "train",
           "triple_classification_disagreement", "version_pair"]

# PyKEEN and torch load on first use (a few seconds), not on ``import embstab.kg``.
_LAZY = {"EarlyStopping": "training", "KGTrainResult": "training", "LinkPredictionMetrics": "training", "evaluate": "training", "train": "training",
         "load_kg_model": "training", "convert_legacy_model": "training",
         "QuantizedKGModel": "quantize", "quantize_model": "quantize", "quantize_pair": "quantize",
         "LinkPredictionDisagreement": "disagreement", "TripleClassificationDisagreement": "disagreement",
         "kg_disagreement": "disagreement",
         "link_prediction_disagreement": "disagreement", "triple_classification_disagreement": "disagreement"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"embstab.kg.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'embstab.kg' has no attribute {name!r}")

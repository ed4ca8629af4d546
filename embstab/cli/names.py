"""The names the command line offers as ``choices``, as plain tuples.

Building the parser (``embstab --help``, ``embstab CMD --help``) must not import the registries
these names come from: the recipe registry imports torch, the KG and data packages pull the
download machinery. The measure names are read from the catalogue of built-in measures, which
declares each measure's properties without importing its code; the other tuples are copies, in the
registries' order (argparse lists the choices in this order in its "invalid choice" message), and
a test checks that each equals its registry so the two cannot drift apart.
"""

from __future__ import annotations

# DEFAULT_MEASURES: the five measures of the paper, the one tuple embstab.measures re-exports
from embstab._measure_catalogue import BUILTIN_MEASURES, DEFAULT_MEASURES

__all__ = ["TRAINING_RECIPES", "MEASURES", "EUCLIDEAN_MEASURES", "LARGER_IS_MORE_STABLE", "DEFAULT_MEASURES",
           "DOWNSTREAM_TASKS", "DOWNSTREAM_MODELS", "KG_TASKS", "TRAIN_ALGOS", "EMBEDDING_FORMATS"]

#: Precision recipes of a trainer's tables (``embstab.recipes.TRAINING_RECIPES``).
TRAINING_RECIPES: tuple[str, ...] = ("fp32", "bf16-nearest", "bf16-stochastic", "bf16-kahan", "fp16-nearest",
                                     "fp16-stochastic", "fp16-kahan", "swalp")

#: Every built-in stability measure (``embstab.measures.REGISTRY`` before any is added).
MEASURES: tuple[str, ...] = tuple(m.name for m in BUILTIN_MEASURES)

#: The measures of word embeddings (``embstab.measures.measures_for("euclidean")``).
EUCLIDEAN_MEASURES: tuple[str, ...] = tuple(m.name for m in BUILTIN_MEASURES if m.geometry == "euclidean")

#: The measures that are similarities (larger = more stable); the others are distances.
LARGER_IS_MORE_STABLE: tuple[str, ...] = tuple(m.name for m in BUILTIN_MEASURES if m.larger_is_more_stable)

#: Word-embedding downstream tasks (``embstab.downstream.TASKS``).
DOWNSTREAM_TASKS: tuple[str, ...] = ("rt_sentiment", "rt_subjectivity", "bbc_topic", "brown_pos", "wiki_retrieval",
                                     "bbc_retrieval")

#: Downstream task models (``embstab.downstream.MODELS``).
DOWNSTREAM_MODELS: tuple[str, ...] = ("linear", "mlp", "cnn", "lstm", "bilstm", "bilstm_crf", "search")

#: Knowledge-graph downstream tasks (``embstab.kg.KG_TASKS``).
KG_TASKS: tuple[str, ...] = ("link_prediction", "triple_classification")

#: Word-embedding training algorithms (``embstab.train.ALGOS``).
TRAIN_ALGOS: tuple[str, ...] = ("w2v_cbow", "w2v_sg", "fasttext", "glove", "mc")

#: Embedding file formats embstab writes (``embstab.io.FORMATS``).
EMBEDDING_FORMATS: tuple[str, ...] = ("word2vec", "vec", "glove", "word2vec_binary", "npz", "npy", "gensim",
                                      "embstab")

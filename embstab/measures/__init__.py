"""Stability measures between two row-aligned embeddings.

Each measure is written once against the array API, so numpy arrays, torch tensors (CPU or CUDA)
and cupy arrays all work and the computation stays on the input's device. float64 is the default
working precision; pass ``dtype="float32"`` for speed. See :data:`REGISTRY` for each measure's
direction, range and invariances. Embeddings of :mod:`embstab.hyperbolic` are compared through their
decoded distances by the registry's ``geometry="hyperbolic"`` measures (:mod:`embstab.measures.hyperbolic`).
"""

from embstab.measures._backend import shared_products
from embstab.measures.displacement import semantic_displacement
from embstab.measures.eis import AnchorFactors, anchor_factors, clear_anchor_cache, eis
from embstab.measures.knn import knn
from embstab.measures.overlap import eigenspace_overlap, weighted_eigenspace_overlap
from embstab.measures.pip import pip_loss
from embstab.measures.registry import (DEFAULT_MEASURES, GEOMETRIES, REGISTRY, MeasureInfo, fallback_order, get_measure,
                                      measures_for, register_measure, unregister_measure)
from embstab.measures.hyperbolic import (DistanceInstability, distortion_avg, distortion_worst,
                                         embedding_instability, hyperbolic_knn, hyperbolic_map)
from embstab.measures.similarity import fro_distance, linear_cka, procrustes_distance
from embstab.measures.knn import nearest_neighbors

# compare() builds pandas tables: imported on first use, so the registry (and `embstab --help`,
# which lists its names) does not pay for pandas
_COMPARE = ("Anchors", "aligned_matrices", "compare", "compare_many")


def __getattr__(name: str):
    if name in _COMPARE:
        import importlib

        # import_module, not `from embstab.measures import compare`: that would look the name up here again
        value = getattr(importlib.import_module("embstab.measures.compare"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'embstab.measures' has no attribute {name!r}")


__all__ = [
    "AnchorFactors", "Anchors", "DEFAULT_MEASURES", "DistanceInstability", "aligned_matrices", "compare",
    "compare_many", "distortion_avg", "distortion_worst", "embedding_instability", "hyperbolic_knn", "hyperbolic_map",
    "GEOMETRIES", "fallback_order", "measures_for", "register_measure", "unregister_measure",
    "nearest_neighbors", "MeasureInfo", "REGISTRY", "anchor_factors", "clear_anchor_cache",
    "eigenspace_overlap", "eis", "fro_distance", "get_measure", "knn", "linear_cka", "pip_loss",
    "procrustes_distance", "semantic_displacement", "shared_products", "weighted_eigenspace_overlap",
]

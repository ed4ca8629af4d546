"""Registry of measures: what each computes, its direction, range and invariances.

Analyses need every measure as a distance ("larger = less stable"); :meth:`MeasureInfo.to_distance`
turns similarities such as k-NN overlap into ``1 − value``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from embstab.measures.displacement import semantic_displacement
from embstab.measures.eis import eis
from embstab.measures.knn import knn
from embstab.measures.overlap import eigenspace_overlap, weighted_eigenspace_overlap
from embstab.measures.pip import pip_loss
from embstab.measures.similarity import fro_distance, linear_cka, procrustes_distance

__all__ = ["MeasureInfo", "REGISTRY", "get_measure", "DEFAULT_MEASURES"]


@dataclass(frozen=True)
class MeasureInfo:
    """Description of one measure.

    Attributes
    ----------
    name : registry key (also the column name in result tables)
    func : the function, ``func(X, Y, **params)`` (EIS also takes the two anchors)
    larger_is_more_stable : True for similarities (k-NN, overlaps, CKA), False for distances
    range : (low, high) of the raw value; ``high`` may be ``inf``
    invariances : transformations of one side that leave the value unchanged
    needs_anchors : EIS needs the two anchor embeddings
    needs_equal_dim : the two embeddings must have the same width
    description : one line for ``--help`` and reports
    """

    name: str
    func: Callable
    larger_is_more_stable: bool
    range: tuple[float, float]
    invariances: tuple[str, ...]
    needs_anchors: bool = False
    needs_equal_dim: bool = False
    description: str = ""
    defaults: dict = field(default_factory=dict)

    @property
    def direction(self) -> str:
        return "larger is more stable" if self.larger_is_more_stable else "smaller is more stable"

    def to_distance(self, value: float) -> float:
        """The value as a distance: larger = less stable (``high − value`` for similarities)."""
        return self.range[1] - value if self.larger_is_more_stable else value


_INF = float("inf")
REGISTRY: dict[str, MeasureInfo] = {m.name: m for m in [
    MeasureInfo("eis", eis, False, (0.0, 1.0), ("invertible linear map",), needs_anchors=True,
                description="eigenspace instability: expected disagreement of least-squares models under "
                            "the anchors' label distribution", defaults={"alpha": 3.0}),
    MeasureInfo("knn", knn, True, (0.0, 1.0), ("rotation", "isotropic scaling"),
                description="mean overlap of the k cosine-nearest neighbours of query words",
                defaults={"k": 5, "n_queries": 1000, "seed": 1234}),
    MeasureInfo("semantic_displacement", semantic_displacement, False, (0.0, 2.0), ("rotation", "isotropic scaling"),
                needs_equal_dim=True, description="mean cosine distance per word after Procrustes alignment"),
    MeasureInfo("pip_loss", pip_loss, False, (0.0, _INF), ("rotation",),
                description="Frobenius norm of the difference of the pairwise-inner-product matrices"),
    MeasureInfo("eigenspace_overlap", eigenspace_overlap, True, (0.0, 1.0), ("invertible linear map",),
                description="normalised overlap of the two column spans"),
    MeasureInfo("weighted_eigenspace_overlap", weighted_eigenspace_overlap, True, (0.0, 1.0), ("rotation of X",),
                description="span overlap weighted by the second embedding's singular values",
                defaults={"exponent": 1.0}),
    MeasureInfo("fro_distance", fro_distance, False, (0.0, _INF), (), needs_equal_dim=True,
                description="Frobenius norm of the difference, no alignment"),
    MeasureInfo("linear_cka", linear_cka, True, (0.0, 1.0), ("rotation", "isotropic scaling", "translation"),
                description="linear centred kernel alignment"),
    MeasureInfo("procrustes_distance", procrustes_distance, False, (0.0, 2.0 ** 0.5),
                ("rotation", "isotropic scaling", "translation"),
                description="orthogonal-Procrustes shape distance of the centred, normalised embeddings"),
]}

#: The five measures of the paper, in its order.
DEFAULT_MEASURES: tuple[str, ...] = ("eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap")


def get_measure(name: str) -> MeasureInfo:
    """The :class:`MeasureInfo` registered under ``name``; the error lists the valid names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown measure {name!r}; choose from {', '.join(REGISTRY)}") from None

"""Registry of measures: what each computes, its direction, range and invariances.

Analyses need every measure as a distance ("larger = less stable"); :meth:`MeasureInfo.to_distance`
turns similarities such as k-NN overlap into ``1 − value``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from embstab.errors import ConfigError, ShapeError, did_you_mean, lookup

from embstab.measures.displacement import semantic_displacement
from embstab.measures.eis import eis
from embstab.measures.hyperbolic import distortion_avg, distortion_worst, hyperbolic_knn, hyperbolic_map
from embstab.measures.knn import knn
from embstab.measures.overlap import eigenspace_overlap, weighted_eigenspace_overlap
from embstab.measures.pip import pip_loss
from embstab.measures.similarity import fro_distance, linear_cka, procrustes_distance

__all__ = ["MeasureInfo", "REGISTRY", "get_measure", "DEFAULT_MEASURES", "measures_for"]


@dataclass(frozen=True)
class MeasureInfo:
    """Description of one measure.

    Every measure is called the same way, through :meth:`evaluate`.

    Attributes
    ----------
    name : str
        Registry key (also the column name in result tables).
    func : callable
        The function: ``func(X, Y, **params)``, or ``func(X, Y, anchor_x, anchor_y, **params)``
        when ``needs_anchors``.
    larger_is_more_stable : bool
        True for similarities (k-NN, overlaps, CKA), False for distances.
    range : tuple of float
        ``(low, high)`` of the raw value; ``high`` may be ``inf``.
    invariances : tuple of str
        Transformations of one side that leave the value unchanged.
    needs_anchors : bool
        The measure needs an anchor embedding per side (EIS).
    needs_equal_dim : bool
        The two embeddings must have the same width.
    description : str
        One line for ``--help`` and reports.
    defaults : dict
        Default parameters (``params`` passed to :meth:`evaluate` override them).
    geometry : str
        The kind of embedding the measure compares: ``"euclidean"`` (word vectors, compared as
        row-aligned matrices) or ``"hyperbolic"`` (embeddings of :mod:`embstab.hyperbolic`, compared
        through their decoded distances; ``X`` and ``Y`` are then the embeddings themselves).
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
    geometry: str = "euclidean"

    def evaluate(self, X: Any, Y: Any, *, anchors: tuple[Any, Any] | None = None, **params: Any) -> float:
        """The measure between two row-aligned embeddings: the one call form for every measure.

        Parameters
        ----------
        X, Y : (n, d) and (n, d̃) arrays
            The pair, row-aligned (numpy, torch or cupy).
        anchors : (array, array), optional
            The anchors of side X and side Y (or their :class:`~embstab.measures.AnchorFactors`);
            required by measures with ``needs_anchors`` and ignored by the others.
        **params
            Overrides of :attr:`defaults`.

        Returns
        -------
        float

        Raises
        ------
        ShapeError
            If the measure needs anchors and none were given, or equal widths and they differ.
        """
        unknown = [p for p in params if p not in self.parameters]
        if unknown:
            hint = did_you_mean(unknown[0], self.parameters)
            raise ConfigError(f"{self.name} has no parameter {unknown[0]!r}{hint}; "
                              f"its parameters: {', '.join(self.parameters) or 'none'}")
        kwargs = {**self.defaults, **params}
        if "n_queries" in self.defaults and "n_queries" not in params:
            kwargs["n_queries"] = min(kwargs["n_queries"], X.shape[0])  # the default must not exceed n
        if self.needs_equal_dim and X.shape[1] != Y.shape[1]:
            raise ShapeError(f"{self.name} needs equal dimensions, got {X.shape[1]} and {Y.shape[1]}")
        if self.needs_anchors:
            if anchors is None:
                raise ShapeError(f"{self.name} needs anchors: pass anchors=(anchor_x, anchor_y)")
            return float(self.func(X, Y, anchors[0], anchors[1], **kwargs))
        return float(self.func(X, Y, **kwargs))

    @property
    def parameters(self) -> tuple[str, ...]:
        """The keyword parameters :meth:`evaluate` passes on to the function."""
        skip = 4 if self.needs_anchors else 2  # X, Y (and the anchors) come positionally
        listed = list(inspect.signature(self.func).parameters.values())[skip:]
        return tuple(p.name for p in listed if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

    @property
    def direction(self) -> str:
        return "larger is more stable" if self.larger_is_more_stable else "smaller is more stable"

    def to_distance(self, value: float) -> float:
        """The value as a distance: larger = less stable (``high − value`` for similarities).

        Parameters
        ----------
        value : float
            A raw value of this measure.

        Returns
        -------
        float
            The value itself for distances, ``range[1] − value`` for similarities.
        """
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
    MeasureInfo("hyperbolic_knn", hyperbolic_knn, True, (0.0, 1.0), ("isometry", "isotropic scaling"),
                description="mean overlap of the k nearest neighbours by decoded distance", geometry="hyperbolic"),
    MeasureInfo("hyperbolic_map", hyperbolic_map, True, (0.0, 1.0), ("isometry", "isotropic scaling"),
                description="mean average precision of the second embedding's ranking at recovering the first's "
                            "k nearest neighbours", geometry="hyperbolic"),
    MeasureInfo("distortion_avg", distortion_avg, False, (0.0, _INF), ("isometry",),
                description="average distortion: mean |d_b/d_a - 1| of the decoded distances", geometry="hyperbolic"),
    MeasureInfo("distortion_worst", distortion_worst, False, (1.0, _INF), ("isometry", "isotropic scaling"),
                description="worst-case distortion: max d_b/d_a times max d_a/d_b over pairs", geometry="hyperbolic"),
]}

#: The five measures of the paper, in its order.
DEFAULT_MEASURES: tuple[str, ...] = ("eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap")


def measures_for(geometry: str) -> tuple[str, ...]:
    """Names of the registered measures that compare embeddings of ``geometry``, in registry order.

    Parameters
    ----------
    geometry : str
        ``"euclidean"`` or ``"hyperbolic"``.

    Returns
    -------
    tuple of str
    """
    return tuple(name for name, info in REGISTRY.items() if info.geometry == geometry)


def get_measure(name: str) -> MeasureInfo:
    """The :class:`MeasureInfo` registered under ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`REGISTRY`.

    Returns
    -------
    MeasureInfo

    Raises
    ------
    UnknownNameError
        If no measure has that name (the message suggests the closest).
    """
    return lookup(REGISTRY, name, "measure")

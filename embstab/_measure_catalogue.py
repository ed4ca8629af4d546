"""The measures embstab ships, declared as data: each one's name and properties, and where its code is.

:class:`MeasureInfo` is the one description of a measure. The built-in ones are declared here with
their function named by import path (``"embstab.measures.knn:knn"``), so this module imports no
measure code, no array library and no torch: the command line builds its ``choices`` from
:data:`BUILTIN_MEASURES` while it builds its parser. :mod:`embstab.measures.registry` registers each
declaration (importing its function) into ``REGISTRY``; everything that computes reads the registry.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from embstab.errors import ConfigError, ShapeError, did_you_mean

__all__ = ["MeasureInfo", "BUILTIN_MEASURES", "DEFAULT_MEASURES", "GEOMETRIES"]

#: The kinds of embedding a measure may compare (:attr:`MeasureInfo.geometry`).
GEOMETRIES: tuple[str, ...] = ("euclidean", "hyperbolic")


@dataclass(frozen=True)
class MeasureInfo:
    """Description of one measure: its function, direction, range, invariances and needs.

    Every measure is called the same way, through :meth:`evaluate`. Register one with
    :func:`embstab.measures.register_measure`; every property below is set there and read from the
    registry by :func:`embstab.compare`, the study schema and the selection.

    Attributes
    ----------
    name : str
        Registry key (also the column name in result tables).
    func : callable or str
        The function: ``func(X, Y, **params)``, or ``func(X, Y, anchor_x, anchor_y, **params)``
        when ``needs_anchors``. A declaration may name it by import path, ``"module:function"``;
        registering imports it.
    larger_is_more_stable : bool
        The direction: True for similarities (k-NN, overlaps, CKA), False for distances.
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
    needs_more_words_than_dims : bool
        The measure sees each matrix only through its column span. With no more compared words
        than dimensions every span is the whole space, so the value is the same for any pair and
        says nothing: a study must compare more words than its largest dimension, and
        :func:`embstab.compare` marks such values as without signal.
    uses_dxd_products : bool
        The measure factors d x d cross products of the compared matrices (and anchors); the
        others work on rows alone. :func:`embstab.compare` counts the products' memory first.
    fallback_rank : int or None
        The measure's place (1 first) among those a recommendation turns to when the one asked for
        shows no signal; None never serves as a fallback (scale-dependent distances).
    """

    name: str
    func: Callable | str
    larger_is_more_stable: bool
    range: tuple[float, float]
    invariances: tuple[str, ...]
    needs_anchors: bool = False
    needs_equal_dim: bool = False
    description: str = ""
    defaults: dict = field(default_factory=dict)
    geometry: str = "euclidean"
    needs_more_words_than_dims: bool = False
    uses_dxd_products: bool = True
    fallback_rank: int | None = None

    def function(self) -> Callable:
        """The measure's function, imported first when the declaration names it by path.

        Returns
        -------
        callable

        Raises
        ------
        ConfigError
            If the path does not name a function of an importable module.
        """
        if callable(self.func):
            return self.func
        module, _, attr = str(self.func).partition(":")
        try:
            found = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ConfigError(f"measure {self.name!r}: func {self.func!r} names no function "
                              f"('module:function' expected): {exc}") from None
        if not callable(found):
            raise ConfigError(f"measure {self.name!r}: func {self.func!r} is not callable")
        return found

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
        ConfigError
            If a parameter is not one of the function's.
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
        func = self.function()
        if self.needs_anchors:
            if anchors is None:
                raise ShapeError(f"{self.name} needs anchors: pass anchors=(anchor_x, anchor_y)")
            return float(func(X, Y, anchors[0], anchors[1], **kwargs))
        return float(func(X, Y, **kwargs))

    @property
    def parameters(self) -> tuple[str, ...]:
        """The keyword parameters :meth:`evaluate` passes on to the function."""
        skip = 4 if self.needs_anchors else 2  # X, Y (and the anchors) come positionally
        listed = list(inspect.signature(self.function()).parameters.values())[skip:]
        return tuple(p.name for p in listed if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

    @property
    def direction(self) -> str:
        """``"larger is more stable"`` or ``"smaller is more stable"``."""
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
_M = "embstab.measures."

#: The built-in measures, in the order the registry lists them. The fallback ranks follow the
#: paper's finding (EIS and k-NN predict downstream disagreement best), then the span and shape
#: measures; the PIP loss and the Frobenius distance grow with the scale of the entries (they rank
#: precisions, not stability), so they are never a fallback. Only the span measures (EIS and the
#: two eigenspace overlaps) need more words than dimensions: CKA, Procrustes and semantic
#: displacement compare inner products of the rows, which still differ between pairs when n ≤ d.
BUILTIN_MEASURES: tuple[MeasureInfo, ...] = (
    MeasureInfo("eis", _M + "eis:eis", False, (0.0, 1.0), ("invertible linear map",), needs_anchors=True,
                description="eigenspace instability: expected disagreement of least-squares models under "
                            "the anchors' label distribution", defaults={"alpha": 3.0},
                needs_more_words_than_dims=True, fallback_rank=1),
    MeasureInfo("knn", _M + "knn:knn", True, (0.0, 1.0), ("rotation", "isotropic scaling"),
                description="mean overlap of the k cosine-nearest neighbours of query words",
                defaults={"k": 5, "n_queries": 1000, "seed": 1234}, uses_dxd_products=False, fallback_rank=2),
    MeasureInfo("semantic_displacement", _M + "displacement:semantic_displacement", False, (0.0, 2.0),
                ("rotation", "isotropic scaling"), needs_equal_dim=True,
                description="mean cosine distance per word after Procrustes alignment", fallback_rank=3),
    MeasureInfo("pip_loss", _M + "pip:pip_loss", False, (0.0, _INF), ("rotation",),
                description="Frobenius norm of the difference of the pairwise-inner-product matrices"),
    MeasureInfo("eigenspace_overlap", _M + "overlap:eigenspace_overlap", True, (0.0, 1.0),
                ("invertible linear map",), description="normalised overlap of the two column spans",
                needs_more_words_than_dims=True, fallback_rank=4),
    MeasureInfo("weighted_eigenspace_overlap", _M + "overlap:weighted_eigenspace_overlap", True, (0.0, 1.0),
                ("rotation of X",), description="span overlap weighted by the second embedding's singular values",
                defaults={"exponent": 1.0}, needs_more_words_than_dims=True, fallback_rank=5),
    MeasureInfo("fro_distance", _M + "similarity:fro_distance", False, (0.0, _INF), (), needs_equal_dim=True,
                description="Frobenius norm of the difference, no alignment", uses_dxd_products=False),
    MeasureInfo("linear_cka", _M + "similarity:linear_cka", True, (0.0, 1.0),
                ("rotation", "isotropic scaling", "translation"), description="linear centred kernel alignment",
                fallback_rank=6),
    MeasureInfo("procrustes_distance", _M + "similarity:procrustes_distance", False, (0.0, 2.0 ** 0.5),
                ("rotation", "isotropic scaling", "translation"),
                description="orthogonal-Procrustes shape distance of the centred, normalised embeddings",
                fallback_rank=7),
    MeasureInfo("hyperbolic_knn", _M + "hyperbolic:hyperbolic_knn", True, (0.0, 1.0),
                ("isometry", "isotropic scaling"),
                description="mean overlap of the k nearest neighbours by decoded distance", geometry="hyperbolic",
                uses_dxd_products=False),
    MeasureInfo("hyperbolic_map", _M + "hyperbolic:hyperbolic_map", True, (0.0, 1.0),
                ("isometry", "isotropic scaling"),
                description="mean average precision of the second embedding's ranking at recovering the first's "
                            "k nearest neighbours", geometry="hyperbolic",
                uses_dxd_products=False),
    MeasureInfo("distortion_avg", _M + "hyperbolic:distortion_avg", False, (0.0, _INF), ("isometry",),
                description="average distortion: mean |d_b/d_a - 1| of the decoded distances", geometry="hyperbolic",
                uses_dxd_products=False),
    MeasureInfo("distortion_worst", _M + "hyperbolic:distortion_worst", False, (1.0, _INF),
                ("isometry", "isotropic scaling"),
                description="worst-case distortion: max d_b/d_a times max d_a/d_b over pairs", geometry="hyperbolic",
                uses_dxd_products=False),
)

#: The five measures of the paper, in its order: :func:`embstab.compare`'s default table.
DEFAULT_MEASURES: tuple[str, ...] = ("eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap")

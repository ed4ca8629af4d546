"""Manifold objects: one home for each geometry an embedding of :mod:`embstab.hyperbolic` lives in.

Each manifold knows its float64 distance, how to tell and make a valid point (:meth:`~Manifold.contains`,
:meth:`~Manifold.project`), the geoopt manifold that trains on it (:meth:`~Manifold.geoopt`,
:meth:`~Manifold.torch_distance`) and, for the two models of hyperbolic space, the conversion to the
other model (:func:`convert`). Names are looked up once, by :func:`get_manifold`; ``"hyperboloid"`` is
accepted there as another name of the Lorentz model.

Curvature is −1 for the hyperbolic models and +1 for the sphere. Points are rows (last axis =
coordinates); the Lorentz model and the sphere store one number more than their dimension.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from embstab.errors import lookup
from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.geometry import (hyperboloid_distance, hyperboloid_to_poincare, lorentz_inner,
                                         poincare_distance, poincare_to_hyperboloid)

__all__ = ["Manifold", "PoincareBall", "Lorentz", "Euclidean", "Sphere", "ProductManifold",
           "MANIFOLDS", "ALIASES", "get_manifold", "convert", "combine_distances"]

#: How far inside the unit ball :meth:`PoincareBall.project` puts a point that lies on or outside it.
BALL_EPS = 1e-15


class Manifold(ABC):
    """A Riemannian manifold of points stored as float rows.

    Subclasses set :attr:`name` (the one canonical name), :attr:`letter` (used in factor strings
    such as ``"H2,S1"``), :attr:`extra` (stored numbers beyond the dimension) and
    :attr:`hyperbolic`.
    """

    name: ClassVar[str]
    letter: ClassVar[str]
    extra: ClassVar[int] = 0
    hyperbolic: ClassVar[bool] = False

    def width(self, dim: int) -> int:
        """Numbers stored per point of the ``dim``-dimensional manifold.

        Parameters
        ----------
        dim : int
            The manifold's own dimension.

        Returns
        -------
        int
        """
        return int(dim) + self.extra

    def dim_of(self, width: int) -> int:
        """The dimension of points stored with ``width`` numbers.

        Parameters
        ----------
        width : int
            Numbers per stored point.

        Returns
        -------
        int
        """
        return int(width) - self.extra

    @abstractmethod
    def distance(self, u: Any, v: Any) -> np.ndarray:
        """Geodesic distance in float64, broadcasting over leading axes.

        Parameters
        ----------
        u, v : array_like
            Points (last axis = coordinates).

        Returns
        -------
        numpy.ndarray
        """

    @abstractmethod
    def contains(self, x: Any, atol: float = 1e-9) -> np.ndarray:
        """Whether each row of ``x`` is a valid point (within ``atol`` of the constraint).

        Parameters
        ----------
        x : array_like
            Points (last axis = coordinates).
        atol : float, default 1e-9
            Tolerance on the defining equation (relative to the point's size where it grows).

        Returns
        -------
        numpy.ndarray of bool
        """

    @abstractmethod
    def project(self, x: Any) -> np.ndarray:
        """The nearest valid point to each row of ``x`` (idempotent; valid points barely move).

        Parameters
        ----------
        x : array_like
            Rows to project.

        Returns
        -------
        numpy.ndarray
        """

    @abstractmethod
    def geoopt(self) -> Any:
        """The geoopt manifold that trains points of this geometry.

        Returns
        -------
        geoopt.Manifold
        """

    def torch_distance(self, a: Any, b: Any) -> Any:
        """Differentiable distance of torch rows (geoopt's, unless a subclass is better conditioned).

        Parameters
        ----------
        a, b : torch.Tensor
            Points on this manifold.

        Returns
        -------
        torch.Tensor
        """
        return self.geoopt().dist(a, b)

    def initial_points(self, n: int, dim: int, generator: Any) -> Any:
        """Starting points for Riemannian SGD: within 1e-3 of the origin (a torch float64 tensor).

        Parameters
        ----------
        n : int
            Number of points.
        dim : int
            The manifold's dimension.
        generator : torch.Generator
            Source of the random draw (deterministic under its seed).

        Returns
        -------
        torch.Tensor
            ``(n, width(dim))`` points on the manifold.
        """
        import torch

        return (torch.rand((n, dim), generator=generator, dtype=torch.float64) - 0.5) * 2e-3

    def to_poincare(self, x: Any) -> np.ndarray:
        """The same points in the Poincaré ball (hyperbolic models only).

        Parameters
        ----------
        x : array_like
            Points of this model.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        HyperbolicError
            If this manifold is not a model of hyperbolic space.
        """
        raise HyperbolicError(f"{self.name} points have no Poincaré-ball form")

    def from_poincare(self, p: Any) -> np.ndarray:
        """Poincaré-ball points in this model (hyperbolic models only).

        Parameters
        ----------
        p : array_like
            Points of the Poincaré ball.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        HyperbolicError
            If this manifold is not a model of hyperbolic space.
        """
        raise HyperbolicError(f"Poincaré-ball points have no {self.name} form")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


class PoincareBall(Manifold):
    """The Poincaré ball {x : ‖x‖ < 1}: hyperbolic space of curvature −1, conformal to R^d."""

    name = "poincare"
    letter = "H"
    hyperbolic = True

    def distance(self, u: Any, v: Any) -> np.ndarray:
        """acosh(1 + 2‖u−v‖² / ((1−‖u‖²)(1−‖v‖²))).

        Parameters
        ----------
        u, v : array_like
            Ball points.

        Returns
        -------
        numpy.ndarray
        """
        return poincare_distance(u, v)

    def contains(self, x: Any, atol: float = 1e-9) -> np.ndarray:
        """‖x‖ < 1 (strictly: a point on the sphere at infinity is not in the ball).

        Parameters
        ----------
        x : array_like
            Rows to test.
        atol : float, default 1e-9
            Unused: the open ball has no equation to be near.

        Returns
        -------
        numpy.ndarray of bool
        """
        x = _f64(x)
        return np.all(np.isfinite(x), axis=-1) & (np.sum(x * x, axis=-1) < 1.0)

    def project(self, x: Any) -> np.ndarray:
        """Rows on or outside the unit sphere are pulled in to norm 1 − 1e-15; others are kept.

        Parameters
        ----------
        x : array_like
            Rows to project.

        Returns
        -------
        numpy.ndarray
        """
        x = _f64(x)
        norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
        limit = 1.0 - BALL_EPS
        # the rescaled norm can round a hair above limit; leaving rows ≤ 1−ε/2 alone keeps it idempotent
        shrink = norm > 1.0 - BALL_EPS / 2
        return np.where(shrink, x * (limit / np.where(shrink, norm, 1.0)), x)

    def geoopt(self) -> Any:
        """geoopt's ``PoincareBall`` (curvature −1).

        Returns
        -------
        geoopt.PoincareBall
        """
        import geoopt

        return geoopt.PoincareBall()

    def to_poincare(self, x: Any) -> np.ndarray:
        """The identity (a copy).

        Parameters
        ----------
        x : array_like
            Ball points.

        Returns
        -------
        numpy.ndarray
        """
        return np.array(x, dtype=np.float64, copy=True)

    def from_poincare(self, p: Any) -> np.ndarray:
        """The identity (a copy).

        Parameters
        ----------
        p : array_like
            Ball points.

        Returns
        -------
        numpy.ndarray
        """
        return np.array(p, dtype=np.float64, copy=True)


class Lorentz(Manifold):
    """The hyperboloid {x : ⟨x, x⟩_L = 1, x₀ > 0} (the Lorentz model; time coordinate first)."""

    name = "lorentz"
    letter = "L"
    extra = 1
    hyperbolic = True

    def distance(self, u: Any, v: Any) -> np.ndarray:
        """acosh(⟨u, v⟩_L), evaluated without cancellation.

        Parameters
        ----------
        u, v : array_like
            Hyperboloid points.

        Returns
        -------
        numpy.ndarray
        """
        return hyperboloid_distance(u, v)

    def contains(self, x: Any, atol: float = 1e-9) -> np.ndarray:
        """x₀ > 0 and ``|⟨x, x⟩_L − 1| ≤ atol·x₀²`` (the two terms grow like x₀²).

        Parameters
        ----------
        x : array_like
            Rows to test.
        atol : float, default 1e-9
            Relative tolerance on the Minkowski norm.

        Returns
        -------
        numpy.ndarray of bool
        """
        x = _f64(x)
        finite = np.all(np.isfinite(x), axis=-1)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = (x[..., 0] > 0) & (np.abs(lorentz_inner(x, x) - 1.0) <= atol * np.maximum(1.0, x[..., 0] ** 2))
        return finite & ok

    def project(self, x: Any) -> np.ndarray:
        """Keep the space-like part x⃗ and set x₀ = √(1 + ‖x⃗‖²), as geoopt's ``projx`` does.

        Parameters
        ----------
        x : array_like
            Rows to project.

        Returns
        -------
        numpy.ndarray
        """
        x = _f64(x)
        space = x[..., 1:]
        return np.concatenate([np.sqrt(1.0 + np.sum(space * space, axis=-1, keepdims=True)), space], axis=-1)

    def geoopt(self) -> Any:
        """geoopt's ``Lorentz`` (k = 1, curvature −1).

        Returns
        -------
        geoopt.Lorentz
        """
        import geoopt

        return geoopt.Lorentz()

    def initial_points(self, n: int, dim: int, generator: Any) -> Any:
        """The ball's start mapped by geoopt's exponential map at the origin of the hyperboloid.

        Parameters
        ----------
        n : int
            Number of points.
        dim : int
            The manifold's dimension.
        generator : torch.Generator
            Source of the random draw.

        Returns
        -------
        torch.Tensor
            ``(n, dim + 1)`` hyperboloid points.
        """
        import torch

        v = super().initial_points(n, dim, generator)
        return self.geoopt().expmap0(torch.cat([torch.zeros(n, 1, dtype=torch.float64), v], dim=1))

    def to_poincare(self, x: Any) -> np.ndarray:
        """p = x⃗ / (1 + x₀).

        Parameters
        ----------
        x : array_like
            Hyperboloid points.

        Returns
        -------
        numpy.ndarray
        """
        return hyperboloid_to_poincare(x)

    def from_poincare(self, p: Any) -> np.ndarray:
        """x = ((1 + ‖p‖²), 2p) / (1 − ‖p‖²).

        Parameters
        ----------
        p : array_like
            Ball points.

        Returns
        -------
        numpy.ndarray
        """
        return poincare_to_hyperboloid(p)


class Euclidean(Manifold):
    """Flat space R^d."""

    name = "euclidean"
    letter = "E"

    def distance(self, u: Any, v: Any) -> np.ndarray:
        """‖u − v‖.

        Parameters
        ----------
        u, v : array_like
            Points.

        Returns
        -------
        numpy.ndarray
        """
        return np.sqrt(np.sum((_f64(u) - _f64(v)) ** 2, axis=-1))

    def contains(self, x: Any, atol: float = 1e-9) -> np.ndarray:
        """Every finite row is a point.

        Parameters
        ----------
        x : array_like
            Rows to test.
        atol : float, default 1e-9
            Unused.

        Returns
        -------
        numpy.ndarray of bool
        """
        return np.all(np.isfinite(_f64(x)), axis=-1)

    def project(self, x: Any) -> np.ndarray:
        """The identity (a copy).

        Parameters
        ----------
        x : array_like
            Rows.

        Returns
        -------
        numpy.ndarray
        """
        return np.array(x, dtype=np.float64, copy=True)

    def geoopt(self) -> Any:
        """geoopt's ``Euclidean`` over vectors.

        Returns
        -------
        geoopt.Euclidean
        """
        import geoopt

        return geoopt.Euclidean(ndim=1)

    def torch_distance(self, a: Any, b: Any) -> Any:
        """‖a − b‖ on torch rows.

        Parameters
        ----------
        a, b : torch.Tensor
            Points.

        Returns
        -------
        torch.Tensor
        """
        return (a - b).norm(dim=-1)


class Sphere(Manifold):
    """The unit sphere S^d ⊂ R^(d+1) with its great-circle distance (curvature +1)."""

    name = "sphere"
    letter = "S"
    extra = 1

    def distance(self, u: Any, v: Any) -> np.ndarray:
        """2·asin(‖u − v‖/2): keeps its digits for near points, where acos(u·v) loses half of them.

        Parameters
        ----------
        u, v : array_like
            Unit vectors.

        Returns
        -------
        numpy.ndarray
        """
        chord = np.sqrt(np.sum((_f64(u) - _f64(v)) ** 2, axis=-1))
        return 2.0 * np.arcsin(np.minimum(chord / 2.0, 1.0))

    def contains(self, x: Any, atol: float = 1e-9) -> np.ndarray:
        """``|‖x‖ − 1| ≤ atol``.

        Parameters
        ----------
        x : array_like
            Rows to test.
        atol : float, default 1e-9
            Tolerance on the norm.

        Returns
        -------
        numpy.ndarray of bool
        """
        x = _f64(x)
        with np.errstate(invalid="ignore", over="ignore"):
            return np.abs(np.sqrt(np.sum(x * x, axis=-1)) - 1.0) <= atol

    def project(self, x: Any) -> np.ndarray:
        """x/‖x‖; a zero row becomes the first basis vector (every direction is equally near).

        Parameters
        ----------
        x : array_like
            Rows to project.

        Returns
        -------
        numpy.ndarray
        """
        x = np.array(x, dtype=np.float64, copy=True)
        norm = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
        zero = norm[..., 0] == 0
        x[zero] = 0.0
        x[zero, 0] = 1.0
        norm[zero] = 1.0
        return x / norm

    def geoopt(self) -> Any:
        """geoopt's ``Sphere``.

        Returns
        -------
        geoopt.Sphere
        """
        import geoopt

        return geoopt.Sphere()

    def torch_distance(self, a: Any, b: Any) -> Any:
        """2·asin(‖a − b‖/2) on torch rows: unlike acos, its gradient stays finite near 0.

        Parameters
        ----------
        a, b : torch.Tensor
            Unit vectors.

        Returns
        -------
        torch.Tensor
        """
        import torch

        return 2 * torch.asin(((a - b).norm(dim=-1) / 2).clamp(max=1.0))

    def initial_points(self, n: int, dim: int, generator: Any) -> Any:
        """Uniform random points on the sphere.

        Parameters
        ----------
        n : int
            Number of points.
        dim : int
            The sphere's dimension.
        generator : torch.Generator
            Source of the random draw.

        Returns
        -------
        torch.Tensor
            ``(n, dim + 1)`` unit vectors.
        """
        import torch

        v = torch.randn((n, dim + 1), generator=generator, dtype=torch.float64)
        return v / v.norm(dim=1, keepdim=True)


#: The manifolds by their canonical names.
MANIFOLDS: dict[str, Manifold] = {m.name: m for m in (PoincareBall(), Lorentz(), Euclidean(), Sphere())}
#: Other names accepted by :func:`get_manifold`, mapped to the canonical one.
ALIASES: dict[str, str] = {"hyperboloid": "lorentz"}


def get_manifold(manifold: str | Manifold) -> Manifold:
    """The manifold named ``manifold`` (a :class:`Manifold` is returned as is).

    Parameters
    ----------
    manifold : str or Manifold
        A key of :data:`MANIFOLDS` or :data:`ALIASES` (``"hyperboloid"`` is the Lorentz model).

    Returns
    -------
    Manifold

    Raises
    ------
    UnknownNameError
        If no manifold has that name.
    """
    if isinstance(manifold, Manifold):
        return manifold
    name = ALIASES.get(manifold, manifold) if isinstance(manifold, str) else manifold
    return lookup(MANIFOLDS, name, "manifold")


def convert(x: Any, source: str | Manifold, target: str | Manifold) -> np.ndarray:
    """Points of one model of hyperbolic space in another (through the Poincaré ball).

    Parameters
    ----------
    x : array_like
        Points of ``source``.
    source, target : str or Manifold
        Hyperbolic models (``"poincare"``, ``"lorentz"``).

    Returns
    -------
    numpy.ndarray
        The same points in ``target`` coordinates.

    Raises
    ------
    HyperbolicError
        If either manifold is not a model of hyperbolic space.
    """
    src, dst = get_manifold(source), get_manifold(target)
    if src == dst:
        return np.array(x, dtype=np.float64, copy=True)
    return dst.from_poincare(src.to_poincare(x))


def combine_distances(parts: Any, combine: str) -> Any:
    """Combine per-factor distances (first axis) as the product metric ``"l2"`` or their sum ``"l1"``.

    Parameters
    ----------
    parts : numpy.ndarray or torch.Tensor
        ``(k, ...)`` factor distances.
    combine : {"l2", "l1"}
        √(Σ d_k²) or Σ d_k.

    Returns
    -------
    numpy.ndarray or torch.Tensor
    """
    if len(parts) == 1:
        return parts[0]
    if combine == "l1":
        return parts.sum(0)
    total = (parts * parts).sum(0)
    return total.sqrt() if hasattr(total, "sqrt") else np.sqrt(total)  # torch tensor or numpy array


class ProductManifold(Manifold):
    """A product of manifolds, each with its dimension; points are the factors' rows side by side.

    Parameters
    ----------
    factors : sequence of (Manifold or str, int)
        The factors and their dimensions.
    combine : {"l2", "l1"}, default "l2"
        √(Σ d_k²), the product metric, or Σ d_k.
    """

    name = "product"
    letter = "P"

    def __init__(self, factors: Sequence[tuple[Manifold | str, int]], combine: str = "l2") -> None:
        if combine not in ("l2", "l1"):
            raise HyperbolicError(f"combine must be 'l2' or 'l1', got {combine!r}")
        if not factors:
            raise HyperbolicError("a product needs at least one factor")
        self.factors = tuple((get_manifold(m), int(d)) for m, d in factors)
        self.combine = combine
        self.widths = tuple(m.width(d) for m, d in self.factors)

    @property
    def dim(self) -> int:
        """Total dimension (sum of the factors')."""
        return sum(d for _, d in self.factors)

    def width(self, dim: int | None = None) -> int:
        """Numbers per point: the sum of the factors' widths (``dim`` is fixed by the factors).

        Parameters
        ----------
        dim : int, optional
            Ignored; accepted for the common signature.

        Returns
        -------
        int
        """
        return sum(self.widths)

    def dim_of(self, width: int) -> int:
        """The product's dimension.

        Parameters
        ----------
        width : int
            Numbers per point (must be :meth:`width`).

        Returns
        -------
        int
        """
        if width != self.width():
            raise HyperbolicError(f"{self} points have {self.width()} numbers, not {width}")
        return self.dim

    @property
    def signature(self) -> str:
        """The factors as a string, e.g. ``"H2,H2,S1"``."""
        return ",".join(f"{m.letter}{d}" for m, d in self.factors)

    def split(self, x: Any) -> list[np.ndarray]:
        """The factors' blocks of ``x`` (last axis split by the factors' widths).

        Parameters
        ----------
        x : array_like
            Product points.

        Returns
        -------
        list of numpy.ndarray
        """
        x = _f64(x)
        return np.split(x, np.cumsum(self.widths)[:-1], axis=-1)

    def factor_distances(self, u: Any, v: Any) -> np.ndarray:
        """``(k, ...)`` distances in each factor.

        Parameters
        ----------
        u, v : array_like
            Product points.

        Returns
        -------
        numpy.ndarray
        """
        return np.stack([m.distance(a, b) for (m, _), a, b in zip(self.factors, self.split(u), self.split(v))])

    def distance(self, u: Any, v: Any) -> np.ndarray:
        """The factor distances combined by :attr:`combine`.

        Parameters
        ----------
        u, v : array_like
            Product points.

        Returns
        -------
        numpy.ndarray
        """
        return combine_distances(self.factor_distances(u, v), self.combine)

    def contains(self, x: Any, atol: float = 1e-9) -> np.ndarray:
        """Every factor's block is a valid point.

        Parameters
        ----------
        x : array_like
            Rows to test.
        atol : float, default 1e-9
            Passed to each factor.

        Returns
        -------
        numpy.ndarray of bool
        """
        return np.all(np.stack([m.contains(b, atol) for (m, _), b in zip(self.factors, self.split(x))]), axis=0)

    def project(self, x: Any) -> np.ndarray:
        """Each factor's block projected onto its factor.

        Parameters
        ----------
        x : array_like
            Rows to project.

        Returns
        -------
        numpy.ndarray
        """
        return np.concatenate([m.project(b) for (m, _), b in zip(self.factors, self.split(x))], axis=-1)

    def geoopt(self) -> Any:
        """geoopt's ``ProductManifold`` of the factors' geoopt manifolds.

        Returns
        -------
        geoopt.ProductManifold
        """
        import geoopt

        return geoopt.ProductManifold(*((m.geoopt(), w) for (m, _), w in zip(self.factors, self.widths)))

    def torch_distance(self, a: Any, b: Any) -> Any:
        """The factors' torch distances combined by :attr:`combine`.

        Parameters
        ----------
        a, b : torch.Tensor
            Product points.

        Returns
        -------
        torch.Tensor
        """
        import torch

        bounds = np.concatenate([[0], np.cumsum(self.widths)]).tolist()
        parts = [m.torch_distance(a[..., lo:hi], b[..., lo:hi])
                 for (m, _), lo, hi in zip(self.factors, bounds[:-1], bounds[1:])]
        return combine_distances(torch.stack(parts), self.combine)

    def initial_points(self, n: int, dim: int | None, generator: Any) -> Any:
        """Each factor's starting points, drawn in factor order, side by side.

        Parameters
        ----------
        n : int
            Number of points.
        dim : int, optional
            Ignored (the factors fix it).
        generator : torch.Generator
            Source of the random draws.

        Returns
        -------
        torch.Tensor
        """
        import torch

        return torch.cat([m.initial_points(n, d, generator) for m, d in self.factors], dim=-1)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ProductManifold) and other.factors == self.factors
                and other.combine == self.combine)

    def __hash__(self) -> int:
        return hash((self.factors, self.combine))

    def __repr__(self) -> str:
        return f"ProductManifold({self.signature!r}, combine={self.combine!r})"

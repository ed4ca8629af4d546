"""Product-space embeddings: H^a × … × E^b × S^c with the product distance (Gu et al. 2019).

A graph that mixes tree-like and cyclic parts fits a product of spaces better than any one of
them (Gu et al., ICLR 2019). Each factor is a Poincaré ball (``"poincare"``, written ``H``), a
Lorentz hyperboloid (``"lorentz"``, ``L``), a Euclidean space (``"euclidean"``, ``E``) or a unit
sphere (``"sphere"``, ``S``); the distance combines the factor distances as the true product
metric √(Σ d_k²) (``combine="l2"``, the original's ``--riemann``) or their sum (``"l1"``).

:class:`ProductEmbedding` shares its base with :class:`~embstab.hyperbolic.HyperbolicEmbedding`, so
:func:`~embstab.hyperbolic.evaluate` and the hyperbolic measures take either; its geometry is a
:class:`~embstab.hyperbolic.manifolds.ProductManifold`. :func:`~embstab.hyperbolic.sgd.fit_product_sgd`
trains one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from embstab.errors import UnknownNameError
from embstab.hyperbolic.base import ManifoldEmbedding, off_manifold
from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.io import PRODUCT_MAGIC
from embstab.hyperbolic.manifolds import MANIFOLDS, ProductManifold, combine_distances, get_manifold

__all__ = [
    "ProductEmbedding",
    "parse_factors",
]

#: Factor kinds by the one-letter names used in factor strings such as ``"H2,H2,S1"``.
KINDS = {m.letter: m.name for m in MANIFOLDS.values()}


def parse_factors(factors: str | Sequence[Any]) -> tuple[tuple[str, int], ...]:
    """Normalise a factor list to ``((manifold name, dim), ...)``.

    Parameters
    ----------
    factors : str or sequence
        ``"H2,H2,E2,S1"``, ``["H2", "S1"]`` or ``[("poincare", 2), ("sphere", 1)]``. The dimension
        is the manifold's own (S1 is the circle, stored as 2 numbers; L2 as 3).

    Returns
    -------
    tuple of (str, int)
        Canonical manifold names (see :func:`~embstab.hyperbolic.manifolds.get_manifold`) and dimensions.

    Raises
    ------
    HyperbolicError
        If a factor is malformed or names no manifold.
    """
    items = [f.strip() for f in factors.split(",")] if isinstance(factors, str) else list(factors)
    out = []
    for f in items:
        if isinstance(f, str):
            m = re.fullmatch(r"([HLES])(\d+)", f.strip().upper())
            if not m:
                raise HyperbolicError(f"bad factor {f!r}: use H<dim> (Poincaré), L<dim> (Lorentz), "
                                      "E<dim> (Euclidean) or S<dim> (sphere), e.g. 'H2,H2,S1'")
            kind, dim = KINDS[m.group(1)], int(m.group(2))
        else:
            try:
                kind, dim = str(f[0]), int(f[1])
            except (TypeError, IndexError, ValueError):
                raise HyperbolicError(f"bad factor {f!r}: expected (kind, dim)") from None
            try:
                kind = get_manifold(kind).name
            except UnknownNameError as exc:
                raise HyperbolicError(f"bad factor {f!r}: {exc}") from None
        if dim < 1:
            raise HyperbolicError(f"factor {f!r} needs a dimension ≥ 1")
        out.append((kind, dim))
    if not out:
        raise HyperbolicError("a product needs at least one factor")
    return tuple(out)


class ProductEmbedding(ManifoldEmbedding, magic=PRODUCT_MAGIC):
    """Points of a product of hyperbolic, Euclidean and spherical factors.

    Parameters
    ----------
    coords : sequence of array_like
        One ``(n, width)`` float array per factor (width = dim, or dim + 1 for ``lorentz`` and
        ``sphere`` points, which are stored in their ambient space).
    factors : str or sequence
        See :func:`parse_factors`.
    combine : {"l2", "l1"}, default "l2"
        √(Σ d_k²), the product metric, or Σ d_k.
    scale : float, default 1.0
        Decoded distance = combined distance / scale (as for HyperbolicEmbedding).
    nodes : sequence, optional
        Labels (default 0..n-1).
    metadata : dict, optional
        Provenance.
    """

    def __init__(self, coords: Sequence[Any], factors: str | Sequence[Any], *,
                 combine: str = "l2", scale: float = 1.0, nodes: Sequence[Any] | None = None,
                 metadata: dict | None = None) -> None:
        self.factors = parse_factors(factors)
        manifold = ProductManifold(self.factors, combine)
        if len(coords) != len(self.factors):
            raise HyperbolicError(f"{len(coords)} coordinate blocks for {len(self.factors)} factors")
        blocks = [np.asarray(c, dtype=np.float64) for c in coords]
        n = blocks[0].shape[0] if blocks[0].ndim == 2 else -1
        for (kind, dim), want, b in zip(self.factors, manifold.widths, blocks):
            if b.ndim != 2 or b.shape[0] != n or b.shape[1] != want or n == 0:
                raise HyperbolicError(f"factor {kind}{dim} needs a non-empty (n, {want}) block with "
                                      f"the same n as the others, got shape {b.shape}")
            if not np.all(np.isfinite(b)):
                raise HyperbolicError(f"factor {kind}{dim} has NaN or inf coordinates")
        super().__init__(manifold, n, scale=scale, nodes=nodes, metadata=metadata)
        self.coords = blocks

    @property
    def combine(self) -> str:
        """How the factor distances combine: ``"l2"`` (the product metric) or ``"l1"``."""
        return self.manifold.combine

    @combine.setter
    def combine(self, value: str) -> None:
        self.manifold = ProductManifold(self.manifold.factors, value)

    def __len__(self) -> int:
        return self.coords[0].shape[0]

    @property
    def dim(self) -> int:
        """Total intrinsic dimension (sum of the factors')."""
        return self.manifold.dim

    @property
    def signature(self) -> str:
        """The factors as a string, e.g. ``"H2,H2,S1"``."""
        return self.manifold.signature

    def __repr__(self) -> str:
        return (f"ProductEmbedding(n={len(self)}, factors={self.signature!r}, "
                f"combine={self.combine!r}, scale={self.scale:.6g})")

    def invalid_row(self) -> tuple[int, str] | None:
        """The first point whose coordinates in some factor are off that factor's manifold, and why
        (see :data:`~embstab.hyperbolic.base.POINT_TOLERANCE`).

        Returns
        -------
        tuple of (int, str) or None
            The row index and the problem in words (naming the factor), or None when every row is a point.
        """
        found = []
        for (man, dim), block in zip(self.manifold.factors, self.coords):
            bad = off_manifold(man, block)
            if bad is not None:
                found.append((bad[0], f"factor {man.letter}{dim}: {bad[1]}"))
        return min(found) if found else None

    def factor_distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        """``(k, m)`` undecoded distances in each factor from point ``i``.

        Parameters
        ----------
        i : int
            Source row.
        targets : numpy.ndarray of int, optional
            Target rows (default all).

        Returns
        -------
        numpy.ndarray
        """
        rows = []
        for (man, _), block in zip(self.manifold.factors, self.coords):
            x = block if targets is None else block[targets]
            rows.append(man.distance(block[int(i)], x))
        return np.vstack(rows)

    def distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        """Decoded product distances from point ``i`` to all points (or ``targets``).

        Parameters
        ----------
        i : int
            Source row.
        targets : numpy.ndarray of int, optional
            Target rows (default all).

        Returns
        -------
        numpy.ndarray
        """
        return combine_distances(self.factor_distances_from(i, targets), self.combine) / self.scale

    # -- files --------------------------------------------------------------------------------------
    def file_header(self) -> dict:
        """Factors, combination rule and scale for the file header.

        Returns
        -------
        dict
            ``factors`` (the signature), ``combine`` and ``scale``.
        """
        return {"factors": self.signature, "combine": self.combine, "scale": self.scale}

    def file_rows(self) -> Iterable[tuple[Any, Iterable[str]]]:
        """Labels and the factors' coordinates side by side, each written exactly by ``repr``.

        Yields
        ------
        tuple
            ``(label, coordinate strings)`` per point, in row order.
        """
        for label, row in zip(self.nodes.tolist(), np.hstack(self.coords)):
            yield label, (repr(float(c)) for c in row)

    @classmethod
    def file_layout(cls, header: dict) -> tuple[int, Callable[[str], Any], int | None]:
        """Row width (the factors' widths summed), float parser, no multiprecision.

        Parameters
        ----------
        header : dict
            The parsed JSON header (its ``factors`` signature is read).

        Returns
        -------
        tuple of (int, callable, None)
            Numbers per row, ``float``, and None.
        """
        return ProductManifold(parse_factors(header["factors"])).width(), float, None

    @classmethod
    def from_file(cls, header: dict, labels: list, rows: list[list]) -> "ProductEmbedding":
        """The embedding a parsed file describes.

        Parameters
        ----------
        header : dict
            The parsed JSON header (see :meth:`file_header`).
        labels : list
            Node labels, one per row.
        rows : list of list
            float coordinates per row, the factors side by side.

        Returns
        -------
        ProductEmbedding
            The embedding (``combine`` defaults to ``"l2"`` and ``scale`` to 1 when the header lacks them).
        """
        factors = parse_factors(header["factors"])
        widths = ProductManifold(factors).widths
        flat = np.asarray(rows, dtype=np.float64).reshape(len(rows), sum(widths))
        blocks = np.split(flat, np.cumsum(widths)[:-1], axis=1)
        return cls(blocks, factors, combine=header.get("combine", "l2"), scale=header.get("scale", 1.0),
                   nodes=labels, metadata=header.get("metadata"))

"""Product-space embeddings: H^a × … × E^b × S^c with the product distance (Gu et al. 2019).

A graph that mixes tree-like and cyclic parts fits a product of spaces better than any one of
them (Gu et al., ICLR 2019). Each factor is a Poincaré ball (``"poincare"``, written ``H``), a
Lorentz hyperboloid (``"lorentz"``, ``L``), a Euclidean space (``"euclidean"``, ``E``) or a unit
sphere (``"sphere"``, ``S``); the distance combines the factor distances as the true product
metric √(Σ d_k²) (``combine="l2"``, the original's ``--riemann``) or their sum (``"l1"``).

:class:`ProductEmbedding` plays the role of :class:`~embstab.hyperbolic.HyperbolicEmbedding`
for :func:`~embstab.hyperbolic.evaluate` (``nodes``, ``len``, ``distances_from``);
:func:`~embstab.hyperbolic.sgd.fit_product_sgd` trains one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.geometry import hyperboloid_distance, poincare_distance

__all__ = [
    "ProductEmbedding",
    "factor_distance",
    "parse_factors",
]

#: Factor kinds and the one-letter names used in factor strings such as ``"H2,H2,S1"``.
KINDS = {"H": "poincare", "L": "lorentz", "E": "euclidean", "S": "sphere"}


def parse_factors(factors: str | Sequence[Any]) -> tuple[tuple[str, int], ...]:
    """Normalise a factor list to ``((kind, dim), ...)``.

    Accepts ``"H2,H2,E2,S1"``, ``["H2", "S1"]`` or ``[("poincare", 2), ("sphere", 1)]``. The
    dimension is the manifold's own (S1 is the circle, stored as 2 numbers; L2 as 3).
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
            if kind not in KINDS.values():
                raise HyperbolicError(f"factor kind must be one of {sorted(KINDS.values())}, "
                                      f"got {kind!r}")
        if dim < 1:
            raise HyperbolicError(f"factor {f!r} needs a dimension ≥ 1")
        out.append((kind, dim))
    if not out:
        raise HyperbolicError("a product needs at least one factor")
    return tuple(out)


def ambient_width(kind: str, dim: int) -> int:
    """Numbers per point: the hyperboloid and the sphere live in one dimension more."""
    return dim + (kind in ("lorentz", "sphere"))


def factor_distance(kind: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """float64 distance in one factor (broadcasts like the geometry helpers)."""
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if kind == "poincare":
        return poincare_distance(u, v)
    if kind == "lorentz":
        return hyperboloid_distance(u, v)
    chord = np.sqrt(np.sum((u - v) ** 2, axis=-1))
    if kind == "euclidean":
        return chord
    if kind == "sphere":
        # 2·asin(chord/2) keeps its digits for near points, where acos(u·v) loses half of them
        return 2.0 * np.arcsin(np.minimum(chord / 2.0, 1.0))
    raise HyperbolicError(f"unknown factor kind {kind!r}")


class ProductEmbedding:
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
        if combine not in ("l2", "l1"):
            raise HyperbolicError(f"combine must be 'l2' or 'l1', got {combine!r}")
        if len(coords) != len(self.factors):
            raise HyperbolicError(f"{len(coords)} coordinate blocks for {len(self.factors)} factors")
        blocks = [np.asarray(c, dtype=np.float64) for c in coords]
        n = blocks[0].shape[0] if blocks[0].ndim == 2 else -1
        for (kind, dim), b in zip(self.factors, blocks):
            want = ambient_width(kind, dim)
            if b.ndim != 2 or b.shape[0] != n or b.shape[1] != want or n == 0:
                raise HyperbolicError(f"factor {kind}{dim} needs a non-empty (n, {want}) block with "
                                      f"the same n as the others, got shape {b.shape}")
            if not np.all(np.isfinite(b)):
                raise HyperbolicError(f"factor {kind}{dim} has NaN or inf coordinates")
        if not scale > 0 or not math.isfinite(scale):
            raise HyperbolicError(f"scale must be a positive finite number, got {scale}")
        self.coords = blocks
        self.combine = combine
        self.scale = float(scale)
        self.nodes = np.arange(n) if nodes is None else np.asarray(list(nodes))
        if len(self.nodes) != n:
            raise HyperbolicError(f"{len(self.nodes)} node labels for {n} points")
        self.metadata = dict(metadata or {})
        self.multiprecision = False
        self.precision_bits = 53

    def __len__(self) -> int:
        return self.coords[0].shape[0]

    @property
    def dim(self) -> int:
        """Total intrinsic dimension (sum of the factors')."""
        return sum(d for _, d in self.factors)

    @property
    def signature(self) -> str:
        """The factors as a string, e.g. ``"H2,H2,S1"``."""
        letter = {v: k for k, v in KINDS.items()}
        return ",".join(f"{letter[k]}{d}" for k, d in self.factors)

    def __repr__(self) -> str:
        return (f"ProductEmbedding(n={len(self)}, factors={self.signature!r}, "
                f"combine={self.combine!r}, scale={self.scale:.6g})")

    def factor_distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        """``(k, m)`` undecoded distances in each factor from point ``i``."""
        rows = []
        for (kind, _), block in zip(self.factors, self.coords):
            x = block if targets is None else block[targets]
            rows.append(factor_distance(kind, block[int(i)], x))
        return np.vstack(rows)

    def distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        """Decoded product distances from point ``i`` to all points (or ``targets``)."""
        d = self.factor_distances_from(i, targets)
        combined = d[0] if len(d) == 1 else (np.sqrt(np.sum(d * d, axis=0)) if self.combine == "l2"
                                             else np.sum(d, axis=0))
        return combined / self.scale

    def distance_matrix(self, rows: Sequence[int] | None = None) -> np.ndarray:
        """Decoded distances from each of ``rows`` (default all) to all points."""
        rows = range(len(self)) if rows is None else rows
        return np.vstack([self.distances_from(i) for i in rows])

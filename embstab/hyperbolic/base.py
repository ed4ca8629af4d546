"""The base of the embeddings of :mod:`embstab.hyperbolic`: labelled points on a manifold, with a scale.

:class:`ManifoldEmbedding` holds what :class:`~embstab.hyperbolic.HyperbolicEmbedding` and
:class:`~embstab.hyperbolic.ProductEmbedding` share — node labels, the :class:`Manifold`, the scale τ
(decoded distance = manifold distance / τ), metadata, decoded distances row by row — and their file
round trip through :mod:`embstab.hyperbolic.io`. Each subclass names the magic line of its file
format when it is defined (``class X(ManifoldEmbedding, magic="# ...")``), which registers it with
the reader, so io never needs to import the classes.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from embstab.hyperbolic import io
from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.manifolds import Manifold

__all__ = ["ManifoldEmbedding", "POINT_TOLERANCE", "off_manifold"]

#: How far a row of a file may sit off its manifold and still be read as a point of it: a Lorentz
#: row needs x₀ > 0 and ``|⟨x, x⟩_L − 1| ≤ POINT_TOLERANCE · max(1, x₀²)`` (both terms grow like x₀²,
#: and float64 round-off leaves about 1e-16 · x₀²), a sphere row ``|‖x‖ − 1| ≤ POINT_TOLERANCE``.
#: A Poincaré row must lie strictly inside the unit ball (at the file's working precision): the
#: open ball has no equation to be near, and a point on its boundary is infinitely far away.
POINT_TOLERANCE = 1e-9


def off_manifold(manifold: Manifold, x: np.ndarray, tolerance: float = POINT_TOLERANCE) -> tuple[int, str] | None:
    """The first row of ``x`` that is not a point of ``manifold`` and why, or None.

    Parameters
    ----------
    manifold : Manifold
        One model (not a product).
    x : numpy.ndarray
        ``(n, width)`` float64 rows.
    tolerance : float, default POINT_TOLERANCE
        See :data:`POINT_TOLERANCE`.

    Returns
    -------
    tuple of (int, str) or None
        The row index and the problem in words.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # a far or broken row is reported, not warned about
        ok = manifold.contains(x, tolerance)
    bad = np.flatnonzero(~np.asarray(ok, dtype=bool))
    if not len(bad):
        return None
    i, row = int(bad[0]), x[int(bad[0])]
    if not np.all(np.isfinite(row)):
        return i, "a coordinate is NaN or infinite"
    with np.errstate(over="ignore", invalid="ignore"):
        norm = float(np.sqrt(np.sum(row * row)))
        if manifold.name == "poincare":
            return i, (f"the point has norm {norm:.17g}, on or outside the unit ball: not a point of the Poincaré "
                       "ball (whose points have norm below 1)")
        if manifold.name == "lorentz":
            if not row[0] > 0:
                return i, f"x0 = {row[0]:.17g} is not positive: not a point of the hyperboloid (x0 > 0)"
            inner = float(row[0] * row[0] - np.sum(row[1:] * row[1:]))
            if not np.isfinite(inner):
                return i, (f"x0 = {row[0]:.3g}: <x, x>_L overflows float64, so the row cannot be checked or used "
                           "(too far from the origin for float64 coordinates)")
            return i, (f"<x, x>_L = {inner:.17g}, not 1 within the tolerance {tolerance:g}·max(1, x0²): not a point "
                       "of the hyperboloid")
        if manifold.name == "sphere":
            return i, f"the point has norm {norm:.17g}, not 1 within {tolerance:g}: not a point of the unit sphere"
    return i, f"not a point of the {manifold.name} model"


class ManifoldEmbedding(ABC):
    """Labelled points on a manifold; decoded distances are manifold distances divided by ``scale``.

    Parameters
    ----------
    manifold : Manifold
        The geometry of the points.
    n : int
        Number of points.
    scale : float
        τ: decoded distance = manifold distance / scale.
    nodes : sequence, optional
        One label per point (default ``0..n-1``).
    metadata : dict, optional
        Free-form provenance.

    Attributes
    ----------
    geometry : str
        ``"hyperbolic"``: such embeddings are compared by their decoded distances (see
        :func:`embstab.compare`), not by linear algebra on coordinates as word vectors are.
    multiprecision : bool
        Whether coordinates are multiprecision (only Poincaré-ball embeddings can be).
    precision_bits : int
        Working precision of the coordinates (53 for float64).
    """

    geometry = "hyperbolic"
    #: The first line of this kind's files (set by ``magic=`` in the class statement).
    file_magic: str | None = None

    def __init_subclass__(cls, magic: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if magic is not None:
            cls.file_magic = magic
            io.register_kind(magic, cls)

    def __init__(self, manifold: Manifold, n: int, *, scale: float = 1.0, nodes: Sequence[Any] | None = None,
                 metadata: dict | None = None) -> None:
        if not isinstance(scale, (int, float, np.floating, np.integer)) or not scale > 0 or not math.isfinite(scale):
            raise HyperbolicError(f"scale must be a positive finite number, got {scale}")
        self.manifold = manifold
        self.scale = float(scale)
        self.nodes = np.arange(n) if nodes is None else np.asarray(list(nodes))
        if len(self.nodes) != n:
            raise HyperbolicError(f"{len(self.nodes)} node labels for {n} points")
        self.metadata = dict(metadata or {})
        self.multiprecision = False
        self.precision_bits = 53

    @abstractmethod
    def __len__(self) -> int:
        """Number of points."""

    @property
    @abstractmethod
    def dim(self) -> int:
        """The manifold's dimension."""

    @abstractmethod
    def distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        """Decoded distances from point ``i`` to all points (or ``targets``), float64.

        Parameters
        ----------
        i : int
            Row of the source point.
        targets : numpy.ndarray of int, optional
            Rows of the targets (default: all, in order).

        Returns
        -------
        numpy.ndarray
        """

    def invalid_row(self) -> tuple[int, str] | None:
        """The first point that is not a point of the manifold, and why (see :data:`POINT_TOLERANCE`).

        Files are checked with it on read; :func:`embstab.compare` checks both members with it.

        Returns
        -------
        tuple of (int, str) or None
            The row index and the problem in words, or None when every row is a point.
        """
        return None

    def distance_matrix(self, rows: Sequence[int] | None = None) -> np.ndarray:
        """Decoded distances from each of ``rows`` (default all) to all points.

        Parameters
        ----------
        rows : sequence of int, optional
            Source rows.

        Returns
        -------
        numpy.ndarray
            ``(len(rows), n)``.
        """
        rows = range(len(self)) if rows is None else rows
        return np.vstack([self.distances_from(i) for i in rows])

    # -- files --------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the embedding to a text file, atomically (see :func:`embstab.hyperbolic.save_embedding`).

        Parameters
        ----------
        path : str or os.PathLike
            The target file.
        """
        io.save_embedding(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> ManifoldEmbedding:
        """Read a file written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            The file.

        Returns
        -------
        ManifoldEmbedding
            An instance of this class (or, called on the base, of the kind the file holds).

        Raises
        ------
        embstab.errors.EmbeddingFormatError
            If the file is malformed or holds another kind of embedding.
        """
        return io.load_embedding(path, kind=None if cls is ManifoldEmbedding else cls)

    @abstractmethod
    def file_header(self) -> dict:
        """The JSON header of this embedding's file (without ``n``, which io adds).

        Returns
        -------
        dict
            JSON-serialisable header fields that :meth:`file_layout` and :meth:`from_file` read back.
        """

    @abstractmethod
    def file_rows(self) -> Iterable[tuple[Any, Iterable[str]]]:
        """(label, coordinates as exact strings) per point, for the file body.

        Returns
        -------
        Iterable of tuple
            One ``(label, strings)`` pair per point, in row order; the strings round-trip exactly.
        """

    @classmethod
    @abstractmethod
    def file_layout(cls, header: dict) -> tuple[int, Callable[[str], Any], int | None]:
        """(numbers per row, parser of one number, working precision or None) for a file's rows.

        Parameters
        ----------
        header : dict
            The parsed JSON header of the file.

        Returns
        -------
        tuple of (int, callable, int or None)
            Numbers per row, the parser of one number string, and the working precision in bits (None for
            float64 files).

        Raises
        ------
        KeyError, TypeError or HyperbolicError
            On a bad header.
        """

    @classmethod
    @abstractmethod
    def from_file(cls, header: dict, labels: list, rows: list[list]) -> ManifoldEmbedding:
        """Build the embedding from a parsed file.

        Parameters
        ----------
        header : dict
            The parsed JSON header.
        labels : list
            One label per point, in row order.
        rows : list of list
            The parsed coordinate numbers, one list per point.

        Returns
        -------
        ManifoldEmbedding
            The embedding the file describes.

        Raises
        ------
        HyperbolicError
            If the file content is invalid.
        """

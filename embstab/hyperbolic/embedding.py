"""A hyperbolic embedding of a graph's nodes: coordinates, model, scale τ and working precision.

Every method embeds τ·d_G, so the decoded distance is d̂ = d_model/τ and τ
travels with the coordinates. Combinatorial embeddings of deep trees need thousands of bits:
their coordinates are :class:`mpmath.mpf` and distances are evaluated at that precision, divided by
τ, and only then turned into float64.

For speed, multiprecision Poincaré points are also held as fixed-point Python integers
(coordinate·2^p). A difference u−v is then an exact integer subtraction, and the distance follows
from logarithms (``math.log`` is exact enough on big integers) plus the per-point
log(1−‖u‖²) computed once in mpmath — no per-pair multiprecision multiply or acosh is needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import mpmath
import numpy as np

from embstab._numbers import is_integer
from embstab.hyperbolic.base import ManifoldEmbedding, off_manifold
from embstab.hyperbolic.errors import HyperbolicError, PrecisionError
from embstab.hyperbolic.geometry import acosh1p_from_log
from embstab.hyperbolic.io import HYPERBOLIC_MAGIC
from embstab.hyperbolic.manifolds import Lorentz, Manifold, PoincareBall, get_manifold
from embstab.hyperbolic.tau import check_precision_bits

__all__ = ["HyperbolicEmbedding"]

_LN2 = math.log(2.0)
_BALL, _LORENTZ = PoincareBall(), Lorentz()


class HyperbolicEmbedding(ManifoldEmbedding, magic=HYPERBOLIC_MAGIC):
    """Points in the Poincaré ball or on the hyperboloid, with their scale and precision.

    Parameters
    ----------
    coords : array_like
        ``(n, d)`` Poincaré coordinates, or ``(n, d+1)`` Lorentz (hyperboloid) coordinates (x₀
        first). A float array is kept as float64; an object array of :class:`mpmath.mpf` (or a
        list of lists of mpf) is multiprecision.
    manifold : {"poincare", "lorentz"} or Manifold, default "poincare"
        The model ``coords`` are in (``"hyperboloid"`` names the Lorentz model too). Multiprecision
        coordinates must be Poincaré.
    scale : float, default 1.0
        τ (or the h-MDS scale s): the decoded distance is d_model/scale.
    nodes : sequence, optional
        Node labels, one per row (default ``0..n-1``).
    precision_bits : int, optional
        Working precision of multiprecision coordinates (required for them; 53 for float64).
    log_conformal : array_like, optional
        log(1−‖p‖²) per point when it is known more accurately than the coordinates give it
        (e.g. from hyperboloid x₀: log(2/(1+x₀))).
    metadata : dict, optional
        Free-form provenance (method, τ rule, root, ...).
    """

    def __init__(self, coords: Any, *, manifold: str | Manifold = "poincare", scale: float = 1.0,
                 nodes: Sequence[Any] | None = None, precision_bits: int | None = None,
                 log_conformal: Sequence[float] | None = None,
                 metadata: dict | None = None) -> None:
        man = get_manifold(manifold)
        if not man.hyperbolic:
            raise HyperbolicError(f"a HyperbolicEmbedding lives in a model of hyperbolic space "
                                  f"('poincare' or 'lorentz'), not {man.name!r}")
        arr = np.asarray(coords, dtype=object if _is_mp(coords) else np.float64)
        if arr.ndim != 2 or arr.shape[0] == 0 or man.dim_of(arr.shape[1]) < 1:
            raise HyperbolicError(f"coordinates must be a non-empty (n, d) array, got shape "
                                  f"{arr.shape}")
        super().__init__(man, arr.shape[0], scale=scale, nodes=nodes, metadata=metadata)
        self.multiprecision = arr.dtype == object
        if self.multiprecision:
            if man != _BALL:
                raise HyperbolicError("multiprecision coordinates must be in the Poincaré model")
            if precision_bits is None:
                raise HyperbolicError("multiprecision coordinates need precision_bits")
            self.precision_bits = check_precision_bits(precision_bits)
        else:
            if not np.all(np.isfinite(arr)):
                raise HyperbolicError("coordinates contain NaN or inf")
            self.precision_bits = 53
        self.coords = arr
        self._log_conformal = None if log_conformal is None else np.asarray(log_conformal,
                                                                            dtype=np.float64)
        self._fixed: list | None = None

    # -- shape ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.coords.shape[0]

    @property
    def dim(self) -> int:
        """Dimension r of the hyperbolic space H^r (hyperboloid rows carry r+1 numbers)."""
        return self.manifold.dim_of(self.coords.shape[1])

    def __repr__(self) -> str:
        kind = f"{self.precision_bits}-bit" if self.multiprecision else "float64"
        return (f"HyperbolicEmbedding(n={len(self)}, dim={self.dim}, manifold={self.manifold.name!r}, "
                f"scale={self.scale:.6g}, {kind})")

    def invalid_row(self) -> tuple[int, str] | None:
        """The first point off its model, and why: a Poincaré point on or outside the unit ball (at the
        working precision for multiprecision coordinates), a Lorentz row off the hyperboloid beyond
        :data:`~embstab.hyperbolic.base.POINT_TOLERANCE`.

        Returns
        -------
        tuple of (int, str) or None
            The row index and the problem in words, or None when every row is a point.
        """
        if not self.multiprecision:
            return off_manifold(self.manifold, self.coords)
        p = self.precision_bits
        with mpmath.workprec(p):
            for i, row in enumerate(self.coords):
                if 1 - mpmath.fsum(c * c for c in row) <= 0:
                    return i, (f"the point has norm {mpmath.nstr(mpmath.sqrt(mpmath.fsum(c * c for c in row)), 17)} "
                               f"at {p} bits, on or outside the unit ball: not a point of the Poincaré ball")
        return None

    # -- multiprecision helpers -------------------------------------------------------------------
    def _prepare_fixed(self) -> None:
        if self._fixed is not None:
            return
        p = self.precision_bits
        cols = []
        for k in range(self.coords.shape[1]):
            col = []
            for c in self.coords[:, k]:
                sign, man, exp, _ = c._mpf_  # no mpf(c): that would round to mp.prec
                man, sh = int(man), exp + p
                v = man << sh if sh >= 0 else man >> -sh  # truncation below 2^-p
                col.append(-v if sign else v)
            cols.append(col)
        self._fixed = cols
        if self._log_conformal is None:
            with mpmath.workprec(p):
                lc = []
                for row in self.coords:
                    one_minus = 1 - mpmath.fsum(c * c for c in row)
                    if one_minus <= 0:
                        raise PrecisionError(
                            f"a point has ‖x‖ ≥ 1 at {p} bits: the precision is too low for "
                            "this scale")
                    lc.append(float(mpmath.log(one_minus)))
            self._log_conformal = np.asarray(lc)

    def log_conformal(self) -> np.ndarray:
        """log(1−‖p‖²) per point, with p the Poincaré coordinates, evaluated at the working precision.

        Returns
        -------
        numpy.ndarray
            ``(n,)`` float64 (``-inf`` for a float64 point on the boundary).

        Raises
        ------
        PrecisionError
            If a multiprecision point has ‖p‖ ≥ 1 at the working precision.
        """
        if self.multiprecision:
            self._prepare_fixed()
            return self._log_conformal
        p = self.poincare64(check=False)
        n = np.sqrt(np.sum(p * p, axis=1))
        with np.errstate(divide="ignore"):
            return np.log((1 - n) * (1 + n))

    # -- distances --------------------------------------------------------------------------------
    def distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        """Decoded distances d_model(x_i, x_t)/scale from point ``i`` to all points (or ``targets``).

        Multiprecision embeddings are evaluated at their working precision; float64 ones with
        the formula of their model (the hyperboloid form is the better conditioned).

        Parameters
        ----------
        i : int
            Row index of the source point.
        targets : numpy.ndarray, optional
            Row indices of the target points (default: all ``n`` points, in row order).

        Returns
        -------
        numpy.ndarray
            float64 distances, one per target.
        """
        if self.multiprecision:
            return self._mp_row(int(i), targets) / self.scale
        x = self.coords if targets is None else self.coords[targets]
        return self.manifold.distance(self.coords[i], x) / self.scale

    def _mp_row(self, i: int, targets: np.ndarray | None) -> np.ndarray:
        self._prepare_fixed()
        log, inf = math.log, math.inf
        acc = None
        for col in self._fixed:
            xi = col[i]
            seq = col if targets is None else [col[t] for t in targets]
            # 2·log|x_t − x_i| per coordinate, summed in log space below
            lk = np.fromiter((2.0 * log(abs(x - xi)) if x != xi else -inf for x in seq),
                             dtype=np.float64, count=len(seq))
            if acc is None:
                acc = lk
            else:
                acc = np.logaddexp(acc, lk)
        lc = self._log_conformal
        lc_t = lc if targets is None else lc[targets]
        logq = _LN2 + acc - 2.0 * self.precision_bits * _LN2 - lc[i] - lc_t
        return acosh1p_from_log(logq)

    # -- float64 views ----------------------------------------------------------------------------
    def poincare64(self, check: bool = True) -> np.ndarray:
        """Poincaré coordinates as float64.

        Parameters
        ----------
        check : bool, default True
            Refuse the export when some point has 1−‖x‖ ≤ 2⁻⁵²: float64 would put it on the
            boundary and its distances become inf/NaN.

        Returns
        -------
        numpy.ndarray
            ``(n, d)`` float64 copy of the coordinates in the Poincaré ball.

        Raises
        ------
        PrecisionError
            With ``check``, if some point lies within 2⁻⁵² of the boundary.
        """
        if self.multiprecision:
            p = np.array([[float(c) for c in row] for row in self.coords], dtype=np.float64)
        else:
            p = self.manifold.to_poincare(self.coords)
        if check:
            if self.multiprecision:
                with mpmath.workprec(self.precision_bits):
                    gap = [1 - mpmath.sqrt(mpmath.fsum(c * c for c in row)) for row in self.coords]
                bad = sum(1 for g in gap if g <= mpmath.mpf(2) ** -52)
            else:
                bad = int(np.sum(1 - np.sqrt(np.sum(p * p, axis=1)) <= 2.0 ** -52))
            if bad:
                raise PrecisionError(
                    f"{bad} of {len(p)} points lie within 2^-52 of the boundary; a float64 "
                    "export would collapse them. Use polar() (direction, distance from origin), "
                    "keep the multiprecision embedding, or pass check=False")
        return np.array(p, dtype=np.float64, copy=True)

    def hyperboloid64(self, check: bool = True) -> np.ndarray:
        """Hyperboloid (Lorentz) coordinates, x₀ first, as float64.

        Parameters
        ----------
        check : bool, default True
            As in :meth:`poincare64` (not needed for a float64 Lorentz embedding, returned as is).

        Returns
        -------
        numpy.ndarray
            ``(n, d+1)`` float64 copy of the coordinates on the hyperboloid.

        Raises
        ------
        PrecisionError
            With ``check``, if a Poincaré point lies within 2⁻⁵² of the boundary.
        """
        if self.manifold == _LORENTZ and not self.multiprecision:
            return self.coords.copy()
        return _LORENTZ.from_poincare(self.poincare64(check=check))

    def polar(self) -> tuple[np.ndarray, np.ndarray]:
        """(unit directions, hyperbolic distance from the origin) as float64.

        Radii stay accurate in float64 however deep the point, unlike Cartesian coordinates.

        Returns
        -------
        directions : numpy.ndarray
            ``(n, d)`` unit vectors (zero rows for a point at the origin).
        radii : numpy.ndarray
            ``(n,)`` hyperbolic distance of each point from the origin (not divided by the scale).
        """
        if self.multiprecision:
            with mpmath.workprec(self.precision_bits):
                norms = [mpmath.sqrt(mpmath.fsum(c * c for c in row)) for row in self.coords]
                radii = np.array([float(2 * mpmath.atanh(nm)) for nm in norms])
                dirs = np.array([[float(c / nm) if nm else 0.0 for c in row]
                                 for row, nm in zip(self.coords, norms)])
            return dirs, radii
        x = self.hyperboloid64(check=False)
        sn = np.sqrt(np.sum(x[:, 1:] ** 2, axis=1))
        dirs = np.divide(x[:, 1:], sn[:, None], out=np.zeros_like(x[:, 1:]),
                         where=sn[:, None] > 0)
        return dirs, np.arcsinh(sn)

    def astype_float64(self, check: bool = True) -> "HyperbolicEmbedding":
        """A float64 Poincaré copy with the same nodes, scale and metadata.

        Parameters
        ----------
        check : bool, default True
            Refuse the copy where float64 would collapse points onto the boundary (see :meth:`poincare64`).

        Returns
        -------
        HyperbolicEmbedding
            The float64 copy.

        Raises
        ------
        PrecisionError
            With ``check``, if some point lies within 2⁻⁵² of the boundary.
        """
        return HyperbolicEmbedding(self.poincare64(check=check), scale=self.scale,
                                   nodes=self.nodes, metadata=dict(self.metadata))

    def with_coords(self, coords: np.ndarray, **metadata: Any) -> "HyperbolicEmbedding":
        """Same nodes, model and scale, new float coordinates.

        Parameters
        ----------
        coords : numpy.ndarray
            ``(n, width)`` float coordinates in this embedding's model.
        **metadata
            Entries added to (or replacing those of) a copy of this embedding's metadata.

        Returns
        -------
        HyperbolicEmbedding
            The new embedding.
        """
        return HyperbolicEmbedding(coords, manifold=self.manifold, scale=self.scale, nodes=self.nodes,
                                   metadata={**self.metadata, **metadata})

    # -- files --------------------------------------------------------------------------------------
    def file_header(self) -> dict:
        """Manifold, scale, precision and dimension for the file header.

        Returns
        -------
        dict
            ``manifold``, ``scale``, ``precision_bits``, ``multiprecision`` and ``dim``.
        """
        return {"manifold": self.manifold.name, "scale": self.scale, "precision_bits": self.precision_bits,
                "multiprecision": self.multiprecision, "dim": self.dim}

    def file_rows(self) -> Iterable[tuple[Any, Iterable[str]]]:
        """Labels and coordinates; multiprecision ones with every digit, float64 ones by ``repr``.

        Yields
        ------
        tuple
            ``(label, coordinate strings)`` per point, in row order.
        """
        digits = math.ceil(self.precision_bits * math.log10(2)) + 3
        for label, row in zip(self.nodes.tolist(), self.coords):
            if self.multiprecision:
                yield label, (mpmath.nstr(c, digits, strip_zeros=False, min_fixed=1, max_fixed=0) for c in row)
            else:
                yield label, (repr(float(c)) for c in row)

    @classmethod
    def file_layout(cls, header: dict) -> tuple[int, Callable[[str], Any], int | None]:
        """Row width, number parser and working precision from a file header.

        Files written before the manifold objects name the model under ``"model"``.

        Parameters
        ----------
        header : dict
            The parsed JSON header.

        Returns
        -------
        tuple of (int, callable, int)
            Numbers per row, the parser (:class:`mpmath.mpf` or ``float``) and the working precision in bits.

        Raises
        ------
        KeyError or HyperbolicError
            If a header field is missing, names an unknown manifold, or is out of range (``dim`` below
            1, ``precision_bits`` outside 2 to :data:`~embstab.hyperbolic.tau.MAX_PRECISION_BITS`).
        """
        man = get_manifold(header["manifold"] if "manifold" in header else header["model"])
        mp_ = header["multiprecision"]
        if not isinstance(mp_, bool):
            raise HyperbolicError(f"multiprecision must be true or false, got {mp_!r}")
        dim = header["dim"]
        if not is_integer(dim) or dim < 1:
            raise HyperbolicError(f"dim={dim!r} is not a dimension (an integer of at least 1)")
        # the same bounds as embed(precision=...): a file cannot ask for more than a method may run at
        bits = check_precision_bits(header["precision_bits"])
        return man.width(int(dim)), (mpmath.mpf if mp_ else float), bits

    @classmethod
    def from_file(cls, header: dict, labels: list, rows: list[list]) -> "HyperbolicEmbedding":
        """The embedding a parsed file describes.

        Parameters
        ----------
        header : dict
            The parsed JSON header (see :meth:`file_header`).
        labels : list
            Node labels, one per row.
        rows : list of list
            Coordinates per row, as parsed by the parser of :meth:`file_layout`.

        Returns
        -------
        HyperbolicEmbedding
            The embedding.

        Raises
        ------
        HyperbolicError
            If the coordinates are invalid.
        """
        mp_ = bool(header["multiprecision"])
        coords = np.array(rows, dtype=object) if mp_ else np.array(rows, dtype=np.float64)
        return cls(coords, manifold=header.get("manifold", header.get("model")), scale=header["scale"],
                   nodes=labels, precision_bits=header["precision_bits"] if mp_ else None,
                   metadata=header.get("metadata", {}))


def _is_mp(coords: Any) -> bool:
    if isinstance(coords, np.ndarray):
        return coords.dtype == object
    try:
        first = coords[0][0]
    except (TypeError, IndexError, KeyError):
        return False
    return isinstance(first, mpmath.mpf)

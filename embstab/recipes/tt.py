"""TT-Rec: embedding tables stored as a tensor train of three small cores.

Row ``i`` of an ``n x d`` table is split into digits ``(i1, i2, i3)`` over the row shape ``p`` and
column ``j`` into digits ``(j1, j2, j3)`` over the column shape ``q`` (both row-major), and
``W[i, j] = G1[0, i1, j1, :] @ G2[:, i2, j2, :] @ G3[:, i3, j3, 0]`` with cores ``G_k`` of shape
``(r_{k-1}, p_k, q_k, r_k)``. The table costs ``sum_k r_{k-1} p_k q_k r_k`` parameters instead of
``n d``.

:class:`TTEmbedding` trains the cores directly (rows by two batched matrix products, bag pooling,
an optional LFU cache of hot rows); :func:`tt_decompose` / :func:`tt_compress_embedding` fit a TT
to an already trained table by TT-SVD (sequential truncated SVDs, float64); when the row grid is
larger than the table, the grid's padding rows are left out of the fit instead of being zeros.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from embstab.embedding import Embedding
from embstab.errors import ConfigError, ShapeError, lookup
from embstab.io.regenerate import tt_rows, tt_rows_cost
from embstab.recipes.registry import CheckResult, register_recipe

__all__ = ["TTShape", "TTCores", "TTEmbedding", "TTConfigError", "TT_INITS", "suggest_tt_shape",
           "tt_decompose", "tt_full", "tt_compress_embedding", "check_ttrec"]

#: Core initialisations of :class:`TTEmbedding` (name -> description).
TT_INITS = {
    "sampled_gaussian": "N(0,1) redrawn while |x| < 2 (tails only), scaled by (3n)^(-1/6)",
    "uniform": "U(0, s), s = sqrt(2/(n+d))^(1/3) * prod(r)^(-1/6): table entries ~ dense U(+-1/sqrt(n)) spread",
    "normal": "N(0, 1/sqrt(n)) per core",
}


#: A tensor-train shape or rank that cannot describe the table.
#: A :class:`~embstab.errors.ConfigError` under the name this module has always raised.
TTConfigError = ConfigError


@dataclass(frozen=True)
class TTShape:
    """Shape of a three-core tensor train for an ``n x d`` table.

    Attributes
    ----------
    p : tuple of int
        Row factors, ``prod(p) >= n``.
    q : tuple of int
        Column factors, ``prod(q) == d``.
    ranks : tuple of int
        The two inner TT ranks ``(r1, r2)``; the outer ranks are 1.
    """

    p: tuple[int, int, int]
    q: tuple[int, int, int]
    ranks: tuple[int, int]

    def __post_init__(self) -> None:
        if len(self.p) != 3 or len(self.q) != 3 or len(self.ranks) != 2:
            raise TTConfigError(f"a TT shape needs 3 row factors, 3 column factors and 2 ranks, "
                                f"got p={self.p}, q={self.q}, ranks={self.ranks}")
        if min(self.p) < 1 or min(self.q) < 1 or min(self.ranks) < 1:
            raise TTConfigError(f"TT factors and ranks must be positive, got p={self.p}, q={self.q}, "
                                f"ranks={self.ranks}")
        object.__setattr__(self, "p", tuple(int(v) for v in self.p))
        object.__setattr__(self, "q", tuple(int(v) for v in self.q))
        object.__setattr__(self, "ranks", tuple(int(v) for v in self.ranks))

    @property
    def full_ranks(self) -> tuple[int, int, int, int]:
        """``(1, r1, r2, 1)``."""
        return (1, self.ranks[0], self.ranks[1], 1)

    @property
    def core_shapes(self) -> list[tuple[int, int, int, int]]:
        """Shapes ``(r_{k-1}, p_k, q_k, r_k)`` of the three cores."""
        r = self.full_ranks
        return [(r[k], self.p[k], self.q[k], r[k + 1]) for k in range(3)]

    @property
    def num_rows(self) -> int:
        """Rows the grid can address, ``prod(p)``."""
        return math.prod(self.p)

    @property
    def dim(self) -> int:
        """Table dimension, ``prod(q)``."""
        return math.prod(self.q)

    @property
    def num_parameters(self) -> int:
        """Parameters of the three cores."""
        return sum(math.prod(s) for s in self.core_shapes)

    def compression_ratio(self, n: int) -> float:
        """Dense parameters ``n * d`` over TT parameters.

        Parameters
        ----------
        n : int
            Rows of the dense table.

        Returns
        -------
        float
            ``n * d / num_parameters``.
        """
        return n * self.dim / self.num_parameters

    def validate(self, n: int, d: int) -> TTShape:
        """Raise :class:`TTConfigError` unless the shape fits an ``n x d`` table; return self.

        Parameters
        ----------
        n : int
            Rows of the table (at most ``prod(p)``).
        d : int
            Its dimension (equal to ``prod(q)``).

        Returns
        -------
        TTShape
            This shape.

        Raises
        ------
        TTConfigError
            The row factors address fewer than ``n`` rows, or the column factors do not multiply to ``d``.
        """
        if self.num_rows < n:
            raise TTConfigError(f"row factors {self.p} address {self.num_rows} rows, fewer than n={n}")
        if self.dim != d:
            raise TTConfigError(f"column factors {self.q} multiply to {self.dim}, not d={d}")
        return self


@dataclass
class TTCores:
    """The three cores of a fitted tensor train (float64 numpy arrays).

    Attributes
    ----------
    cores : list of numpy.ndarray
        Cores of shape ``(r_{k-1}, p_k, q_k, r_k)``.
    shape : TTShape
        Their shape (ranks as actually kept, never above the requested ones).
    """

    cores: list[np.ndarray]
    shape: TTShape

    @property
    def num_parameters(self) -> int:
        """Parameters held by the cores."""
        return int(sum(c.size for c in self.cores))


# ---------------------------------------------------------------------------------------------
# shapes

def _balanced_exact(d: int) -> tuple[int, int, int]:
    """The most balanced (max/min smallest) ordered triple of integers with product ``d``."""
    best = None
    for a in range(1, int(round(d ** (1 / 3))) + 2):
        if d % a:
            continue
        rest = d // a
        for b in range(a, int(math.isqrt(rest)) + 1):
            if rest % b:
                continue
            c = rest // b
            if c < b:
                continue
            key = c / a
            if best is None or key < best[0]:
                best = (key, (a, b, c))
    if best is None:  # d < 1 cannot reach here; d prime still gives (1, 1, d)
        return (1, 1, d)
    return best[1]


def _balanced_cover(n: int, slack: float = 0.02) -> tuple[int, int, int]:
    """A balanced triple with ``prod >= n``, allowing at most ``slack`` extra (unused) rows.

    Among triples whose product lies in ``[n, n * (1 + slack)]`` the most balanced wins (the
    maximal-entropy factorisation); ties go to the smaller product.
    """
    limit = max(n, int(math.floor(n * (1 + slack))))
    best = None
    top = int(math.ceil(limit ** (1 / 3))) + 1
    for a in range(1, top + 1):
        for b in range(a, int(math.isqrt(limit // a)) + 2):
            c = max(b, -(-n // (a * b)))
            prod = a * b * c
            if prod > limit:
                continue
            key = (c / a, prod)
            if best is None or key < best[0]:
                best = (key, (a, b, c))
    if best is None:
        return _balanced_cover(n, slack * 2 + 0.01)
    return best[1]


def suggest_tt_shape(n: int, d: int, ranks: int | tuple[int, int] | None = None,
                     ratio: float | None = None, slack: float = 0.02) -> TTShape:
    """Suggest a balanced three-core TT shape for an ``n x d`` table.

    Parameters
    ----------
    n, d : int
        Table rows and dimension.
    ranks : int or (int, int), optional
        Inner ranks. Give either ``ranks`` or ``ratio`` (neither: rank 8).
    ratio : float, optional
        Target compression ``n d / params``: the largest equal rank ``r`` reaching at least this
        ratio is chosen.
    slack : float
        Fraction of padding rows the row grid may add (``prod(p) <= n (1 + slack)``).

    Returns
    -------
    TTShape

    Raises
    ------
    TTConfigError
        Non-positive sizes, both ``ranks`` and ``ratio``, or a ratio that even rank 1 cannot reach.
    """
    if n < 1 or d < 1:
        raise TTConfigError(f"table size must be positive, got n={n}, d={d}")
    if ranks is not None and ratio is not None:
        raise TTConfigError("give ranks or ratio, not both")
    p = _balanced_cover(int(n), slack)
    q = _balanced_exact(int(d))
    if ratio is not None:
        if ratio <= 0:
            raise TTConfigError(f"ratio must be positive, got {ratio}")
        best = None
        for r in range(1, max(p[0] * q[0], p[2] * q[2]) + 1):
            shape = TTShape(p, q, (r, r))
            if shape.compression_ratio(n) >= ratio:
                best = shape
            else:
                break
        if best is None:
            raise TTConfigError(f"no TT rank reaches compression {ratio:g}x for a {n}x{d} table "
                                f"(rank 1 gives {TTShape(p, q, (1, 1)).compression_ratio(n):.1f}x)")
        return best
    if ranks is None:
        ranks = 8
    if isinstance(ranks, int):
        ranks = (ranks, ranks)
    return TTShape(p, q, tuple(ranks))


# ---------------------------------------------------------------------------------------------
# TT-SVD

#: Singular values below this fraction of the largest count as zero when a fit on the real rows of a
#: padded grid decides how many directions its data really has (float64 data rounding sits near 1e-16).
_RANK_RTOL = 1e-12


def _tt_svd_full_grid(X: np.ndarray, shape: TTShape) -> TTCores:
    """TT-SVD of a table that fills its row grid exactly (``n == prod(p)``)."""
    p, q = shape.p, shape.q
    # (i1,i2,i3,j1,j2,j3) -> (i1,j1,i2,j2,i3,j3): each TT mode is one (row digit, column digit) pair
    t = X.reshape(p[0], p[1], p[2], q[0], q[1], q[2]).transpose(0, 3, 1, 4, 2, 5)
    modes = [p[k] * q[k] for k in range(3)]
    cores: list[np.ndarray] = []
    rank_prev = 1
    rest = t.reshape(modes[0], -1)
    kept = []
    for k in range(2):
        mat = rest.reshape(rank_prev * modes[k], -1)
        u, s, vt = np.linalg.svd(mat, full_matrices=False)
        r = min(shape.ranks[k], s.size)
        cores.append(u[:, :r].reshape(rank_prev, p[k], q[k], r))
        rest = s[:r, None] * vt[:r]
        rank_prev = r
        kept.append(r)
    cores.append(rest.reshape(rank_prev, p[2], q[2], 1))
    return TTCores(cores, TTShape(p, q, tuple(kept)))


def _staircase_basis(F: np.ndarray, R: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row basis of at most ``r`` rows for a matrix whose rows are complete (``F``) or cover only
    the leading columns (``R``, observed on its first ``R.shape[1]`` columns).

    The basis is the dominant row space of ``F`` (numerical rank, at most ``r``) plus, while rank is
    left, the part of ``R`` outside it, set to zero on the unobserved columns. If the matrix has a
    completion of rank ``<= r``, this basis has the minimal completion rank
    ``rank[F] + rank[F_obs; R] - rank[F_obs]`` and reproduces every observed entry.

    Returns the basis ``(k, ncols)`` and the coefficients of ``F`` and ``R`` in it.
    """
    nc, nobs = F.shape[1], R.shape[1]
    scale = 0.0
    B1 = np.zeros((0, nc))
    if F.shape[0]:
        _, s, vt = np.linalg.svd(F, full_matrices=False)
        scale = float(s[0]) if s.size else 0.0
        B1 = vt[: min(r, int(np.sum(s > _RANK_RTOL * scale)))] if scale > 0 else B1
    parts = [B1]
    if R.shape[0] and nobs and B1.shape[0] < r:
        res = R
        if B1.shape[0]:
            # project R off the row space that F already gives on the observed columns
            _, so, vo = np.linalg.svd(B1[:, :nobs], full_matrices=False)
            vo = vo[: int(np.sum(so > _RANK_RTOL * so[0]))] if so.size and so[0] > 0 else vo[:0]
            res = R - (R @ vo.T) @ vo
        _, sr, vr = np.linalg.svd(res, full_matrices=False)
        scale = max(scale, float(np.linalg.norm(R, 2)))
        extra = min(r - B1.shape[0], int(np.sum(sr > _RANK_RTOL * scale))) if scale > 0 else 0
        E = np.zeros((extra, nc))
        E[:, :nobs] = vr[:extra]
        parts.append(E)
    B = np.vstack(parts)
    if not B.shape[0]:  # an all-zero table: one (unused) direction keeps the cores well formed
        B = np.zeros((1, nc))
        B[0, 0] = 1.0
    coef_f = np.zeros((F.shape[0], B.shape[0]))
    coef_f[:, : B1.shape[0]] = F @ B1.T
    coef_r = (np.linalg.lstsq(B[:, :nobs].T, R.T, rcond=None)[0].T if R.shape[0] and nobs
              else np.zeros((R.shape[0], B.shape[0])))
    return B, coef_f, coef_r


def _tt_fit_real_rows(X: np.ndarray, shape: TTShape) -> TTCores:
    """TT fit of the ``n < prod(p)`` real rows of a table, the grid's padding rows left free.

    The real rows are a prefix of the row grid in row-major order, so ``n = a1 p2 p3 + a2 p3 + a3``
    splits them into complete ``(i1, i2)`` blocks and one partial block. Right to left:

    1. the last core spans the row space of the complete blocks in the ``(i1 j1 i2 j2) x (i3 j3)``
       unfolding (plus what the partial block needs beyond it, while rank is left);
    2. the complete blocks' coefficients in that basis form a ``(i1 j1) x (i2 j2 k)`` matrix whose
       first ``a1`` slabs are complete and slab ``a1`` covers leading blocks only; the middle core
       is its row basis, found the same way, and the first core its coefficients;
    3. the first core's partial slab ``a1`` is refitted by least squares against all its real rows
       (the partial block's coefficients need not be unique, its data are).

    If the real rows are rows of a TT tensor of ranks ``(r1, r2)`` on this grid and the complete
    parts are generic (they span the spaces the ranks allow), this reproduces them to rounding.
    """
    n, d = X.shape
    p, q = shape.p, shape.q
    r1, r2 = shape.ranks
    m, a3 = divmod(n, p[2])  # complete (i1, i2) blocks, real rows of the partial one
    padded = np.zeros((shape.num_rows, d))
    padded[:n] = X
    blocks = padded.reshape(p[0] * p[1], p[2], q[0], q[1], q[2]).transpose(0, 2, 3, 1, 4)  # (blk, j1, j2, i3, j3)
    F = blocks[:m].reshape(m * q[0] * q[1], p[2] * q[2])
    R = blocks[m, :, :, :a3].reshape(q[0] * q[1], a3 * q[2])
    C, z_full, z_part = _staircase_basis(F, R, r2)
    k2 = C.shape[0]
    Z = np.zeros((p[0] * p[1], q[0], q[1], k2))
    Z[:m] = z_full.reshape(m, q[0], q[1], k2)
    Z[m] = z_part.reshape(q[0], q[1], k2)
    M = Z.reshape(p[0], p[1], q[0], q[1], k2).transpose(0, 2, 1, 3, 4)  # (i1, j1, i2, j2, k)
    a1, b = divmod(m, p[1])
    b += 1 if a3 else 0  # the partial block's (possibly non-unique) coefficients ride in slab a1 only
    F1 = M[:a1].reshape(a1 * q[0], p[1] * q[1] * k2)
    R1 = M[a1, :, :b].reshape(q[0], b * q[1] * k2)
    B, g_full, g_part = _staircase_basis(F1, R1, r1)
    k1 = B.shape[0]
    G1 = np.zeros((1, p[0], q[0], k1))
    G1[0, :a1] = g_full.reshape(a1, q[0], k1)
    G1[0, a1] = g_part
    G2 = B.reshape(k1, p[1], q[1], k2)
    G3 = C.reshape(k2, p[2], q[2], 1)
    tail = n - a1 * p[1] * p[2]
    if tail:
        # rows (i2 i3) of slab a1 in row-major order are exactly its first `tail` rows
        W = np.einsum("aijk,klm->ailjm", G2, G3[..., 0]).reshape(k1, p[1] * p[2], q[1] * q[2])[:, :tail]
        data = X[n - tail:].reshape(tail, q[0], q[1] * q[2]).transpose(1, 0, 2).reshape(q[0], -1)
        G1[0, a1] = np.linalg.lstsq(W.reshape(k1, -1).T, data.T, rcond=None)[0].T
    return TTCores([G1, G2, G3], TTShape(p, q, (k1, k2)))


def tt_decompose(X: Any, shape: TTShape) -> TTCores:
    """Fit a tensor train to a dense table (float64).

    The table is reshaped to the 3-mode tensor with modes ``(p_k q_k)``. When ``n == prod(p)``,
    two truncated SVDs over the sequential unfoldings give the cores (TT-SVD). When the grid has
    padding rows (``n < prod(p)``), they are treated as missing rather than as zeros: zero rows
    would raise the TT rank of the tensor, so that even a table made of rows of an exact rank-``r``
    tensor train would not come back. The fit then uses the real rows only (complete blocks of the
    grid fix the row spaces, the one partial first-digit slab is refitted by least squares); the
    padding rows of the returned train hold whatever the cores give.

    Parameters
    ----------
    X : array-like, shape (n, d)
        The table.
    shape : TTShape
        Target shape; ranks are upper bounds (an unfolding of lower rank keeps fewer).

    Returns
    -------
    TTCores

    Raises
    ------
    TTConfigError
        The shape does not fit ``X``.
    ShapeError
        ``X`` is not 2-D.

    Notes
    -----
    Exactness: let the ``n`` rows be the first ``n`` rows of a TT tensor of ranks ``(r1, r2)`` on
    the grid. With no padding, TT-SVD reproduces them to float64 rounding. With padding, the
    real-row fit does so whenever the complete ``(i1, i2)`` blocks (``floor(n / p3)`` of them) have
    the tensor's full rank in the ``(i1 j1 i2 j2) x (i3 j3)`` unfolding and the complete
    first-digit slabs (``floor(n / (p2 p3))``) have it in the ``(i1 j1) x (i2 j2 i3 j3)`` one: for
    random cores, about ``floor(n / p3) q1 q2 >= r2`` and ``floor(n / (p2 p3)) q1 >= r1``. Smaller
    or degenerate tables are covered by the minimal-rank completion step rather than by that
    argument; randomized checks over every row count of many small grids (degenerate cores
    included) found no table that failed to come back, but no proof covers them. Zero padding
    would instead leave such tables off by percents. For a table that is not of low TT rank the
    real-row fit is a sequential truncation like TT-SVD, not an optimum.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ShapeError(f"a TT table must be 2-D, got shape {X.shape}")
    n, d = X.shape
    shape.validate(n, d)
    if n == shape.num_rows:
        return _tt_svd_full_grid(X, shape)
    return _tt_fit_real_rows(X, shape)


def tt_full(cores: TTCores | list[Any], n: int | None = None, d: int | None = None) -> np.ndarray:
    """Reconstruct the dense table of a tensor train (float64).

    Parameters
    ----------
    cores : TTCores or list of array-like
        Three cores of shape ``(r_{k-1}, p_k, q_k, r_k)``.
    n : int, optional
        Rows to keep (default: all ``prod(p)``).
    d : int, optional
        Expected dimension (checked when given).

    Returns
    -------
    numpy.ndarray, shape (n, d)

    Notes
    -----
    Only the rows asked for are computed (:func:`embstab.io.regenerate.tt_rows`, a block of rows
    at a time), never the padding rows of the grid.
    """
    cs = cores.cores if isinstance(cores, TTCores) else cores
    g = [np.asarray(c.detach().cpu() if isinstance(c, torch.Tensor) else c, dtype=np.float64) for c in cs]
    if len(g) != 3 or any(c.ndim != 4 for c in g):
        raise TTConfigError(f"tt_full expects 3 cores of 4 dimensions, got shapes {[c.shape for c in g]}")
    rows, dim = math.prod(c.shape[1] for c in g), math.prod(c.shape[2] for c in g)
    if d is not None and dim != d:
        raise TTConfigError(f"cores give dimension {dim}, expected {d}")
    stop = len(range(rows)[:n])  # the rows full[:n] would keep, without the padded grid
    out = np.empty((stop, dim))
    one_row, _ = tt_rows_cost([c.shape for c in g], 1)
    step = max(1, (8 << 20) // max(1, 2 * one_row))  # temporaries of a block of rows near 8 MB
    for s in range(0, stop, step):
        out[s:s + step] = tt_rows(g, s, min(stop, s + step))
    return out


def tt_compress_embedding(emb: Embedding, ranks: int | tuple[int, int] = 8,
                          shape: TTShape | None = None) -> Embedding:
    """Replace an embedding's vectors by their TT-SVD reconstruction.

    Parameters
    ----------
    emb : Embedding
        Rows in the embedding's own order (frequency order compresses better).
    ranks : int or (int, int)
        Inner TT ranks (ignored when ``shape`` is given).
    shape : TTShape, optional
        Explicit shape (default: :func:`suggest_tt_shape`).

    Returns
    -------
    Embedding
        Same words; metadata gains ``tt_shape`` (p, q), ``tt_ranks`` and ``tt_params``.
    """
    n, d = emb.shape
    shape = shape or suggest_tt_shape(n, d, ranks=ranks)
    fit = tt_decompose(emb.vectors, shape)
    vec = tt_full(fit, n, d).astype(emb.vectors.dtype)
    return emb.with_vectors(vec, tt_shape={"p": list(fit.shape.p), "q": list(fit.shape.q)},
                            tt_ranks=list(fit.shape.ranks), tt_params=fit.num_parameters)


# ---------------------------------------------------------------------------------------------
# the trainable table

def _init_core(shape: tuple[int, ...], init: str, n: int, d: int, ranks: tuple[int, int],
               gen: torch.Generator) -> torch.Tensor:
    if init == "sampled_gaussian":
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
        bad = x.abs() < 2
        while bool(bad.any()):  # keep only the tails, as FBTT's "approx-normal"
            x[bad] = torch.randn(int(bad.sum()), generator=gen, dtype=torch.float64)
            bad = x.abs() < 2
        return (x * (3 * n) ** (-1 / 6)).float()
    if init == "uniform":
        s = math.sqrt(2 / (n + d)) ** (1 / 3) * (ranks[0] * ranks[1]) ** (-1 / 6)
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * s).float()
    std = 1 / math.sqrt(n)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * std).float()


class TTEmbedding(nn.Module):
    """An ``n x d`` embedding table stored as three TT cores, with an optional LFU row cache.

    Parameters
    ----------
    n, d : int
        Rows and dimension.
    ranks : int or (int, int)
        Inner TT ranks.
    p, q : tuple of 3 ints, optional
        Row and column factors (default: :func:`suggest_tt_shape`).
    init : {"sampled_gaussian", "uniform", "normal"}
        Core initialisation (see :data:`TT_INITS`).
    cache_rows : int
        Capacity of the LFU cache of dense hot rows (0: no cache).
    core_format : lowprec Format or str, optional
        When given, the cores are rounded onto this format at construction and by
        :meth:`quantize_cores` (e.g. after each optimizer step).
    mode : {"sum", "mean"}
        Bag pooling of :meth:`forward`.
    generator : torch.Generator or int, optional
        Seed or generator for the initialisation.

    Notes
    -----
    Cache life cycle: every :meth:`forward` / :meth:`rows` call in training mode counts how often
    each row is looked up. :meth:`cache_populate` then fills the cache with the ``cache_rows``
    most frequently counted rows, materialised from the cores; from then on those rows are read
    from (and trained as) dense parameters, the rest from the cores. Calling
    :meth:`cache_populate` again re-ranks by the counts: rows that stay keep their trained dense
    values, new rows are materialised from the cores, and evicted rows fall back to the cores
    (their dense updates are dropped). :meth:`cache_flush` empties the cache. Hit statistics
    since the last populate are in :attr:`cache_hits` / :attr:`cache_lookups`.
    """

    def __init__(self, n: int, d: int, ranks: int | tuple[int, int] = 8, p: tuple[int, ...] | None = None,
                 q: tuple[int, ...] | None = None, init: str = "sampled_gaussian", cache_rows: int = 0,
                 core_format: Any = None, mode: str = "sum",
                 generator: torch.Generator | int | None = None) -> None:
        super().__init__()
        lookup(TT_INITS, init, "TT initialisation")
        lookup({"sum": 0, "mean": 0}, mode, "bag mode")
        if isinstance(ranks, int):
            ranks = (ranks, ranks)
        auto = suggest_tt_shape(n, d, ranks=tuple(ranks))
        self.shape = TTShape(tuple(p) if p is not None else auto.p, tuple(q) if q is not None else auto.q,
                             tuple(ranks)).validate(n, d)
        if not 0 <= cache_rows <= n:
            raise TTConfigError(f"cache_rows must lie in [0, n={n}], got {cache_rows}")
        self.n, self.d, self.init, self.mode = int(n), int(d), init, mode
        self.cache_rows = int(cache_rows)
        self.core_format = core_format
        gen = generator if isinstance(generator, torch.Generator) else torch.Generator().manual_seed(
            0 if generator is None else int(generator))
        self.cores = nn.ParameterList([nn.Parameter(_init_core(s, init, n, d, self.shape.ranks, gen))
                                       for s in self.shape.core_shapes])
        p0, p1, p2 = self.shape.p
        self._strides = (p1 * p2, p2)
        self.register_buffer("counts", torch.zeros(n, dtype=torch.long))
        self.register_buffer("cache_slot", torch.full((n,), -1, dtype=torch.long))
        self.register_buffer("cache_ids", torch.zeros(0, dtype=torch.long))
        self.cache_weight = nn.Parameter(torch.zeros(0, d))
        self.cache_hits = 0
        self.cache_lookups = 0
        if core_format is not None:
            self.quantize_cores()

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def num_parameters(self) -> int:
        """Parameters of the cores (the cache excluded)."""
        return self.shape.num_parameters

    @property
    def compression_ratio(self) -> float:
        """``n d`` over the core parameters."""
        return self.shape.compression_ratio(self.n)

    @property
    def cache_hit_rate(self) -> float:
        """Fraction of lookups served by the cache since the last :meth:`cache_populate`."""
        return self.cache_hits / self.cache_lookups if self.cache_lookups else 0.0

    # -- rows ----------------------------------------------------------------------------------
    def _check_ids(self, idx: torch.Tensor) -> torch.Tensor:
        idx = torch.as_tensor(idx, dtype=torch.long)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.n):
            raise ShapeError(f"row ids must lie in [0, {self.n}), got range "
                             f"[{int(idx.min())}, {int(idx.max())}]")
        return idx

    def tt_rows(self, idx: torch.Tensor) -> torch.Tensor:
        """Rows computed from the cores only (no cache), shape ``(len(idx), d)``.

        Parameters
        ----------
        idx : torch.Tensor
            Int row ids in ``[0, n)``.

        Returns
        -------
        torch.Tensor
            ``(idx.numel(), d)`` rows.

        Raises
        ------
        ShapeError
            A row id outside ``[0, n)``.
        """
        idx = self._check_ids(idx).reshape(-1)
        g1, g2, g3 = self.cores
        s1, s2 = self._strides
        i1, i2, i3 = idx // s1, (idx % s1) // s2, idx % s2
        (q1, q2, _), (r1, r2) = self.shape.q, self.shape.ranks
        a = g1[0, i1]                                          # (B, q1, r1)
        b = g2[:, i2].permute(1, 0, 2, 3).reshape(-1, r1, q2 * r2)  # (B, r1, q2 r2)
        ab = torch.bmm(a, b).reshape(-1, q1 * q2, r2)          # (B, q1 q2, r2)
        c = g3[:, i3, :, 0].permute(1, 0, 2)                    # (B, r2, q3)
        return torch.bmm(ab, c).reshape(-1, self.d)

    def rows(self, idx: Any) -> torch.Tensor:
        """Rows ``idx`` (cached rows from the cache), shape ``idx.shape + (d,)``.

        Parameters
        ----------
        idx : array-like of int
            Row ids in ``[0, n)``; in training mode each lookup is counted for the cache.

        Returns
        -------
        torch.Tensor
            Rows of shape ``idx.shape + (d,)``.

        Raises
        ------
        ShapeError
            A row id outside ``[0, n)``.
        """
        idx = self._check_ids(idx)
        flat = idx.reshape(-1)
        if self.training and flat.numel():
            self.counts += torch.bincount(flat, minlength=self.n)
        if not self.cache_weight.shape[0]:
            return self.tt_rows(flat).reshape(*idx.shape, self.d)
        slot = self.cache_slot[flat]
        hit = slot >= 0
        self.cache_hits += int(hit.sum())
        self.cache_lookups += flat.numel()
        # only the misses pay for the TT products; that is the point of the cache
        out = torch.empty(flat.numel(), self.d, dtype=self.cache_weight.dtype)
        out[hit] = self.cache_weight[slot[hit]]
        out[~hit] = self.tt_rows(flat[~hit])
        return out.reshape(*idx.shape, self.d)

    def forward(self, idx: Any, offsets: Any = None) -> torch.Tensor:
        """Pooled bags, as :class:`torch.nn.EmbeddingBag`.

        Parameters
        ----------
        idx : LongTensor
            2-D ``(bags, bag_size)``, or 1-D with ``offsets`` (bag starts).
        offsets : LongTensor, optional
            Start of each bag in a 1-D ``idx``.

        Returns
        -------
        torch.Tensor, shape (bags, d)
        """
        idx = torch.as_tensor(idx, dtype=torch.long)
        if offsets is None:
            if idx.dim() != 2:
                raise ShapeError(f"without offsets the ids must be 2-D (bags, bag_size), got {tuple(idx.shape)}")
            r = self.rows(idx)
            return r.sum(1) if self.mode == "sum" else r.mean(1)
        if idx.dim() != 1:
            raise ShapeError(f"with offsets the ids must be 1-D, got {tuple(idx.shape)}")
        offsets = torch.as_tensor(offsets, dtype=torch.long)
        lengths = torch.diff(torch.cat([offsets, torch.tensor([idx.numel()])]))
        if offsets.numel() == 0 or int(offsets[0]) != 0 or bool((lengths < 0).any()):
            raise ShapeError("offsets must start at 0 and be non-decreasing within the ids")
        bag = torch.repeat_interleave(torch.arange(offsets.numel()), lengths)
        out = torch.zeros(offsets.numel(), self.d, dtype=self.cores[0].dtype).index_add(0, bag, self.rows(idx))
        if self.mode == "mean":
            out = out / lengths.clamp(min=1).unsqueeze(1).to(out.dtype)
        return out

    def full(self) -> torch.Tensor:
        """The whole ``n x d`` table (cache applied), without counting lookups.

        Returns
        -------
        torch.Tensor
            ``(n, d)`` table, computed without gradients.
        """
        with torch.no_grad():
            out = self.tt_rows(torch.arange(self.n))
            if self.cache_weight.shape[0]:
                out[self.cache_ids] = self.cache_weight
        return out

    # -- cache ---------------------------------------------------------------------------------
    @torch.no_grad()
    def cache_populate(self) -> int:
        """Fill the LFU cache with the most frequently looked-up rows; return how many are cached.

        Returns
        -------
        int
            Rows now cached: ``cache_rows``, or fewer when fewer rows were ever looked up.
        """
        if self.cache_rows == 0:
            return 0
        k = min(self.cache_rows, int((self.counts > 0).sum()))
        # stable descending sort: equal counts keep the lower row id (deterministic)
        order = torch.sort(-self.counts, stable=True).indices[:k]
        new = torch.empty(k, self.d)
        if k:
            new[:] = self.tt_rows(order)
            keep = self.cache_slot[order]
            stay = keep >= 0
            new[stay] = self.cache_weight.detach()[keep[stay]]
        self.cache_slot.fill_(-1)
        self.cache_slot[order] = torch.arange(k)
        self.cache_ids = order.clone()
        self.cache_weight = nn.Parameter(new)
        self.cache_hits = self.cache_lookups = 0
        return k

    @torch.no_grad()
    def cache_flush(self) -> None:
        """Empty the cache (cached rows fall back to the cores)."""
        self.cache_slot.fill_(-1)
        self.cache_ids = torch.zeros(0, dtype=torch.long)
        self.cache_weight = nn.Parameter(torch.zeros(0, self.d))
        self.cache_hits = self.cache_lookups = 0

    @torch.no_grad()
    def quantize_cores(self, rounding: str = "nearest", generator: torch.Generator | int | None = None) -> None:
        """Round the cores onto :attr:`core_format` in place (no-op without one).

        Parameters
        ----------
        rounding : str, default "nearest"
            Rounding mode of :func:`embstab.lowprec.quantize` (e.g. ``"stochastic"``).
        generator : torch.Generator or int, optional
            Seed or generator of stochastic rounding.
        """
        if self.core_format is None:
            return
        from embstab.lowprec import quantize
        for c in self.cores:
            c.copy_(quantize(c.detach(), self.core_format, rounding=rounding, generator=generator))


# ---------------------------------------------------------------------------------------------
# acceptance check

def _random_tt(shape: TTShape, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal(s) for s in shape.core_shapes]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


@register_recipe("ttrec", "TT-Rec: embedding tables as three tensor-train cores, TT-SVD, LFU row cache",
                 ("TTEmbedding", "TTShape", "suggest_tt_shape", "tt_decompose", "tt_full",
                  "tt_compress_embedding"))
def check_ttrec(seed: int = 0) -> CheckResult:
    """TT-SVD errors on a 10,000 x 64 table at ranks 8/16/32, row lookup and LFU cache checks.

    Parameters
    ----------
    seed : int
        Seed of the synthetic tables and lookups.

    Returns
    -------
    CheckResult
        One row per rank: parameters, compression, relative errors for a matrix-rank-8 table plus
        10 % noise, an exact TT-rank-8 table plus 10 % noise, and an iid Gaussian table, and the
        lookup-vs-reconstruction error.
    """
    rng = np.random.default_rng(seed)
    n, d = 10_000, 64
    p, q = (20, 20, 25), (4, 4, 4)

    def noisy(W: np.ndarray) -> np.ndarray:
        noise = rng.standard_normal(W.shape)
        return W + 0.1 * np.linalg.norm(W) / np.linalg.norm(noise) * noise

    low = noisy(rng.standard_normal((n, 8)) @ rng.standard_normal((8, d)))
    exact = noisy(tt_full(_random_tt(TTShape(p, q, (8, 8)), rng), n))
    iid = rng.standard_normal((n, d))
    rows = []
    lookup_err = 0.0
    ids = torch.from_numpy(rng.integers(0, n, 4096))
    for r in (8, 16, 32):
        shape = TTShape(p, q, (r, r))
        errs = {name: _rel(X, tt_full(tt_decompose(X, shape), n)) for name, X in
                (("matrix_rank8", low), ("tt_rank8", exact), ("iid_gaussian", iid))}
        emb = TTEmbedding(n, d, r, p=p, q=q, init="normal", generator=seed).eval()
        with torch.no_grad():
            got = emb.rows(ids).double().numpy()
        ref = tt_full(list(emb.cores), n)[ids.numpy()]
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        lookup_err = max(lookup_err, err)
        rows.append({"rank": r, "params": shape.num_parameters,
                     "compression": round(shape.compression_ratio(n), 1),
                     **{f"err_{k}": round(v, 4) for k, v in errs.items()}, "lookup_rel_err": err})
    table = pd.DataFrame(rows)

    # LFU cache on Zipf(1) lookups: the hit rate equals the mass of the cached (most counted) rows
    zipf = 1.0 / np.arange(1, n + 1)
    zipf /= zipf.sum()
    emb = TTEmbedding(n, d, 8, p=p, q=q, cache_rows=n // 100, generator=seed).train()
    train_ids = torch.from_numpy(rng.choice(n, size=50_000, p=zipf))
    emb.rows(train_ids)
    emb.cache_populate()
    test_ids = torch.from_numpy(rng.choice(n, size=50_000, p=zipf))
    emb.rows(test_ids)
    mass = float(zipf[emb.cache_ids.numpy()].sum())
    with torch.no_grad():
        cached_ok = bool(torch.allclose(emb.rows(emb.cache_ids), emb.tt_rows(emb.cache_ids), atol=1e-6))

    claims = {
        "params are 6,560 / 23,360 / 87,680 at ranks 8 / 16 / 32": table["params"].tolist() == [6560, 23360, 87680],
        "exact TT-rank-8 + 10% noise recovered to ~0.099 at rank 8": bool(abs(table["err_tt_rank8"][0] - 0.1 / math.sqrt(1.01)) < 0.005),
        "matrix-rank-8 and iid tables are not TT-compressible (error > 0.8 at every rank)":
            bool((table[["err_matrix_rank8", "err_iid_gaussian"]] > 0.8).all().all()),
        "errors fall as the rank grows": bool(table["err_iid_gaussian"].is_monotonic_decreasing),
        "row lookup equals the full reconstruction within 1e-4": lookup_err < 1e-4,
        "1% LFU cache hit rate matches the Zipf mass of the cached rows (within 0.02)":
            abs(emb.cache_hit_rate - mass) < 0.02,
        "freshly cached rows equal their TT rows": cached_ok,
    }
    table["cache_hit_rate_1pct"] = emb.cache_hit_rate
    table["cached_mass_1pct"] = mass
    return CheckResult("ttrec", table, claims, seed)


def time_lookup(n: int = 10_000, d: int = 64, ranks: tuple[int, ...] = (8, 16, 32), batch: int = 4096,
                repeats: int = 5, seed: int = 0) -> pd.DataFrame:
    """Time row lookup: TT cores vs a dense ``index_select`` vs a fully cached TT table.

    Parameters
    ----------
    n, d : int
        Table size.
    ranks : tuple of int
        TT ranks to time.
    batch : int
        Random ids per lookup.
    repeats : int
        Timed repetitions (the best is kept).
    seed : int
        Seed of ids and cores.

    Returns
    -------
    pandas.DataFrame
        Per rank: microseconds per row for TT, dense and cached lookups, and the ratios.
    """
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, n, (batch,), generator=gen)
    dense = torch.randn(n, d, generator=gen)

    def best(fn) -> float:
        fn()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return min(ts) / batch * 1e6

    out = []
    for r in ranks:
        emb = TTEmbedding(n, d, r, generator=seed).eval()
        cached = TTEmbedding(n, d, r, cache_rows=n, generator=seed).train()
        with torch.no_grad():
            cached.rows(torch.arange(n))
            cached.cache_populate()
            cached.eval()
            t_tt = best(lambda: emb.rows(ids))
            t_dense = best(lambda: dense.index_select(0, ids))
            t_cache = best(lambda: cached.rows(ids))
        out.append({"rank": r, "tt_us_per_row": t_tt, "dense_us_per_row": t_dense,
                    "cached_us_per_row": t_cache, "tt_over_dense": t_tt / t_dense,
                    "tt_over_cached": t_tt / t_cache})
    return pd.DataFrame(out)

"""Rebuilding what a compressed table stores implicitly: rotations from a seed, merged channel
splits, tensor-train rows from cores.

A ``.esq`` file keeps the codes of a transformed table and only a description of the transform
(see :mod:`embstab.io.compressed`); reading it applies the inverse here, row block by row block, so
the work follows the rows that exist:

- :func:`random_hadamard` is the randomized Hadamard rotation ``H diag(s) / sqrt(m)`` (block
  diagonal over the binary decomposition of the dimension); :func:`hadamard_rotate` applies it, or
  its transpose, to rows with a fast Walsh-Hadamard transform (:func:`fwht`) in
  ``O(n d log d)`` without building the ``d x d`` matrix;
- :func:`random_orthogonal` is the Haar-random rotation (QR of a Gaussian matrix): there is no fast
  form, so it costs ``d^2`` memory and ``d^3`` time, which a reader weighs before building it;
- :func:`merge_half_splits` sums the copies of outlier channels that were split in half;
- :func:`tt_rows` computes rows of a three-core tensor train without the padded table of its row grid.

These are the generators :mod:`embstab.recipes.rotation`, :mod:`embstab.recipes.ocs` and
:mod:`embstab.recipes.tt` build their methods on: a rotation regenerated here from ``(kind, seed,
dimension)`` is the one the recipe drew.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from embstab.errors import ConfigError

__all__ = ["hadamard", "hadamard_blocks", "random_hadamard", "fwht", "hadamard_rotate", "random_orthogonal",
           "merge_half_splits", "tt_rows", "tt_rows_cost"]


def _check_dim(d: object) -> int:
    if not (isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 1):
        raise ConfigError(f"rotation dimension must be a positive integer, got {d!r}")
    return int(d)


def hadamard(m: int) -> np.ndarray:
    """The Sylvester Hadamard matrix of order ``m`` (a power of two), entries ±1, float64.

    Parameters
    ----------
    m : int
        The order, a positive power of two.

    Returns
    -------
    numpy.ndarray
        ``(m, m)`` float64, unnormalised (``H @ H.T == m * I``).

    Raises
    ------
    ConfigError
        ``m`` is not a positive power of two.
    """
    if not (isinstance(m, (int, np.integer)) and m >= 1 and (m & (m - 1)) == 0):
        raise ConfigError(f"a Sylvester Hadamard matrix needs a power-of-two order, got {m!r}")
    H = np.ones((1, 1))
    while H.shape[0] < m:
        H = np.block([[H, H], [H, -H]])
    return H


def hadamard_blocks(d: int, seed: int = 0) -> list[tuple[int, np.ndarray]]:
    """The blocks of the randomized Hadamard rotation of dimension ``d``: ``(start, signs)`` each.

    ``d`` splits into its binary decomposition, largest power of two first (100 = 64 + 32 + 4); the
    block at ``start`` has ``m = len(signs)`` columns and the random signs ``s`` of ``H_m diag(s) /
    sqrt(m)``, drawn in this order from ``numpy.random.default_rng(seed)``.

    Parameters
    ----------
    d : int
        Dimension, positive.
    seed : int, default 0
        Seed of the signs.

    Returns
    -------
    list of (int, numpy.ndarray)
        One entry per set bit of ``d``; the signs are float64 ±1.

    Raises
    ------
    ConfigError
        ``d`` is not a positive integer.
    """
    d = _check_dim(d)
    rng = np.random.default_rng(seed)
    out, start = [], 0
    for bit in reversed(range(d.bit_length())):
        m = 1 << bit
        if d & m:
            out.append((start, rng.choice([-1.0, 1.0], size=m)))
            start += m
    return out


def random_hadamard(d: int, seed: int = 0, mode: str = "blocks") -> np.ndarray:
    """A randomized Hadamard rotation ``H diag(s) / sqrt(m)`` for dimension ``d``, as a matrix.

    Parameters
    ----------
    d : int
        Dimension (any positive int).
    seed : int, default 0
        Seed of the random signs.
    mode : {"blocks", "pad"}
        For ``d`` not a power of two: ``"blocks"`` is block-diagonal over the binary decomposition
        of ``d`` (:func:`hadamard_blocks`; square, orthogonal); ``"pad"`` zero-pads to the next power
        of two ``D`` and returns a ``d x D`` matrix with orthonormal rows.

    Returns
    -------
    numpy.ndarray
        ``d x d`` (blocks, or ``d`` a power of two) or ``d x D`` (pad), float64.

    Raises
    ------
    ConfigError
        ``d`` is not a positive integer, or an unknown mode.
    """
    d = _check_dim(d)
    if mode not in ("blocks", "pad"):
        raise ConfigError(f"mode must be 'blocks' or 'pad', got {mode!r}")
    if mode == "pad":
        D = 1 << (d - 1).bit_length()
        s = np.random.default_rng(seed).choice([-1.0, 1.0], size=D)
        return (hadamard(D) * s[None, :] / np.sqrt(D))[:d]
    R = np.zeros((d, d))
    for start, s in hadamard_blocks(d, seed):
        m = len(s)
        R[start:start + m, start:start + m] = hadamard(m) * s[None, :] / np.sqrt(m)
    return R


def fwht(x: np.ndarray) -> np.ndarray:
    """Fast Walsh-Hadamard transform of each row: ``x @ H_m`` for the Sylvester matrix ``H_m``.

    ``m = x.shape[-1]`` must be a power of two; ``log2 m`` butterfly passes cost ``O(m log m)`` per
    row and one temporary of half the rows' size.

    Parameters
    ----------
    x : numpy.ndarray
        ``(..., m)`` values.

    Returns
    -------
    numpy.ndarray
        float64 array of ``x``'s shape (a new array), unnormalised.

    Raises
    ------
    ConfigError
        ``m`` is not a power of two.
    """
    y = np.array(x, dtype=np.float64)  # a copy: the butterflies work in place
    m = y.shape[-1]
    if m < 1 or m & (m - 1):
        raise ConfigError(f"a Walsh-Hadamard transform needs a power-of-two length, got {m}")
    lead = y.shape[:-1]
    rows = int(np.prod(lead, dtype=np.int64))
    h = 1
    while h < m:
        v = y.reshape(rows, m // (2 * h), 2, h)
        a, b = v[:, :, 0, :], v[:, :, 1, :]
        total = a + b
        np.subtract(a, b, out=b)
        a[...] = total
        h *= 2
    return y.reshape(*lead, m)


def hadamard_rotate(x: np.ndarray, seed: int = 0, transpose: bool = False) -> np.ndarray:
    """``x @ R`` (or ``x @ R.T``) for ``R = random_hadamard(d, seed)``, without building ``R``.

    Each block of :func:`hadamard_blocks` is a fast Walsh-Hadamard transform of the rows:
    ``O(n d log d)`` time and ``O(n d)`` memory instead of the ``d x d`` matrix. The result agrees
    with the dense product to float64 rounding (the sums are taken in another order).

    Parameters
    ----------
    x : numpy.ndarray
        ``(n, d)`` rows.
    seed : int, default 0
        The rotation's seed.
    transpose : bool, default False
        Apply ``R.T`` (the inverse) instead of ``R``.

    Returns
    -------
    numpy.ndarray
        float64 ``(n, d)``.

    Raises
    ------
    ConfigError
        ``x`` is not 2-D with at least one column.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ConfigError(f"a Hadamard rotation applies to (n, d) rows with d >= 1, got shape {x.shape}")
    out = np.empty_like(x)
    for start, s in hadamard_blocks(x.shape[1], seed):
        m = len(s)
        block = x[:, start:start + m]
        # R's block is H diag(s) / sqrt(m) and H is symmetric: x R = fwht(x) s / sqrt(m), x R^T = fwht(x s) / sqrt(m)
        out[:, start:start + m] = fwht(block * s) / np.sqrt(m) if transpose else fwht(block) * s / np.sqrt(m)
    return out


def random_orthogonal(d: int, seed: int = 0) -> np.ndarray:
    """A Haar-random ``d x d`` orthogonal matrix (QR of a Gaussian matrix, signs fixed), float64.

    It costs about ``3 d^2`` float64 values and ``d^3`` multiply-adds; there is no fast form.

    Parameters
    ----------
    d : int
        Dimension, positive.
    seed : int, default 0
        Seed of the Gaussian matrix.

    Returns
    -------
    numpy.ndarray
        ``(d, d)`` float64 orthogonal matrix.

    Raises
    ------
    ConfigError
        ``d`` is not a positive integer.
    """
    d = _check_dim(d)
    Q, Rr = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return Q * np.sign(np.diag(Rr))[None, :]


def merge_half_splits(values: np.ndarray, splits: Sequence[tuple[int, int]]) -> np.ndarray:
    """Undo half splits of columns: add each appended copy back onto its source, last split first.

    A split ``(src, new)`` halved column ``src`` and appended the other half as column ``new``
    (``new`` is the next column at that point), so the merged table has
    ``values.shape[1] - len(splits)`` columns.

    Parameters
    ----------
    values : numpy.ndarray
        ``(n, d + len(splits))`` split table.
    splits : sequence of (int, int)
        ``(source column, new column)`` in the order they were made.

    Returns
    -------
    numpy.ndarray
        float64 ``(n, d)`` (a new array).

    Raises
    ------
    ConfigError
        A split that does not append the next column from an earlier one.
    """
    X = np.array(values, dtype=np.float64)
    d = X.shape[1] - len(splits)
    for i, (src, new) in enumerate(splits):
        if new != d + i or not 0 <= src < new:
            raise ConfigError(f"split {i} must append column {d + i} from an earlier one, got ({src}, {new})")
    for src, new in reversed(splits):
        X[:, src] += X[:, new]
    return X[:, :d].copy() if splits else X


def _tt_dims(shapes: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    p = tuple(int(sh[1]) for sh in shapes)
    q = tuple(int(sh[2]) for sh in shapes)
    return p, q, int(shapes[0][3]), int(shapes[1][3])


def tt_rows_cost(shapes: Sequence[Sequence[int]], rows: int) -> tuple[int, int]:
    """Peak temporary bytes and multiply-adds of :func:`tt_rows` for ``rows`` consecutive rows.

    Parameters
    ----------
    shapes : sequence of 4 ints, three of them
        Core shapes ``(r_{k-1}, p_k, q_k, r_k)``.
    rows : int
        Rows computed in one call.

    Returns
    -------
    (int, int)
        Bytes of the float64 temporaries (the returned rows included) and multiply-adds.
    """
    p, q, r1, r2 = _tt_dims(shapes)
    rows = max(0, int(rows))
    if not rows:
        return 0, 0
    blocks = min(rows, (rows - 1) // p[2] + 2)  # (i1, i2) blocks a run of rows touches
    d = q[0] * q[1] * q[2]
    # float64 values and int64 indexes alike: A, the gathered G2 and their product per block (and
    # its index digits); the gathered product, G3 slice and result per row (and its digits)
    per_block = q[0] * r1 + r1 * q[1] * r2 + q[0] * q[1] * r2 + 3
    per_row = q[0] * q[1] * r2 + r2 * q[2] + d + 3
    ops = blocks * q[0] * r1 * q[1] * r2 + rows * q[0] * q[1] * r2 * q[2]
    return 8 * (blocks * per_block + rows * per_row), ops


def tt_rows(cores: Sequence[np.ndarray], start: int, stop: int) -> np.ndarray:
    """Rows ``start .. stop - 1`` of a three-core tensor train, float64.

    Row ``i`` has digits ``(i1, i2, i3)`` over the row factors ``p`` (row-major) and
    ``W[i, (j1, j2, j3)] = G1[0, i1, j1, :] @ G2[:, i2, j2, :] @ G3[:, i3, j3, 0]``. The product of
    the first two cores is formed once per ``(i1, i2)`` block the rows touch, then each row takes
    one matrix product with the third: only these rows are computed, never the padded grid of
    ``prod(p)`` rows (:func:`tt_rows_cost` gives the cost).

    Parameters
    ----------
    cores : sequence of numpy.ndarray
        Three cores of shape ``(r_{k-1}, p_k, q_k, r_k)`` with ranks that chain.
    start, stop : int
        Row range, ``0 <= start <= stop <= prod(p)``.

    Returns
    -------
    numpy.ndarray
        ``(stop - start, prod(q))`` float64.

    Raises
    ------
    ConfigError
        Not three chained 4-d cores, or a row range outside the grid.
    """
    g = [np.asarray(c, dtype=np.float64) for c in cores]
    if len(g) != 3 or any(c.ndim != 4 for c in g) or g[0].shape[0] != 1 or g[2].shape[3] != 1 \
            or g[0].shape[3] != g[1].shape[0] or g[1].shape[3] != g[2].shape[0]:
        raise ConfigError(f"a tensor train has three chained 4-d cores, got shapes {[c.shape for c in g]}")
    p, q, r1, r2 = _tt_dims([c.shape for c in g])
    if not 0 <= start <= stop <= math.prod(p):
        raise ConfigError(f"rows {start}..{stop} lie outside the tensor train's {math.prod(p)} rows")
    d = q[0] * q[1] * q[2]
    if stop == start:
        return np.zeros((0, d))
    ids = np.arange(start, stop)
    block, i3 = np.divmod(ids, p[2])
    first = int(block[0])
    blocks = np.arange(first, int(block[-1]) + 1)
    i1, i2 = np.divmod(blocks, p[1])
    a = g[0][0, i1]                                                       # (U, q1, r1)
    b = g[1].transpose(1, 0, 2, 3)[i2].reshape(len(blocks), r1, q[1] * r2)  # (U, r1, q2 r2)
    ab = np.matmul(a, b).reshape(len(blocks), q[0] * q[1], r2)            # (U, q1 q2, r2)
    c = g[2][:, :, :, 0].transpose(1, 0, 2)[i3]                           # (rows, r2, q3)
    return np.matmul(ab[block - first], c).reshape(len(ids), d)

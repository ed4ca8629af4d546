"""Uniform quantization with a golden-section clip (smallfry's ``compress_uniform``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from embstab._bits import check_bits
from tqdm.auto import tqdm

from embstab.errors import ConfigError, ShapeError
from embstab.lowprec import UniformFormat, quantize

__all__ = ["optimal_clip", "uniform_quantize", "quantization_error"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_CHUNK_ROWS = 1 << 16


def _as_matrix(X: Any) -> np.ndarray:
    X = np.asarray(getattr(X, "vectors", X))
    if X.ndim != 2:
        raise ShapeError(f"expected a 2-D (n_words, dim) matrix, got shape {X.shape}")
    if X.size == 0:
        raise ShapeError("cannot quantize an empty matrix")
    if not np.isfinite(X).all():
        raise ShapeError("the matrix contains NaN or Inf")
    return X


def _check_bits(bits: int) -> int:
    return check_bits(bits)


def quantization_error(X: Any, bits: int, clip: float) -> float:
    """Squared Frobenius error ``||X - Q_clip(X)||²`` of deterministic uniform quantization.

    Evaluated in float64, in row chunks to bound memory; rounding is half to even.

    Parameters
    ----------
    X : array_like or Embedding
        ``(n_words, dim)`` finite matrix (or an embedding's vectors).
    bits : int
        Bit rate, ≥ 1 (32 and more: only the clipping error counts).
    clip : float
        Clip value r: the grid has ``2**bits`` levels on [−r, r] (r ≤ 0 quantizes everything to 0).

    Returns
    -------
    float
        The squared error.

    Raises
    ------
    ShapeError
        If ``X`` is not 2-D, is empty or holds NaN/Inf.
    ValueError
        If ``bits`` is not a positive integer.
    """
    X = _as_matrix(X)
    bits = _check_bits(bits)
    if bits >= 32:
        return float(sum(np.square((np.abs(X[s:s + _CHUNK_ROWS].astype(np.float64)) - clip).clip(min=0)).sum()
                         for s in range(0, len(X), _CHUNK_ROWS)))
    if clip <= 0:
        return float(sum(np.square(X[s:s + _CHUNK_ROWS].astype(np.float64)).sum() for s in range(0, len(X), _CHUNK_ROWS)))
    n = 2 ** bits - 1
    total = 0.0
    for s in range(0, len(X), _CHUNK_ROWS):
        x = X[s:s + _CHUNK_ROWS].astype(np.float64)
        q = np.round((np.clip(x, -clip, clip) + clip) * (n / (2 * clip)))  # np.round: half to even
        total += float(np.square(x - (q * (2 * clip / n) - clip)).sum())
    return total


def optimal_clip(X: Any, bits: int, tol: float = 1e-2, progress: bool = False) -> float:
    """Clip value minimising the squared quantization error, by golden-section search.

    Searches ``r`` in ``[0, max|X|]`` with ``c = (sqrt(5) - 1) / 2`` until the bracket is narrower
    than ``tol`` and than ``tol · max|X|``, evaluating the error over the whole matrix with
    deterministic (half-to-even) rounding, and returns the best of the final bracket points other
    than 0. With ``bits >= 32`` the answer is exactly ``max|X|`` (no rounding, so clipping only
    hurts).

    The absolute tolerance is the anchor-stability paper's (0.01, for embeddings whose entries
    reach 1 and more); the relative one keeps the search as fine for an embedding of small
    entries, which the absolute one alone would not search at all (every entry under 0.01: the
    clip 0, and the table quantized to zeros).

    Parameters
    ----------
    X : array_like of shape (n_words, dim) or Embedding
    bits : int
    tol : float
        Tolerance on the clip value, absolute and relative to ``max|X|`` (the smaller applies).
    progress : bool
        Show a progress bar over the search iterations.

    Returns
    -------
    float
    """
    X = _as_matrix(X)
    bits = _check_bits(bits)
    if not tol > 0:
        raise ConfigError(f"tol must be positive, got {tol!r}")
    hi = float(np.abs(X).max())
    if bits >= 32 or hi == 0.0:
        return hi
    f = lambda r: quantization_error(X, bits, r)  # noqa: E731
    width = min(tol, tol * hi)
    a, b = 0.0, hi
    x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    f1, f2 = f(x1), f(x2)
    steps = max(0, math.ceil(math.log(width / hi) / math.log(_GOLDEN)))
    with tqdm(total=steps, desc=f"clip search ({bits} bits)", disable=not progress, leave=False) as bar:
        while b - a > width:
            if f1 < f2:
                b, x2, f2 = x2, x1, f1
                x1 = b - _GOLDEN * (b - a)
                f1 = f(x1)
            else:
                a, x1, f1 = x1, x2, f2
                x2 = a + _GOLDEN * (b - a)
                f2 = f(x2)
            bar.update(1)
    # a clip of 0 maps every entry to 0: never the answer for a nonzero matrix
    cands = [(f(a), a)] if a > 0 else []
    cands += [(f1, x1), (f2, x2), (f(b), b)]
    return float(min(cands)[1])


def uniform_quantize(X: Any, bits: int, clip: float | None = None, rounding: str = "nearest",
                     seed: Any = None) -> np.ndarray:
    """Clip to ``[-clip, clip]`` and round onto ``2**bits`` evenly spaced levels.

    Parameters
    ----------
    X : array_like of shape (n_words, dim) or Embedding
    bits : int
        ``bits >= 32`` clips without rounding.
    clip : float, optional
        Defaults to :func:`optimal_clip` of ``X`` (always searched with deterministic rounding).
    rounding : {"nearest", "stochastic"} or any mode of :func:`embstab.lowprec.quantize`
    seed : int or torch.Generator, optional
        Randomness for stochastic rounding.

    Returns
    -------
    ndarray of X's dtype
    """
    X = _as_matrix(X)
    bits = _check_bits(bits)
    if clip is None:
        clip = optimal_clip(X, bits)
    if not (math.isfinite(clip) and clip >= 0):
        raise ConfigError(f"clip must be a finite number >= 0, got {clip!r}")
    return quantize(X, UniformFormat(bits, float(clip)), rounding, seed)

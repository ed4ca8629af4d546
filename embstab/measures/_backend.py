"""Array-API plumbing shared by every measure: namespace lookup, validation, dtype, factorizations.

Each measure is written once against the array API (numpy, torch on CPU or CUDA, cupy); the only
backend-specific primitive is :func:`topk`, because the standard has no partial sort.
"""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np

from embstab.errors import ShapeError

__all__ = ["namespace", "as_float", "check_matrix", "check_pair", "orthonormal_basis", "topk", "to_float"]

_DTYPES = ("float64", "float32")


def namespace(*arrays: Any):
    """The array-API namespace of the inputs (all must come from the same library)."""
    try:
        return array_api_compat.array_namespace(*arrays)
    except TypeError as exc:
        raise ShapeError(f"inputs must be numpy, torch or cupy arrays of one library: {exc}") from None


def as_float(xp, x: Any, dtype: str | None):
    """``x`` cast to float64 (default) or float32, on its own device."""
    name = dtype or "float64"
    if name not in _DTYPES:
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    target = getattr(xp, name)
    return x if x.dtype == target else xp.astype(x, target)


def check_matrix(xp, x: Any, what: str) -> None:
    """Raise :class:`ShapeError` unless ``x`` is a non-empty 2-D array of finite values."""
    if x.ndim != 2:
        raise ShapeError(f"{what} must be a 2-D (n_words, dim) array, got shape {tuple(x.shape)}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ShapeError(f"{what} is empty (shape {tuple(x.shape)})")
    if not bool(xp.all(xp.isfinite(x))):
        raise ShapeError(f"{what} contains NaN or Inf")


def check_pair(x: Any, y: Any, dtype: str | None, names: tuple[str, str] = ("X", "Y"), same_dim: bool = False):
    """Validate two row-aligned matrices and return ``(xp, x, y)`` cast to the working dtype."""
    xp = namespace(x, y)
    check_matrix(xp, x, names[0])
    check_matrix(xp, y, names[1])
    if x.shape[0] != y.shape[0]:
        raise ShapeError(f"{names[0]} and {names[1]} must be row-aligned: {x.shape[0]} vs {y.shape[0]} rows")
    if same_dim and x.shape[1] != y.shape[1]:
        raise ShapeError(f"this measure needs equal dimensions: {names[0]} is {x.shape[1]}-d, "
                         f"{names[1]} is {y.shape[1]}-d")
    if array_api_compat.device(x) != array_api_compat.device(y):
        raise ShapeError(f"{names[0]} and {names[1]} are on different devices")
    return xp, as_float(xp, x, dtype), as_float(xp, y, dtype)


def sq_norm(xp, a: Any):
    """Squared Frobenius norm as a 0-d array."""
    return xp.sum(a * a)


def to_float(value: Any) -> float:
    """A 0-d array (any backend, any device) as a Python float."""
    return float(value)


def orthonormal_basis(xp, x: Any, rtol: float | None = None):
    """Orthonormal basis of the column span of ``x`` and its singular values.

    Householder QR (backward stable, cheap) followed by an SVD of the small R factor, which
    reveals the rank: directions whose singular value is below ``rtol * s_max`` are dropped
    rather than kept as arbitrary columns (the reference keeps them, giving garbage for
    rank-deficient inputs). ``rtol`` defaults to ``max(n, d) * eps``.

    Returns
    -------
    basis : (n, r) array with orthonormal columns, r = numerical rank
    q, small_u, s : the QR factor, the R-factor's left singular vectors (d×r) and the r kept
        singular values (for callers that want ``basis = q @ small_u`` lazily).
    """
    n, d = x.shape
    if n >= d:
        q, r = xp.linalg.qr(x, mode="reduced")
        small_u, s, _ = xp.linalg.svd(r, full_matrices=False)
    else:  # wide matrix: the span is at most n-dimensional, an SVD is as cheap
        q = None
        small_u, s, _ = xp.linalg.svd(x, full_matrices=False)
    eps = float(np.finfo(np.float64 if x.dtype == xp.float64 else np.float32).eps)
    tol = (rtol if rtol is not None else max(n, d) * eps) * float(s[0]) if s.shape[0] else 0.0
    rank = int(xp.sum(xp.astype(s > tol, xp.int64)))
    small_u = small_u[:, :rank]
    s = s[:rank]
    basis = small_u if q is None else q @ small_u
    return basis, s


def topk(xp, scores: Any, k: int):
    """Values and column indices of the ``k`` largest entries of each row, sorted descending.

    The array API has no partial sort, so this dispatches to ``torch.topk`` or
    ``argpartition`` (numpy, cupy). Among equal values the lower column index comes first
    after the final sort, but which of several tied values at the k-th place is kept is
    backend-defined.
    """
    k = min(k, scores.shape[1])
    if array_api_compat.is_torch_array(scores):
        import torch

        vals, idx = torch.topk(scores, k, dim=1, largest=True, sorted=False)
    else:
        lib = np if array_api_compat.is_numpy_array(scores) else __import__("cupy")
        if k < scores.shape[1]:
            idx = lib.argpartition(-scores, k - 1, axis=1)[:, :k]
        else:
            idx = lib.broadcast_to(lib.arange(scores.shape[1]), scores.shape).copy()
        vals = lib.take_along_axis(scores, idx, axis=1)
    # sort the k survivors by (value desc, index asc) so the order is deterministic
    order = xp.argsort(xp.astype(idx, xp.int64), axis=1, stable=True)
    vals = xp.take_along_axis(vals, order, axis=1)
    idx = xp.take_along_axis(idx, order, axis=1)
    order = xp.argsort(vals, axis=1, descending=True, stable=True)
    return xp.take_along_axis(vals, order, axis=1), xp.take_along_axis(idx, order, axis=1)

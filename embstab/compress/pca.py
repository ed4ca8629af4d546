"""Dimension reduction by PCA truncation."""

from __future__ import annotations

import numpy as np

from embstab._numbers import is_integer
from embstab.embedding import Embedding
from embstab.errors import ShapeError

__all__ = ["truncate_dimension"]


def truncate_dimension(emb: Embedding, dim: int) -> Embedding:
    """Project ``emb`` onto its ``dim`` leading principal components.

    The rows are centred, projected on the top eigenvectors of the d×d covariance (float64), and
    each component's sign is fixed so its largest-magnitude loading is positive, which makes the
    result deterministic. ``metadata["explained_variance_ratio"]`` records the kept variance.

    Parameters
    ----------
    emb : Embedding
    dim : int
        1 <= dim <= emb.dim.

    Returns
    -------
    Embedding
        Same words and counts, ``dim`` columns, emb's dtype.
    """
    if not is_integer(dim) or not 1 <= dim <= emb.dim:
        raise ShapeError(f"dim must be an integer in 1..{emb.dim}, got {dim!r}")
    if len(emb) < 2:
        raise ShapeError("PCA needs at least 2 words")
    X = np.asarray(emb.vectors, dtype=np.float64)
    Xc = X - X.mean(axis=0)
    cov = Xc.T @ Xc
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(vals)[::-1][:dim]
    V = vecs[:, order]
    flip = np.sign(V[np.abs(V).argmax(axis=0), np.arange(dim)])
    V = V * np.where(flip == 0, 1.0, flip)
    total = float(vals.clip(min=0).sum())
    ratio = float(vals[order].clip(min=0).sum() / total) if total > 0 else 1.0
    return emb.with_vectors((Xc @ V).astype(emb.dtype), truncated_from=emb.dim, explained_variance_ratio=ratio)

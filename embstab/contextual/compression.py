"""Compressing contextual feature pairs through the core: PCA dimension, then uniform bits."""

from __future__ import annotations

import numpy as np

from embstab.compress.embedding import compress_pair
from embstab.compress.pca import truncate_dimension
from embstab.embedding import Embedding
from embstab.errors import ShapeError

__all__ = ["compress_features"]


def compress_features(features_old: np.ndarray, features_new: np.ndarray, bits: int | None = None,
                      dim: int | None = None, rounding: str = "nearest", seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Compress a pair of feature matrices (rows = the same items) the way word-embedding pairs are.

    Each member is first projected on its own ``dim`` leading principal components
    (:func:`embstab.compress.truncate_dimension`); then :func:`embstab.compress.compress_pair`
    rotates the new member onto the old one (orthogonal Procrustes over the shared rows) and
    quantizes both to ``bits`` with the clip found on the old member alone.

    Parameters
    ----------
    features_old, features_new : numpy.ndarray of shape (n, d)
        The old (reference) member first.
    bits : int, optional
        Uniform bits per entry (32 = clip only); ``None`` keeps float values.
    dim : int, optional
        PCA dimension; ``None`` keeps every column.
    rounding : {"nearest", "stochastic"}
    seed : int, optional
        For stochastic rounding.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        float32 matrices of shape (n, dim or d).

    Raises
    ------
    ShapeError
        If the matrices are not 2-D with the same shape.
    """
    a, b = np.asarray(features_old), np.asarray(features_new)
    if a.ndim != 2 or a.shape != b.shape:
        raise ShapeError(f"feature matrices must be 2-D with one shape, got {a.shape} and {b.shape}")
    ids = [f"#{i}" for i in range(a.shape[0])]
    ea, eb = Embedding(ids, a, name="old"), Embedding(ids, b, name="new")
    if dim is not None:
        ea, eb = truncate_dimension(ea, dim), truncate_dimension(eb, dim)
    if bits is not None:
        ea, eb = compress_pair(ea, eb, bits, rounding=rounding, seed=seed)
    return np.asarray(ea.vectors, np.float32), np.asarray(eb.vectors, np.float32)

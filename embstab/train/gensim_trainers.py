"""word2vec (CBOW, skip-gram) and fastText through gensim, made deterministic."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from gensim.models.callbacks import CallbackAny2Vec
from tqdm.auto import tqdm

from embstab.errors import ConfigError

__all__ = ["train_gensim", "stable_hash"]


def stable_hash(text: str) -> int:
    """A hash that, unlike ``hash``, does not change with ``PYTHONHASHSEED``.

    gensim seeds some per-word vectors with ``hashfxn(word + str(seed))``; passing this keeps
    runs reproducible across interpreter launches. Module-level so gensim can pickle it.

    Parameters
    ----------
    text : str
        The string to hash.

    Returns
    -------
    int
        Unsigned 64-bit BLAKE2b digest of the UTF-8 bytes.
    """
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class _EpochBar(CallbackAny2Vec):
    def __init__(self, bar: tqdm) -> None:
        self.bar = bar

    def on_epoch_end(self, model) -> None:  # noqa: D401 - gensim callback
        self.bar.update(1)


def train_gensim(docs: Sequence[Sequence[str]], algo: str, dim: int, seed: int, epochs: int,
                 min_count: int, window: int, progress: bool, **kwargs: Any
                 ) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
    """Train a gensim word2vec (CBOW or skip-gram) or fastText (skip-gram) model.

    ``workers`` defaults to 1: gensim's multi-threaded training interleaves updates in an order set
    by the OS scheduler, so only a single worker gives bit-identical vectors for the same seed.

    Parameters
    ----------
    docs : sequence of sequence of str
        Tokenised documents.
    algo : {"w2v_cbow", "w2v_sg", "fasttext"}
        The model.
    dim : int
        Vector size.
    seed : int
        gensim's seed (with :func:`stable_hash` as its hash function).
    epochs : int
        Passes over the corpus.
    min_count : int
        Words rarer than this are dropped.
    window : int
        Context window (tokens on each side).
    progress : bool
        Show a tqdm bar over the epochs.
    **kwargs
        Any other gensim keyword (``negative``, ``sample``, ``alpha``, ``min_n``, ``workers``...);
        ``max_vocab`` is passed as ``max_final_vocab``.

    Returns
    -------
    words : list of str
        In gensim's (frequency) order.
    vectors : numpy.ndarray
        float32 ``(n_words, dim)``.
    counts : numpy.ndarray
        int64 corpus counts.
    settings : dict
        The settings used, plus ``train_seconds``, ``corpus_tokens`` and ``tokens_per_second``.
    """
    from gensim.models import FastText, Word2Vec

    settings: dict[str, Any] = {"vector_size": dim, "window": window, "min_count": min_count,
                                "epochs": epochs, "seed": seed, "workers": 1, "hashfxn": stable_hash}
    if algo == "w2v_cbow":
        cls, settings["sg"] = Word2Vec, 0
    elif algo == "w2v_sg":
        cls, settings["sg"] = Word2Vec, 1
    elif algo == "fasttext":
        cls, settings["sg"] = FastText, 1  # the paper's ft_sg: fastText skip-gram
    else:  # pragma: no cover - dispatch guards this
        raise ValueError(algo)
    if "max_vocab" in kwargs:
        kwargs["max_final_vocab"] = kwargs.pop("max_vocab")
    settings.update(kwargs)
    docs = [list(d) for d in docs]
    with tqdm(total=epochs, desc=f"training {algo}", unit="epoch", disable=not progress) as bar:
        start = time.perf_counter()
        try:
            model = cls(sentences=docs, callbacks=[_EpochBar(bar)], **settings)
        except RuntimeError as exc:  # gensim's words for an empty vocabulary
            if "build vocabulary" not in str(exc):
                raise
            tokens = sum(len(d) for d in docs)
            raise ConfigError(f"no word occurs at least min_count={min_count} times in the corpus ({tokens} tokens); "
                              "lower min_count or use a bigger corpus") from None
        elapsed = time.perf_counter() - start
    wv = model.wv
    words = list(wv.index_to_key)
    counts = np.asarray([wv.get_vecattr(w, "count") for w in words], dtype=np.int64)
    record = {k: v for k, v in settings.items() if k != "hashfxn"}
    record.update({"train_seconds": elapsed, "corpus_tokens": int(model.corpus_total_words),
                   "tokens_per_second": model.corpus_total_words * epochs / max(elapsed, 1e-9)})
    return words, np.array(wv.vectors, dtype=np.float32), counts, record

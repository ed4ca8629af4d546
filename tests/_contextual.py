"""Shared tiny fixtures for the contextual tests: a tokenizer and models trained in seconds."""

from __future__ import annotations

import functools
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may reach a hub, whatever a library tries

from embstab.contextual import build_model, train_wordpiece  # noqa: E402
from embstab.data import load_corpus  # noqa: E402


@functools.lru_cache(maxsize=1)
def lee_docs() -> list[list[str]]:
    """gensim's Lee corpus (300 news documents, ~60k tokens), shipped with gensim."""
    return load_corpus("gensim_lee")


@functools.lru_cache(maxsize=1)
def tiny_tokenizer():
    return train_wordpiece(lee_docs(), vocab_size=2000)


def tiny_model(seed: int = 0, max_length: int = 64):
    """A 2 x 128 BERT with the Lee tokenizer, untrained (features of a random network are still
    deterministic functions of the input, which is all the numerics tests need)."""
    return build_model("tiny", tiny_tokenizer(), seed, max_length=max_length)


def sentences(n: int = 40, width: int = 12) -> list[list[str]]:
    """Short word windows cut from the Lee corpus (each fits a 64-piece model)."""
    out = []
    for doc in lee_docs():
        for start in range(0, len(doc) - width, width):
            out.append(doc[start:start + width])
            if len(out) == n:
                return out
    return out

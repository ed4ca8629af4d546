"""Tokenised text corpora from offline packages, and corpus pairs that model retraining."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from embstab.data.errors import DataNotFoundError
from embstab.errors import ConfigError, lookup
from embstab.data.parsers import (iter_dictd_entries, read_brown_file, read_nlp_corpus_file,
                                  read_wiki_summaries, read_wikipedia_xml)
from embstab.data.registry import DATASETS, POOLED, dataset_root
from embstab.data.sources import SOURCES, source_path
from embstab.data.tokenize import tokenize

__all__ = ["load_corpus", "load_texts", "make_corpus_pair", "corpus_names"]

_MIN_TOKENS = 3  # documents shorter than this carry no co-occurrence signal


def _dictd(name: str, filename: str) -> list[str]:
    path = dataset_root(name) / "usr" / "share" / "dictd" / filename
    return list(iter_dictd_entries(path))


def _wiki_vital() -> list[str]:
    return read_wiki_summaries(dataset_root("wiki_vital") / "data" / "summaries_en-us.json")


def _bbc_news() -> list[str]:
    from embstab.data.tasks import bbc_documents

    return [text for text, _ in bbc_documents()]


def _nlp_corpus() -> list[str]:
    files = sorted((dataset_root("nlp_corpus") / "builds").glob("doc-*.json"),
                   key=lambda p: int(p.stem.split("-")[1]))
    return [s for f in files for s in read_nlp_corpus_file(f)]


def _brown() -> list[str]:
    root = dataset_root("brown")
    files = sorted(p for p in root.iterdir() if len(p.name) == 4 and p.name[0] == "c" and p.name[2:].isdigit())
    # One document per file; words only (the tags are for the brown_pos task).
    return [" ".join(w for sent in read_brown_file(f) for w, _ in sent) for f in files]


def _gensim_file(filename: str) -> Path:
    from gensim.test.utils import datapath

    path = Path(datapath(filename))
    if not path.exists():
        raise DataNotFoundError("gensim_lee", f"{path} missing from the gensim install")
    return path


def _gensim_lee() -> list[str]:
    return _gensim_file("lee_background.cor").read_text(encoding="utf-8", errors="replace").splitlines()


def _gensim_wiki() -> list[str]:
    return read_wikipedia_xml(_gensim_file("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"))


_TEXT_LOADERS: dict[str, Callable[[], list[str]]] = {
    "wordnet_glosses": lambda: _dictd("wordnet_glosses", "wn.dict.dz"),
    "gcide": lambda: _dictd("gcide", "gcide.dict.dz"),
    "foldoc": lambda: _dictd("foldoc", "foldoc.dict.dz"),
    "wiki_vital": _wiki_vital,
    "bbc_news": _bbc_news,
    "nlp_corpus": _nlp_corpus,
    "brown": _brown,
    "gensim_lee": _gensim_lee,
    "gensim_wiki": _gensim_wiki,
}


def corpus_names() -> list[str]:
    """Names accepted by :func:`load_corpus` (``"pooled"`` and ``"a+b"`` combinations also work).

    Returns
    -------
    list of str
        The corpus names, ``"pooled"`` last.
    """
    return [*_TEXT_LOADERS, "pooled"]


def load_texts(name: str) -> list[str]:
    """The raw (untokenised) documents of one corpus, in the source's order.

    Parameters
    ----------
    name : str
        A corpus name (see :func:`corpus_names`; ``"pooled"`` and combinations are not accepted here).

    Returns
    -------
    list of str
        One string per document.

    Raises
    ------
    UnknownNameError
        If ``name`` is not a corpus (the message says when it names another kind of dataset).
    DataNotFoundError
        If the corpus's package is not installed or fetched.
    """
    note = f"it is a {DATASETS[name].kind} dataset, not a corpus" if name in DATASETS else ""
    return lookup(_TEXT_LOADERS, name, "corpus", note)()


def load_corpus(name: str) -> list[list[str]]:
    """Load a real corpus as tokenised documents (lower-cased word tokens, punctuation dropped).

    Parameters
    ----------
    name : str
        A corpus name (see :func:`corpus_names`): ``"wordnet_glosses"``, ``"gcide"``, ``"foldoc"``,
        ``"wiki_vital"``, ``"bbc_news"``, ``"nlp_corpus"``, ``"brown"``, ``"gensim_lee"``,
        ``"gensim_wiki"``; ``"pooled"`` concatenates :data:`embstab.data.registry.POOLED` (≈14M tokens,
        the offline stand-in for a Wikipedia dump); ``"a+b"`` concatenates the named corpora.

    Returns
    -------
    list of list of str
        One token list per document, documents with fewer than 3 tokens dropped.

    Raises
    ------
    DataNotFoundError
        If a needed package has not been fetched; the message names the ``embstab data fetch``
        command to run.
    UnknownDatasetError
        If the name is not a corpus.
    """
    parts = list(POOLED) if name == "pooled" else name.split("+")
    missing = [p for p in parts if p in _TEXT_LOADERS and source_path(SOURCES[DATASETS[p].source]) is None]
    if missing:
        raise DataNotFoundError(" ".join(missing), f"needed by corpus {name!r}")
    docs: list[list[str]] = []
    for part in parts:
        for text in load_texts(part):
            tokens = tokenize(text)
            if len(tokens) >= _MIN_TOKENS:
                docs.append(tokens)
    return docs


def make_corpus_pair(docs: Sequence[list[str]], kind: str = "leave_out", fraction: float = 0.05,
                     seed: int = 0, other: Sequence[list[str]] | None = None,
                     ) -> tuple[list[list[str]], list[list[str]]]:
    """Two mostly-overlapping corpora that model retraining on updated data.

    Parameters
    ----------
    docs : sequence of token lists
        The base corpus.
    kind : {"leave_out", "extend", "given"}
        ``"leave_out"``: two samples, each leaving out a different random ``fraction`` of the
        documents (disjoint left-out sets; like two Wikipedia dumps a year apart).
        ``"extend"``: the corpus without a random ``fraction`` of documents vs. the full corpus,
        the held-out documents appended at the end as new data (or ``docs`` vs ``docs + other``
        when ``other`` is given).
        ``"given"``: ``(docs, other)`` as they are.
    fraction : float
        Fraction of documents left out (0 < fraction < 0.5 for "leave_out", < 1 for "extend").
    seed : int
        Seed of the local random generator choosing the documents.
    other : sequence of token lists, optional
        Second corpus for "given", or the new documents for "extend".

    Returns
    -------
    (list of token lists, list of token lists)
        Documents keep their original relative order.
    """
    docs = list(docs)
    if kind == "given":
        if other is None:
            raise ConfigError("kind='given' needs the second corpus as other=")
        return docs, list(other)
    if kind == "extend" and other is not None:
        return docs, docs + list(other)
    if kind not in ("leave_out", "extend"):
        raise ConfigError(f"kind must be 'leave_out', 'extend' or 'given', got {kind!r}")
    limit = 0.5 if kind == "leave_out" else 1.0
    if not 0.0 < fraction < limit:
        raise ConfigError(f"fraction must be in (0, {limit}) for kind={kind!r}, got {fraction}")
    n = len(docs)
    k = int(round(fraction * n))
    if k == 0 or (kind == "leave_out" and 2 * k > n):
        raise ConfigError(f"fraction {fraction} of {n} documents leaves out {k}; use more documents "
                         f"or a larger fraction")
    perm = np.random.default_rng(seed).permutation(n)
    if kind == "leave_out":
        out_a, out_b = set(perm[:k].tolist()), set(perm[k:2 * k].tolist())
        return ([d for i, d in enumerate(docs) if i not in out_a],
                [d for i, d in enumerate(docs) if i not in out_b])
    held = set(perm[:k].tolist())
    base = [d for i, d in enumerate(docs) if i not in held]
    return base, base + [docs[i] for i in sorted(held)]

"""NumPy files: ``.npz`` (words, vectors and optional counts in one archive) and ``.npy`` plus a
vocabulary file (one word per line, optionally ``word count``)."""

from __future__ import annotations

import os
import zipfile

import numpy as np

from embstab.errors import EmbeddingFormatError

__all__ = ["read_npz", "write_npz", "read_npy", "write_npy", "vocab_path_for"]


def vocab_path_for(path: str) -> str:
    """The vocabulary file that accompanies ``X.npy``: ``X.vocab``."""
    return os.path.splitext(path)[0] + ".vocab"


def read_npz(path: str):
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = {"words", "vectors"} - set(archive.files)
            if missing:
                raise EmbeddingFormatError(path, f"the archive lacks the array(s) {sorted(missing)} "
                                           f"(it holds {archive.files})")
            words = [str(w) for w in archive["words"].tolist()]
            vectors = archive["vectors"]
            counts = archive["counts"] if "counts" in archive.files else None
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        if isinstance(exc, EmbeddingFormatError):
            raise
        raise EmbeddingFormatError(path, f"not a readable .npz archive ({exc})") from None
    _check(path, words, vectors)
    return words, vectors, counts


def write_npz(path: str, words: list[str], vectors: np.ndarray, counts) -> None:
    arrays = {"words": np.asarray(words, dtype=str), "vectors": np.asarray(vectors)}
    if counts is not None:
        arrays["counts"] = np.asarray(counts)
    with open(path, "wb") as f:  # a file object stops numpy from appending ".npz" to the name
        np.savez(f, **arrays)


def read_npy(path: str, vocab: str | None = None):
    vocab = vocab or vocab_path_for(path)
    try:
        vectors = np.load(path, allow_pickle=False, mmap_mode=None)
    except (OSError, ValueError) as exc:
        raise EmbeddingFormatError(path, f"not a readable .npy array ({exc})") from None
    if not os.path.exists(vocab):
        raise EmbeddingFormatError(path, f"a .npy embedding needs its vocabulary file {vocab} (one word per line)")
    words, counts = [], []
    with open(vocab, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            if not line.strip():
                raise EmbeddingFormatError(vocab, "empty line in the vocabulary file", lineno)
            word, _, count = line.partition("\t")
            words.append(word)
            if count:
                if not count.strip().isdigit():
                    raise EmbeddingFormatError(vocab, f"count {count!r} is not a non-negative integer", lineno)
                counts.append(int(count))
    if counts and len(counts) != len(words):
        raise EmbeddingFormatError(vocab, "some vocabulary lines have a count and others do not")
    _check(path, words, vectors)
    return words, vectors, (np.asarray(counts, dtype=np.int64) if counts else None)


def write_npy(path: str, words: list[str], vectors: np.ndarray, counts, vocab: str) -> None:
    for w in words:
        if "\n" in w or "\t" in w or not w.strip():
            raise EmbeddingFormatError(vocab, f"word {w!r} cannot be stored in a vocabulary file")
    with open(path, "wb") as f:
        np.save(f, np.asarray(vectors))
    with open(vocab, "w", encoding="utf-8") as f:
        for i, w in enumerate(words):
            f.write(w if counts is None else f"{w}\t{int(counts[i])}")
            f.write("\n")


def _check(path: str, words: list[str], vectors: np.ndarray) -> None:
    if vectors.ndim != 2:
        raise EmbeddingFormatError(path, f"vectors must be 2-D, got shape {vectors.shape}")
    if vectors.shape[0] != len(words):
        raise EmbeddingFormatError(path, f"{len(words)} words but {vectors.shape[0]} vector rows")
    if not np.issubdtype(vectors.dtype, np.floating):
        raise EmbeddingFormatError(path, f"vectors must be floating point, got {vectors.dtype}")
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise EmbeddingFormatError(path, f"NaN or Inf in the vector of {words[bad]!r} (row {bad})")

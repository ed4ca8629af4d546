"""Reading and writing embedding files, with the format detected from the content.

Formats (``format=`` names):

========================  ==========================================================  ==========
name                      what                                                        suffix
========================  ==========================================================  ==========
``word2vec``              text, ``n d`` header line then ``word v1 … vd``              .txt .w2v
``vec``                   fastText text: the same layout as ``word2vec``               .vec
``glove``                 text without a header                                       .glove
``word2vec_binary``       ``n d`` header then word + d float32 per record              .bin
``npz``                   NumPy archive with ``words``, ``vectors`` (and ``counts``)    .npz
``npy``                   NumPy matrix plus ``X.vocab`` (a word per line [tab count])  .npy
``gensim``                gensim ``KeyedVectors.save`` file (a pickle: trusted files)  .kv
``embstab``               embstab's bit-packed compressed format                      .esq
========================  ==========================================================  ==========

Every problem with a file raises :class:`~embstab.errors.EmbeddingFormatError` naming the file,
the line and the problem. Writes are atomic (a temporary file renamed into place), so a failed
save leaves nothing behind and never clobbers an existing file with half a file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import numpy as np

from embstab._fs import publish
from embstab.embedding import Embedding
from embstab.errors import EmbeddingFormatError
from embstab.io.arrays import read_npy, read_npz, vocab_path_for, write_npy, write_npz
from embstab.io.binary import read_word2vec_binary, write_word2vec_binary
from embstab.io.text import parse_header, read_text, write_text

__all__ = ["FORMATS", "detect_format", "load", "save"]

FORMATS = ("word2vec", "vec", "glove", "word2vec_binary", "npz", "npy", "gensim", "embstab")
_SUFFIXES = {".txt": "word2vec", ".w2v": "word2vec", ".vec": "vec", ".glove": "glove", ".bin": "word2vec_binary",
             ".npz": "npz", ".npy": "npy", ".kv": "gensim", ".esq": "embstab"}


def _compressed_module():
    # the compressed format depends on the low-precision core; import it only when needed
    from embstab.io import compressed

    return compressed


def detect_format(path: str | os.PathLike) -> str:
    """Guess the format of an existing file from its first bytes (the suffix is not trusted)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise EmbeddingFormatError(path, "is a directory, not an embedding file")
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if not head:
        raise EmbeddingFormatError(path, "the file is empty")
    try:
        magic = _compressed_module().MAGIC
    except ImportError:
        magic = None
    if magic and head.startswith(magic):
        return "embstab"
    if head.startswith(b"PK\x03\x04"):
        return "npz"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):  # a pickle: gensim .save()
        return "gensim"
    newline = head.find(b"\n")
    first = head[: newline if newline >= 0 else len(head)]
    try:
        header = parse_header(first.decode("ascii"))
    except UnicodeDecodeError:
        header = None
    if header is not None:
        rest = head[newline + 1:]
        try:
            rest.decode("utf-8")
            binary = b"\x00" in rest
        except UnicodeDecodeError as exc:
            # a multi-byte character cut at the end of the sniffed block is still text
            binary = exc.start < len(rest) - 4
        return "word2vec_binary" if binary else "word2vec"
    return "glove"


def load(
    path: str | os.PathLike,
    format: str | None = None,
    *,
    dtype=np.float64,
    duplicates: str = "error",
    name: str | None = None,
    vocab: str | os.PathLike | None = None,
    progress: bool | None = None,
) -> Embedding:
    """Load an embedding file into an :class:`~embstab.Embedding`.

    Parameters
    ----------
    path : path of the file
    format : one of :data:`FORMATS`; detected from the content when omitted
    dtype : numpy dtype of the matrix (float64 by default; float32 halves the memory)
    duplicates : {"error", "first"}
        A word that occurs twice is an error, or the first occurrence is kept with a warning.
    name : name of the embedding (default: the file name without its suffix)
    vocab : vocabulary file of a ``.npy`` matrix (default: the same name with ``.vocab``)
    progress : progress bar for large files (default: on above 20 MB)

    Raises
    ------
    EmbeddingFormatError
        Malformed file: inconsistent width, non-numeric field, NaN or Inf, header/row count
        mismatch, duplicate word, empty file, binary garbage, undecodable text.
    FileNotFoundError
        The file does not exist.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "no such embedding file", path)
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if duplicates not in ("error", "first"):
        raise ValueError(f"duplicates must be 'error' or 'first', got {duplicates!r}")
    counts = None
    lines = None
    if fmt in ("word2vec", "vec", "glove"):
        words, vectors, declared, lines = read_text(path, dtype=dtype, header=False if fmt == "glove" else None,
                                                    progress=progress)
    elif fmt == "word2vec_binary":
        words, vectors = read_word2vec_binary(path, dtype=dtype, progress=progress)
    elif fmt == "npz":
        words, vectors, counts = read_npz(path)
    elif fmt == "npy":
        words, vectors, counts = read_npy(path, os.fspath(vocab) if vocab else None)
    elif fmt == "gensim":
        return _load_gensim(path, dtype, name)
    else:
        emb = _compressed_module().read_compressed(path)
        if name:
            emb.name = name
        return emb
    if duplicates == "error":
        seen: dict[str, int] = {}
        for i, w in enumerate(words):
            j = seen.setdefault(w, i)
            if j != i:
                where = lines[i] if lines is not None else i + 1
                first = f"line {lines[j]}" if lines is not None else f"record {j + 1}"
                raise EmbeddingFormatError(path, f"duplicate word {w!r} (first seen on {first}); "
                                           "pass duplicates='first' to keep the first occurrence", where)
    return Embedding(words, np.asarray(vectors, dtype=dtype), counts, name=name or _stem(path), source=path,
                     duplicates=duplicates, copy=False)


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def _load_gensim(path: str, dtype, name: str | None) -> Embedding:
    from gensim.models import KeyedVectors

    try:
        obj = KeyedVectors.load(path)
    except Exception as exc:  # unpickling errors come in many types
        raise EmbeddingFormatError(path, f"not a loadable gensim KeyedVectors file ({type(exc).__name__}: {exc})") \
            from None
    kv = getattr(obj, "wv", obj)  # a whole Word2Vec/FastText model saved with .save() also works
    if not hasattr(kv, "index_to_key"):
        raise EmbeddingFormatError(path, f"the pickle holds a {type(obj).__name__}, not gensim KeyedVectors")
    emb = Embedding.from_keyedvectors(kv, name=name or _stem(path), source=path)
    return emb.astype(dtype) if emb.dtype != dtype else emb


def save(emb: Embedding, path: str | os.PathLike, format: str | None = None, **kwargs) -> None:
    """Write ``emb`` to ``path`` atomically.

    The format is taken from ``format`` or the suffix (see the module table; unknown suffixes
    give word2vec text). An embedding made by :mod:`embstab.compress` is saved as ``.esq`` with
    its exact codes; any other embedding as raw float32. To quantize while saving, use
    :func:`embstab.compress.save_compressed` (``bits=``, ``format=``); passing such options
    here raises a ``TypeError`` that says so.
    """
    path = os.fspath(path)
    fmt = format or _SUFFIXES.get(os.path.splitext(path)[1].lower(), "word2vec")
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    words, vectors, counts = emb.words, emb.vectors, emb.counts
    if fmt in ("word2vec", "vec", "glove"):
        _atomic(path, lambda tmp: write_text(tmp, words, vectors, header=fmt != "glove"))
    elif fmt == "word2vec_binary":
        _atomic(path, lambda tmp: write_word2vec_binary(tmp, words, vectors))
    elif fmt == "npz":
        _atomic(path, lambda tmp: write_npz(tmp, words, vectors, counts))
    elif fmt == "npy":
        vocab = vocab_path_for(path)
        with _TempSibling(vocab) as vtmp:
            _atomic(path, lambda tmp: write_npy(tmp, words, vectors, counts, vtmp))
            publish(vtmp, vocab)
    elif fmt == "gensim":
        _save_gensim(emb, path)
    else:
        _atomic(path, lambda tmp: _compressed_module().write_compressed(emb, tmp, **kwargs))


class _TempSibling:
    """A temporary path next to ``target`` (same file system, so ``os.replace`` is atomic)."""

    def __init__(self, target: str):
        self.target = target

    def __enter__(self) -> str:
        directory = os.path.dirname(os.path.abspath(self.target))
        fd, self.tmp = tempfile.mkstemp(prefix=f".{os.path.basename(self.target)}.", suffix=".tmp", dir=directory)
        os.close(fd)
        return self.tmp

    def __exit__(self, *exc) -> None:
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


def _atomic(path: str, write: Callable[[str], None]) -> None:
    with _TempSibling(path) as tmp:
        try:
            write(tmp)
        except EmbeddingFormatError as exc:
            raise EmbeddingFormatError(path, exc.problem, exc.line) from None
        publish(tmp, path)


def _save_gensim(emb: Embedding, path: str) -> None:
    directory = tempfile.mkdtemp(prefix=".embstab-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        staged = os.path.join(directory, os.path.basename(path))
        emb.to_keyedvectors().save(staged)
        for name in os.listdir(directory):  # gensim may add side files such as X.vectors.npy
            os.replace(os.path.join(directory, name), os.path.join(os.path.dirname(os.path.abspath(path)), name))
    finally:
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        os.rmdir(directory)

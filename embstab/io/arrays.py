"""NumPy files: ``.npz`` (words, vectors, counts and a JSON description in one archive) and
``.npy`` plus a vocabulary file (one word per line, optionally ``word<TAB>count``).

The ``.npz`` layout is the one embedding codec of embstab: :func:`npz_bytes` / :func:`read_npz`
serve both :func:`embstab.save` / :func:`embstab.load` and the study's artifact store, so a
``.npz`` holds the same information whichever writer made it (name and metadata included).
Array headers are checked against the bytes present before anything is allocated.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
import zlib
from collections.abc import Mapping
from typing import IO, Any

import numpy as np

from embstab._fs import atomic_write, json_safe, to_json
from embstab._textfiles import loads_json
from embstab.embedding import Embedding
from embstab.errors import EmbeddingFormatError

__all__ = ["read_npz", "write_npz", "npz_bytes", "read_npy", "write_npy", "vocab_path_for"]

# Deflate cannot expand data by more than about 1032:1; a member declaring more is a zip bomb.
_MAX_DEFLATE_RATIO = 1100


def vocab_path_for(path: str) -> str:
    """The vocabulary file that accompanies ``X.npy``: ``X.vocab``.

    Parameters
    ----------
    path : str
        Path of the ``.npy`` file.

    Returns
    -------
    str
        Path of its vocabulary file.
    """
    return os.path.splitext(path)[0] + ".vocab"


# ------------------------------------------------------------------------------------ array headers
def _read_npy_header(fh: IO[bytes], label: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from an ``.npy`` header; the file position ends at the data."""
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise EmbeddingFormatError(label, f"not a readable .npy array ({exc})") from None
    if dtype.hasobject:
        raise EmbeddingFormatError(label, "the array holds Python objects (a pickle), which embstab never loads")
    return tuple(int(s) for s in shape), dtype


def _check_declared(label: str, shape: tuple[int, ...], dtype: np.dtype, available: int) -> None:
    need = math.prod(shape) * dtype.itemsize
    if need > available:
        raise EmbeddingFormatError(label, f"the array header declares shape {shape} of {dtype} ({need} bytes) but "
                                   f"only {available} bytes follow (truncated, or a corrupt header)")


# ------------------------------------------------------------------------------------ .npz codec
def _write_arrays(fh: IO[bytes], arrays: Mapping[str, np.ndarray]) -> None:
    # deflate level 1: quantized matrices hold few distinct values, so a 1-bit pair shrinks about
    # 9x and an 8-bit one about 4x, at a fraction of the cost of numpy's default level
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, arr in arrays.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr), allow_pickle=False)


def _arrays(emb: Embedding) -> dict[str, np.ndarray]:
    arrays = {"words": np.asarray(emb.words, dtype=str), "vectors": np.asarray(emb.vectors)}
    if emb.counts is not None:
        arrays["counts"] = np.asarray(emb.counts)
    meta = {"name": emb.name, "source": emb.source, "metadata": json_safe(dict(emb.metadata or {}))}
    arrays["meta"] = np.asarray(to_json(meta))
    return arrays


def npz_bytes(emb: Embedding) -> bytes:
    """The ``.npz`` form of ``emb`` (words, vectors, counts, and name/source/metadata as JSON).

    Parameters
    ----------
    emb : Embedding
        The embedding to serialise.

    Returns
    -------
    bytes
        The archive's bytes.
    """
    buf = io.BytesIO()
    _write_arrays(buf, _arrays(emb))
    return buf.getvalue()


def write_npz(path: str | os.PathLike, emb: Embedding) -> None:
    """Write ``emb`` as ``.npz`` (see :func:`npz_bytes`) through :func:`embstab._fs.atomic_write`.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file (replaced atomically).
    emb : Embedding
        The embedding.
    """
    with atomic_write(path) as fh:
        fh.write(npz_bytes(emb))


def _load_member(zf: zipfile.ZipFile, name: str, label: str) -> np.ndarray:
    info = zf.getinfo(f"{name}.npy")
    if info.compress_type == zipfile.ZIP_STORED:
        bound = info.compress_size
    else:
        bound = info.compress_size * _MAX_DEFLATE_RATIO + 4096
    if info.file_size > bound:
        raise EmbeddingFormatError(label, f"array {name!r} declares {info.file_size} bytes from "
                                   f"{info.compress_size} compressed (corrupt or a zip bomb)")
    with zf.open(info) as fh:
        shape, dtype = _read_npy_header(fh, f"{label} ({name})")
        _check_declared(f"{label} ({name})", shape, dtype, info.file_size - fh.tell())
    with zf.open(info) as fh:  # read_array parses the header again from the start
        return np.lib.format.read_array(fh, allow_pickle=False)


def read_npz(source: str | os.PathLike | bytes, label: str | None = None):
    """Read an ``.npz`` embedding from a path or from bytes.

    Parameters
    ----------
    source : str, os.PathLike or bytes
        The archive's path, or its bytes.
    label : str, optional
        Name used in error messages (default: the path, or ``"<npz bytes>"``).

    Returns
    -------
    words : list of str
    vectors : numpy.ndarray
        ``(n, d)`` matrix with the dtype stored in the archive.
    counts : numpy.ndarray or None
    meta : dict
        ``name``, ``source`` and ``metadata`` when the file holds them (files written by embstab).

    Raises
    ------
    EmbeddingFormatError
        Not a zip archive, missing arrays, arrays of objects, sizes that do not fit, bad values.
    """
    label = label or (os.fspath(source) if not isinstance(source, bytes) else "<npz bytes>")
    handle = io.BytesIO(source) if isinstance(source, bytes) else os.fspath(source)
    try:
        with zipfile.ZipFile(handle) as zf:
            names = {n[:-4] for n in zf.namelist() if n.endswith(".npy")}
            missing = {"words", "vectors"} - names
            if missing:
                raise EmbeddingFormatError(label, f"the archive lacks the array(s) {sorted(missing)} "
                                           f"(it holds {sorted(names)})")
            words_arr = _load_member(zf, "words", label)
            vectors = _load_member(zf, "vectors", label)
            counts = _load_member(zf, "counts", label) if "counts" in names else None
            meta: dict[str, Any] = {}
            if "meta" in names:
                raw = _load_member(zf, "meta", label)
                try:
                    meta = loads_json(str(raw))
                except ValueError:
                    raise EmbeddingFormatError(label, "the 'meta' array is not valid JSON") from None
                if not isinstance(meta, dict):
                    raise EmbeddingFormatError(label, "the 'meta' array must hold a JSON object")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, ValueError, EOFError, KeyError,
            NotImplementedError, RuntimeError) as exc:  # damaged data, unsupported or encrypted members
        if isinstance(exc, EmbeddingFormatError):
            raise
        raise EmbeddingFormatError(label, f"not a readable .npz archive ({exc})") from None
    if words_arr.dtype.kind not in "US" or words_arr.ndim != 1:
        raise EmbeddingFormatError(label, f"'words' must be a 1-D array of strings, got {words_arr.dtype} "
                                   f"of shape {words_arr.shape}")
    words = [str(w) for w in words_arr.tolist()]
    _check(label, words, vectors)
    return words, vectors, counts, meta


def read_npy(path: str, vocab: str | None = None):
    """Read ``X.npy`` and its vocabulary file (one word per line, optionally ``word<TAB>count``).

    Parameters
    ----------
    path : str
        The ``.npy`` matrix (loaded without pickles).
    vocab : str, optional
        The vocabulary file (default: :func:`vocab_path_for` of ``path``).

    Returns
    -------
    words : list of str
    vectors : numpy.ndarray
        ``(n, d)`` matrix with the dtype stored in the file.
    counts : numpy.ndarray or None
        int64 counts when every vocabulary line has one.

    Raises
    ------
    EmbeddingFormatError
        Unreadable array, missing or malformed vocabulary file, sizes that do not fit, bad values.
    """
    vocab = vocab or vocab_path_for(path)
    try:
        with open(path, "rb") as fh:
            shape, dtype = _read_npy_header(fh, path)
            _check_declared(path, shape, dtype, os.path.getsize(path) - fh.tell())
        vectors = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        if isinstance(exc, EmbeddingFormatError):
            raise
        raise EmbeddingFormatError(path, f"not a readable .npy array ({exc})") from None
    if not os.path.exists(vocab):
        raise EmbeddingFormatError(path, f"a .npy embedding needs its vocabulary file {vocab} (one word per line)")
    words, counts = [], []
    with open(vocab, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EmbeddingFormatError(vocab, f"undecodable text (not UTF-8): {exc.reason} at byte {exc.start}",
                                           lineno) from None
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if not line.strip():
                raise EmbeddingFormatError(vocab, "empty line in the vocabulary file", lineno)
            word, _, count = line.partition("\t")
            words.append(word)
            if count:
                if not (count.strip().isascii() and count.strip().isdigit()) or int(count) >= 2**63:
                    raise EmbeddingFormatError(vocab, f"count {count[:40]!r} is not a non-negative 64-bit integer",
                                               lineno)
                counts.append(int(count))
    if counts and len(counts) != len(words):
        raise EmbeddingFormatError(vocab, "some vocabulary lines have a count and others do not")
    _check(path, words, vectors)
    return words, vectors, (np.asarray(counts, dtype=np.int64) if counts else None)


def write_npy(path: str, words: list[str], vectors: np.ndarray, counts, vocab: str) -> None:
    """Write ``X.npy`` and ``X.vocab``, each through :func:`embstab._fs.atomic_write`.

    Parameters
    ----------
    path : str
        Destination of the matrix.
    words : list of str
        One word per row.
    vectors : numpy.ndarray
        ``(n, d)`` matrix, saved with its dtype.
    counts : array_like of int or None
        Counts written after a tab on each vocabulary line, when given.
    vocab : str
        Destination of the vocabulary file.

    Raises
    ------
    EmbeddingFormatError
        If a word is blank or holds a tab or line break.
    """
    for w in words:
        if "\n" in w or "\r" in w or "\t" in w or not w.strip():
            raise EmbeddingFormatError(vocab, f"word {w!r} cannot be stored in a vocabulary file")
    with atomic_write(path) as f:
        np.save(f, np.asarray(vectors))
    with atomic_write(vocab, "w", encoding="utf-8", newline="\n") as f:
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

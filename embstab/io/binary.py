"""word2vec binary files: an ``n d`` text header, then per word ``word<space>`` + d little-endian float32."""

from __future__ import annotations

import os

import numpy as np

from embstab._fs import atomic_write
from embstab.errors import EmbeddingFormatError
from embstab.io.text import PROGRESS_MIN_BYTES, parse_header

__all__ = ["read_word2vec_binary", "write_word2vec_binary"]


def read_word2vec_binary(path: str | os.PathLike, *, dtype=np.float64, progress: bool | None = None):
    """Read a word2vec binary file.

    Records are numbered from 1 in error messages ("line" = record number, after the header).

    Parameters
    ----------
    path : str or os.PathLike
        The file (memory-mapped while read).
    dtype : numpy dtype, default numpy.float64
        dtype of the returned matrix (the file holds float32 values).
    progress : bool, optional
        Show a tqdm bar (default: for files of 20 MiB or more).

    Returns
    -------
    words : list of str
    vectors : numpy.ndarray
        ``(n, d)`` matrix of ``dtype``.

    Raises
    ------
    EmbeddingFormatError
        Empty file, missing or bad header, truncated records, undecodable words, NaN/Inf values,
        or data after the declared records.
    """
    path = os.fspath(path)
    data = np.memmap(path, dtype=np.uint8, mode="r") if os.path.getsize(path) else None
    if data is None:
        raise EmbeddingFormatError(path, "the file is empty")
    buf = memoryview(data)
    end = bytes(buf[:200]).find(b"\n")
    if end < 0:
        raise EmbeddingFormatError(path, "no 'n d' header line", 1)
    try:
        hdr = parse_header(bytes(buf[:end]).decode("ascii"))
    except UnicodeDecodeError:
        hdr = None
    if hdr is None:
        raise EmbeddingFormatError(path, "a word2vec binary file must start with an 'n d' header line", 1)
    n, d = hdr
    if d == 0:
        raise EmbeddingFormatError(path, "the header declares dimension 0", 1)
    pos = end + 1
    # Every record takes at least a one-byte word, a space and 4*d bytes, so the file bounds the
    # rows it can hold: allocate no more than that (a 17 KB file can declare terabytes). A header
    # that declares more is then reported at the exact record where the data runs out.
    rows = min(n, (len(buf) - pos) // (4 * d + 2))
    words: list[str] = []
    vectors = np.empty((rows, d), dtype=dtype)
    width = 4 * d
    size = len(buf)
    from tqdm.auto import tqdm  # here: `import embstab` does without tqdm's start-up

    show = size >= PROGRESS_MIN_BYTES if progress is None else progress
    with tqdm(total=n, unit="word", desc=f"reading {os.path.basename(path)}", disable=not show, leave=False) as bar:
        for i in range(n):
            while pos < size and buf[pos] in (0x0A, 0x0D):  # optional newline after each record
                pos += 1
            space = bytes(buf[pos:pos + 1024]).find(b" ")
            if pos >= size:
                raise EmbeddingFormatError(path, f"the header declares {n} words but the file holds {i}")
            if space < 0:
                raise EmbeddingFormatError(path, "no space after the word (truncated or not word2vec binary)", i + 1)
            raw = bytes(buf[pos:pos + space])
            try:
                word = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise EmbeddingFormatError(path, f"undecodable word bytes {raw[:40]!r}", i + 1) from None
            pos += space + 1
            if pos + width > size or i >= rows:
                raise EmbeddingFormatError(path, f"the file ends inside the vector of {word!r} (truncated)", i + 1)
            vec = np.frombuffer(buf[pos:pos + width], dtype="<f4")
            if not np.isfinite(vec).all():
                raise EmbeddingFormatError(path, f"NaN or Inf in the vector of {word!r}", i + 1)
            vectors[i] = vec
            words.append(word)
            pos += width
            bar.update(1)
    while pos < size and buf[pos] in (0x0A, 0x0D, 0x20):
        pos += 1
    if pos < size:
        raise EmbeddingFormatError(path, f"{size - pos} bytes of data after the {n} records the header declares")
    return words, vectors


def write_word2vec_binary(path: str | os.PathLike, words: list[str], vectors: np.ndarray) -> None:
    """Write a word2vec binary file (float32 values, a newline after each record, as gensim does).

    Parameters
    ----------
    path : str or os.PathLike
        Destination (replaced atomically).
    words : list of str
        One word per row.
    vectors : numpy.ndarray
        ``(n, d)`` matrix, written as little-endian float32.

    Raises
    ------
    EmbeddingFormatError
        If a word is empty or holds white space.
    """
    for w in words:
        if not w or any(c.isspace() for c in w):
            raise EmbeddingFormatError(path, f"word {w!r} cannot be stored in word2vec binary (empty or holds "
                                       "white space)")
    data = np.ascontiguousarray(vectors, dtype="<f4")
    with atomic_write(path) as f:
        f.write(f"{len(words)} {data.shape[1]}\n".encode("ascii"))
        for w, row in zip(words, data):
            f.write(w.encode("utf-8") + b" ")
            f.write(row.tobytes())
            f.write(b"\n")

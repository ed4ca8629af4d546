"""Text embedding files: word2vec text (with or without the ``n d`` header), GloVe, fastText ``.vec``.

One line per word: the word, then ``d`` numbers separated by white space. A word may itself
contain spaces (word2vec text allows it): the last ``d`` fields are the vector. The reader
streams the file in chunks into a preallocated matrix (memory about the size of the matrix), with
a progress bar for large files, and reports the first malformed line exactly.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import numpy as np

from embstab._fs import atomic_write
from embstab.errors import EmbeddingFormatError

__all__ = ["read_text", "write_text", "parse_header", "BOM"]

#: The UTF-8 byte-order mark some editors put at the start of a file; it is not part of a word.
BOM = b"\xef\xbb\xbf"

CHUNK_LINES = 20_000
PROGRESS_MIN_BYTES = 20 * 2**20


def parse_header(line: str) -> tuple[int, int] | None:
    """``(n, d)`` if ``line`` is a word2vec/fastText header (exactly two positive integers).

    Parameters
    ----------
    line : str
        The first line of a text file.

    Returns
    -------
    tuple of (int, int) or None
        The declared word count and dimension, or None when the line is not a header.
    """
    parts = line.split()
    if len(parts) == 2 and all(p.isascii() and p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _headerless_dim(path: str, first_line: int, sample: int = 1000) -> int:
    """Vector width of a file without header: the most common field count minus one.

    Using the most common count over the first lines (rather than the first line alone) keeps
    a first word that contains spaces from being mistaken for an extra column.
    """
    widths: dict[int, int] = {}
    first = None
    with open(path, "rb") as f:
        for i, raw in enumerate(f, start=1):
            if i < first_line:
                continue
            n = len(raw.split())
            if n:
                widths[n] = widths.get(n, 0) + 1
                first = n if first is None else first
            if i - first_line >= sample:
                break
    # a tie (a short file) goes to the first line's width, so the line blamed is the one that departs from it
    fields = max(widths, key=lambda w: (widths[w], w == first, -w))
    if fields < 2:
        raise EmbeddingFormatError(path, "a line must hold a word followed by its vector", first_line)
    return fields - 1


def _count_lines(path: str) -> int:
    n = 0
    last = b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def _lines(path: str, bar) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) pairs of the lines that are not blank; decoding errors name the line.

    Blank lines cost neither memory nor decoding: a file of one vector and millions of empty lines
    reads as fast as its size allows.
    """
    unreported = 0  # bytes of skipped lines, added to the progress bar with the next real line
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if raw.isspace():
                unreported += len(raw)
                continue
            if bar is not None:
                bar.update(len(raw) + unreported)
                unreported = 0
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if b"\x00" in raw:
                    raise EmbeddingFormatError(path, "binary data in a text embedding file (is it word2vec binary, "
                                               "or not an embedding at all?)", lineno) from None
                raise EmbeddingFormatError(path, f"undecodable text (not UTF-8): {exc.reason} at byte "
                                           f"{exc.start}", lineno) from None
            if "\x00" in text:
                raise EmbeddingFormatError(path, "binary data (NUL bytes) in a text embedding file", lineno)
            if lineno == 1:
                text = text.removeprefix("\ufeff")
            yield lineno, text


def read_text(path: str | os.PathLike, *, dtype=np.float64, header: bool | None = None, progress: bool | None = None):
    """Read a text embedding file (``word v1 … vd`` per line).

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    dtype : numpy dtype, default numpy.float64
        dtype of the returned matrix.
    header : bool, optional
        True/False to force/forbid an ``n d`` first line; None detects it.
    progress : bool, optional
        Show a tqdm bar (default: for files of 20 MiB or more).

    Returns
    -------
    words : list of str
    vectors : numpy.ndarray
        ``(n, d)`` matrix of ``dtype``.
    declared : tuple of (int, int) or None
        ``(n, d)`` from the header, or None.
    lines : list of int
        The 1-based line of each word (for error messages about duplicates).

    Raises
    ------
    EmbeddingFormatError
        Empty file, malformed lines, rows of different lengths, a header that does not match.
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size == 0:
        raise EmbeddingFormatError(path, "the file is empty")
    from tqdm.auto import tqdm  # here: `import embstab` does without tqdm's start-up

    show = size >= PROGRESS_MIN_BYTES if progress is None else progress
    bar = tqdm(total=size, unit="B", unit_scale=True, desc=f"reading {os.path.basename(path)}",
               disable=not show, leave=False)
    try:
        return _read(path, dtype, header, bar)
    finally:
        bar.close()


def _read(path: str, dtype, header: bool | None, bar):
    lines = _lines(path, bar)
    declared = None
    dim = None
    words: list[str] = []
    word_lines: list[int] = []
    first = next(((i, t) for i, t in lines if t.strip()), None)
    if first is None:
        raise EmbeddingFormatError(path, "the file holds only blank lines")
    lineno, text = first
    hdr = parse_header(text)
    if header is True and hdr is None:
        raise EmbeddingFormatError(path, f"expected an 'n d' header line, got {text.strip()[:60]!r}", lineno)
    pending: list[tuple[int, str]] = []
    if hdr is not None and header is not False:
        declared = hdr
        dim = hdr[1]
        if dim == 0:
            raise EmbeddingFormatError(path, "the header declares dimension 0", lineno)
    else:
        pending.append((lineno, text))
    if dim is None:
        dim = _headerless_dim(path, pending[0][0])
    # An upper bound on the rows, to preallocate once. Lines can be blank, so the line count alone
    # is no bound (a file of newlines would ask for rows x dim); every real row holds at least
    # `dim` numbers plus separators, i.e. 2 * dim bytes.
    capacity = min(_count_lines(path), os.path.getsize(path) // (2 * dim) + 1)
    matrix = None
    filled = 0
    chunk_words: list[str] = []
    chunk_nums: list[str] = []
    chunk_lines: list[int] = []

    def flush() -> None:
        nonlocal matrix, filled
        if not chunk_words:
            return
        try:
            block = np.array(chunk_nums, dtype=np.float64).reshape(len(chunk_words), dim)
        except ValueError:
            for ln, start in zip(chunk_lines, range(0, len(chunk_nums), dim)):
                for tok in chunk_nums[start:start + dim]:
                    if not _is_number(tok):
                        raise EmbeddingFormatError(path, f"non-numeric field {tok[:40]!r}", ln) from None
            raise
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            bad = int(np.flatnonzero(~finite)[0])
            raise EmbeddingFormatError(path, f"NaN or Inf in the vector of {chunk_words[bad]!r}", chunk_lines[bad])
        if matrix is None:
            matrix = np.empty((max(capacity, 1), dim), dtype=dtype)
        matrix[filled:filled + len(block)] = block
        filled += len(block)
        words.extend(chunk_words)
        word_lines.extend(chunk_lines)
        chunk_words.clear()
        chunk_nums.clear()
        chunk_lines.clear()

    def rows() -> Iterator[tuple[int, str]]:
        yield from pending
        yield from lines

    for lineno, text in rows():
        stripped = text.rstrip("\r\n")
        if not stripped.strip():
            continue
        tokens = stripped.split()
        if dim is None:
            dim = len(tokens) - 1
            if dim < 1:
                raise EmbeddingFormatError(path, "a line must hold a word followed by its vector", lineno)
        if len(tokens) < dim + 1:
            raise EmbeddingFormatError(path, f"inconsistent width: {len(tokens) - 1} values where {dim} are expected",
                                       lineno)
        if len(tokens) > dim + 1 and all(_is_number(t) for t in tokens[1:len(tokens) - dim]):
            raise EmbeddingFormatError(path, f"inconsistent width: {len(tokens) - 1} values where {dim} are expected",
                                       lineno)
        # the word is everything before the last `dim` fields (it may contain spaces)
        word = stripped.strip().rsplit(None, dim)[0] if len(tokens) > dim + 1 else tokens[0]
        chunk_words.append(word)
        chunk_nums.extend(tokens[-dim:])
        chunk_lines.append(lineno)
        if len(chunk_words) >= CHUNK_LINES:
            flush()
    flush()
    if filled == 0:
        raise EmbeddingFormatError(path, "no vectors found (only a header)" if declared else "no vectors found")
    if declared is not None and filled != declared[0]:
        raise EmbeddingFormatError(path, f"the header declares {declared[0]} words but the file holds {filled}")
    vectors = matrix[:filled]
    if matrix.shape[0] != filled:
        vectors = vectors.copy()  # release the over-allocated tail
    return words, vectors, declared, word_lines


def write_text(path: str | os.PathLike, words: list[str], vectors: np.ndarray, header: bool) -> None:
    """Write ``word v1 … vd`` lines (shortest round-trip float text), with an optional header.

    Parameters
    ----------
    path : str or os.PathLike
        Destination (replaced atomically).
    words : list of str
        One word per row.
    vectors : numpy.ndarray
        ``(n, d)`` matrix.
    header : bool
        Write an ``n d`` first line (word2vec text) or not (GloVe).

    Raises
    ------
    EmbeddingFormatError
        If a word is blank, holds a tab or line break, or has edge spaces.
    """
    for w in words:
        if not w.strip() or any(c in w for c in "\n\r\t") or w != w.strip():
            raise EmbeddingFormatError(path, f"word {w!r} cannot be written to a text embedding file "
                                       "(empty, or holds a tab, newline or edge space)")
    with atomic_write(path, "w", encoding="utf-8", newline="\n") as f:
        if header:
            f.write(f"{len(words)} {vectors.shape[1]}\n")
        for start in range(0, len(words), CHUNK_LINES):
            block = vectors[start:start + CHUNK_LINES].astype(str)  # numpy's shortest round-trip repr
            buf = io.StringIO()
            for w, row in zip(words[start:start + CHUNK_LINES], block):
                buf.write(w)
                buf.write(" ")
                buf.write(" ".join(row))
                buf.write("\n")
            f.write(buf.getvalue())

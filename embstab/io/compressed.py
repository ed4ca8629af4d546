"""embstab's compressed embedding file (``.esq``): bit-packed codes, per-block scales and vocabulary.

Every entry is ``value = table[code] * 2**scale_exp[row, block]``: the table lists the value of
each code (the 2**b uniform levels, or every code of an fp8/fp4/bf16 format, or the integers of a
block format), the optional scale exponents hold one power of two per row block (block float, MX).
With ``bits == 32`` the codes are raw float32 patterns and there is no table. A 4-bit 300-d
embedding therefore takes 150 bytes per word plus its vocabulary.

Layout (little-endian)::

    MAGIC (16 bytes) | u32 header length | header (ASCII JSON) | u32 CRC-32 of the header | body

and the body is, in order: u32 word lengths[n] | UTF-8 words | float64 table | int16 scale
exponents[n, n_blocks] | int64 counts[n] | packed codes | packed tensor-train core codes. The
header records every section's size and a CRC-32 of the body, and is itself checksummed, so
truncated, corrupted or edited files are reported, not misread; the sizes the header declares are
checked against the file before anything is allocated. (Version 1 files, without the header
checksum, and version 2 files, without transforms, are still read.)

A transformed table (:class:`StoredTransform`) is stored in the coordinates it was quantized in:
rotated and OCS-split codes, with the rotation as (kind, seed, dimension) so it is regenerated
exactly, and the splits to merge back; or the quantized cores of a tensor train (one clip per
core). Reading undoes the transform, so the file holds no more than the bits per word reported.

Reading costs memory and time bounded by the file's size: before anything is allocated, the
sizes the header declares are turned into an estimate of the peak memory (the decoded table
included) and of the operations decoding takes, and :func:`embstab._resources.check_read_cost`
refuses, in one line naming the file and the header key, a file whose estimate exceeds
``READ_BYTES_PER_BYTE`` (1024) bytes and ``READ_OPS_PER_BYTE`` (16384) operations per byte of the
file plus a constant allowance (64 MiB, 2**31 operations). Decoding works block of rows by block
of rows: a Hadamard rotation is undone by a fast Walsh-Hadamard transform (``O(n d log d)``, no
``d x d`` matrix), a random orthogonal rotation is rebuilt (``d^2`` memory, ``d^3`` time) only
when the file's budget covers it, and a tensor train gives only the rows that exist, never the
padded table of its row grid. Devices and pipes are refused: their size bounds nothing.

This module depends only on numpy and :mod:`embstab.embedding`/:mod:`embstab.errors`, with the
regenerating transforms of :mod:`embstab.io.regenerate`, so :mod:`embstab.io` never imports the
compression code; :mod:`embstab.compress` builds :class:`CompressedData` and calls
:func:`write_compressed`.
"""

from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embstab._fs import atomic_write, json_safe, to_json
from embstab._numbers import is_integer
from embstab._resources import check_read_cost, read_budget, read_regular_file
from embstab._textfiles import loads_json
from embstab.embedding import Embedding
from embstab.errors import EmbeddingFormatError
from embstab.io.regenerate import hadamard_rotate, merge_half_splits, random_orthogonal, tt_rows, tt_rows_cost

__all__ = ["MAGIC", "VERSION", "CompressedData", "StoredTransform", "read_compressed", "read_compressed_data",
           "write_compressed", "pack_bits", "unpack_bits", "uniform_table"]

#: First bytes of every compressed file (PNG-style: the \r\n and \x1a catch text-mode mangling).
MAGIC = b"\x89EMBSTAB-Q\r\n\x1a\n\x00\x00"
VERSION = 3
_READABLE_VERSIONS = (1, 2, 3)
_ROTATIONS = ("hadamard", "orthogonal")
_MAX_TT_DIM = 1 << 16  # widest tensor-train table a file may describe (embeddings are far narrower)
_MAX_HEADER = 1 << 26  # 64 MiB of JSON is far beyond any real header (metadata is small)
_CHUNK = 1 << 20  # codes packed per step: bounds the temporary bit matrix to a few MB
_UNPACK_CHUNK = 1 << 16  # codes unpacked per step: a (step, bits) bit matrix and its uint32 copy, under 5 MB
_ROW_BLOCK = 8 << 20  # bytes of float64 temporaries while decoding one block of rows
#: Bytes a word costs while it is read: its str object and list slots, the lengths read as Python
#: ints, the embedding's index entry (its characters are counted apart).
_WORD_BYTES = 320


def uniform_table(bits: int, clip: float) -> np.ndarray:
    """Values of the ``2**bits`` evenly spaced levels on ``[-clip, clip]``.

    Level ``k`` is ``k * (2 clip / (2**bits - 1)) - clip``, the arithmetic of the uniform quantizer,
    so a table rebuilt from a stored clip decodes to the values the quantizer returned.

    Parameters
    ----------
    bits : int
        Bits per code (1..16).
    clip : float
        The grid's clip (0 puts every level at 0).

    Returns
    -------
    numpy.ndarray
        float64 table of length ``2**bits``.
    """
    return np.arange(2 ** bits, dtype=np.float64) * (2 * clip / (2 ** bits - 1)) - clip


def _int(value: Any, what: str, low: int = 0) -> int:
    if not is_integer(value) or int(value) < low:
        raise ValueError(f"{what} must be an integer >= {low}, got {value!r}")
    return int(value)


@dataclass
class StoredTransform:
    """How stored codes map back to the embedding's coordinates.

    Either a rotation and/or outlier channel splits (the codes are the rotated, split table, one
    grid for all of it) or a tensor train (the rows have no codes of their own: the three cores
    hold them, each core on its own grid).

    Parameters
    ----------
    dim : int
        Dimension of the embedding the codes stand for.
    rotation : {"hadamard", "orthogonal"}, optional
        Regenerated on reading as ``random_hadamard(dim, seed)`` or ``random_orthogonal(dim, seed)``.
    seed : int, optional
        The rotation's integer seed (required with a rotation).
    splits : list of (int, int)
        Half splits ``(source column, new column)`` in the order they were made; each appends a
        column, so merging back sums the two copies in reverse order.
    tt_cores : list of numpy.ndarray, optional
        Codes of the three tensor-train cores, shaped ``(r_{k-1}, p_k, q_k, r_k)`` (float32 values
        when the file stores 32 bits).
    tt_clips : list of float, optional
        Clip of each core's uniform grid (required with cores below 32 bits).
    """

    dim: int
    rotation: str | None = None
    seed: int | None = None
    splits: list[tuple[int, int]] = field(default_factory=list)
    tt_cores: list[np.ndarray] | None = None
    tt_clips: list[float] | None = None

    def __post_init__(self) -> None:
        self.dim = _int(self.dim, "transform dim", 1)
        if self.rotation is not None:
            if self.rotation not in _ROTATIONS:
                raise ValueError(f"rotation must be one of {', '.join(_ROTATIONS)}, got {self.rotation!r}")
            # the generators take any non-negative integer seed; a generator object cannot be stored
            self.seed = _int(self.seed, "rotation seed")
        splits = []
        for i, pair in enumerate(self.splits):
            if len(pair) != 2:
                raise ValueError(f"an OCS split is (source, new), got {pair!r}")
            src, new = _int(pair[0], "OCS split source"), _int(pair[1], "OCS split column")
            if new != self.dim + i or src >= new:
                raise ValueError(f"OCS split {i} must append column {self.dim + i} from an earlier one, got ({src}, {new})")
            splits.append((src, new))
        self.splits = splits
        if self.tt_cores is not None:
            if self.rotation is not None or self.splits:
                raise ValueError("a tensor train stands alone: no rotation or splits with it")
            self.tt_cores = [np.asarray(c) for c in self.tt_cores]
            shapes = [c.shape for c in self.tt_cores]
            if len(shapes) != 3 or any(len(sh) != 4 for sh in shapes):
                raise ValueError(f"a tensor train has three 4-d cores, got shapes {shapes}")
            if shapes[0][0] != 1 or shapes[2][3] != 1 or shapes[0][3] != shapes[1][0] or shapes[1][3] != shapes[2][0]:
                raise ValueError(f"tensor-train core ranks do not chain: {shapes}")
            if int(np.prod([sh[2] for sh in shapes])) != self.dim:
                raise ValueError(f"tensor-train column factors multiply to {np.prod([sh[2] for sh in shapes])}, "
                                 f"not dim {self.dim}")
            if self.tt_clips is not None:
                self.tt_clips = [float(c) for c in self.tt_clips]
                if len(self.tt_clips) != 3 or not all(np.isfinite(c) and c >= 0 for c in self.tt_clips):
                    raise ValueError(f"a tensor train needs three finite clips >= 0, got {self.tt_clips}")

    @property
    def is_tt(self) -> bool:
        """True when the table is stored as tensor-train cores."""
        return self.tt_cores is not None

    @property
    def code_dim(self) -> int:
        """Columns of the per-row codes: ``dim`` plus the splits, or 0 for a tensor train."""
        return 0 if self.is_tt else self.dim + len(self.splits)

    @property
    def tt_rows(self) -> int:
        """Rows the tensor train addresses (``prod(p)``; 0 without one)."""
        return int(np.prod([c.shape[1] for c in self.tt_cores])) if self.is_tt else 0

    def header(self) -> dict[str, Any]:
        """The JSON description written in the file header (the cores' codes go in the body).

        Returns
        -------
        dict
            ``dim``, ``rotation``, ``seed``, ``splits`` and ``tt`` (core shapes and clips, or None).
        """
        tt = None if not self.is_tt else {"core_shapes": [list(map(int, c.shape)) for c in self.tt_cores],
                                          "clips": self.tt_clips}
        return {"dim": self.dim, "rotation": self.rotation, "seed": self.seed,
                "splits": [list(p) for p in self.splits], "tt": tt}

    def undo(self, values: np.ndarray, n: int, bits: int) -> np.ndarray:
        """The float64 ``(n, dim)`` table the decoded codes stand for.

        Parameters
        ----------
        values : numpy.ndarray
            The decoded per-row codes, float64 ``(n, code_dim)``.
        n : int
            Rows.
        bits : int
            Bits per code (32: the cores are float32 values).

        Returns
        -------
        numpy.ndarray
            float64 ``(n, dim)``.
        """
        if self.is_tt:
            return tt_rows(self.tt_values(bits), 0, n)
        if not n:  # no rows: nothing to merge or rotate (and no matrix to build)
            return np.zeros((0, self.dim))
        return self._undo_rows(values, self._matrix())

    def tt_values(self, bits: int) -> list[np.ndarray]:
        """The tensor-train cores as float64 values (their codes looked up on each core's grid).

        Parameters
        ----------
        bits : int
            Bits per code (32: the cores already hold float32 values).

        Returns
        -------
        list of numpy.ndarray
            Three float64 cores; an empty list without a tensor train.
        """
        if not self.is_tt:
            return []
        if bits == 32:
            return [np.asarray(c, np.float64) for c in self.tt_cores]
        return [uniform_table(bits, clip)[c.astype(np.int64)] for c, clip in zip(self.tt_cores, self.tt_clips)]

    def _matrix(self) -> np.ndarray | None:
        """The rotation as a matrix where it has no fast form (orthogonal), else None."""
        return random_orthogonal(self.dim, self.seed) if self.rotation == "orthogonal" else None

    def _undo_rows(self, values: np.ndarray, matrix: np.ndarray | None) -> np.ndarray:
        """Merge the splits and rotate back a block of rows (row by row independent)."""
        if self.splits:
            values = merge_half_splits(values, self.splits)
        if self.rotation == "hadamard":
            values = hadamard_rotate(values, self.seed, transpose=True)
        elif matrix is not None:
            values = values @ matrix.T
        return values


@dataclass
class CompressedData:
    """Everything a compressed file holds.

    Parameters
    ----------
    words : list of str
    codes : ndarray of shape (n_words, code columns)
        Unsigned codes below ``2**bits`` (uint8/uint16/uint32), or float32 values when ``bits == 32``.
        Without a transform there is one column per dimension; with one, the columns of the
        rotated, split table (none for a tensor train).
    bits : int
        Bits per code (1..16, or 32 for raw float32).
    table : ndarray of float64, optional
        Value of each code (length ``2**bits``); required unless ``bits == 32`` or the table is a
        tensor train (whose cores carry their own clips).
    scale_exponents : ndarray of int16, shape (n_words, n_blocks), optional
        Power-of-two scale per row block; block ``j`` covers columns ``j*block_size`` onward.
    block_size : int, optional
        Columns per block (the whole row when omitted and scales are given).
    counts : ndarray of int64, optional
    name : str, optional
    metadata : dict
        JSON-serialisable description (method, format, clip, rounding...).
    transform : StoredTransform, optional
        How the codes map back to the embedding's coordinates.
    """

    words: list[str]
    codes: np.ndarray
    bits: int
    table: np.ndarray | None = None
    scale_exponents: np.ndarray | None = None
    block_size: int | None = None
    counts: np.ndarray | None = None
    name: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    transform: StoredTransform | None = None

    def __post_init__(self) -> None:
        self.codes = np.asarray(self.codes)
        t = self.transform
        if self.codes.ndim != 2 or self.codes.shape[0] != len(self.words):
            raise ValueError(f"codes must have shape ({len(self.words)}, dim), got {self.codes.shape}")
        if t is not None and self.codes.shape[1] != t.code_dim:
            raise ValueError(f"codes must have {t.code_dim} columns for this transform, got {self.codes.shape[1]}")
        if t is not None and self.scale_exponents is not None:
            raise ValueError("a transformed table has no block scales")
        arrays = [self.codes] + (t.tt_cores if t is not None and t.is_tt else [])
        if self.bits == 32:
            if any(a.dtype != np.float32 for a in arrays):
                raise ValueError("32-bit codes must be float32 values")
        elif not (1 <= self.bits <= 16):
            raise ValueError(f"bits must be 1..16 or 32, got {self.bits}")
        else:
            if t is not None and t.is_tt:
                if t.tt_clips is None:
                    raise ValueError(f"{self.bits}-bit tensor-train cores need their clips")
            elif self.table is None or len(self.table) != 2 ** self.bits:
                raise ValueError(f"a {self.bits}-bit code needs a table of {2 ** self.bits} values")
            for a in arrays:
                if a.size and (a.min() < 0 or a.max() >= 2 ** self.bits):
                    raise ValueError(f"codes out of range for {self.bits} bits")
        if t is not None and t.is_tt and t.tt_rows < len(self.words):
            raise ValueError(f"the tensor train addresses {t.tt_rows} rows, fewer than the {len(self.words)} words")
        if self.scale_exponents is not None:
            self.scale_exponents = np.asarray(self.scale_exponents, dtype=np.int16)
            nb = self.scale_exponents.shape[1] if self.scale_exponents.ndim == 2 else -1
            bs = self.block_size or self.dim
            if self.scale_exponents.shape != (len(self.words), -(-self.dim // bs) if self.dim else 0) or nb < 0:
                raise ValueError("scale_exponents must have shape (n_words, ceil(dim / block_size))")

    @property
    def dim(self) -> int:
        """Dimension of the embedding the codes stand for."""
        return self.transform.dim if self.transform is not None else int(self.codes.shape[1])

    def decode(self) -> np.ndarray:
        """The float32 matrix the codes stand for (table values times the block scales, with any
        transform undone in float64 first).

        Rows are decoded a block at a time, so the temporaries stay near 8 MB whatever the table's
        size: a Hadamard rotation is undone by a fast Walsh-Hadamard transform, a tensor train
        gives only the rows that exist.

        Returns
        -------
        numpy.ndarray
            float32 ``(n_words, dim)`` matrix.
        """
        n, t = len(self.words), self.transform
        out = np.empty((n, self.dim), np.float32)
        if not n:
            return out
        if t is not None and t.is_tt:
            cores = t.tt_values(self.bits)
            step = _tt_step([c.shape for c in cores])
            for s in range(0, n, step):
                out[s:s + step] = tt_rows(cores, s, min(n, s + step))
            return out
        matrix = t._matrix() if t is not None else None
        table = None if self.bits == 32 else np.asarray(self.table, np.float64)
        blocks = None
        if self.scale_exponents is not None:
            # block j covers columns j * block_size onward: each column's block, instead of repeating the scales
            blocks = np.arange(self.codes.shape[1]) // (self.block_size or self.dim or 1)
        step = _row_step(self.codes.shape[1], self.dim)
        for s in range(0, n, step):
            codes = self.codes[s:s + step]
            if self.bits == 32:
                vals = codes.astype(np.float64)
            elif codes.shape[1] == 0:
                vals = np.zeros(codes.shape, np.float64)
            else:
                vals = table[codes.astype(np.int64)]
            if blocks is not None:
                vals = vals * np.ldexp(1.0, self.scale_exponents[s:s + step].astype(np.int64))[:, blocks]
            if t is not None:
                vals = t._undo_rows(vals, matrix)
            out[s:s + step] = vals
        return out

    def to_embedding(self, source: str | None = None) -> Embedding:
        # codes=self lets save(..., format="embstab") write the exact codes again
        """An :class:`Embedding` of the decoded values that keeps these codes.

        ``codes=self`` lets saving to ``.esq`` write the exact codes again.

        Parameters
        ----------
        source : str, optional
            Where the data came from (a path), stored on the embedding.

        Returns
        -------
        Embedding
            float32 embedding with the same words, counts, name and a copy of the metadata.
        """
        return Embedding(self.words, self.decode(), self.counts, name=self.name, source=source,
                         metadata=dict(self.metadata), copy=False, codes=self)

    def nbytes(self) -> int:
        """Bytes of the packed codes, tensor-train cores and scales (the vocabulary excluded).

        Returns
        -------
        int
            ``ceil(n_codes * bits / 8)`` plus two bytes per block scale.
        """
        n = self.codes.size + _core_count(self.transform)
        scales = 0 if self.scale_exponents is None else self.scale_exponents.size * 2
        return (n * self.bits + 7) // 8 + scales


def _row_step(code_dim: int, dim: int) -> int:
    """Rows per decoding block: the float64 temporaries of a row (codes, scales, merged and
    rotated copies, the transform's scratch) times the rows stay within ``_ROW_BLOCK``."""
    return max(1, _ROW_BLOCK // (8 * (3 * code_dim + 6 * dim + 1)))


def _tt_step(shapes: list[tuple[int, ...]]) -> int:
    """Rows of a tensor train computed per block (their temporaries within ``_ROW_BLOCK``)."""
    one_block, _ = tt_rows_cost(shapes, 1)
    return max(1, _ROW_BLOCK // max(1, 2 * one_block))


def _core_count(t: StoredTransform | None) -> int:
    return 0 if t is None or not t.is_tt else int(sum(c.size for c in t.tt_cores))


def _packed_bytes(count: int, bits: int) -> int:
    return 4 * count if bits == 32 else (count * bits + 7) // 8


# ---------------------------------------------------------------------------------- bit packing
def pack_bits(codes: np.ndarray, bits: int) -> bytes:
    """Pack unsigned integers below ``2**bits`` into a little-endian bit stream.

    Parameters
    ----------
    codes : numpy.ndarray
        Non-negative integer codes (any shape, flattened in C order).
    bits : int
        Bits per code (8 and 16 are stored as plain bytes/uint16).

    Returns
    -------
    bytes
        ``ceil(codes.size * bits / 8)`` bytes.
    """
    flat = np.ascontiguousarray(codes).reshape(-1)
    if bits == 8:
        return flat.astype(np.uint8).tobytes()
    if bits == 16:
        return flat.astype("<u2").tobytes()
    out = []
    step = _CHUNK - _CHUNK % 8
    shifts = np.arange(bits, dtype=np.uint32)
    for s in range(0, flat.size, step):
        v = flat[s:s + step].astype(np.uint32)
        bitmat = ((v[:, None] >> shifts) & 1).astype(np.uint8)
        out.append(np.packbits(bitmat.reshape(-1), bitorder="little").tobytes())
    return b"".join(out)


def unpack_bits(buf: bytes | memoryview, bits: int, count: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`.

    Parameters
    ----------
    buf : bytes or memoryview
        The packed stream.
    bits : int
        Bits per code.
    count : int
        Number of codes to read.

    Returns
    -------
    numpy.ndarray
        ``(count,)`` codes, uint8 for up to 8 bits, else uint16.
    """
    if bits == 8:
        return np.frombuffer(buf, np.uint8, count).copy()
    if bits == 16:
        return np.frombuffer(buf, "<u2", count).astype(np.uint16)
    raw = np.frombuffer(buf, np.uint8)
    out = np.empty(count, np.uint8 if bits <= 8 else np.uint16)
    weights = (1 << np.arange(bits)).astype(np.uint32)
    step = _UNPACK_CHUNK - _UNPACK_CHUNK % 8  # a multiple of 8 codes is a whole number of bytes
    for s in range(0, count, step):
        n = min(step, count - s)
        b0 = s * bits // 8
        nbytes = (n * bits + 7) // 8
        bitv = np.unpackbits(raw[b0:b0 + nbytes], bitorder="little")[: n * bits].reshape(n, bits)
        out[s:s + n] = bitv.astype(np.uint32) @ weights
    return out


# ---------------------------------------------------------------------------------- writing
def _from_embedding(emb: Embedding) -> CompressedData:
    data = emb.codes
    if isinstance(data, CompressedData) and data.words == emb.words and (len(data.words), data.dim) == emb.shape \
            and np.array_equal(data.decode(), np.asarray(emb.vectors, np.float32)):
        return data
    # no (or stale) codes: store the float32 values themselves, which loses nothing for float32 data
    return CompressedData(emb.words, np.asarray(emb.vectors, np.float32), 32, counts=emb.counts, name=emb.name,
                          metadata=json_safe(emb.metadata))


def write_compressed(data: CompressedData | Embedding, path: str | os.PathLike, **options: Any) -> None:
    """Write ``data`` to ``path`` through :func:`embstab._fs.atomic_write`.

    An :class:`Embedding` made by :mod:`embstab.compress` is written with its exact codes; any
    other Embedding is stored as raw float32 (``bits == 32``). Quantizing while saving is
    :func:`embstab.compress.save_compressed`'s job (this module stays independent of the
    compression code), so ``options`` such as ``bits=`` are refused with a pointer to it.

    Parameters
    ----------
    data : CompressedData or Embedding
        What to write.
    path : str or os.PathLike
        Destination (replaced atomically).
    **options
        Refused (see above).

    Raises
    ------
    TypeError
        If options are given, or ``data`` is neither type.
    """
    if options:
        raise TypeError(f"write_compressed takes no options ({', '.join(sorted(options))}); to quantize while "
                        "saving use embstab.compress.save_compressed(emb, path, bits=..., format=...)")
    if isinstance(data, Embedding):
        data = _from_embedding(data)
    if not isinstance(data, CompressedData):
        raise TypeError(f"write_compressed needs CompressedData or an Embedding, got {type(data).__name__}")
    words = [w.encode("utf-8") for w in data.words]
    parts = [np.asarray([len(w) for w in words], "<u4").tobytes(), b"".join(words)]
    table_len = 0
    if data.bits != 32 and data.table is not None:
        table = np.asarray(data.table, "<f8")
        table_len = len(table)
        parts.append(table.tobytes())
    n_blocks = 0
    if data.scale_exponents is not None:
        n_blocks = int(data.scale_exponents.shape[1])
        parts.append(np.asarray(data.scale_exponents, "<i2").tobytes())
    if data.counts is not None:
        parts.append(np.asarray(data.counts, "<i8").tobytes())
    t = data.transform
    # the per-row codes, then every core of a tensor train in one stream (no padding between cores)
    flat = [np.asarray(data.codes).reshape(-1)] + ([c.reshape(-1) for c in t.tt_cores] if t is not None and t.is_tt else [])
    stream = np.concatenate(flat) if len(flat) > 1 else flat[0]
    if data.bits == 32:
        parts.append(np.asarray(stream, "<f4").tobytes())
    else:
        parts.append(pack_bits(stream, data.bits))
    crc = 0
    for p in parts:
        crc = zlib.crc32(p, crc)
    header = {
        "version": VERSION, "n_words": len(words), "dim": int(data.codes.shape[1]), "bits": data.bits,
        "words_bytes": len(parts[1]), "table_len": table_len, "n_blocks": n_blocks,
        "block_size": data.block_size, "has_counts": data.counts is not None, "crc32": crc,
        "body_bytes": sum(len(p) for p in parts), "name": data.name, "metadata": json_safe(data.metadata),
        "transform": None if t is None else t.header(),
    }
    head = to_json(header).encode("ascii")
    with atomic_write(path) as f:
        f.write(MAGIC)
        f.write(len(head).to_bytes(4, "little"))
        f.write(head)
        f.write(zlib.crc32(head).to_bytes(4, "little"))
        for p in parts:
            f.write(p)


# ---------------------------------------------------------------------------------- reading
def read_compressed_data(path: str | os.PathLike) -> CompressedData:
    """Read a compressed file into :class:`CompressedData` (codes, table, scales, vocabulary).

    Reading and then decoding the file (:meth:`CompressedData.decode`) costs at most
    ``READ_BYTES_PER_BYTE`` (1024) bytes of memory and ``READ_OPS_PER_BYTE`` (16384) operations per
    byte of the file, plus 64 MiB and 2**31 operations (:func:`embstab._resources.read_budget`):
    the header's sizes are weighed before any array is allocated, and a header that implies more
    (a small file naming a huge rotation or tensor train) is refused.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.esq`` file.

    Returns
    -------
    CompressedData
        The stored codes and their description.

    Raises
    ------
    EmbeddingFormatError
        If the file is not a regular file (a device or a pipe), is not a compressed embedding, is
        truncated, fails its checksum, or has a header whose implied work exceeds the budget (the
        message names the file and the header key).
    InsufficientMemoryError
        If the file fits its budget but not the memory available now.
    """
    path = os.fspath(path)
    blob = read_regular_file(path, "compressed embedding file", error=EmbeddingFormatError)
    if not blob.startswith(MAGIC):
        raise EmbeddingFormatError(path, "not an embstab compressed file (bad magic bytes)")
    pos = len(MAGIC)
    if len(blob) < pos + 4:
        raise EmbeddingFormatError(path, "truncated: the header length is missing")
    hlen = int.from_bytes(blob[pos:pos + 4], "little")
    pos += 4
    if len(blob) < pos + hlen or hlen > _MAX_HEADER:
        raise EmbeddingFormatError(path, f"truncated or corrupt: the header declares {hlen} bytes, "
                                   f"{len(blob) - pos} present")
    head = blob[pos:pos + hlen]
    pos += hlen
    try:
        h = loads_json(head.decode("ascii"))
        version = h["version"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise EmbeddingFormatError(path, f"corrupt header ({type(exc).__name__}: {exc})") from None
    if version not in _READABLE_VERSIONS:
        raise EmbeddingFormatError(path, f"unsupported compressed-file version {version!r} "
                                   f"(this embstab reads {', '.join(map(str, _READABLE_VERSIONS))})")
    if version >= 2:
        if len(blob) < pos + 4 or int.from_bytes(blob[pos:pos + 4], "little") != zlib.crc32(head):
            raise EmbeddingFormatError(path, "header checksum mismatch: the header was corrupted or edited")
        pos += 4
    try:
        n, dim, bits = int(h["n_words"]), int(h["dim"]), int(h["bits"])
        body_bytes, words_bytes = int(h["body_bytes"]), int(h["words_bytes"])
        table_len, n_blocks, has_counts = int(h["table_len"]), int(h["n_blocks"]), bool(h["has_counts"])
        crc = int(h["crc32"])
    except (ValueError, KeyError, TypeError) as exc:
        raise EmbeddingFormatError(path, f"corrupt header ({type(exc).__name__}: {exc})") from None
    if min(n, dim, words_bytes, table_len, n_blocks) < 0 or not (1 <= bits <= 16 or bits == 32):
        raise EmbeddingFormatError(path, "corrupt header: negative sizes or bits outside 1-16 and 32")
    block_size = h.get("block_size")
    if block_size is not None and not (is_integer(block_size) and block_size >= 0):
        raise EmbeddingFormatError(path, f"corrupt header: block_size must be a whole number of columns, got {block_size!r}")
    transform, core_shapes = _transform_header(path, h.get("transform") if version >= 3 else None, n, dim)
    core_count = sum(int(np.prod(sh, dtype=object)) for sh in core_shapes)
    body = memoryview(blob)[pos:]
    if len(body) != body_bytes:
        what = "truncated" if len(body) < body_bytes else "has trailing bytes"
        raise EmbeddingFormatError(path, f"{what}: expected {body_bytes} body bytes, found {len(body)}")
    # the sections the header declares must add up to the body before any array is allocated
    code_bytes = _packed_bytes(n * dim + core_count, bits)
    declared = (4 * n + words_bytes + 8 * table_len + 2 * n * n_blocks + (8 * n if has_counts else 0) + code_bytes)
    if declared != body_bytes:
        raise EmbeddingFormatError(path, f"corrupt header: its sections add up to {declared} bytes, "
                                   f"the body holds {body_bytes}")
    # what decoding will take, from the declared sizes alone: refused here, before any array exists
    nbytes, ops, key, what = _read_cost(len(blob), n, dim, bits, words_bytes, table_len, n_blocks, has_counts,
                                        transform, core_shapes)
    check_read_cost(path, key, len(blob), nbytes, ops, what, error=EmbeddingFormatError)
    if zlib.crc32(body) != crc:
        raise EmbeddingFormatError(path, "checksum mismatch: the file is corrupted")
    off = 0

    def take(nbytes: int) -> memoryview:
        nonlocal off
        chunk = body[off:off + nbytes]
        off += nbytes
        return chunk

    lengths = np.frombuffer(take(4 * n), "<u4")
    wbytes = bytes(take(words_bytes))
    if int(lengths.sum()) != len(wbytes):
        raise EmbeddingFormatError(path, "corrupt vocabulary section")
    try:
        ends = np.cumsum(lengths)
        words = [wbytes[e - k:e].decode("utf-8") for e, k in zip(ends.tolist(), lengths.tolist())]
    except UnicodeDecodeError as exc:
        raise EmbeddingFormatError(path, f"vocabulary is not valid UTF-8 ({exc})") from None
    table = np.frombuffer(take(8 * table_len), "<f8").copy() if table_len else None
    scales = None
    if n_blocks:
        scales = np.frombuffer(take(2 * n * n_blocks), "<i2").reshape(n, n_blocks).copy()
    counts = np.frombuffer(take(8 * n), "<i8").copy() if has_counts else None
    total = n * dim + core_count
    if bits == 32:
        stream = np.frombuffer(take(4 * total), "<f4").copy()
    else:
        stream = unpack_bits(take((total * bits + 7) // 8), bits, total)
    codes = stream[: n * dim].reshape(n, dim)
    try:
        if transform is not None:
            ends = np.cumsum([0] + [int(np.prod(sh)) for sh in core_shapes]) + n * dim
            cores = [stream[a:b].reshape(sh) for a, b, sh in zip(ends[:-1], ends[1:], core_shapes)] or None
            transform = StoredTransform(transform["dim"], transform.get("rotation"), transform.get("seed"),
                                        transform.get("splits") or [], cores,
                                        transform["tt"]["clips"] if cores is not None else None)
        return CompressedData(words, codes, bits, table, scales, block_size, counts, h.get("name"),
                              dict(h.get("metadata") or {}), transform)
    except (ValueError, TypeError, KeyError) as exc:
        raise EmbeddingFormatError(path, f"inconsistent contents: {exc}") from None


def _read_cost(file_size: int, n: int, dim: int, bits: int, words_bytes: int, table_len: int, n_blocks: int,
               has_counts: bool, t: dict | None, core_shapes: list[tuple[int, ...]]) -> tuple[int, int, str, str]:
    """Peak bytes and operations of reading and decoding a file with this header, and the header key
    (with a description) of the largest part.

    The parts: the file itself; the vocabulary (:data:`_WORD_BYTES` a word plus its characters
    twice); the unpacked codes with the table, scales and counts; the decoded float32 table, the
    embedding's finiteness check of it and per-column index arrays; one block of rows' float64
    temporaries; and the transform: a fast Hadamard transform (``n d log d`` operations), a
    random orthogonal matrix (five ``d x d`` float64 arrays while it is built, ``2 d^3 + n d^2``
    operations), merged splits, or tensor-train cores with the blocks of rows computed from them.
    """
    parts: list[tuple[str, int, int, str]] = []  # (key, bytes, operations, what)
    out_dim = int(t["dim"]) if t is not None else dim
    itemsize = 1 if bits <= 8 else 2 if bits <= 16 else 4
    core_count = sum(math.prod(sh) for sh in core_shapes)
    parts.append(("n_words", _WORD_BYTES * n + 2 * words_bytes, 64 * n + words_bytes, f"a vocabulary of {n} words"))
    unpack = 5 * bits * _UNPACK_CHUNK if bits not in (8, 16, 32) else 0
    parts.append(("dim", itemsize * (n * dim + core_count) + unpack + 8 * table_len + 2 * n * n_blocks
                  + (8 * n if has_counts else 0), 8 * (n * dim + core_count), f"{n} x {dim} codes"))
    out_key = "transform.dim" if t is not None else "dim"
    parts.append((out_key, 5 * n * out_dim + 16 * (dim + out_dim), 8 * n * out_dim,
                  f"a decoded table of {n} x {out_dim} float32 values"))
    if n and (t is None or t.get("tt") is None):
        step = _row_step(dim, out_dim)
        parts.append(("dim", 8 * min(n, step) * (3 * dim + 6 * out_dim + 1), 0, f"{n} x {dim} codes"))
    if t is not None and n:
        splits = t.get("splits") or []
        if splits:
            parts.append(("transform.splits", 0, n * len(splits), f"{len(splits)} split merges of {n} rows"))
        rotation = t.get("rotation")
        if rotation == "hadamard":
            parts.append(("transform.rotation", 0, 3 * n * out_dim * max(1, out_dim.bit_length()),
                          f"a {out_dim}-d Hadamard rotation of {n} rows"))
        elif rotation == "orthogonal":
            parts.append(("transform.rotation", 40 * out_dim * out_dim, 2 * out_dim ** 3 + n * out_dim * out_dim,
                          f"a {out_dim}-d random orthogonal rotation of {n} rows"))
        if core_shapes:
            step = _tt_step(core_shapes)
            block_bytes, block_ops = tt_rows_cost(core_shapes, min(n, step))
            blocks = -(-n // step)
            parts.append(("transform.tt.core_shapes", 16 * core_count + block_bytes, 4 * core_count + blocks * block_ops,
                          f"a tensor train with cores {[list(sh) for sh in core_shapes]} for {n} rows"))
    nbytes = file_size + sum(p[1] for p in parts)
    ops = sum(p[2] for p in parts)
    # name the part that decides: the largest share of the budget that is most overrun
    mem_cap, ops_cap = read_budget(file_size)
    over_memory = nbytes / mem_cap >= ops / ops_cap
    key, _, _, what = max(parts, key=lambda p: p[1] if over_memory else p[2])
    return nbytes, ops, key, what


def _transform_header(path: str, t: Any, n: int, dim: int) -> tuple[dict | None, list[tuple[int, ...]]]:
    """Check a header's transform before anything is allocated; return it and the TT core shapes."""
    if t is None:
        return None, []
    try:
        out_dim = int(t["dim"])
        splits = t.get("splits") or []
        tt = t.get("tt")
        shapes = [] if tt is None else [tuple(int(v) for v in sh) for sh in tt["core_shapes"]]
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as exc:
        raise EmbeddingFormatError(path, f"corrupt header transform ({type(exc).__name__}: {exc})") from None
    if tt is not None:
        if dim != 0 or len(shapes) != 3 or any(len(sh) != 4 or min(sh) < 1 for sh in shapes):
            raise EmbeddingFormatError(path, "corrupt header: a tensor train has three 4-d cores and no row codes")
        rows = int(np.prod([sh[1] for sh in shapes], dtype=object))
        # TT grids pad the rows by a few percent, and tiny cores can name a huge table: bound both,
        # or decoding a small file could allocate without limit
        width = int(np.prod([sh[2] for sh in shapes], dtype=object))
        if rows > 2 * n + 1024 or out_dim > _MAX_TT_DIM or out_dim != width:
            raise EmbeddingFormatError(path, f"corrupt header: a tensor train of {rows} rows x {out_dim} dims "
                                       f"for {n} words")
    elif not isinstance(splits, list) or out_dim < 1 or out_dim + len(splits) != dim:
        raise EmbeddingFormatError(path, f"corrupt header: a {out_dim}-d transform with {len(splits)} splits "
                                   f"cannot have {dim} code columns")
    elif t.get("rotation") is not None and out_dim > max(1024, 64 * n):
        # the d x d rotation is rebuilt on reading: a few rows must not name a huge matrix
        raise EmbeddingFormatError(path, f"corrupt header: a {out_dim}-d rotation for only {n} words")
    return t, shapes


def read_compressed(path: str | os.PathLike) -> Embedding:
    """Load a compressed file as an :class:`Embedding` of float32 values (codes kept on the embedding).

    Memory and time are bounded by the file's size: at most ``READ_BYTES_PER_BYTE`` (1024) bytes
    and ``READ_OPS_PER_BYTE`` (16384) operations per byte of the file, plus 64 MiB and 2**31
    operations, the decoded table included (see :func:`read_compressed_data`).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.esq`` file.

    Returns
    -------
    Embedding
        The decoded embedding; its ``codes`` are the stored :class:`CompressedData`.

    Raises
    ------
    EmbeddingFormatError
        If the file is not a regular file, is not a compressed embedding, is truncated, fails its
        checksum, or has a header whose implied work exceeds the budget (naming the header key).
    InsufficientMemoryError
        If the file fits its budget but not the memory available now.
    """
    return read_compressed_data(path).to_embedding(source=os.fspath(path))

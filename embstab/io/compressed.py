"""embstab's compressed embedding file (``.esq``): bit-packed codes, per-block scales and vocabulary.

Every entry is ``value = table[code] * 2**scale_exp[row, block]``: the table lists the value of
each code (the 2**b uniform levels, or every code of an fp8/fp4/bf16 format, or the integers of a
block format), the optional scale exponents hold one power of two per row block (block float, MX).
With ``bits == 32`` the codes are raw float32 patterns and there is no table. A 4-bit 300-d
embedding therefore takes 150 bytes per word plus its vocabulary.

Layout (little-endian)::

    MAGIC (16 bytes) | u32 header length | header (ASCII JSON) | u32 CRC-32 of the header | body

and the body is, in order: u32 word lengths[n] | UTF-8 words | float64 table | int16 scale
exponents[n, n_blocks] | int64 counts[n] | packed codes. The header records every section's size
and a CRC-32 of the body, and is itself checksummed, so truncated, corrupted or edited files are
reported, not misread; the sizes the header declares are checked against the file before
anything is allocated. (Version 1 files, without the header checksum, are still read.)

This module depends only on numpy and :mod:`embstab.embedding`/:mod:`embstab.errors`, so
:mod:`embstab.io` never imports the compression code; :mod:`embstab.compress` builds
:class:`CompressedData` and calls :func:`write_compressed`.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embstab._fs import atomic_write, json_safe, to_json
from embstab._textfiles import loads_json
from embstab.embedding import Embedding
from embstab.errors import EmbeddingFormatError

__all__ = ["MAGIC", "VERSION", "CompressedData", "read_compressed", "read_compressed_data", "write_compressed",
           "pack_bits", "unpack_bits"]

#: First bytes of every compressed file (PNG-style: the \r\n and \x1a catch text-mode mangling).
MAGIC = b"\x89EMBSTAB-Q\r\n\x1a\n\x00\x00"
VERSION = 2
_READABLE_VERSIONS = (1, 2)
_MAX_HEADER = 1 << 26  # 64 MiB of JSON is far beyond any real header (metadata is small)
_CHUNK = 1 << 20  # codes packed per step: bounds the temporary bit matrix to a few MB


@dataclass
class CompressedData:
    """Everything a compressed file holds.

    Parameters
    ----------
    words : list of str
    codes : ndarray of shape (n_words, dim)
        Unsigned codes below ``2**bits`` (uint8/uint16/uint32), or float32 values when ``bits == 32``.
    bits : int
        Bits per code (1..16, or 32 for raw float32).
    table : ndarray of float64, optional
        Value of each code (length ``2**bits``); required unless ``bits == 32``.
    scale_exponents : ndarray of int16, shape (n_words, n_blocks), optional
        Power-of-two scale per row block; block ``j`` covers columns ``j*block_size`` onward.
    block_size : int, optional
        Columns per block (the whole row when omitted and scales are given).
    counts : ndarray of int64, optional
    name : str, optional
    metadata : dict
        JSON-serialisable description (method, format, clip, rounding...).
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

    def __post_init__(self) -> None:
        self.codes = np.asarray(self.codes)
        if self.codes.ndim != 2 or self.codes.shape[0] != len(self.words):
            raise ValueError(f"codes must have shape ({len(self.words)}, dim), got {self.codes.shape}")
        if self.bits == 32:
            if self.codes.dtype != np.float32:
                raise ValueError("32-bit codes must be float32 values")
        elif not (1 <= self.bits <= 16):
            raise ValueError(f"bits must be 1..16 or 32, got {self.bits}")
        else:
            if self.table is None or len(self.table) != 2 ** self.bits:
                raise ValueError(f"a {self.bits}-bit code needs a table of {2 ** self.bits} values")
            if self.codes.size and (self.codes.min() < 0 or self.codes.max() >= 2 ** self.bits):
                raise ValueError(f"codes out of range for {self.bits} bits")
        if self.scale_exponents is not None:
            self.scale_exponents = np.asarray(self.scale_exponents, dtype=np.int16)
            nb = self.scale_exponents.shape[1] if self.scale_exponents.ndim == 2 else -1
            bs = self.block_size or self.dim
            if self.scale_exponents.shape != (len(self.words), -(-self.dim // bs) if self.dim else 0) or nb < 0:
                raise ValueError("scale_exponents must have shape (n_words, ceil(dim / block_size))")

    @property
    def dim(self) -> int:
        return int(self.codes.shape[1])

    def decode(self) -> np.ndarray:
        """The float32 matrix the codes stand for (table values times the block scales).

        Returns
        -------
        numpy.ndarray
            float32 ``(n_words, dim)`` matrix.
        """
        if self.bits == 32:
            vals = self.codes.astype(np.float64)
        else:
            vals = np.asarray(self.table, np.float64)[self.codes.astype(np.int64)]
        if self.scale_exponents is not None:
            bs = self.block_size or self.dim
            scale = np.repeat(np.ldexp(1.0, self.scale_exponents.astype(np.int64)), bs, axis=1)[:, : self.dim]
            vals = vals * scale
        return vals.astype(np.float32)

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
        """Bytes of the packed codes and scales (the vocabulary excluded).

        Returns
        -------
        int
            ``ceil(n_codes * bits / 8)`` plus two bytes per block scale.
        """
        n = self.codes.size
        scales = 0 if self.scale_exponents is None else self.scale_exponents.size * 2
        return (n * self.bits + 7) // 8 + scales


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
    step = _CHUNK - _CHUNK % 8  # a multiple of 8 codes is a whole number of bytes
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
    if isinstance(data, CompressedData) and data.words == emb.words and data.codes.shape == emb.shape \
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
    if data.bits != 32:
        table = np.asarray(data.table, "<f8")
        table_len = len(table)
        parts.append(table.tobytes())
    n_blocks = 0
    if data.scale_exponents is not None:
        n_blocks = int(data.scale_exponents.shape[1])
        parts.append(np.asarray(data.scale_exponents, "<i2").tobytes())
    if data.counts is not None:
        parts.append(np.asarray(data.counts, "<i8").tobytes())
    if data.bits == 32:
        parts.append(np.asarray(data.codes, "<f4").tobytes())
    else:
        parts.append(pack_bits(data.codes, data.bits))
    crc = 0
    for p in parts:
        crc = zlib.crc32(p, crc)
    header = {
        "version": VERSION, "n_words": len(words), "dim": data.dim, "bits": data.bits,
        "words_bytes": len(parts[1]), "table_len": table_len, "n_blocks": n_blocks,
        "block_size": data.block_size, "has_counts": data.counts is not None, "crc32": crc,
        "body_bytes": sum(len(p) for p in parts), "name": data.name, "metadata": json_safe(data.metadata),
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
        If the file is not a compressed embedding, is truncated, or fails its checksum.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        blob = f.read()
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
    body = memoryview(blob)[pos:]
    if len(body) != body_bytes:
        what = "truncated" if len(body) < body_bytes else "has trailing bytes"
        raise EmbeddingFormatError(path, f"{what}: expected {body_bytes} body bytes, found {len(body)}")
    # the sections the header declares must add up to the body before any array is allocated
    code_bytes = 4 * n * dim if bits == 32 else (n * dim * bits + 7) // 8
    declared = (4 * n + words_bytes + (8 * table_len if bits != 32 else 0) + 2 * n * n_blocks
                + (8 * n if has_counts else 0) + code_bytes)
    if declared != body_bytes:
        raise EmbeddingFormatError(path, f"corrupt header: its sections add up to {declared} bytes, "
                                   f"the body holds {body_bytes}")
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
    table = np.frombuffer(take(8 * table_len), "<f8").copy() if bits != 32 else None
    scales = None
    if n_blocks:
        scales = np.frombuffer(take(2 * n * n_blocks), "<i2").reshape(n, n_blocks).copy()
    counts = np.frombuffer(take(8 * n), "<i8").copy() if has_counts else None
    if bits == 32:
        codes = np.frombuffer(take(4 * n * dim), "<f4").reshape(n, dim).copy()
    else:
        codes = unpack_bits(take((n * dim * bits + 7) // 8), bits, n * dim).reshape(n, dim)
    try:
        return CompressedData(words, codes, bits, table, scales, h.get("block_size"), counts, h.get("name"),
                              dict(h.get("metadata") or {}))
    except (ValueError, TypeError) as exc:
        raise EmbeddingFormatError(path, f"inconsistent contents: {exc}") from None


def read_compressed(path: str | os.PathLike) -> Embedding:
    """Load a compressed file as an :class:`Embedding` of float32 values (codes kept on the embedding).

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
        If the file is not a compressed embedding, is truncated, or fails its checksum.
    """
    return read_compressed_data(path).to_embedding(source=os.fspath(path))

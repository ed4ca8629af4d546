"""GloVe and PPMI matrix completion, trained with torch on CPU (or CUDA when asked)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from embstab.recipes.training import training_recipe
from embstab.train.factorize import fit_observed_entries
from embstab.train.vocab import build_vocab, cooccurrence, encode_corpus, ppmi

__all__ = ["train_glove", "train_mc"]


def _prepare(docs, min_count, window, weighting, max_vocab, progress):
    words, counts = build_vocab(docs, min_count=min_count, max_vocab=max_vocab)
    ids, doc_ids = encode_corpus(docs, words)
    cooc = cooccurrence(ids, doc_ids, len(words), window=window, weighting=weighting, progress=progress)
    return words, counts, cooc, int(len(ids))


def train_glove(docs: Sequence[Sequence[str]], dim: int = 100, seed: int = 0, epochs: int = 25,
                min_count: int = 5, window: int = 10, progress: bool = True, *, lr: float = 0.05,
                x_max: float = 100.0, alpha: float = 0.75, batch_size: int = 4096,
                max_vocab: int | None = None, threads: int | None = None, recipe: str | None = None
                ) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
    """GloVe (Pennington et al. 2014), fitted with torch.

    Distance-weighted (1/k) symmetric co-occurrence counts X within ``window``; weighted least
    squares Σ f(X_ij)(w_i·w̃_j + b_i + b̃_j − log X_ij)² with f(x) = min(1, (x/x_max)^alpha),
    minimised by AdaGrad. The returned vectors are W + W̃ (GloVe's default output).

    Parameters
    ----------
    docs : sequence of sequence of str
        Tokenised documents.
    dim : int, default 100
        Vector size.
    seed : int, default 0
        Seed of the initialisation and of the batch order.
    epochs : int, default 25
        Passes over the non-zero co-occurrence entries.
    min_count : int, default 5
        Words rarer than this are dropped.
    window : int, default 10
        Context window (tokens on each side).
    progress : bool, default True
        Show tqdm bars.
    lr : float, default 0.05
        AdaGrad learning rate.
    x_max : float, default 100.0
        Count at which the weight f reaches 1.
    alpha : float, default 0.75
        Exponent of the weight f.
    batch_size : int, default 4096
        Entries per update.
    max_vocab : int, optional
        Keep at most this many words (most frequent first).
    threads : int, optional
        torch's thread count for the fit (``None``: torch's default).
    recipe : str, optional
        A training recipe of :data:`embstab.recipes.TRAINING_RECIPES` (default ``"fp32"``).

    Returns
    -------
    words : list of str
        Most frequent first.
    vectors : numpy.ndarray
        ``(n_words, dim)`` W + W̃.
    counts : numpy.ndarray
        int64 corpus counts.
    settings : dict
        The settings used, the final loss, ``train_seconds``, ``corpus_tokens`` and ``tokens_per_second``.

    Raises
    ------
    EmbstabError
        If no word reaches ``min_count``.
    """
    start = time.perf_counter()
    words, counts, cooc, n_tokens = _prepare(docs, min_count, window, "harmonic", max_vocab, progress)
    coo = cooc.tocoo()
    weights = np.minimum(1.0, (coo.data / x_max) ** alpha)
    fit = fit_observed_entries(coo.row, coo.col, np.log(coo.data), weights, len(words), dim, epochs=epochs,
                               lr=lr, batch_size=batch_size, biases=True, seed=seed, progress=progress,
                               desc="training glove", threads=threads, recipe=recipe)
    elapsed = time.perf_counter() - start
    settings = {"vector_size": dim, "window": window, "min_count": min_count, "epochs": epochs, "seed": seed,
                "lr": lr, "x_max": x_max, "alpha": alpha, "batch_size": batch_size, "max_vocab": max_vocab,
                "recipe": training_recipe(recipe).name,
                "nonzero_cooccurrences": int(coo.nnz), "final_loss": fit["loss"][-1] if fit["loss"] else None,
                "train_seconds": elapsed, "corpus_tokens": n_tokens,
                "tokens_per_second": n_tokens * epochs / max(elapsed, 1e-9)}
    return words, fit["u"] + fit["v"], counts, settings


def train_mc(docs: Sequence[Sequence[str]], dim: int = 100, seed: int = 0, epochs: int = 25,
             min_count: int = 5, window: int = 10, progress: bool = True, *, lr: float = 0.05,
             batch_size: int = 4096, max_vocab: int | None = None, threads: int | None = None,
             recipe: str | None = None) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, Any]]:
    """Matrix completion of the PPMI matrix, fitted with torch.

    Counts co-occurrences within ``window`` (unweighted), turns them into PPMI, and fits
    U Vᵀ ≈ PPMI on the *observed* (non-zero count) entries only, unweighted, with AdaGrad; the
    unobserved entries are left free, which is what makes it completion rather than SVD.
    The returned vectors are U + V (the matrix is symmetric, so both factors describe words).

    Parameters
    ----------
    docs : sequence of sequence of str
        Tokenised documents.
    dim : int, default 100
        Vector size.
    seed : int, default 0
        Seed of the initialisation and of the batch order.
    epochs : int, default 25
        Passes over the observed entries.
    min_count : int, default 5
        Words rarer than this are dropped.
    window : int, default 10
        Context window (tokens on each side).
    progress : bool, default True
        Show tqdm bars.
    lr : float, default 0.05
        AdaGrad learning rate.
    batch_size : int, default 4096
        Entries per update.
    max_vocab : int, optional
        Keep at most this many words (most frequent first).
    threads : int, optional
        torch's thread count for the fit (``None``: torch's default).
    recipe : str, optional
        A training recipe of :data:`embstab.recipes.TRAINING_RECIPES` (default ``"fp32"``).

    Returns
    -------
    words : list of str
        Most frequent first.
    vectors : numpy.ndarray
        ``(n_words, dim)`` U + V.
    counts : numpy.ndarray
        int64 corpus counts.
    settings : dict
        The settings used, the number of observed entries, the final loss, ``train_seconds``,
        ``corpus_tokens`` and ``tokens_per_second``.

    Raises
    ------
    EmbstabError
        If no word reaches ``min_count``.
    """
    start = time.perf_counter()
    words, counts, cooc, n_tokens = _prepare(docs, min_count, window, "uniform", max_vocab, progress)
    target = ppmi(cooc)
    fit = fit_observed_entries(target.row, target.col, target.data, np.ones_like(target.data), len(words), dim,
                               epochs=epochs, lr=lr, batch_size=batch_size, biases=False, seed=seed,
                               init_scale=0.1, progress=progress, desc="training mc", threads=threads,
                               recipe=recipe)
    elapsed = time.perf_counter() - start
    settings = {"vector_size": dim, "window": window, "min_count": min_count, "epochs": epochs, "seed": seed,
                "lr": lr, "batch_size": batch_size, "max_vocab": max_vocab, "observed_entries": int(target.nnz),
                "recipe": training_recipe(recipe).name,
                "final_loss": fit["loss"][-1] if fit["loss"] else None, "train_seconds": elapsed,
                "corpus_tokens": n_tokens, "tokens_per_second": n_tokens * epochs / max(elapsed, 1e-9)}
    return words, fit["u"] + fit["v"], counts, settings

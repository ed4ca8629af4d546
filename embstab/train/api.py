"""Public entry point: :func:`train_embedding` dispatching to the trainers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from embstab.embedding import Embedding
from embstab.errors import ConfigError, EmbstabError, lookup

__all__ = ["ALGOS", "train_embedding", "train_pair"]

#: Algorithm name → one-line description.
ALGOS: dict[str, str] = {
    "w2v_cbow": "word2vec continuous bag-of-words (gensim)",
    "w2v_sg": "word2vec skip-gram (gensim)",
    "fasttext": "fastText skip-gram with character n-grams (gensim)",
    "glove": "GloVe: weighted least squares on log co-occurrences, AdaGrad (torch)",
    "mc": "matrix completion of the PPMI matrix on observed entries, AdaGrad (torch)",
}


def train_embedding(docs: Sequence[Sequence[str]], algo: str = "w2v_cbow", dim: int = 100, seed: int = 0,
                    epochs: int = 5, min_count: int = 5, window: int = 5, progress: bool = True,
                    **kwargs: Any) -> Embedding:
    """Train a word embedding on tokenised documents.

    Parameters
    ----------
    docs : sequence of list of str
        Tokenised documents, e.g. from :func:`embstab.data.load_corpus`.
    algo : {"w2v_cbow", "w2v_sg", "fasttext", "glove", "mc"}
    dim : int
        Embedding dimension.
    seed : int
        Seed; the same seed and settings give identical vectors.
    epochs : int
        Passes over the corpus (GloVe/MC: passes over the co-occurrence entries).
    min_count : int
        Words rarer than this are dropped.
    window : int
        Context window (tokens on each side).
    progress : bool
        Show progress bars.
    **kwargs
        Algorithm-specific settings: any gensim keyword for the gensim algorithms (``workers``,
        ``negative``, ``alpha``, ``max_vocab``...), ``lr``, ``batch_size``, ``max_vocab``, ``threads`` (and
        ``x_max``, ``alpha`` for GloVe) for the torch ones. ``recipe`` (torch algorithms only): a
        training recipe of :data:`embstab.recipes.TRAINING_RECIPES`, e.g. ``"bf16-kahan"``.

    Returns
    -------
    Embedding
        Rows in frequency order, ``counts`` set, ``metadata`` holding ``algo`` and every setting,
        plus ``train_seconds``, ``corpus_tokens`` and ``tokens_per_second``.
    """
    lookup(ALGOS, algo, "algo")
    for name, value in (("dim", dim), ("epochs", epochs), ("min_count", min_count), ("window", window)):
        if int(value) != value or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(docs, str):
        raise ConfigError("docs must be tokenised documents (lists of str), got one string: split it into "
                          "documents and tokens first")
    docs = list(docs)
    for i, doc in enumerate(docs):
        if isinstance(doc, str) or not all(isinstance(token, str) for token in doc[:1]):
            # a string is a sequence of characters: it would silently train character embeddings
            raise ConfigError(f"docs must be tokenised documents (lists of str); document {i} is a string: split "
                              "it into tokens first, e.g. text.split()" if isinstance(doc, str) else
                              f"docs must be tokenised documents (lists of str); document {i} holds "
                              f"{type(doc[0]).__name__} tokens")
    docs = [d for d in docs if len(d) > 0]
    if not docs:
        raise EmbstabError("the corpus is empty: no document has any token")

    if algo in ("w2v_cbow", "w2v_sg", "fasttext"):
        from embstab.train.gensim_trainers import train_gensim

        recipe = kwargs.pop("recipe", None)
        if recipe not in (None, "fp32"):
            # gensim's C loops update float32 tables in place; there is no hook to round them
            raise EmbstabError(f"training recipe {recipe!r} needs a torch trainer ('glove' or 'mc'); "
                               f"{algo} trains only in fp32")

        words, vectors, counts, settings = train_gensim(docs, algo, dim, seed, epochs, min_count, window,
                                                        progress, **kwargs)
    else:
        from embstab.train.torch_trainers import train_glove, train_mc

        trainer = train_glove if algo == "glove" else train_mc
        words, vectors, counts, settings = trainer(docs, dim=dim, seed=seed, epochs=epochs, min_count=min_count,
                                                   window=window, progress=progress, **kwargs)
    if not words:
        raise EmbstabError(f"no word reached min_count={min_count}; lower it or use a bigger corpus")
    return Embedding(words, vectors, counts, name=f"{algo}_d{dim}_s{seed}", source=f"embstab.train:{algo}",
                     metadata={"algo": algo, "dim": dim, "seed": seed, **settings})


def train_pair(docs_a: Sequence[Sequence[str]], docs_b: Sequence[Sequence[str]], algo: str = "w2v_cbow",
               dim: int = 100, seed: int = 0, **kwargs: Any) -> tuple[Embedding, Embedding]:
    """Train the two embeddings of a pair with the same algorithm, settings and seed.

    The same seed for both members is the reference protocol: then the only difference between the
    two embeddings is the corpus.

    Parameters
    ----------
    docs_a, docs_b : sequence of list of str
        Tokenised documents of the two corpora.
    algo : {"w2v_cbow", "w2v_sg", "fasttext", "glove", "mc"}, default "w2v_cbow"
        The algorithm.
    dim : int, default 100
        Embedding dimension.
    seed : int, default 0
        Seed of both trainings.
    **kwargs
        Further settings, as in :func:`train_embedding`.

    Returns
    -------
    tuple of (Embedding, Embedding)
        The embeddings trained on ``docs_a`` and on ``docs_b``.

    Raises
    ------
    UnknownNameError
        If ``algo`` is unknown.
    EmbstabError
        If a corpus is empty or no word reaches ``min_count``.
    """
    return (train_embedding(docs_a, algo=algo, dim=dim, seed=seed, **kwargs),
            train_embedding(docs_b, algo=algo, dim=dim, seed=seed, **kwargs))

"""Downstream datasets: sentence/document classification and sequence labelling, with fixed splits."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embstab._numbers import is_integer, is_real
from embstab.data.errors import DataNotFoundError
from embstab.errors import ConfigError, UnknownNameError
from embstab.data.parsers import read_brown_file, simplify_brown_tag
from embstab.data.registry import dataset_info, dataset_root
from embstab.data.tokenize import tokenize

__all__ = ["ClassificationData", "TaggingData", "load_classification", "load_tagging", "bbc_documents",
           "split_indices", "fold_indices", "fold_splits", "BBC_TOPICS"]

#: Names accepted by :func:`load_classification` and :func:`load_tagging`.
CLASSIFICATION_TASKS: tuple[str, ...] = ("rt_sentiment", "rt_subjectivity", "bbc_topic")
TAGGING_TASKS: tuple[str, ...] = ("brown_pos",)

BBC_TOPICS = ("business", "entertainment", "politics", "sports", "tech")


@dataclass
class ClassificationData:
    """A text classification task split into train / dev / test.

    ``*_x`` are token lists, ``*_y`` integer label arrays indexing ``labels``.
    """

    name: str
    labels: list[str]
    train_x: list[list[str]]
    train_y: np.ndarray
    dev_x: list[list[str]]
    dev_y: np.ndarray
    test_x: list[list[str]]
    test_y: np.ndarray
    info: dict = field(default_factory=dict)

    def majority_rate(self) -> float:
        """Share (percent) of the most frequent label among the test items.

        The test accuracy of the best constant prediction, whatever the training labels: a balanced
        binary task is never below 50 %. (The most frequent *training* label can be a test
        minority on a small split.)

        Returns
        -------
        float
            The share in percent, 0 to 100 (0 without test items).
        """
        if len(self.test_y) == 0:
            return 0.0
        counts = np.bincount(np.asarray(self.test_y, dtype=np.int64), minlength=len(self.labels))
        return float(100.0 * counts.max() / len(self.test_y))


@dataclass
class TaggingData:
    """A sequence labelling task: per-sentence token lists and integer tag arrays."""

    name: str
    tags: list[str]
    train_x: list[list[str]]
    train_y: list[np.ndarray]
    dev_x: list[list[str]]
    dev_y: list[np.ndarray]
    test_x: list[list[str]]
    test_y: list[np.ndarray]
    outside_tag: str | None = None  # "O" for NER-style tasks; disagreement then skips gold-O tokens
    info: dict = field(default_factory=dict)


def split_indices(n: int, seed: int = 0, dev: float = 0.1, test: float = 0.1,
                  labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A fixed random train/dev/test split of ``n`` items (sorted index arrays), stratified by ``labels`` when given.

    The split seed is independent of the model seed, so every model of a study sees the same test set.
    With ``labels`` each label's items are permuted apart and shared out so that the test split
    holds ``round(test * n)`` items of which every label has its share of ``test`` rounded up or
    down (within one item), and the dev split likewise from the rest: a small test split then has
    the label shares of the whole task instead of whatever a random draw gives it.

    Parameters
    ----------
    n : int
        Number of items.
    seed : int, default 0
        Seed of the permutation.
    dev : float, default 0.1
        Fraction for the dev set (rounded to whole items).
    test : float, default 0.1
        Fraction for the test set (rounded to whole items).
    labels : numpy.ndarray, optional
        Integer label of each item (length ``n``): stratify by it. Without it (tagging) the split
        is one random permutation.

    Returns
    -------
    train, dev, test : numpy.ndarray
        Disjoint sorted int64 index arrays covering ``0..n-1``.

    Raises
    ------
    ConfigError
        If ``labels`` does not hold one non-negative integer per item.
    """
    return _split(n, np.random.default_rng(seed), dev, test, labels)


def _split(n: int, rng: np.random.Generator, dev: float, test: float, labels: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_test, n_dev = int(round(test * n)), int(round(dev * n))
    if labels is None:
        perm = rng.permutation(n)
        return np.sort(perm[n_test + n_dev:]), np.sort(perm[n_test:n_test + n_dev]), np.sort(perm[:n_test])
    groups = _label_groups(labels, n, rng)
    counts = np.asarray([len(g) for g in groups], dtype=np.int64)
    take_test = _quotas(counts, n_test)
    take_dev = _quotas(counts - take_test, n_dev)
    parts: tuple[list, list, list] = ([], [], [])
    for g, t, d in zip(groups, take_test, take_dev):
        parts[2].append(g[:t])
        parts[1].append(g[t:t + d])
        parts[0].append(g[t + d:])
    empty = np.zeros(0, np.int64)
    return tuple(np.sort(np.concatenate([empty, *p])).astype(np.int64) for p in parts)  # type: ignore[return-value]


def _label_groups(labels: np.ndarray, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Each label's item indices (labels in increasing order), each permuted by ``rng`` in turn."""
    y = np.asarray(labels)
    if y.shape != (n,) or (n and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0)):
        raise ConfigError(f"labels must hold one non-negative integer per item ({n}), got an array of shape "
                          f"{y.shape} and type {y.dtype}")
    return [rng.permutation(np.flatnonzero(y == c)) for c in np.unique(y)]


def _quotas(counts: np.ndarray, total: int) -> np.ndarray:
    """Whole shares of ``total`` proportional to ``counts`` (largest remainders; ties to the lower label).

    Each share is its exact proportion rounded down or up, so never more than the count itself.
    """
    if total <= 0 or counts.sum() == 0:
        return np.zeros(len(counts), np.int64)
    exact = counts * (total / counts.sum())
    base = np.floor(exact).astype(np.int64)
    extra = np.argsort(-(exact - base), kind="stable")[:total - int(base.sum())]
    base[extra] += 1
    return base


def fold_indices(n: int, folds: int, seed: int = 0, labels: np.ndarray | None = None) -> list[np.ndarray]:
    """Split ``n`` items into ``folds`` disjoint test folds that together hold every item once.

    The items are permuted with ``seed`` and dealt to the folds in turn, so fold sizes differ by
    at most one; with ``labels`` each label's items are permuted apart and dealt in turn (one label
    after another, continuing where the previous one stopped), so every fold also holds each
    label's share rounded up or down.

    Parameters
    ----------
    n : int
        Number of items.
    folds : int
        Number of folds, from 2 to ``n``.
    seed : int, default 0
        Seed of the permutation.
    labels : numpy.ndarray, optional
        Integer label of each item (length ``n``): stratify by it.

    Returns
    -------
    list of numpy.ndarray
        ``folds`` sorted int64 index arrays, disjoint, covering ``0..n-1``.

    Raises
    ------
    ConfigError
        If ``folds`` is not an integer from 2 to ``n``, or ``labels`` does not hold one
        non-negative integer per item.
    """
    if not is_integer(folds) or not 2 <= folds <= n:
        raise ConfigError(f"folds must be an integer from 2 to the number of items ({n}), got {folds!r}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n) if labels is None else np.concatenate(
        [np.zeros(0, np.int64), *_label_groups(labels, n, rng)])
    return [np.sort(order[f::folds]).astype(np.int64) for f in range(folds)]


def fold_splits(n: int, folds: int, seed: int = 0, dev: float = 0.1, labels: np.ndarray | None = None
                ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Train/dev/test splits of ``n`` items for k-fold evaluation: every item is a test item exactly once.

    Fold ``f`` tests the items of :func:`fold_indices`'s ``f``-th fold; a dev split of ``dev``
    times ``n`` items (stratified by ``labels`` when given, drawn with ``seed`` and ``f``) is
    carved from the other folds and the rest trains, so the dev split has the size it has in
    :func:`split_indices`.

    Parameters
    ----------
    n : int
        Number of items.
    folds : int
        Number of folds, from 2 to ``n``.
    seed : int, default 0
        Seed of the folds and of each fold's dev carve.
    dev : float, default 0.1
        Fraction of all items for each fold's dev set (taken from the other folds), below
        ``1 - 1 / folds``.
    labels : numpy.ndarray, optional
        Integer label of each item: stratify the folds and the dev carves by it.

    Returns
    -------
    list of tuple of (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        Per fold, the sorted int64 ``train``, ``dev`` and ``test`` index arrays into ``0..n-1``,
        disjoint and covering every item.

    Raises
    ------
    ConfigError
        If ``folds`` is not an integer from 2 to ``n``, ``dev`` leaves no training items, or
        ``labels`` does not hold one non-negative integer per item.
    """
    tests = fold_indices(n, folds, seed, labels)
    rest_share = 1.0 - 1.0 / folds
    if not is_real(dev) or not 0.0 <= dev < rest_share:
        raise ConfigError(f"the dev share must be a number from 0 to below {rest_share:g} with {folds} folds, "
                          f"got {dev!r}")
    y = None if labels is None else np.asarray(labels)
    out = []
    for f, test in enumerate(tests):
        rest = np.setdiff1d(np.arange(n, dtype=np.int64), test, assume_unique=True)
        # the dev share of all items, taken from the other folds; each fold draws its own
        tr, dv, _ = _split(len(rest), np.random.default_rng([int(seed), f]), dev * n / max(len(rest), 1), 0.0,
                           None if y is None else y[rest])
        out.append((rest[tr], rest[dv], test))
    return out


def _make_classification(name: str, texts: list[list[str]], labels: list[str], label_names: list[str],
                         split_seed: int, info: dict) -> ClassificationData:
    y = np.asarray([label_names.index(lab) for lab in labels], dtype=np.int64)
    tr, dv, te = split_indices(len(texts), seed=split_seed, labels=y)
    pick = lambda idx: [texts[i] for i in idx]  # noqa: E731
    return ClassificationData(name, label_names, pick(tr), y[tr], pick(dv), y[dv], pick(te), y[te],
                              info={**info, "split_seed": split_seed, "n": len(texts)})


def _rotten_tomatoes():
    import pandas as pd

    path = dataset_root("rt_sentiment") / "data" / "rotten_tomatoes_corpus_full.csv.bz2"
    df = pd.read_csv(path)
    df = df.dropna(subset=["text", "category"])
    df["tokens"] = [tokenize(str(t)) for t in df["text"]]
    df = df[[len(t) > 0 for t in df["tokens"]]]
    # 69 texts occur twice; keep one copy so a sentence cannot sit in both train and test.
    return df.drop_duplicates("text", keep="first").reset_index(drop=True)


def bbc_documents() -> list[tuple[str, str]]:
    """All BBC News documents as ``(text, topic)``, topics in :data:`BBC_TOPICS` order, files sorted.

    Returns
    -------
    list of tuple of (str, str)
        The documents and their topics.

    Raises
    ------
    DataNotFoundError
        If the package holding the documents is missing or holds none.
    """
    root = dataset_root("bbc_topic") / "bbcnews" / "data"
    out = []
    for topic in BBC_TOPICS:
        for f in sorted((root / topic).glob("*.txt")):
            out.append((f.read_text(encoding="utf-8", errors="replace"), topic))
    if not out:
        raise DataNotFoundError("bbc_topic", f"no documents under {root}")
    return out


def load_classification(name: str, split_seed: int = 0, max_examples: int | None = None
                        ) -> ClassificationData:
    """Load a classification task with a fixed train/dev/test split (80/10/10, stratified by label).

    Parameters
    ----------
    name : {"rt_sentiment", "rt_subjectivity", "bbc_topic"}
        ``rt_sentiment``: Rotten Tomatoes critic snippets, fresh vs rotten (12.7k unique).
        ``rt_subjectivity``: plot synopses (objective) vs an equal number of critic snippets drawn
        with ``split_seed`` (subjective); the offline stand-in for Subj.
        ``bbc_topic``: BBC News documents, 5 topics.
    split_seed : int, default 0
        Seed of the split (and of the subjectivity subsample); not the model seed.
    max_examples : int, optional
        Keep a random subset of this many examples before splitting (for quick runs).

    Returns
    -------
    ClassificationData
        Tokenised texts and integer labels.

    Raises
    ------
    UnknownNameError
        If ``name`` is not one of the tasks above.
    DataNotFoundError
        If the task's data package is not installed or fetched.
    """
    if name == "rt_sentiment":
        df = _rotten_tomatoes()
        df = df[df["category"].isin(["fresh", "rotten"])]
        texts, labels, names = df["tokens"].tolist(), df["category"].tolist(), ["rotten", "fresh"]
    elif name == "rt_subjectivity":
        df = _rotten_tomatoes()
        plots = df[df["category"] == "plot"]
        reviews = df[df["category"] != "plot"]
        pick = np.random.default_rng(split_seed).choice(len(reviews), size=len(plots), replace=False)
        reviews = reviews.iloc[np.sort(pick)]
        texts = plots["tokens"].tolist() + reviews["tokens"].tolist()
        labels = ["objective"] * len(plots) + ["subjective"] * len(reviews)
        names = ["objective", "subjective"]
    elif name == "bbc_topic":
        docs = bbc_documents()
        texts, labels, names = [tokenize(t) for t, _ in docs], [c for _, c in docs], list(BBC_TOPICS)
    else:
        raise UnknownNameError("classification task", name, CLASSIFICATION_TASKS)
    if max_examples is not None and max_examples < len(texts):
        keep = np.sort(np.random.default_rng(split_seed).choice(len(texts), max_examples, replace=False))
        texts, labels = [texts[i] for i in keep], [labels[i] for i in keep]
    return _make_classification(name, texts, labels, names, split_seed, {"source": dataset_info(name).source})


def load_tagging(name: str = "brown_pos", split_seed: int = 0, max_sentences: int | None = None
                 ) -> TaggingData:
    """Load a sequence labelling task with a fixed 80/10/10 split of sentences.

    Parameters
    ----------
    name : {"brown_pos"}, default "brown_pos"
        Part-of-speech tags of the Brown corpus, simplified by
        :func:`embstab.data.parsers.simplify_brown_tag`; words are lower-cased like the corpora.
    split_seed : int, default 0
        Seed of the split (and of the subsample); not the model seed.
    max_sentences : int, optional
        Keep a random subset of this many sentences (the full corpus has 57k).

    Returns
    -------
    TaggingData
        Sentences with integer tag arrays (tag names sorted); no outside tag.

    Raises
    ------
    UnknownNameError
        If ``name`` is not a tagging task.
    DataNotFoundError
        If the Brown corpus package is not installed or fetched.
    """
    if name not in TAGGING_TASKS:
        raise UnknownNameError("tagging task", name, TAGGING_TASKS)
    root = dataset_root("brown_pos")
    files = sorted(p for p in root.iterdir() if len(p.name) == 4 and p.name[0] == "c" and p.name[2:].isdigit())
    sents = [s for f in files for s in read_brown_file(f)]
    if max_sentences is not None and max_sentences < len(sents):
        keep = np.sort(np.random.default_rng(split_seed).choice(len(sents), max_sentences, replace=False))
        sents = [sents[i] for i in keep]
    words = [[w.lower() for w, _ in s] for s in sents]
    raw_tags = [[simplify_brown_tag(t) for _, t in s] for s in sents]
    tag_names = sorted({t for s in raw_tags for t in s})
    tag_index = {t: i for i, t in enumerate(tag_names)}
    y = [np.asarray([tag_index[t] for t in s], dtype=np.int64) for s in raw_tags]
    tr, dv, te = split_indices(len(sents), seed=split_seed)
    return TaggingData(name, tag_names, [words[i] for i in tr], [y[i] for i in tr],
                       [words[i] for i in dv], [y[i] for i in dv], [words[i] for i in te], [y[i] for i in te],
                       outside_tag=None, info={"split_seed": split_seed, "n_sentences": len(sents)})

"""Downstream datasets: sentence/document classification and sequence labelling, with fixed splits."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from embstab.data.errors import DataNotFoundError
from embstab.errors import UnknownNameError
from embstab.data.parsers import read_brown_file, simplify_brown_tag
from embstab.data.registry import dataset_info, dataset_root
from embstab.data.tokenize import tokenize

__all__ = ["ClassificationData", "TaggingData", "load_classification", "load_tagging", "bbc_documents",
           "split_indices", "BBC_TOPICS"]

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
        """Test accuracy (percent) of always predicting the most frequent training label.

        Returns
        -------
        float
            Accuracy in percent, 0 to 100.
        """
        majority = np.bincount(self.train_y, minlength=len(self.labels)).argmax()
        return float(100.0 * np.mean(self.test_y == majority))


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


def split_indices(n: int, seed: int = 0, dev: float = 0.1, test: float = 0.1
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A fixed random train/dev/test split of ``n`` items (sorted index arrays).

    The split seed is independent of the model seed, so every model of a study sees the same test set.

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

    Returns
    -------
    train, dev, test : numpy.ndarray
        Disjoint sorted int64 index arrays covering ``0..n-1``.
    """
    perm = np.random.default_rng(seed).permutation(n)
    n_test, n_dev = int(round(test * n)), int(round(dev * n))
    return np.sort(perm[n_test + n_dev:]), np.sort(perm[n_test:n_test + n_dev]), np.sort(perm[:n_test])


def _make_classification(name: str, texts: list[list[str]], labels: list[str], label_names: list[str],
                         split_seed: int, info: dict) -> ClassificationData:
    y = np.asarray([label_names.index(lab) for lab in labels], dtype=np.int64)
    tr, dv, te = split_indices(len(texts), seed=split_seed)
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
    """Load a classification task with a fixed train/dev/test split (80/10/10).

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

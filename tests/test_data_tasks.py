"""Downstream task datasets: splits are fixed and disjoint; real RT/BBC/Brown data loads sanely."""

from __future__ import annotations

import numpy as np
import pytest

from embstab.data import list_datasets, load_classification, load_tagging
from embstab.data.registry import DATASETS
from embstab.data.sources import SOURCES, source_path
from embstab.data.tasks import split_indices


def _available(name: str) -> bool:
    return source_path(SOURCES[DATASETS[name].source]) is not None


def test_split_indices_partition_and_are_seeded():
    tr, dv, te = split_indices(1000, seed=5)
    assert len(tr) == 800 and len(dv) == 100 and len(te) == 100
    assert len(np.union1d(np.union1d(tr, dv), te)) == 1000
    assert np.array_equal(split_indices(1000, seed=5)[2], te)
    assert not np.array_equal(split_indices(1000, seed=6)[2], te)


def test_list_datasets_is_tidy():
    df = list_datasets()
    assert list(df.columns) == ["name", "kind", "source", "registry", "version", "available", "size", "licence",
                                "description"]
    assert set(df["kind"]) == {"corpus", "classification", "tagging", "embedding"}
    assert df["name"].is_unique
    assert df.loc[df["name"] == "gensim_lee", "available"].item()


@pytest.mark.skipif(not _available("rt_sentiment"), reason="run `embstab data fetch rt_sentiment`")
def test_rt_sentiment_splits():
    d = load_classification("rt_sentiment")
    n = len(d.train_x) + len(d.dev_x) + len(d.test_x)
    assert 12_600 < n <= 12_808  # fresh 7,403 + rotten 5,405 less duplicates
    assert d.labels == ["rotten", "fresh"]
    train = {" ".join(x) for x in d.train_x}
    assert sum(" ".join(x) in train for x in d.test_x) < 5  # deduplicated texts (tokenisation may merge a few)
    assert 55 < d.majority_rate() < 62
    small = load_classification("rt_sentiment", max_examples=500)
    assert len(small.train_x) + len(small.dev_x) + len(small.test_x) == 500


@pytest.mark.skipif(not _available("rt_subjectivity"), reason="run `embstab data fetch rt_subjectivity`")
def test_rt_subjectivity_is_balanced():
    d = load_classification("rt_subjectivity")
    y = np.concatenate([d.train_y, d.dev_y, d.test_y])
    assert abs(np.mean(y) - 0.5) < 1e-9
    assert d.labels == ["objective", "subjective"]


@pytest.mark.skipif(not _available("bbc_topic"), reason="run `embstab data fetch bbc_topic`")
def test_bbc_topic_counts():
    d = load_classification("bbc_topic")
    y = np.concatenate([d.train_y, d.dev_y, d.test_y])
    assert np.bincount(y).tolist() == [510, 386, 417, 511, 401]


@pytest.mark.skipif(not _available("brown_pos"), reason="run `embstab data fetch brown_pos`")
def test_brown_pos_subset():
    d = load_tagging("brown_pos", max_sentences=300)
    assert len(d.train_x) + len(d.dev_x) + len(d.test_x) == 300
    assert all(len(x) == len(y) for x, y in zip(d.train_x, d.train_y))
    assert "nn" in d.tags and "at" in d.tags and not any(t.endswith("-tl") for t in d.tags)

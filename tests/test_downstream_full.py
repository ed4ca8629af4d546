"""Slow tier on the full offline data (opt in with `-m slow`): real pairs, real tasks, sane quality."""

from __future__ import annotations

import pytest

from embstab.data import load_corpus, make_corpus_pair
from embstab.data.registry import DATASETS, POOLED
from embstab.data.sources import SOURCES, source_path
from embstab.downstream import disagreement, seed_baseline
from embstab.train import train_pair

pytestmark = pytest.mark.slow


def _need(*names: str) -> None:
    missing = [n for n in names if source_path(SOURCES[DATASETS[n].source]) is None]
    if missing:
        pytest.skip(f"run `embstab data fetch {' '.join(missing)}`")


def test_pooled_corpus_size():
    _need(*POOLED)
    docs = load_corpus("pooled")
    assert 12e6 < sum(map(len, docs)) < 16e6


@pytest.fixture(scope="module")
def w2v_pair():
    _need("wiki_vital", "bbc_news", "nlp_corpus")
    docs = load_corpus("wiki_vital+bbc_news+nlp_corpus")
    a, b = make_corpus_pair(docs, kind="leave_out", fraction=0.05, seed=0)
    return train_pair(a, b, algo="w2v_cbow", dim=100, seed=1234, epochs=5, progress=False)


def test_rt_sentiment_linear_on_a_real_pair(w2v_pair):
    _need("rt_sentiment")
    ea, eb = w2v_pair
    res = disagreement(ea, eb, "rt_sentiment", "linear", seed=1234, lr=1e-2)
    base = seed_baseline(ea, "rt_sentiment", "linear", seed=1234, lr=1e-2)
    assert res.quality_old > res.settings["majority_rate"] + 4
    assert 0 < res.disagreement < 40 and 0 <= base.disagreement < 40


def test_bbc_topic_linear_is_accurate(w2v_pair):
    _need("bbc_topic")
    ea, eb = w2v_pair
    res = disagreement(ea, eb, "bbc_topic", "linear", seed=0)
    assert res.quality_old > 85 and res.quality_new > 85


def test_brown_pos_tagger_quality(w2v_pair):
    _need("brown_pos")
    ea, eb = w2v_pair
    res = disagreement(ea, eb, "brown_pos", "bilstm", seed=0, limit=5000, epochs=6)
    assert res.quality_old > 80 and res.disagreement < 25

"""Retrieval as a downstream task: exact search against a literal sort, ties, churn, chance, GloVe on real data, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embstab import Embedding, cli
from embstab.data.registry import DATASETS
from embstab.data.sources import SOURCES, source_path
from embstab.downstream import (MODELS, TASKS, DisagreementResult, RetrievalData, default_model, disagreement,
                                register_model, register_task, train_and_predict)
from embstab.downstream.retrieval import chance_levels, search, text_vectors, top_k_churn
from embstab.errors import ConfigError, ShapeError, UnknownNameError

LIMIT = 300  # wiki queries in the real-data tests: a few hundred keep the file fast


def _available(name: str) -> bool:
    return source_path(SOURCES[DATASETS[name].source]) is not None


needs_wiki_glove = pytest.mark.skipif(not (_available("wiki_vital") and _available("glove_6b_50d")),
                                      reason="run `embstab data fetch wiki_vital glove_6b_50d`")


@pytest.fixture(scope="module")
def glove():
    from embstab.data.pretrained import glove_6b_50d

    return glove_6b_50d(top_n=30_000, dtype=np.float32)


def _reference_top_k(q: np.ndarray, d: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A literal sort: cosine scores in float64, each row sorted by (-score, document index)."""
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    dn = d / np.linalg.norm(d, axis=1, keepdims=True)
    scores = qn @ dn.T
    top = np.array([sorted(range(d.shape[0]), key=lambda j: (-row[j], j))[:k] for row in scores])
    return top, scores


def test_top_k_and_ranks_equal_a_literal_sort():
    rng = np.random.default_rng(5)
    q, d = rng.normal(size=(60, 12)), rng.normal(size=(150, 12))
    relevant = rng.integers(0, 150, size=60)
    got = search(q, d, 7, relevant=relevant, batch_size=16)
    top, scores = _reference_top_k(q.astype(np.float32).astype(np.float64), d.astype(np.float32).astype(np.float64), 7)
    np.testing.assert_array_equal(got.top_k, top)
    ranks = np.array([1 + int(np.sum(scores[i] > scores[i, r])) for i, r in enumerate(relevant)])
    np.testing.assert_array_equal(got.ranks, ranks)  # random scores: no ties to break
    assert got.recall() == pytest.approx(100.0 * np.mean(ranks <= 7))
    assert got.mrr() == pytest.approx(np.mean(1.0 / ranks))
    assert got.ties_at_k == 0


@pytest.mark.parametrize("precision", ["float32", "binary"])
def test_documents_read_a_block_at_a_time_give_the_one_block_answer(monkeypatch, precision):
    import embstab.downstream.retrieval as retrieval

    rng = np.random.default_rng(7)
    q, d = rng.normal(size=(30, 12)), rng.normal(size=(200, 12))
    relevant = rng.integers(0, 200, size=30)
    whole = search(q, d, 9, relevant=relevant, precision=precision, batch_size=8)
    monkeypatch.setattr(retrieval, "EXACT_BLOCK_BYTES", 8 * 12 * 23)  # 23 documents a block, the last one short
    blocks = search(q, d, 9, relevant=relevant, precision=precision, batch_size=8)
    np.testing.assert_array_equal(blocks.top_k, whole.top_k)
    np.testing.assert_array_equal(blocks.ranks, whole.ranks)  # the second pass: ranks across blocks
    np.testing.assert_allclose(blocks.scores, whole.scores, rtol=0, atol=1e-12)
    assert blocks.ties_at_k == whole.ties_at_k and (precision == "float32") == (whole.ties_at_k == 0)


def test_ties_go_to_the_lower_document_index_whatever_the_blocks():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(5, 4))
    d = np.repeat(base, 3, axis=0)[[0, 5, 1, 9, 2, 14, 3, 6, 4, 7, 8, 10, 11, 12, 13]]  # every row three times
    q = np.vstack([base + 0.01 * rng.normal(size=base.shape), np.zeros((1, 4))])  # the last query: all ties
    results = [search(q, d, 4, relevant=np.zeros(len(q), dtype=np.int64), batch_size=b) for b in (1, 2, 64)]
    for r in results[1:]:
        np.testing.assert_array_equal(r.top_k, results[0].top_k)
        np.testing.assert_array_equal(r.ranks, results[0].ranks)
    top = results[0].top_k
    for i in range(len(base)):
        # the three copies of the nearest row, in index order, then the best of the rest
        copies = np.flatnonzero(np.all(np.isclose(d, base[i]), axis=1))
        np.testing.assert_array_equal(top[i, :3], copies)
    np.testing.assert_array_equal(top[-1], [0, 1, 2, 3])  # a zero query scores 0 everywhere
    assert results[0].ties_at_k >= 1  # the zero query's tie straddles rank 4
    assert results[0].ranks[-1] == 1  # relevant document 0 comes first among equals


def test_binary_precision_is_hamming_search_of_the_sign_bits():
    rng = np.random.default_rng(2)
    q, d = rng.normal(size=(40, 19)), rng.normal(size=(90, 19))  # 19 dims: a padded last byte
    got = search(q, d, 5, relevant=np.arange(40), precision="binary")
    hamming = ((q > 0)[:, None, :] != (d > 0)[None, :, :]).sum(axis=2)
    top = np.array([sorted(range(90), key=lambda j: (row[j], j))[:5] for row in hamming])
    np.testing.assert_array_equal(got.top_k, top)
    ranks = np.array([1 + np.sum(hamming[i] < hamming[i, i]) + np.sum(hamming[i, :i] == hamming[i, i])
                      for i in range(40)])
    np.testing.assert_array_equal(got.ranks, ranks)
    with pytest.raises(UnknownNameError, match="precision"):
        search(q, d, 5, precision="int3")


@pytest.mark.parametrize("k", [0, -1, 91, 2.5])
def test_a_bad_k_is_one_line_naming_k(k):
    rng = np.random.default_rng(0)
    data = _toy_task()
    with pytest.raises(ConfigError, match=r"^k \(documents returned per query\) must be an integer") as err:
        search(rng.normal(size=(3, 4)), rng.normal(size=(90, 4)), k)
    assert "\n" not in str(err.value)
    bad = len(data.documents) + 1 if k == 91 else k
    with pytest.raises(ConfigError, match=f"from 1 to the {len(data.documents)} documents") as err:
        disagreement(_letters, _letters, data, k=bad)
    assert "\n" not in str(err.value)


def test_churn_counts_changed_sets_not_orders():
    a = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    b = np.array([[3, 2, 1], [4, 5, 0], [10, 11, 12]])
    flipped, overlap = top_k_churn(a, b)
    assert flipped == 2
    assert overlap == pytest.approx((1 + 2 / 3 + 0) / 3)
    with pytest.raises(ShapeError):
        top_k_churn(a, b[:, :2])


def test_chance_is_a_random_rankings_recall_and_mrr():
    recall, mrr = chance_levels(3, 8)
    assert recall == pytest.approx(100 * 3 / 8)
    assert mrr == pytest.approx(np.mean([1 / r for r in range(1, 9)]))  # uniform rank: the mean of 1/r
    with pytest.raises(ConfigError):
        chance_levels(9, 8)


def _letters(texts: list[str]) -> np.ndarray:
    """A text encoder: letter counts (deterministic, no model needed)."""
    out = np.zeros((len(texts), 26))
    for i, t in enumerate(texts):
        for ch in t.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1
    return out


def _toy_task() -> RetrievalData:
    rng = np.random.default_rng(3)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]
    docs = [" ".join(rng.choice(words, size=6)) + f" item{i}" for i in range(90)]
    queries = [" ".join(doc.split()[:2]) for doc in docs]
    return RetrievalData("toy", queries, docs, np.arange(90))


def test_a_text_encoder_is_a_member_and_the_result_type_is_shared():
    data = _toy_task()
    res = disagreement(_letters, _letters, data)
    assert isinstance(res, DisagreementResult) and res.model == "search" and res.n_test == 90
    assert res.disagreement == 0.0 and res.disagreement_interval[0] == 0.0
    assert res.settings["overlap_at_k"] == 1.0 and res.quality_old == res.quality_new
    assert res.settings["chance"] == pytest.approx(100 * 10 / 90)
    row = res.to_dict()
    assert row["disagreement_low"] == 0.0 and row["k"] == 10 and "mrr_old" in row
    assert "recall@10" in res._repr_html_() and "random ranking" in res._repr_html_()
    with pytest.raises(ShapeError, match="text encoder returned shape"):
        disagreement(lambda texts: np.zeros((len(texts) - 1, 3)), _letters, data)
    with pytest.raises(ConfigError, match="has no setting 'epochs'"):
        disagreement(_letters, _letters, data, epochs=3)
    with pytest.raises(ConfigError, match="'linear' is for classification"):
        disagreement(_letters, _letters, data, model="linear")


def test_word_vectors_are_means_over_known_tokens_only():
    data = RetrievalData("tiny", ["a b", "zzz"], ["a", "b c"], np.array([0, 1]))
    emb = Embedding(["a", "b", "c"], np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], dtype=np.float32))
    q, d, info = text_vectors(emb, data)
    np.testing.assert_allclose(q, [[0.5, 0.5], [0.0, 0.0]])  # "zzz" is unknown: the zero vector, not a random one
    np.testing.assert_allclose(d, [[1.0, 0.0], [1.0, 1.5]])
    assert info == {"empty_queries": 1, "empty_documents": 0}


def test_the_catalogue_registers_retrieval_through_its_one_path():
    assert TASKS["wiki_retrieval"][0] == TASKS["bbc_retrieval"][0] == "retrieval"
    assert MODELS["search"] == ("retrieval", {"k": 10, "precision": "float32", "batch_size": 256, "index": "exact",
                                              "hnsw_m": 32, "ef_construction": 40, "ef_search": 64, "nlist": None,
                                              "nprobe": 8})
    assert default_model("wiki_retrieval") == "search" and default_model("rt_sentiment") == "linear"
    with pytest.raises(ConfigError, match="already registered"):
        register_task("wiki_retrieval", "retrieval", "again")
    with pytest.raises(ConfigError, match="kind must be one of"):
        register_model("ranker", "ranking", {})
    with pytest.raises(ConfigError, match="no model is trained"):
        train_and_predict(Embedding(["a"], np.ones((1, 2), np.float32)), _toy_task(), "search")


@needs_wiki_glove
def test_glove_on_wiki_retrieval_finds_titles_far_above_chance_and_flips_nothing_against_itself(glove):
    res = disagreement(glove, glove, "wiki_retrieval", limit=LIMIT)
    assert res.model == "search" and res.n_test == LIMIT and res.settings["n_documents"] == LIMIT
    assert res.disagreement == 0.0 and res.disagreement_interval[0] == 0.0
    assert res.settings["overlap_at_k"] == 1.0
    assert res.settings["chance"] == pytest.approx(100 * 10 / LIMIT)
    assert res.quality_old > 10 * res.settings["chance"]  # measured 85 % against 3.3 %
    assert res.settings["mrr_old"] > 20 * res.settings["chance_mrr"]


@needs_wiki_glove
def test_a_perturbed_copy_flips_some_queries_within_its_interval(glove):
    rng = np.random.default_rng(0)
    noisy = Embedding(glove.words, glove.vectors + rng.normal(scale=0.3, size=glove.vectors.shape).astype(np.float32),
                      name="noisy")
    res = disagreement(glove, noisy, "wiki_retrieval", limit=LIMIT, keep_predictions=True)
    low, high = res.disagreement_interval
    assert 0 < res.disagreement <= 100 and low <= res.disagreement <= high
    assert 0 < res.settings["overlap_at_k"] < 1
    changed = np.any(np.sort(res.predictions_old, 1) != np.sort(res.predictions_new, 1), axis=1)
    assert res.disagreement == pytest.approx(100 * changed.mean())


@needs_wiki_glove
def test_the_cli_prints_recall_chance_flips_and_overlap(glove, tmp_path, capsys):
    from embstab.io import save

    old, new = tmp_path / "old.npz", tmp_path / "new.npz"
    save(glove, old)
    save(Embedding(glove.words, np.round(glove.vectors * 4) / 4, name="rounded"), new)
    argv = ["downstream", str(old), str(new), "--task", "wiki_retrieval", "--limit", "200", "--k", "5"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "top-5 sets differ" in out and "mean top-5 overlap" in out
    assert "recall@5 old:" in out and "random ranking: recall@5 2.50%" in out
    assert cli.main([*argv, "--output", "json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["k"] == 5 and row["model"] == "search" and row["disagreement_low"] <= row["disagreement"]
    assert cli.main([*argv, "--epochs", "3"]) == 2
    assert "--epochs applies to trained tasks" in capsys.readouterr().err
    assert cli.main(["downstream", str(old), str(new), "--task", "rt_sentiment", "--k", "5"]) == 2
    assert "--k applies to retrieval tasks" in capsys.readouterr().err


@pytest.mark.slow  # building the tokenizer and a model and importing transformers: about 9 s on a shared core
def test_a_contextual_model_searches_with_its_sentence_vectors():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from _contextual import tiny_model

    from embstab.contextual.retrieval import contextual_retrieval_disagreement, text_encoder

    data = _toy_task()
    model = tiny_model(0)  # one untrained network: its input layer and its last layer are two encoders
    encode = text_encoder(model)
    assert encode(["alpha bravo", ""]).shape == (2, model.hidden_size)
    same = contextual_retrieval_disagreement(model, model, data, k=5)
    assert same.disagreement == 0.0 and same.settings["k"] == 5 and same.n_test == 90
    changed = disagreement(text_encoder(model, layer=0), encode, data, k=5)
    assert changed.disagreement > 0
    assert changed.disagreement_interval[0] <= changed.disagreement <= changed.disagreement_interval[1]

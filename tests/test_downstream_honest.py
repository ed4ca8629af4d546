"""The measured side of a disagreement: chance levels, stratified splits, sampling intervals, k-fold evaluation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest

import embstab.cli as cli
from embstab import Embedding
from embstab.data.registry import DATASETS
from embstab.data.sources import SOURCES, source_path
from embstab.data.tasks import ClassificationData, TaggingData, fold_indices, fold_splits, split_indices
from embstab.downstream import FOLDS, chance_level, disagreement, load_task, train_and_predict
from embstab.downstream.api import default_folds
from embstab.downstream.intervals import INTERVAL_LEVEL, disagreement_interval
from embstab.errors import ConfigError

POS = [f"good{i}" for i in range(15)]
NEG = [f"bad{i}" for i in range(15)]
FILLER = [f"the{i}" for i in range(20)]


def _available(name: str) -> bool:
    return source_path(SOURCES[DATASETS[name].source]) is not None


def _embedding(seed: int = 0, dim: int = 8, noise: float = 0.1) -> Embedding:
    rng = np.random.default_rng(seed)
    words = POS + NEG + FILLER
    vecs = rng.normal(scale=noise, size=(len(words), dim))
    vecs[:15, 0] += 1.0
    vecs[15:30, 0] -= 1.0
    return Embedding(words, vecs.astype(np.float32), name=f"synthetic{seed}")


def _classification(n: int = 200, seed: int = 0) -> ClassificationData:
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(n):
        label = int(rng.integers(2))
        # weak evidence, so that two embeddings flip some predictions
        sent = list(rng.choice(POS if label else NEG, 1)) + list(rng.choice(FILLER + POS + NEG, 6))
        xs.append(sent)
        ys.append(label)
    y = np.asarray(ys)
    a, b = int(0.7 * n), int(0.85 * n)
    return ClassificationData("synthetic", ["neg", "pos"], xs[:a], y[:a], xs[a:b], y[a:b], xs[b:], y[b:])


def _tagging(n: int = 60, seed: int = 0) -> TaggingData:
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(n):
        sent = list(rng.choice(POS + NEG + FILLER, int(rng.integers(3, 8))))
        xs.append(sent)
        ys.append(np.asarray([2 if w.startswith("good") else 0 if w.startswith("bad") else 1 for w in sent]))
    a, b = int(0.7 * n), int(0.85 * n)
    return TaggingData("synthetic_tags", ["NEG", "O", "POS"], xs[:a], ys[:a], xs[a:b], ys[a:b], xs[b:], ys[b:],
                       outside_tag="O")


# --------------------------------------------------------------------------------------------
# chance levels


@pytest.mark.skipif(not _available("rt_subjectivity"), reason="run `embstab data fetch rt_subjectivity`")
def test_rt_subjectivity_chance_is_at_least_half():
    """A balanced binary task: the best constant prediction scores 50 % or more on any test split."""
    data = load_task("rt_subjectivity")
    assert 50.0 <= chance_level(data) <= 51.0
    counts = np.bincount(np.concatenate([data.train_y, data.dev_y, data.test_y]))
    assert chance_level(data, folds=5) == pytest.approx(100.0 * counts.max() / counts.sum())


@pytest.mark.skipif(not _available("bbc_topic"), reason="run `embstab data fetch bbc_topic`")
def test_bbc_topic_chance_is_the_largest_topic_share():
    data = load_task("bbc_topic")
    test = np.bincount(data.test_y)
    assert chance_level(data) == pytest.approx(100.0 * test.max() / test.sum())
    assert chance_level(data) > 20.0  # five topics, the largest near 23 %: the training majority's share was 16.7


def test_chance_over_folds_is_over_every_item():
    data = _classification(n=120)
    y = np.concatenate([data.train_y, data.dev_y, data.test_y])
    assert chance_level(data, folds=4) == pytest.approx(100.0 * np.bincount(y).max() / len(y))
    with pytest.raises(ConfigError, match="folds must be a positive integer"):
        chance_level(data, folds=0)


# --------------------------------------------------------------------------------------------
# stratified splits and folds


@pytest.mark.parametrize("seed", [0, 7])
def test_stratified_split_keeps_each_label_share_within_one_item(seed):
    rng = np.random.default_rng(seed)
    y = rng.choice(5, size=1237, p=[0.5, 0.2, 0.15, 0.1, 0.05])
    tr, dv, te = split_indices(len(y), seed=seed, labels=y)
    assert len(te) == round(0.1 * len(y)) and len(dv) == round(0.1 * len(y))
    assert np.array_equal(np.sort(np.concatenate([tr, dv, te])), np.arange(len(y)))
    counts = np.bincount(y)
    assert np.all(np.abs(np.bincount(y[te], minlength=5) - 0.1 * counts) < 1.0)
    # the dev split is shared out from what the test split left
    assert np.all(np.abs(np.bincount(y[dv], minlength=5) - 0.1 * counts) < 1.5)
    again = split_indices(len(y), seed=seed, labels=y)
    assert all(np.array_equal(a, b) for a, b in zip(again, (tr, dv, te)))
    assert not np.array_equal(split_indices(len(y), seed=seed + 1, labels=y)[2], te)


def test_an_unstratified_draw_would_miss_the_shares_the_stratified_one_keeps():
    # the failure stratification prevents: a random 10 % of a balanced task far from 50/50
    y = np.repeat([0, 1], 500)
    worst = max(abs(np.mean(y[split_indices(1000, seed=s)[2]]) - 0.5) for s in range(40))
    assert worst > 0.05
    assert all(np.mean(y[split_indices(1000, seed=s, labels=y)[2]]) == 0.5 for s in range(40))


@pytest.mark.skipif(not _available("rt_subjectivity"), reason="run `embstab data fetch rt_subjectivity`")
def test_loaded_task_splits_are_stratified():
    data = load_task("rt_subjectivity")
    y = np.concatenate([data.train_y, data.dev_y, data.test_y])
    share = np.bincount(y) / len(y)
    assert np.all(np.abs(np.bincount(data.test_y) - share * len(data.test_y)) <= 1.0)


def test_split_refuses_labels_of_the_wrong_length():
    with pytest.raises(ConfigError, match="one non-negative integer per item"):
        split_indices(10, labels=np.zeros(9, np.int64))


def test_folds_test_every_item_once_with_the_label_shares():
    rng = np.random.default_rng(3)
    y = rng.choice(3, size=503, p=[0.6, 0.3, 0.1])
    folds = fold_indices(len(y), 5, seed=2, labels=y)
    assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(len(y)))
    assert max(map(len, folds)) - min(map(len, folds)) <= 1
    for f in folds:
        assert np.all(np.abs(np.bincount(y[f], minlength=3) - np.bincount(y) / 5) < 1.0)
    splits = fold_splits(len(y), 5, seed=2, labels=y)
    for (tr, dv, te), f in zip(splits, folds):
        assert np.array_equal(te, f)
        assert len(np.intersect1d(tr, dv)) == len(np.intersect1d(tr, te)) == len(np.intersect1d(dv, te)) == 0
        assert len(tr) + len(dv) + len(te) == len(y) and len(dv) == round(0.1 * len(y))
    again = fold_splits(len(y), 5, seed=2, labels=y)
    assert all(np.array_equal(a, b) for s, t in zip(splits, again) for a, b in zip(s, t))
    with pytest.raises(ConfigError, match="folds must be an integer from 2"):
        fold_indices(4, 5)


# --------------------------------------------------------------------------------------------
# sampling intervals


@pytest.mark.parametrize("k, n", [(0, 10), (1, 217), (10, 217), (100, 2166), (217, 217), (3, 7)])
def test_interval_is_scipys_exact_binomial_interval(k, n):
    low, high = disagreement_interval(k, n)
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert low == pytest.approx(100.0 * ref.low, abs=1e-9) and high == pytest.approx(100.0 * ref.high, abs=1e-9)
    assert low <= 100.0 * k / n <= high
    ref90 = binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    assert disagreement_interval(k, n, 0.9) == pytest.approx((100.0 * ref90.low, 100.0 * ref90.high), abs=1e-9)


def test_interval_shrinks_with_the_items_and_is_zero_based_without_flips():
    widths = [np.subtract(*disagreement_interval(n // 20, n)[::-1]) for n in (200, 2000, 20000)]
    assert widths[0] > widths[1] > widths[2] > 0
    # ten times the items: about a third of the width (1 / sqrt(10))
    assert 0.25 < widths[1] / widths[0] < 0.4
    assert disagreement_interval(0, 50)[0] == 0.0 and disagreement_interval(50, 50)[1] == 100.0
    assert INTERVAL_LEVEL == 0.95


@pytest.mark.parametrize("args", [(3, 0), (5, 4), (-1, 4), (1.5, 4), (1, 4, 1.0), (1, 4, 0.0)])
def test_interval_refuses_bad_counts_and_levels(args):
    with pytest.raises(ConfigError):
        disagreement_interval(*args)


# --------------------------------------------------------------------------------------------
# k-fold disagreement


def test_kfold_tests_every_item_once_and_is_deterministic():
    data = _classification(n=200)
    a, b = _embedding(0), _embedding(1, noise=0.8)
    opts = dict(epochs=30, lr=0.1, batch_size=4096, keep_predictions=True)
    res = disagreement(a, b, data, "linear", 0, folds=4, **opts)
    assert res.quality_old > res.settings["chance"] + 5  # the models learned something
    assert res.n_test == 200 and res.settings["folds"] == 4 and res.settings["n_items"] == 200
    assert len(res.predictions_old) == len(res.predictions_new) == 200
    gold = np.concatenate([data.train_y, data.dev_y, data.test_y])
    assert res.quality_old == pytest.approx(100.0 * np.mean(res.predictions_old == gold))
    flipped = int(np.sum(res.predictions_old != res.predictions_new))
    assert res.disagreement == pytest.approx(100.0 * flipped / 200)
    assert res.disagreement_interval == disagreement_interval(flipped, 200)
    again = disagreement(a, b, data, "linear", 0, folds=4, **opts)
    assert np.array_equal(again.predictions_old, res.predictions_old)
    assert (again.disagreement, again.quality_new) == (res.disagreement, res.quality_new)
    other = disagreement(a, b, data, "linear", 0, folds=4, split_seed=1, **opts)
    assert other.n_test == 200 and not np.array_equal(other.predictions_old, res.predictions_old)
    # one fold: the caller's split, its test items alone
    single = disagreement(a, b, data, "linear", 0, **opts)
    assert single.settings["folds"] == 1 and single.n_test == len(data.test_y)


def test_each_item_is_predicted_by_the_model_that_did_not_train_on_it():
    """Labels that are the item's own unique word: a model can only get them right by having seen
    the item, so k-fold accuracy stays at chance where training on the test items would score 100 %."""
    n = 120
    words = [f"w{i}" for i in range(n)]
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(n, 256)).astype(np.float32)  # more dimensions than items: separable
    y = rng.integers(2, size=n)
    xs = [[w] for w in words]
    data = ClassificationData("memo", ["a", "b"], xs[:96], y[:96], xs[96:108], y[96:108], xs[108:], y[108:])
    emb = Embedding(words, vecs)
    opts = dict(epochs=200, lr=0.1, batch_size=4096)
    res = train_and_predict(emb, data, "linear", 0, folds=5, **opts)
    assert len(res.pred) == n and res.settings["folds"] == 5
    assert res.quality < 70.0  # unseen random vectors: near 50 %
    # what a leak would look like: the test items among the training items are remembered
    leak = ClassificationData("leak", ["a", "b"], xs, y, xs[96:108], y[96:108], xs[108:], y[108:])
    assert train_and_predict(emb, leak, "linear", 0, **opts).quality == 100.0


def test_kfold_tagging_covers_every_token():
    data = _tagging()
    res = disagreement(_embedding(0), _embedding(1, noise=0.5), data, "bilstm", 0, folds=3, epochs=1)
    outside = [np.sum(y != 1) for y in [*data.train_y, *data.dev_y, *data.test_y]]
    assert res.n_test == int(sum(outside)) and res.settings["folds"] == 3


def test_fold_defaults_and_refusals():
    assert default_folds("rt_subjectivity") == FOLDS["rt_subjectivity"] == 5
    assert default_folds("bbc_topic") == 5 and default_folds("rt_sentiment") == default_folds("brown_pos") == 1
    assert default_folds(_classification()) == 1
    data = _classification(n=30)
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ConfigError, match="folds must be a positive integer"):
            disagreement(_embedding(0), _embedding(1), data, "linear", folds=bad)
    with pytest.raises(ConfigError, match="folds must be at most the number of items"):
        disagreement(_embedding(0), _embedding(1), data, "linear", folds=31)
    # one test item per fold is allowed: all 30 are tested
    assert disagreement(_embedding(0), _embedding(1), data, "linear", folds=30, epochs=1).n_test == 30
    # 9 items: fewer tested than a disagreement is reported on, however they are folded
    with pytest.raises(ConfigError, match="too few for 3 folds"):
        disagreement(_embedding(0), _embedding(1), _classification(n=9), "linear", folds=3)


def test_result_dict_carries_the_interval_after_the_disagreement():
    res = disagreement(_embedding(0), _embedding(1, noise=0.8), _classification(), "linear", 0, folds=3, epochs=2)
    row = res.to_dict()
    keys = list(row)
    assert keys[keys.index("disagreement") + 1:keys.index("disagreement") + 3] == ["disagreement_low",
                                                                                   "disagreement_high"]
    assert row["disagreement_low"] <= row["disagreement"] <= row["disagreement_high"]
    assert row["folds"] == 3 and row["interval_level"] == 0.95
    assert row["chance"] == row["majority_rate"] >= 50.0
    assert json.loads(json.dumps(row, default=float))["disagreement_high"] == row["disagreement_high"]


# --------------------------------------------------------------------------------------------
# command line


@pytest.mark.skipif(not _available("rt_subjectivity"), reason="run `embstab data fetch rt_subjectivity`")
def test_cli_same_embedding_twice_gives_zero_with_a_zero_based_interval(tmp_path, capsys):
    from embstab.io import save

    data = load_task("rt_subjectivity", 0, 300)
    words = sorted({w for split in (data.train_x, data.dev_x, data.test_x) for seq in split for w in seq})
    emb = Embedding(words, np.random.default_rng(0).normal(size=(len(words), 8)).astype(np.float32))
    path = tmp_path / "a.npz"
    save(emb, path)
    args = ["downstream", str(path), str(path), "--task", "rt_subjectivity", "--limit", "300", "--epochs", "2"]
    assert cli.main([*args, "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["disagreement"] == 0.0 and doc["disagreement_low"] == 0.0 and 0.0 < doc["disagreement_high"] < 2.0
    assert doc["n_test"] == 300 and doc["folds"] == 5 and doc["chance"] >= 50.0
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "300 test examples (5-fold: every item tested once)" in out
    assert "0.00% of predictions differ   [0.00, " in out and "95% interval over the test examples" in out
    assert cli.main([*args, "--folds", "1"]) == 0
    assert "30 test examples (the fixed 80/10/10 split)" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# study rows


def test_study_rows_carry_the_interval():
    from embstab.study.steps import assemble_row

    meta = {"dim": 8, "bitrate": 4}
    row = assemble_row(meta, {"n_words": 10}, {"disagreement": 100.0 * 108 / 1083, "quality_a": 80.0,
                                               "quality_b": 81.0, "chance": 50.0, "n_test": 1083})
    low, high = disagreement_interval(108, 1083)
    assert row["extra"]["disagreement_low"] == pytest.approx(low) and row["extra"]["disagreement_high"] == high
    # a disagreement that is no whole number of its items (or has none) has no binomial interval
    row = assemble_row(meta, {}, {"disagreement": 10.3, "quality_a": 1.0, "quality_b": 1.0, "n_test": 100})
    assert "disagreement_low" not in row["extra"]
    row = assemble_row(meta, {}, {"disagreement": 0.0, "quality_a": 1.0, "quality_b": 1.0})
    assert "disagreement_low" not in row["extra"]


def test_results_database_reads_the_interval_columns(tmp_path):
    from embstab.study.results import ResultDB
    from embstab.study.steps import assemble_row

    meta = {"algo": "w2v_cbow", "seed": 0, "dim": 8, "bitrate": 4, "task": "t", "model": "linear"}
    with ResultDB(tmp_path / "r.sqlite") as db:
        db.add_result("old", {**meta, "seed": 1, "memory": 32, "disagreement": 1.0, "quality": 70.0,
                              "quality_old": 71.0, "measures": {}, "extra": {}})
        db.add_result("new", assemble_row(meta, {}, {"disagreement": 5.0, "quality_a": 70.0, "quality_b": 71.0,
                                                     "chance": 50.0, "n_test": 200}))
        df = db.results().set_index("row_id")
    assert df.loc["new", "disagreement_low"] == pytest.approx(disagreement_interval(10, 200)[0])
    assert np.isnan(df.loc["old", "disagreement_low"])  # rows stored before intervals: unknown


# --------------------------------------------------------------------------------------------
# knowledge graphs: the same interval


def test_kg_disagreements_carry_the_same_interval():
    pytest.importorskip("pykeen")
    from embstab.kg import load_graph, train
    from embstab.kg.disagreement import link_prediction_disagreement, triple_classification_disagreement

    graph = load_graph("nations")
    a = train(graph, "TransE", dim=4, epochs=1, seed=0, progress=False)
    b = train(graph, "TransE", dim=4, epochs=1, seed=1, progress=False)
    lp = link_prediction_disagreement(a, b, graph, keep_answers=True)
    flipped = int(np.sum(lp.answers_old != lp.answers_new))
    assert lp.disagreement_interval == disagreement_interval(flipped, lp.n_queries)
    row = lp.to_dict()
    assert (row["disagreement_low"], row["disagreement_high"]) == lp.disagreement_interval
    tc = triple_classification_disagreement(a, b, graph, keep_decisions=True)
    flipped = int(np.sum(tc.decisions_old != tc.decisions_new))
    assert tc.disagreement_interval == disagreement_interval(flipped, tc.n_test)
    assert tc.to_dict()["disagreement_high"] == tc.disagreement_interval[1]
    same = link_prediction_disagreement(a, a, graph)
    assert same.disagreement == 0.0 and same.disagreement_interval[0] == 0.0


def test_a_result_shows_its_flips_interval_and_chance_in_a_notebook():
    from embstab.downstream.api import DisagreementResult

    r = DisagreementResult(4.0, 80.0, 81.5, 500, "rt_subjectivity", "linear", 0,
                           settings={"chance": 50.0, "folds": 5, "interval_level": 0.95})
    page = r._repr_html_()
    low, high = r.disagreement_interval
    assert f"[{low:.2f}, {high:.2f}]" in page and "95% interval" in page
    assert "50.00 %" in page and "5-fold" in page and "500 test items" in page
    assert "<b>DisagreementResult</b>" in page

"""Downstream harness: same-seed protocol, disagreement counting, models, CRF numerics, real RT data."""

from __future__ import annotations

import json

import itertools

import numpy as np
import pytest
import torch

from embstab import Embedding
from embstab.data.registry import DATASETS
from embstab.data.sources import SOURCES, source_path
from embstab.data.tasks import ClassificationData, TaggingData
from embstab.downstream import MODELS, TASKS, DisagreementResult, disagreement, seed_baseline, train_and_predict, TrainResult
from embstab.downstream.api import default_folds, token_coverage
from embstab.downstream.lookup import TaskVocabulary, lookup_table
from embstab.downstream.models import CRF
from embstab.errors import ConfigError, EmbstabError, ShapeError

POS_WORDS = [f"good{i}" for i in range(15)]
NEG_WORDS = [f"bad{i}" for i in range(15)]
FILLER = [f"the{i}" for i in range(20)]


def _embedding(seed: int = 0, dim: int = 8, noise: float = 0.1) -> Embedding:
    rng = np.random.default_rng(seed)
    words = POS_WORDS + NEG_WORDS + FILLER
    vecs = rng.normal(scale=noise, size=(len(words), dim))
    vecs[:15, 0] += 1.0
    vecs[15:30, 0] -= 1.0
    return Embedding(words, vecs.astype(np.float32), name=f"synthetic{seed}")


def _classification(n: int = 300, seed: int = 0) -> ClassificationData:
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(n):
        label = int(rng.integers(2))
        strong = POS_WORDS if label else NEG_WORDS
        sent = list(rng.choice(strong, 3)) + list(rng.choice(FILLER, int(rng.integers(2, 8))))
        sent += ["unknownword"] if rng.random() < 0.2 else []
        rng.shuffle(sent)
        xs.append(sent)
        ys.append(label)
    y = np.asarray(ys)
    a, b = int(0.7 * n), int(0.85 * n)
    return ClassificationData("synthetic", ["neg", "pos"], xs[:a], y[:a], xs[a:b], y[a:b], xs[b:], y[b:])


def _tagging(n: int = 120, seed: int = 0, outside: bool = True) -> TaggingData:
    rng = np.random.default_rng(seed)
    tags = ["NEG", "O", "POS"]
    xs, ys = [], []
    for _ in range(n):
        sent = list(rng.choice(POS_WORDS + NEG_WORDS + FILLER, int(rng.integers(3, 9))))
        xs.append(sent)
        ys.append(np.asarray([2 if w.startswith("good") else 0 if w.startswith("bad") else 1 for w in sent]))
    a, b = int(0.7 * n), int(0.85 * n)
    return TaggingData("synthetic_tags", tags, xs[:a], ys[:a], xs[a:b], ys[a:b], xs[b:], ys[b:],
                       outside_tag="O" if outside else None)


SMALL = {"linear": dict(epochs=30), "mlp": dict(epochs=30, hidden=16), "cnn": dict(epochs=3, filters=8), "lstm": dict(epochs=3, hidden=16, layers=1),
         "bilstm": dict(epochs=3, hidden=16), "bilstm_crf": dict(epochs=3, hidden=16)}


@pytest.mark.parametrize("model", [m for m, (kind, _) in MODELS.items() if kind != "retrieval"])
def test_same_seed_same_embedding_gives_zero_disagreement(model):
    data = _tagging() if MODELS[model][0] == "tagging" else _classification()
    emb = _embedding()
    res = disagreement(emb, emb, data, model, seed=3, **SMALL[model])
    assert isinstance(res, DisagreementResult)
    assert res.disagreement == 0.0 and res.quality_old == res.quality_new
    assert res.settings["seed_b"] == 3 and res.model == model


def test_linear_model_learns_and_other_embedding_flips_predictions():
    data = _classification()
    good, noise = _embedding(0), Embedding(_embedding(0).words, np.random.default_rng(9).normal(size=(50, 8)))
    res = disagreement(good, noise, data, "linear", seed=0, epochs=30, keep_predictions=True)
    assert res.quality_old > 90 and res.quality_new < res.quality_old
    assert res.n_test == len(data.test_y)
    manual = 100.0 * np.mean(res.predictions_old != res.predictions_new)
    assert res.disagreement == pytest.approx(manual) and res.disagreement > 5
    row = res.to_dict()
    assert row["disagreement"] == res.disagreement and row["coverage_old"] == pytest.approx(50 / 51)
    assert "predictions_old" not in row and "settings" not in row


def test_seed_baseline_uses_another_seed():
    data, emb = _classification(), _embedding()
    res = seed_baseline(emb, data, "cnn", seed=1, epochs=2, filters=8)
    assert res.settings["seed_b"] == 1001 and res.seed == 1
    assert 0.0 <= res.disagreement <= 100.0


def test_tagging_disagreement_counts_only_non_outside_tokens():
    data = _tagging(outside=True)
    a, b = _embedding(0), _embedding(5, noise=2.0)
    res = disagreement(a, b, data, "bilstm", seed=0, keep_predictions=True, **SMALL["bilstm"])
    gold = np.concatenate(data.test_y)
    counted = gold != 1
    assert res.n_test == int(counted.sum())
    expect = 100.0 * np.sum((res.predictions_old != res.predictions_new) & counted) / counted.sum()
    assert res.disagreement == pytest.approx(expect)
    plain = disagreement(a, a, _tagging(outside=False), "bilstm", seed=0, **SMALL["bilstm"])
    assert plain.n_test == len(gold) and plain.disagreement == 0.0


def test_global_torch_rng_is_left_alone():
    before = torch.get_rng_state().clone()
    train_and_predict(_embedding(), _classification(), "cnn", seed=4, epochs=1, filters=4)
    assert torch.equal(before, torch.get_rng_state())


def test_train_and_predict_returns_a_typed_result():
    res = train_and_predict(_embedding(), _classification(), "linear", seed=0, epochs=2)
    assert isinstance(res, TrainResult) and res.pred.shape == res.gold.shape
    assert res.quality == pytest.approx(100.0 * np.mean(res.pred == res.gold))
    assert 0.0 <= res.coverage <= 1.0 and 1 <= res.best_epoch <= res.epochs_run <= 2
    plain = json.loads(json.dumps(res.to_dict()))
    assert plain["pred"] == res.pred.tolist() and plain["settings"]["epochs"] == 2


def test_lookup_table_shares_oov_vectors_between_embeddings():
    vocab = TaskVocabulary([["good1", "zzz", "the3"]], [["bad2", "yyy"]])
    assert vocab.words == ["<pad>", "good1", "zzz", "the3", "bad2", "yyy"]
    e1, e2 = _embedding(0), _embedding(1)
    t1, cov = lookup_table(e1, vocab, seed=2)
    t2, _ = lookup_table(e2, vocab, seed=2)
    assert cov == pytest.approx(3 / 5)
    assert torch.equal(t1[2], t2[2]) and torch.equal(t1[5], t2[5])  # OOV rows: same draw
    assert float(t1[2].abs().max()) <= 0.25
    np.testing.assert_array_equal(t1[1].numpy(), e1["good1"])
    assert torch.count_nonzero(t1[0]) == 0


def test_wrong_model_for_task_and_bad_inputs():
    with pytest.raises(EmbstabError, match="use one of bilstm, bilstm_crf"):
        disagreement(_embedding(), _embedding(), _tagging(), "linear")
    with pytest.raises(EmbstabError, match="unknown task"):
        disagreement(_embedding(), _embedding(), "imdb")
    with pytest.raises(EmbstabError, match="unknown model"):
        disagreement(_embedding(), _embedding(), _classification(), "transformer")
    with pytest.raises(ShapeError, match="the new member must be an embstab.Embedding"):
        disagreement(_embedding(), np.zeros((3, 3)), _classification())
    assert set(TASKS) >= {"rt_sentiment", "rt_subjectivity", "bbc_topic", "brown_pos"}


@pytest.mark.parametrize("kwargs, message", [
    ({"epochs": 0}, "epochs must be a positive integer, got 0"),
    ({"epochs": -3}, "epochs must be a positive integer"),
    ({"batch_size": 0}, "batch_size must be a positive integer"),
    ({"lr": float("nan")}, "lr must be a finite number from 1e-08 to 10"),
    ({"lr": 0}, "lr must be a finite number from 1e-08 to 10"),
    ({"limit": 0}, "limit must be a positive integer or None"),
    ({"seed": 1.5}, "seed must be an integer"),
    ({"split_seed": "0"}, "split_seed must be an integer"),
    ({"epoch": 1}, "model 'linear' has no setting 'epoch' \\(did you mean 'epochs'\\?\\)"),
    ({"model": "mlp", "hiden": 8}, "model 'mlp' has no setting 'hiden' \\(did you mean 'hidden'\\?\\)"),
])
def test_settings_no_model_trains_with_are_refused_before_training(kwargs, message):
    # an untrained model (epochs=0) would report a disagreement that means nothing
    kwargs = {"model": "linear", **kwargs}
    with pytest.raises(ConfigError, match=message):
        disagreement(_embedding(), _embedding(), _classification(), **kwargs)


def test_every_model_has_its_network():
    from embstab.downstream.training import NETWORKS

    assert set(NETWORKS) == {m for m, (kind, _) in MODELS.items() if kind != "retrieval"}  # retrieval trains none


def _brute_force(em: torch.Tensor, crf: CRF) -> tuple[float, list[int], dict]:
    steps, n = em.shape
    scores = {}
    for path in itertools.product(range(n), repeat=steps):
        s = crf.start[path[0]] + em[0, path[0]] + crf.end[path[-1]]
        for t in range(1, steps):
            s = s + crf.trans[path[t - 1], path[t]] + em[t, path[t]]
        scores[path] = float(s.detach())
    log_z = float(torch.logsumexp(torch.tensor(list(scores.values()), dtype=torch.float64), 0))
    best = max(scores, key=scores.get)
    return log_z, list(best), scores


def test_crf_likelihood_and_viterbi_match_enumeration():
    gen = torch.Generator().manual_seed(0)
    crf = CRF(3).double()
    with torch.no_grad():
        for p in crf.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
    em = torch.randn(2, 4, 3, generator=gen, dtype=torch.float64)
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    tags = torch.tensor([[0, 2, 1, 1], [2, 2, 0, 0]])
    nll = crf.neg_log_likelihood(em, tags, mask)
    decoded = crf.decode(em, mask)
    expect = 0.0
    for b, length in enumerate([4, 3]):
        log_z, best, scores = _brute_force(em[b, :length], crf)
        expect += log_z - scores[tuple(tags[b, :length].tolist())]
        assert decoded[b, :length].tolist() == best
    assert float(nll.detach()) == pytest.approx(expect, abs=1e-9)


def _available(name: str) -> bool:
    return source_path(SOURCES[DATASETS[name].source]) is not None


@pytest.mark.skipif(not (_available("rt_sentiment") and _available("glove_6b_50d")),
                    reason="run `embstab data fetch rt_sentiment glove_6b_50d`")
def test_real_rt_linear_beats_the_majority_class():
    from embstab.data.pretrained import glove_6b_50d as load_glove_6b_50d

    glove = load_glove_6b_50d(top_n=30_000)
    res = disagreement(glove, glove, "rt_sentiment", "linear", seed=0, limit=6000, epochs=10, lr=1e-2)
    assert res.disagreement == 0.0
    assert res.quality_old > res.settings["majority_rate"] + 5
    assert res.settings["coverage_old"] > 0.5  # of word types; rare names and typos are the misses


def test_token_coverage_counts_tokens_with_repeats():
    data = _classification()
    emb = _embedding()
    tokens = [w for split in (data.train_x, data.dev_x, data.test_x) for seq in split for w in seq]
    expected = sum(w in emb for w in tokens) / len(tokens)
    assert token_coverage(emb, data) == pytest.approx(expected, abs=1e-12)
    assert 0.8 < expected < 1.0  # "unknownword" is the only miss


def test_task_data_built_by_the_caller_is_prepared_afresh_each_call():
    """Vocabulary and encodings are shared between models only for tasks loaded by name: a
    caller's data may change between calls, and a stale vocabulary would not know its new words."""
    data = _classification()
    emb = _embedding()
    first = train_and_predict(emb, data, "linear", seed=0, epochs=2)
    data.test_x[0] = ["neverseenbefore", *data.test_x[0]]
    again = train_and_predict(emb, data, "linear", seed=0, epochs=2)
    assert len(again.pred) == len(first.pred)


@pytest.mark.skipif(not _available("rt_subjectivity"), reason="run `embstab data fetch rt_subjectivity`")
def test_task_by_name_gives_what_its_loaded_data_gives():
    """The by-name path shares one prepared vocabulary between calls; results equal the path
    that prepares the same data afresh."""
    from embstab.downstream import load_task

    words = sorted({w for seq in load_task("rt_subjectivity", 0, 400).train_x for w in seq})
    rng = np.random.default_rng(0)
    a = Embedding(words[::2], rng.normal(size=(len(words[::2]), 8)).astype(np.float32))
    b = Embedding(words[::2], rng.normal(size=(len(words[::2]), 8)).astype(np.float32))
    opts = dict(seed=3, limit=400, epochs=5, lr=0.03, batch_size=4096, min_coverage=0.0)
    # by name the task is evaluated k-fold by default; its data, given by the caller, keeps its own
    # split unless told the same folds
    folds = default_folds("rt_subjectivity")
    assert folds > 1 and default_folds(load_task("rt_subjectivity", 0, 400)) == 1
    for by_name_folds, by_data_folds in ((None, folds), (1, None)):
        by_name = [disagreement(a, b, "rt_subjectivity", "linear", folds=by_name_folds, **opts) for _ in range(2)]
        by_data = disagreement(a, b, load_task("rt_subjectivity", 0, 400), "linear", folds=by_data_folds,
                               **{k: v for k, v in opts.items() if k != "limit"})
        for res in by_name:
            assert (res.disagreement, res.quality_old, res.quality_new) == (by_data.disagreement,
                                                                            by_data.quality_old, by_data.quality_new)
            assert res.settings["token_coverage_old"] == by_data.settings["token_coverage_old"]
            assert res.settings["folds"] == by_data.settings["folds"] == (by_name_folds or folds)
            assert res.n_test == (400 if res.settings["folds"] > 1 else 40)


@pytest.mark.parametrize("n", [5, 20, 60])
def test_splits_too_small_to_compare_are_refused(n):
    # 5 examples leave no dev split (the training crashed); 20 leave 3 test examples, where one
    # flipped prediction is 33 points of disagreement
    with pytest.raises(ConfigError, match="every split needs some, and the test split at least 10 examples"):
        disagreement(_embedding(), _embedding(), _classification(n=n), "linear")


def test_the_smallest_comparable_split_is_accepted():
    res = disagreement(_embedding(), _embedding(), _classification(n=67), "linear", epochs=1)
    assert res.n_test == 11

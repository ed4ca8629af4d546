"""Per-word contextual features and brown_pos tagging on them, against one-sentence-at-a-time loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _contextual import sentences, tiny_model
from embstab.contextual import (EmptyTextError, SequenceLengthError, contextual_disagreement, quantize_weights,
                                task_token_features, token_feature_disagreement, token_features)
from embstab.contextual.downstream import tokens_as_task
from embstab.data.sources import SOURCES, source_path
from embstab.data.registry import DATASETS
from embstab.data.tasks import TaggingData
from embstab.downstream import DisagreementResult, load_task
from embstab.errors import EmbstabError, ShapeError, UnknownNameError

_MODEL: dict = {}


def _model():
    if not _MODEL:
        _MODEL["m"] = tiny_model(0)
    return _MODEL["m"]


def _brute(model, words: list[str], layer: int, subword: str) -> np.ndarray:
    """One sentence alone through the network, pieces from the tokenizer's own pre-tokenized path."""
    enc = model.tokenizer.encode(words, is_pretokenized=True, add_special_tokens=False)
    ids = [model.special_id("[CLS]"), *enc.ids, model.special_id("[SEP]")]
    with torch.no_grad():
        h = model.network.bert(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[layer]
    h = h[0].double().numpy()
    word_ids = [None, *enc.word_ids, None]
    out = []
    for j in range(len(words)):
        pos = [p for p, wid in enumerate(word_ids) if wid == j]
        out.append(h[pos[0]] if subword == "first" else h[pos].mean(0))
    return np.array(out)


@pytest.mark.parametrize("subword,layer", [("first", -1), ("mean", -1), ("mean", 1)])
def test_token_features_equal_a_one_sentence_loop(subword, layer):
    model = _model()
    sents = [s[: 3 + i % 9] for i, s in enumerate(sentences(20))]  # varied lengths: padding in batches
    feats = token_features(model, sents, layer=layer, subword=subword, batch_size=6)
    assert [f.shape for f in feats] == [(len(s), 128) for s in sents]
    assert all(f.dtype == np.float32 for f in feats)
    for s, f in zip(sents, feats):
        np.testing.assert_allclose(f, _brute(model, s, layer, subword), rtol=1e-4, atol=1e-5)


def test_a_sentence_longer_than_the_model_is_read_in_windows():
    model = tiny_model(0, max_length=16)
    long = [w for s in sentences(6) for w in s]  # 72 words, many more pieces than 14
    (feats,) = token_features(model, [long])
    assert feats.shape == (len(long), 128)
    from embstab.contextual.encoding import WordPieces
    from embstab.contextual.features import word_windows

    windows = word_windows([long], WordPieces(model.tokenizer), 16)
    assert len(windows) > 3 and sum(map(len, windows)) == len(long)
    ref = np.concatenate([_brute(model, w, -1, "first") for w in windows])
    np.testing.assert_allclose(feats, ref, rtol=1e-4, atol=1e-5)


def test_token_feature_bad_input():
    model = _model()
    with pytest.raises(EmptyTextError, match="text 2"):
        token_features(model, [["the", "cat"], []])
    with pytest.raises(SequenceLengthError, match="alone has"):
        token_features(tiny_model(0, max_length=4), [["antidisestablishmentarianism"]])
    with pytest.raises(ValueError, match="subword must be one of"):
        token_features(model, [["a"]], subword="last")


def _sign_task(n: int = 120, seed: int = 0) -> tuple[TaggingData, list[np.ndarray]]:
    """Tags decided by the sign of a feature's first coordinate (features stand for the words)."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(3, 9, size=n)
    feats = [rng.normal(size=(k, 4)).astype(np.float32) for k in lens]
    tags = [(f[:, 0] > 0).astype(np.int64) for f in feats]
    words = [["w"] * k for k in lens]
    a, b = int(0.7 * n), int(0.85 * n)
    data = TaggingData("signs", ["neg", "pos"], words[:a], tags[:a], words[a:b], tags[a:b], words[b:], tags[b:])
    return data, feats


def test_tagger_on_token_features_counts_flipped_tags():
    data, feats = _sign_task()
    kw = dict(epochs=8, hidden=16, lr=1e-2)
    same = token_feature_disagreement(feats, feats, data, "bilstm", seed=1, **kw)
    assert isinstance(same, DisagreementResult) and same.disagreement == 0.0
    assert same.quality_old > 90 and same.n_test == sum(len(t) for t in data.test_y)
    rng = np.random.default_rng(3)
    noisy = [f + rng.normal(scale=0.7, size=f.shape).astype(np.float32) for f in feats]
    res = token_feature_disagreement(feats, noisy, data, "bilstm", seed=1, keep_predictions=True, **kw)
    manual = 100.0 * np.mean(res.predictions_old != res.predictions_new)
    assert res.disagreement == pytest.approx(manual) and res.disagreement > 0
    again = token_feature_disagreement(feats, noisy, data, "bilstm", seed=1, **kw)
    assert again.disagreement == res.disagreement  # seeded
    assert res.settings["features"] is True and res.settings["dim_old"] == 4


def test_occurrence_ids_keep_each_tokens_vector():
    data, feats = _sign_task(10)
    wrapped, emb = tokens_as_task(data, feats, "A")
    flat = np.concatenate(feats)
    assert len(emb) == len(flat) and wrapped.train_y is data.train_y
    first_test = wrapped.test_x[0][0]
    k = sum(len(s) for s in data.train_x) + sum(len(s) for s in data.dev_x)
    assert first_test == f"#{k}" and np.array_equal(emb[first_test], flat[k])


def test_token_feature_shapes_and_taggers_are_checked():
    data, feats = _sign_task(20)
    with pytest.raises(ShapeError, match="one array per sentence of task 'signs' \\(20\\), got 19"):
        token_feature_disagreement(feats, feats[:-1], data)
    bad = list(feats)
    bad[4] = bad[4][:-1]
    with pytest.raises(ShapeError, match="sentence 5 must be"):
        token_feature_disagreement(feats, bad, data)
    with pytest.raises(UnknownNameError, match="'linear' is a classifier"):
        token_feature_disagreement(feats, feats, data, "linear")
    with pytest.raises(EmbstabError, match="per-word features serve tagging tasks"):
        token_feature_disagreement(feats, feats, _xor_like())


def _xor_like():
    from embstab.data.tasks import ClassificationData

    return ClassificationData("cls", ["a", "b"], [["w"]], np.array([0]), [["w"]], np.array([1]), [["w"]],
                              np.array([0]))


@pytest.mark.skipif(source_path(SOURCES[DATASETS["brown_pos"].source]) is None,
                    reason="run `embstab data fetch brown_pos`")
def test_brown_pos_on_a_tiny_model_and_its_quantized_self():
    model = tiny_model(0, max_length=128)
    quant = quantize_weights(model, "fp4_e2m1")
    data = load_task("brown_pos", limit=60)
    feats = task_token_features(model, data)
    sents = [*data.train_x, *data.dev_x, *data.test_x]
    assert [f.shape[0] for f in feats] == [len(s) for s in sents]
    kw = dict(epochs=2, hidden=32)
    res = contextual_disagreement(model, quant, data, seed=2, **kw)
    again = contextual_disagreement(model, quant, data, seed=2, **kw)
    assert res.model == "bilstm" and res.disagreement == again.disagreement
    assert res.n_test == sum(len(s) for s in data.test_x) and 0.0 <= res.disagreement <= 100.0
    assert res.settings["model_new"].endswith("@fp4_e2m1") and res.settings["subword"] == "first"
    floor = contextual_disagreement(model, model, data, "bilstm", seed=2, seed_b=1002, **kw)
    assert floor.settings["seed_b"] == 1002

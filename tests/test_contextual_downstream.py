"""Frozen-feature disagreement of contextual models, with the existing downstream result objects."""

from __future__ import annotations

import numpy as np
import pytest

from _contextual import tiny_model
from embstab.contextual import contextual_disagreement, feature_disagreement, quantize_weights, task_features
from embstab.data import DATASETS
from embstab.data.sources import SOURCES, source_path
from embstab.data.tasks import ClassificationData
from embstab.downstream import DisagreementResult, load_task
from embstab.errors import ShapeError, UnknownNameError


def _xor_task(n: int = 400, seed: int = 0) -> tuple[ClassificationData, np.ndarray]:
    """Two classes a linear layer cannot separate (XOR of two signs), as sentence features."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 2))
    y = ((x[:, 0] > 0) ^ (x[:, 1] > 0)).astype(np.int64)
    feats = np.hstack([x, 0.1 * rng.normal(size=(n, 4))]).astype(np.float32)
    a, b = int(0.7 * n), int(0.85 * n)
    words = [["w"]] * n  # the texts are never read: the features stand for them
    return ClassificationData("xor", ["even", "odd"], words[:a], y[:a], words[a:b], y[a:b], words[b:], y[b:]), feats


def test_same_features_same_seed_agree_and_predictions_are_counted():
    data, feats = _xor_task()
    same = feature_disagreement(feats, feats, data, "mlp", seed=1, epochs=30)
    assert isinstance(same, DisagreementResult) and same.disagreement == 0.0
    noisy = feats + np.random.default_rng(5).normal(scale=0.5, size=feats.shape).astype(np.float32)
    res = feature_disagreement(feats, noisy, data, "linear", seed=1, epochs=30, keep_predictions=True)
    manual = 100.0 * np.mean(res.predictions_old != res.predictions_new)
    assert res.disagreement == pytest.approx(manual) and res.n_test == len(data.test_y)
    base = feature_disagreement(feats, feats, data, "mlp", seed=1, seed_b=1001, epochs=30)
    assert base.settings["seed_b"] == 1001 and base.settings["features"] is True


def test_mlp_learns_what_a_linear_classifier_cannot():
    data, feats = _xor_task()
    lin = feature_disagreement(feats, feats, data, "linear", seed=0, epochs=40)
    mlp = feature_disagreement(feats, feats, data, "mlp", seed=0, epochs=60, lr=1e-2, hidden=32)
    assert lin.quality_old < 75 and mlp.quality_old > 90


def test_bad_classifier_task_and_feature_shapes():
    data, feats = _xor_task()
    with pytest.raises(UnknownNameError, match="'cnn' reads word sequences"):
        feature_disagreement(feats, feats, data, "cnn")
    with pytest.raises(ShapeError, match="one row per example of task 'xor' \\(400\\)"):
        feature_disagreement(feats, feats[:10], data)


@pytest.mark.skipif(source_path(SOURCES[DATASETS["rt_sentiment"].source]) is None,
                    reason="run `embstab data fetch rt_sentiment`")
def test_tiny_model_vs_its_quantized_self_on_a_real_task():
    model = tiny_model(0, max_length=128)
    quant = quantize_weights(model, "fp4_e2m1")
    data = load_task("rt_sentiment", limit=300)
    feats = task_features(model, data)
    assert feats.shape == (300, 128)
    res = contextual_disagreement(model, quant, data, "linear", seed=2, epochs=15)
    again = contextual_disagreement(model, quant, data, "linear", seed=2, epochs=15)
    assert res.disagreement == again.disagreement and res.n_test == 30
    assert 0.0 <= res.disagreement <= 100.0 and 0.0 <= res.quality_new <= 100.0
    assert res.settings["model_new"].endswith("@fp4_e2m1") and res.settings["dim_old"] == 128
    floor = contextual_disagreement(model, model, data, "linear", seed=2, seed_b=1002, epochs=15)
    assert floor.settings["model_old"] == floor.settings["model_new"]
    with pytest.raises(UnknownNameError, match="'bilstm' is a tagger, for brown_pos"):
        contextual_disagreement(model, quant, data, "bilstm")

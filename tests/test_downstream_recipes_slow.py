"""Slow tier: 16-bit training recipes on the CNN sentence classifier over rt_sentiment.

Measured (2-core x86_64, torch 2.13 CPU, one thread; mean test accuracy over model seeds 0 and 1,
lr 1e-4, 15 epochs, frozen GloVe 6B 50-d): fp32 70.67 %, bf16-nearest 66.24 %, bf16-stochastic
70.55 %, bf16-kahan 70.59 %. At the default lr 1e-3 (10 epochs, seeds 0-4) Adam's steps are large
against bf16's spacing and nearest rounding loses nothing (fp32 71.64, nearest 71.73, stochastic
71.23, Kahan 71.51): the damage shows where updates fall below half a unit in the last place.
"""

from __future__ import annotations

import numpy as np
import pytest

from embstab.data.registry import DATASETS
from embstab.data.sources import SOURCES, source_path
from embstab.downstream import train_and_predict

pytestmark = pytest.mark.slow


def _available(name: str) -> bool:
    return source_path(SOURCES[DATASETS[name].source]) is not None


@pytest.mark.skipif(not (_available("rt_sentiment") and _available("glove_6b_50d")),
                    reason="run `embstab data fetch rt_sentiment glove_6b_50d`")
def test_rt_sentiment_cnn_nearest_loses_accuracy_stochastic_and_kahan_do_not():
    from embstab.data.pretrained import glove_6b_50d

    glove = glove_6b_50d(top_n=30_000)
    acc = {}
    for recipe in ("fp32", "bf16-nearest", "bf16-stochastic", "bf16-kahan"):
        runs = [train_and_predict(glove, "rt_sentiment", "cnn", seed=s, lr=1e-4, epochs=15, recipe=recipe)
                for s in (0, 1)]
        assert all(r.settings["recipe"] == recipe for r in runs)
        acc[recipe] = float(np.mean([r.quality for r in runs]))
    print(acc)
    assert acc["fp32"] > 68
    assert acc["bf16-nearest"] < acc["fp32"] - 2.0
    assert abs(acc["bf16-stochastic"] - acc["fp32"]) <= 0.5
    assert abs(acc["bf16-kahan"] - acc["fp32"]) <= 0.5

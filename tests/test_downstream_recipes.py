"""Downstream models trained under a training recipe: the recipe is really applied, and selectable."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embstab import Embedding
from embstab.data.tasks import ClassificationData, TaggingData
from embstab.downstream import disagreement, train_and_predict
from embstab.downstream.training import fit_classifier, fit_tagger
from embstab.errors import UnknownNameError
from embstab.lowprec import quantize
from embstab.recipes.swalp import swalp_formats

POS, NEG, FILL = [f"good{i}" for i in range(10)], [f"bad{i}" for i in range(10)], [f"the{i}" for i in range(10)]


def _embedding(dim: int = 8) -> Embedding:
    rng = np.random.default_rng(0)
    words = POS + NEG + FILL
    vecs = rng.normal(scale=0.1, size=(len(words), dim))
    vecs[:10, 0] += 1.0
    vecs[10:20, 0] -= 1.0
    return Embedding(words, vecs.astype(np.float32), name="synthetic")


def _data(n: int = 120) -> ClassificationData:
    rng = np.random.default_rng(1)
    xs, ys = [], []
    for _ in range(n):
        label = int(rng.integers(2))
        sent = list(rng.choice(POS if label else NEG, 2)) + list(rng.choice(FILL, int(rng.integers(3, 6))))
        rng.shuffle(sent)
        xs.append(sent)
        ys.append(label)
    y = np.asarray(ys)
    return ClassificationData("synthetic", ["neg", "pos"], xs[:80], y[:80], xs[80:100], y[80:100], xs[100:], y[100:])


def _encoded(data: ClassificationData):
    from embstab.downstream.lookup import TaskVocabulary, lookup_table

    vocab = TaskVocabulary(data.train_x, data.dev_x, data.test_x)
    table, _ = lookup_table(_embedding(), vocab, 0)
    return table, (vocab.encode(data.train_x), data.train_y), (vocab.encode(data.dev_x), data.dev_y), \
        vocab.encode(data.test_x)


def _fit(model: str, recipe: str | None, seed: int = 0):
    table, train, dev, test = _encoded(_data())
    fit = fit_classifier(model, table.clone(), 2, train, dev, test, seed=seed, lr=1e-2, epochs=3, batch_size=16,
                         patience=None, recipe=recipe, **({"filters": 4} if model == "cnn" else {}))
    return fit, table


def _trainable(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach() for n, p in model.named_parameters() if not n.startswith("emb.")]


def _on_bf16_grid(t: torch.Tensor) -> bool:
    return torch.equal(t.to(torch.bfloat16).float(), t)


@pytest.mark.parametrize("model", ["cnn", "lstm", "linear"])
def test_bf16_recipes_keep_the_trained_weights_on_the_bf16_grid(model):
    ref, table = _fit(model, None)
    assert not all(_on_bf16_grid(p) for p in _trainable(ref.model))  # fp32 training leaves the grid
    for recipe in ("bf16-nearest", "bf16-stochastic", "bf16-kahan"):
        fit, _ = _fit(model, recipe)
        assert all(_on_bf16_grid(p) for p in _trainable(fit.model)), recipe
        if model != "linear":  # the frozen input table is never rounded
            assert torch.equal(fit.model.emb.weight.detach(), table)


def test_update_rules_differ_and_a_seed_reproduces_stochastic_rounding():
    near, _ = _fit("cnn", "bf16-nearest")
    sr1, _ = _fit("cnn", "bf16-stochastic")
    sr1b, _ = _fit("cnn", "bf16-stochastic")
    kahan, _ = _fit("cnn", "bf16-kahan")
    w = lambda f: torch.cat([p.flatten() for p in _trainable(f.model)])  # noqa: E731
    assert torch.equal(w(sr1), w(sr1b))
    assert not torch.equal(w(near), w(sr1)) and not torch.equal(w(near), w(kahan))


def test_swalp_scores_and_returns_the_average_of_block_float_iterates():
    fit, _ = _fit("cnn", "swalp")
    weights = [p for p in _trainable(fit.model) if p.dim() > 1]
    # an average of 8-bit block-float iterates is (almost surely) off the 8-bit grid
    assert any(not torch.equal(quantize(p, swalp_formats(8)["channel"]), p) for p in weights)
    assert fit.best_epoch >= 1 and np.isfinite(fit.dev_score)


def test_tagger_trains_under_a_recipe():
    rng = np.random.default_rng(2)
    xs = [list(rng.choice(POS + NEG + FILL, int(rng.integers(3, 7)))) for _ in range(60)]
    ys = [np.asarray([2 if w.startswith("good") else 0 if w.startswith("bad") else 1 for w in s]) for s in xs]
    data = TaggingData("synthetic", ["NEG", "O", "POS"], xs[:40], ys[:40], xs[40:50], ys[40:50], xs[50:], ys[50:],
                       outside_tag="O")
    from embstab.downstream.lookup import TaskVocabulary, lookup_table

    vocab = TaskVocabulary(data.train_x, data.dev_x, data.test_x)
    table, _ = lookup_table(_embedding(), vocab, 0)
    fit = fit_tagger("bilstm", table, 3, (vocab.encode(data.train_x), data.train_y),
                     (vocab.encode(data.dev_x), data.dev_y), vocab.encode(data.test_x), seed=0, lr=5e-3, epochs=2,
                     batch_size=8, patience=None, outside=1, recipe="bf16-stochastic", hidden=8)
    assert all(_on_bf16_grid(p) for p in _trainable(fit.model))


def test_the_recipe_is_recorded_fp32_is_the_default_and_bad_names_are_refused():
    emb, data = _embedding(), _data()
    plain = train_and_predict(emb, data, "linear", seed=0, epochs=3)
    named = train_and_predict(emb, data, "linear", seed=0, epochs=3, recipe="fp32")
    assert np.array_equal(plain.pred, named.pred) and plain.settings["recipe"] == "fp32"
    res = disagreement(emb, emb, data, "linear", seed=0, seed_b=1, epochs=3, recipe="bf16-kahan")
    assert res.settings["recipe"] == "bf16-kahan"
    with pytest.raises(UnknownNameError, match="bf16-kahn"):
        disagreement(emb, emb, data, "linear", recipe="bf16-kahn")
    with pytest.raises(UnknownNameError):
        train_and_predict(emb, data, "linear", recipe="int3")

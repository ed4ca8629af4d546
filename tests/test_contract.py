"""One contract over every member of each catalogue (as scikit-learn's estimator checks).

Every downstream task x model of its kind, every dataset, every pretrained embedding and every
registered recipe must honour the same promises; a new member is checked by being registered.
"""

from __future__ import annotations

import numpy as np
import pytest

import embstab
import embstab.recipes
from embstab import Embedding
from embstab.data import DATASETS, PRETRAINED
from embstab.data.registry import dataset_info
from embstab.data.sources import SOURCES, source_path
from embstab.downstream import MODELS, TASKS, TrainResult, load_task, train_and_predict
from embstab.errors import UnknownNameError, lookup
from embstab.recipes import RECIPES, CheckResult, get_recipe

PAIRS = [(task, model) for task, (kind, _) in TASKS.items() for model, (mkind, _) in MODELS.items()
         if mkind == kind]
# retrieval trains no model (the vectors rank the documents): its own contract below
TRAINED = [(task, model) for task, model in PAIRS if TASKS[task][0] != "retrieval"]
RETRIEVAL = [(task, model) for task, model in PAIRS if TASKS[task][0] == "retrieval"]
TINY = {"linear": dict(epochs=2), "mlp": dict(epochs=2, hidden=8), "cnn": dict(epochs=1, filters=4), "lstm": dict(epochs=1, hidden=8, layers=1),
        "bilstm": dict(epochs=1, hidden=8), "bilstm_crf": dict(epochs=1, hidden=8)}


def _available(task: str) -> bool:
    return source_path(SOURCES[DATASETS[task].source]) is not None


def _task_embedding(data, dim: int = 6, seed: int = 0) -> Embedding:
    words = sorted({w for sent in data.train_x for w in sent})
    return Embedding(words, np.random.default_rng(seed).normal(size=(len(words), dim)).astype(np.float32))


def test_every_model_kind_has_a_task_and_every_task_a_model():
    assert {k for k, _ in TASKS.values()} == {k for k, _ in MODELS.values()}
    assert {t for t, _ in PAIRS} == set(TASKS)


@pytest.mark.parametrize("task,model", TRAINED)
def test_task_model_contract(task, model):
    if not _available(task):
        pytest.skip(f"run `embstab data fetch {task}`")
    data = load_task(task, limit=150)
    emb = _task_embedding(data)
    first = train_and_predict(emb, data, model, seed=3, **TINY[model])
    again = train_and_predict(emb, data, model, seed=3, **TINY[model])
    assert isinstance(first, TrainResult)
    n_test = len(data.test_y) if TASKS[task][0] == "classification" else sum(len(y) for y in data.test_y)
    assert first.pred.shape == first.gold.shape == (n_test,)
    assert 0.0 <= first.quality <= 100.0 and 0.0 < first.coverage <= 1.0
    n_classes = len(data.labels) if TASKS[task][0] == "classification" else len(data.tags)
    assert first.pred.min() >= 0 and first.pred.max() < n_classes
    np.testing.assert_array_equal(first.pred, again.pred)  # same seed, same predictions


@pytest.mark.parametrize("task,model", RETRIEVAL)
def test_retrieval_task_model_contract(task, model):
    from embstab.data import DataNotFoundError
    from embstab.downstream import RetrievalData, disagreement

    try:
        data = load_task(task, limit=150)
    except DataNotFoundError as exc:
        pytest.skip(str(exc))
    assert isinstance(data, RetrievalData) and data.n_queries == 150
    emb = _task_embedding(type("Words", (), {"train_x": data.document_tokens})())
    first = disagreement(emb, emb, data, model)
    assert first.disagreement == 0.0 and first.n_test == 150 and 0.0 <= first.quality_old <= 100.0
    assert first.quality_old == disagreement(emb, emb, data, model).quality_old  # deterministic


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_dataset_contract(name):
    info = dataset_info(name)
    assert info.name == name and info.kind in {"corpus", "classification", "tagging", "embedding"}
    assert info.source in SOURCES and info.licence and info.description
    if info.kind in ("classification", "tagging"):
        assert name in TASKS and TASKS[name][0] == info.kind


def test_a_typo_in_any_catalogue_gets_the_one_error_with_a_hint():
    for table, what in [(DATASETS, "dataset"), (TASKS, "task"), (MODELS, "model"), (PRETRAINED, "pretrained"),
                        (RECIPES or {"swalp": None}, "recipe")]:
        name = sorted(table)[0]
        with pytest.raises(UnknownNameError, match=f"did you mean {name!r}"):
            lookup(table, name[:-1] + ("x" if name[-1] != "x" else "y"), what)


@pytest.mark.parametrize("name", sorted(PRETRAINED))
def test_pretrained_contract(name):
    info = DATASETS[name]
    assert info.kind == "embedding"
    if source_path(SOURCES[info.source]) is None:
        pytest.skip(f"run `embstab data fetch {name}`")
    emb = embstab.load(f"builtin:{name}")
    assert isinstance(emb, Embedding) and emb.name == name and len(emb) > 1000
    assert np.isfinite(emb.vectors[:100]).all()


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_contract(name):
    recipe = get_recipe(name)
    assert recipe.name == name and recipe.summary and recipe.entry_points
    for entry in recipe.entry_points:
        assert hasattr(embstab.recipes, entry), f"{name}: entry point {entry!r} is not exported"
    assert callable(recipe.check)


def test_recipe_check_results_are_honest():
    table = __import__("pandas").DataFrame({"x": [1.0]})
    assert CheckResult("r", table, {"a": True, "b": True}).passed
    assert not CheckResult("r", table, {"a": True, "b": False}).passed
    assert CheckResult("r", table, {"a": True}).to_dict()["table"] == [{"x": 1.0}]



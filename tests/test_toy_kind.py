"""A kind defined outside the package: registered through the public ``register_kind`` alone, it
passes the whole kind contract (``tests/_kind_contract.py``) and leaves the registry as it found it.

The toy kind: a source pair of two seeded point clouds (the new one the old one plus noise), one
member a seeded random projection of a cloud to ``dim`` dimensions, compression and measures the
shared ones, and a downstream task whose labels are each point's parity (a least-squares classifier
on half the points, tested on the other half).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from _kind_contract import (check_plans_its_grid, check_rejects, check_report_and_recommend, check_reproduces,
                            check_resumes, check_rows, run_tiny)

from embstab import Embedding
from embstab.study import ArtifactStore, Steps, parse_study
from embstab.study.kinds import KINDS, StudyKind, register_kind, unregister_kind
from embstab.study.settings import Setting, TaskRule, member_config, source_config
from embstab.study.steps import default_steps, downstream_output, guarded, run_compress

#: Width of the source clouds (a member is a projection of its cloud to fewer dimensions).
WIDTH = 32


@dataclass(frozen=True)
class ToySpec:
    """The ``toy`` section: how many points, how far the new cloud moves, the seed."""

    n: int = 300
    noise: float = 0.3
    seed: int = 0


def parse_toy(v: Any, value: Any) -> ToySpec:
    g = v.mapping(value, "toy", {"n": False, "noise": False, "seed": False})
    return ToySpec(n=v.integer(g.get("n", 300), "toy.n", 50, 5000),
                   noise=v.number(g.get("noise", 0.3), "toy.noise", 0.0, 10.0, open_low=True),
                   seed=v.integer(g.get("seed", 0), "toy.seed", 0))


def toy_algorithms(v: Any, value: Any) -> tuple[str, ...]:
    return v.str_list(value, "training.algorithms", ("projection",))


def toy_tasks() -> dict[str, TaskRule]:
    return {"parity": TaskRule(("least_squares",), {})}


def toy_source_config(spec: Any) -> dict[str, Any]:
    return source_config("toy", spec.source_spec, kind="toy")


def toy_train_config(spec: Any, side: str, v: Any) -> dict[str, Any]:
    return member_config(spec, side, v, toy_source_config(spec))


def _labels(words: list[str]) -> np.ndarray:
    return np.array([int(w[1:]) % 2 for w in words])


@guarded("toy")
def run_toy_source(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any]) -> str:
    if store.has_embedding("toy_new", key) and store.has_embedding("toy_old", key):
        return key
    rng = np.random.default_rng(config["seed"])
    words = [f"t{i}" for i in range(config["n"])]
    old = rng.standard_normal((config["n"], WIDTH))
    old[:, 0] += 3.0 * (2 * _labels(words) - 1)  # the parity is learnable from the cloud
    new = old + config["noise"] * rng.standard_normal(old.shape)
    store.put_embedding("toy_old", key, Embedding(words, old.astype(np.float32)), config)
    store.put_embedding("toy_new", key, Embedding(words, new.astype(np.float32)), config)
    return key


def project(cloud: Embedding, dim: int, seed: int) -> Embedding:
    """The toy trainer: a seeded random projection of the cloud to ``dim`` dimensions."""
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((cloud.dim, dim)) / np.sqrt(dim)
    return Embedding(list(cloud.words), (np.asarray(cloud.vectors, dtype=np.float64) @ weights).astype(np.float32))


@guarded("train")
def run_toy_train(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any], source_key: str) -> str:
    if store.has_embedding("embedding", key):
        return key
    cloud = store.get_embedding(f"toy_{config['side']}", source_key)
    store.put_embedding("embedding", key, project(cloud, config["dim"], config["seed"]), config)
    return key


def _predict(emb: Embedding) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares parity classifier fit on the even points, its predictions and labels on the odd half."""
    x = np.hstack([np.asarray(emb.vectors, dtype=np.float64), np.ones((len(emb), 1))])
    y = 2.0 * _labels(list(emb.words)) - 1
    fit = np.arange(len(emb)) % 4 < 2
    w, *_ = np.linalg.lstsq(x[fit], y[fit], rcond=None)
    return np.sign(x[~fit] @ w), y[~fit]


@guarded("downstream")
def run_toy_downstream(store: ArtifactStore, steps: Steps, key: str, config: Mapping[str, Any],
                       pair_key: str) -> dict[str, Any]:
    if store.has_json("downstream", key):
        return store.get_json("downstream", key)
    old, new = store.get_embedding("pair_old", pair_key), store.get_embedding("pair_new", pair_key)
    (p_old, y), (p_new, _) = _predict(old), _predict(new)
    value = downstream_output(100.0 * float(np.mean(p_old != p_new)), 100.0 * float(np.mean(p_old == y)),
                              100.0 * float(np.mean(p_new == y)), len(y),
                              chance=100.0 * max(float(np.mean(y > 0)), float(np.mean(y < 0))))
    store.put_json("downstream", key, value, config)
    return value


TOY = StudyKind(
    name="toy", label="toy point clouds", memory_unit="bits per toy point", source_key="toy", source_stage="toy",
    parse_source=parse_toy, algorithms=toy_algorithms, training={"scale": Setting(1.0, "float", 0.0, 10.0)},
    tasks=toy_tasks, check=None, source_config=toy_source_config, train_config=toy_train_config,
    run_source=run_toy_source, run_train=run_toy_train, run_compress=run_compress, run_downstream=run_toy_downstream,
)

TINY_TOY = {
    "name": "kinds_toy", "kind": "toy",
    "toy": {"n": 300, "noise": 0.3, "seed": 0},
    "training": {"algorithms": ["projection"], "dimensions": [4, 8], "seeds": [0]},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["eis", "knn", "pip_loss"], "top_n": 200, "params": {"knn": {"n_queries": 100}}},
    "downstream": [{"task": "parity"}],
}


@pytest.fixture(scope="module")
def toy():
    assert "toy" not in KINDS
    register_kind(TOY)
    yield TOY
    assert unregister_kind("toy") is TOY  # leave the registry as it was
    assert "toy" not in KINDS


@pytest.fixture(scope="module")
def finished(toy, tmp_path_factory):
    root = tmp_path_factory.mktemp("kind_toy")
    spec, run = run_tiny(TINY_TOY, root)
    return spec, root, run


def test_the_toy_kind_is_registered_last_and_parsed_by_name(toy):
    assert list(KINDS)[0] == "word" and list(KINDS)[-1] == "toy"
    spec = parse_study(TINY_TOY)
    assert spec.study_kind is TOY and spec.source_spec == ToySpec()
    with pytest.raises(ValueError, match="already registered"):
        register_kind(dataclasses.replace(TOY))


def test_the_toy_kind_plans_its_grid(toy, tmp_path):
    check_plans_its_grid("toy", TINY_TOY, tmp_path)


def test_the_toy_kind_runs_with_rows_of_its_kind(finished):
    spec, _, run = finished
    check_rows("toy", spec, run)
    assert run.results["quality"].min() > 60  # the parity is learnable: the rows are not near chance


def test_the_toy_kind_resumes_without_training(finished, monkeypatch):
    spec, root, run = finished
    monkeypatch.setattr(f"{__name__}.project", _never)
    check_resumes(spec, root, run, default_steps())


def _never(*args, **kwargs):
    raise AssertionError("a resumed study must not train again")


def test_the_toy_kind_reproduces_in_a_fresh_store(finished, tmp_path):
    spec, _, run = finished
    check_reproduces(spec, run, tmp_path)


def test_the_toy_kind_reaches_the_report_and_recommend(finished):
    spec, _, run = finished
    check_report_and_recommend("toy", spec, run)


@pytest.mark.parametrize("path, value, key, words", [
    ("kind", "toyy", "kind", "did you mean 'toy'"),
    ("toy.n", 10, "toy.n", ">= 50"),
    ("toy.noise", 0.0, "toy.noise", "(0.0, 10.0]"),
    ("training.algorithms", ["w2v_cbow"], "training.algorithms[0]", "unknown value"),
    ("training.scale", 11.0, "training.scale", "must be in [0.0, 10.0]"),
    ("downstream", [{"task": "rt_sentiment"}], "downstream[0].task", "toy study has no downstream task"),
    ("corpus", {"name": "gensim_lee"}, "corpus", "from 'toy'"),
])
def test_the_toy_kinds_schema_errors_name_their_key(toy, path, value, key, words):
    check_rejects(TINY_TOY, path, value, key, words)

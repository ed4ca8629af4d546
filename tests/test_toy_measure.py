"""A new measure needs only its registration: a toy one, registered here through the public API,
passes the measure contract and is seen by compare, the study schema and the fallback order.

The toy is the uncentred kernel alignment ‖XᵀY‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F), the cosine between the two
Gram matrices XXᵀ and YYᵀ: larger is more stable, invariant to rotations and isotropic scaling of
either side, not to translation. Every test registers it and removes it again.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import embstab
from embstab import Embedding
from embstab.errors import ConfigError, UnknownNameError
from embstab.measures import (REGISTRY, MeasureInfo, fallback_order, get_measure, measures_for, register_measure,
                              unregister_measure)
from embstab.study import StudyDefinitionError, parse_study

from _measure_contract import check_invariances, check_measure_contract


def gram_alignment(X, Y, *, squared: bool = True) -> float:
    """‖XᵀY‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F) (its square root with ``squared=False``); numpy or torch."""
    cross = float(((X.T @ Y) ** 2).sum())
    den = float(((X.T @ X) ** 2).sum()) ** 0.5 * float(((Y.T @ Y) ** 2).sum()) ** 0.5
    value = min(cross / den, 1.0) if den else 0.0
    return value if squared else value ** 0.5


TOY = MeasureInfo("gram_alignment", gram_alignment, True, (0.0, 1.0), ("rotation", "isotropic scaling"),
                  description="cosine between the two Gram matrices", defaults={"squared": True},
                  fallback_rank=99)


@pytest.fixture
def toy():
    assert TOY.name not in REGISTRY
    info = register_measure(TOY)
    try:
        yield info
    finally:
        unregister_measure(TOY.name)
    assert TOY.name not in REGISTRY  # cleaned up: other tests see the built-in registry


def test_the_toy_passes_the_measure_contract(toy):
    assert get_measure("gram_alignment") is toy
    check_measure_contract(toy)


def test_the_contract_catches_a_false_declaration(toy):
    # the uncentred alignment changes when a side is translated: declaring it must fail the contract
    lying = dataclasses.replace(toy, invariances=(*toy.invariances, "translation"))
    with pytest.raises(AssertionError, match="declared invariant to translation"):
        check_invariances(lying)


def test_the_registry_serves_the_toy_everywhere(toy):
    assert measures_for("euclidean")[-1] == "gram_alignment"
    assert fallback_order()[-1] == "gram_alignment"
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(80)]
    x = rng.normal(size=(80, 6))
    a, b = Embedding(words, x, name="a"), Embedding(words, x + 0.2 * rng.normal(size=(80, 6)), name="b")
    table = embstab.compare(a, b, measures=["gram_alignment", "knn"], params={"gram_alignment": {"squared": False}})
    row = table.set_index("measure").loc["gram_alignment"]
    assert row.value == pytest.approx(gram_alignment(x, b.vectors, squared=False))
    assert row.distance == pytest.approx(1 - row.value) and row.direction == "larger is more stable"
    assert np.isfinite(row.null) and row.null < row.value  # a shuffled partner aligns worse
    # a study may name it, and it needs no more words than dimensions
    study = {"name": "t", "corpus": {"name": "gensim_lee", "fraction": 0.1},
             "training": {"algorithms": ["w2v_cbow"], "dimensions": [10, 20], "seeds": [1], "epochs": 2},
             "compression": {"bit_widths": [1, 32]}, "measures": {"names": ["gram_alignment"], "top_n": 20},
             "downstream": [{"task": "rt_sentiment"}]}
    assert parse_study(study).measures.names == ("gram_alignment",)
    register_measure(dataclasses.replace(toy, needs_more_words_than_dims=True), replace=True)
    with pytest.raises(StudyDefinitionError, match="measures.top_n.*gram_alignment"):
        parse_study(study)


def test_registration_refuses_inconsistent_declarations(toy):
    with pytest.raises(ConfigError, match="already registered"):
        register_measure(TOY)
    bad = {"geometry": "spherical", "range": (1.0, 0.0), "defaults": {"k": 3}, "fallback_rank": 1,
           "name": "gram alignment"}
    messages = {"geometry": "geometry must be one of", "range": "low < high", "defaults": "not parameters",
                "fallback_rank": "already eis's", "name": "must be an identifier"}
    for field, value in bad.items():
        with pytest.raises(ConfigError, match=messages[field]):
            register_measure(dataclasses.replace(TOY, **{field: value}), replace=True)
    assert get_measure("gram_alignment") is toy  # a refused declaration changes nothing
    with pytest.raises(ConfigError, match="names no function"):
        register_measure(dataclasses.replace(TOY, name="other", func="embstab.measures.knn:nope"))
    with pytest.raises(UnknownNameError):
        unregister_measure("not_registered")

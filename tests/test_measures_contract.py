"""Every registered measure honours the measure contract, and reads its properties from the registry.

The contract (``tests/_measure_contract.py``) runs over the registry as it stands when the tests are
collected; a new measure is checked by being registered (``tests/test_toy_measure.py`` shows how).
"""

from __future__ import annotations

import warnings

import pytest

from embstab._measure_catalogue import BUILTIN_MEASURES
from embstab.cli import names
from embstab.measures import DEFAULT_MEASURES, REGISTRY, fallback_order, measures_for
from embstab.selection.signal import FALLBACK_ORDER
from embstab.study import StudyDefinitionError, parse_study

from _measure_contract import CHECKS, check_declaration

EUCLIDEAN = measures_for("euclidean")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("name", EUCLIDEAN)
def test_measure_contract(name, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. k-NN on few rows; the contract is about values
        check(REGISTRY[name])


@pytest.mark.parametrize("name", measures_for("hyperbolic"))
def test_hyperbolic_measures_are_declared_consistently(name):
    check_declaration(REGISTRY[name])


def test_the_registry_is_the_catalogue_and_the_cli_reads_it():
    assert tuple(REGISTRY) == tuple(m.name for m in BUILTIN_MEASURES) == names.MEASURES
    for declared in BUILTIN_MEASURES:
        info = REGISTRY[declared.name]
        assert callable(info.func) and isinstance(declared.func, str)  # registering imported it
        assert (info.geometry, info.larger_is_more_stable, info.fallback_rank) == \
               (declared.geometry, declared.larger_is_more_stable, declared.fallback_rank)
    assert names.DEFAULT_MEASURES is DEFAULT_MEASURES


def test_only_the_span_measures_need_more_words_than_dimensions():
    needing = {n for n, m in REGISTRY.items() if m.needs_more_words_than_dims}
    assert needing == {"eis", "eigenspace_overlap", "weighted_eigenspace_overlap"}


def test_the_fallback_order_is_the_registered_ranks():
    assert FALLBACK_ORDER == fallback_order() == ("eis", "knn", "semantic_displacement", "eigenspace_overlap",
                                                  "weighted_eigenspace_overlap", "linear_cka",
                                                  "procrustes_distance")
    ranks = [REGISTRY[n].fallback_rank for n in FALLBACK_ORDER]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)


STUDY = {
    "name": "t",
    "corpus": {"name": "gensim_lee", "fraction": 0.1},
    "training": {"algorithms": ["w2v_cbow"], "dimensions": [10, 20], "seeds": [1], "epochs": 2},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["knn"], "top_n": 20},
    "downstream": [{"task": "rt_sentiment"}],
}


@pytest.mark.parametrize("name", EUCLIDEAN)
def test_a_study_asks_for_more_words_than_dimensions_exactly_when_the_measure_needs_them(name):
    data = {**STUDY, "measures": {"names": [name], "top_n": 20}}  # top_n = the largest dimension
    if REGISTRY[name].needs_more_words_than_dims:
        with pytest.raises(StudyDefinitionError, match=f"measures.top_n.*{name}"):
            parse_study(data)
    else:
        assert parse_study(data).measures.names == (name,)


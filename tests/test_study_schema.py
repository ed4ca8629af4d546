"""Study definitions: valid files load; bad ones are rejected before anything runs, naming the key."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from embstab.errors import EmbstabError
from embstab.study import StudyDefinitionError, load_study, parse_study

REPO = Path(__file__).resolve().parents[1]

VALID = {
    "name": "t",
    "corpus": {"name": "gensim_lee", "fraction": 0.1},
    "training": {"algorithms": ["w2v_cbow"], "dimensions": [10, 20], "seeds": [1, 2], "epochs": 2},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["eis", "knn"], "top_n": 500},
    "downstream": [{"task": "rt_sentiment"}],
    "budgets": [20, 100],
}


def _with(path: str, value, base=VALID):
    """A copy of ``base`` with the dotted ``path`` set to ``value`` (``...`` deletes it)."""
    data = copy.deepcopy(base)
    node = data
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    last = parts[-1]
    if value is ...:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


def test_valid_definition_parses_with_defaults():
    spec = parse_study(VALID)
    assert spec.training.dimensions == (10, 20)
    assert spec.compression.rounding == "nearest"
    assert spec.measures.params == ()  # the registry's defaults apply
    assert spec.downstream[0].model == "linear" and spec.downstream[0].label == "rt_sentiment"
    assert spec.anchor_dim == 20
    assert spec.n_rows() == 1 * 2 * 2 * 2 * 1


def test_fingerprint_is_stable_and_changes_with_content():
    a, b = parse_study(VALID), parse_study(copy.deepcopy(VALID))
    assert a.fingerprint() == b.fingerprint()
    assert parse_study(_with("training.seeds", [1, 3])).fingerprint() != a.fingerprint()
    # a round trip through to_dict gives the same definition
    assert parse_study(a.to_dict()) == a


@pytest.mark.parametrize("path,value,key", [
    # unknown keys, at every level
    ("colour", "blue", "colour"),
    ("training.dimension", [10], "training.dimension"),
    ("measures.topn", 10, "measures.topn"),
    ("downstream.0.modle", "linear", "downstream[0].modle"),
    # missing required keys
    ("corpus", ..., "corpus"),
    ("training.seeds", ..., "training.seeds"),
    # bad values
    ("training.dimensions", [10, -5], "training.dimensions[1]"),
    ("training.dimensions", [10, "big"], "training.dimensions[1]"),
    ("training.dimensions", [], "training.dimensions"),
    ("training.dimensions", [10, 10], "training.dimensions[1]"),
    ("training.dimensions", 10, "training.dimensions"),
    ("training.algorithms", ["word2vec"], "training.algorithms[0]"),
    ("training.seeds", [1.5], "training.seeds[0]"),
    ("training.epochs", 0, "training.epochs"),
    ("compression.bit_widths", [1, 33], "compression.bit_widths[1]"),
    ("compression.bit_widths", [0], "compression.bit_widths[0]"),
    ("compression.rounding", "up", "compression.rounding"),
    ("compression.rounding", "toward_zero", "compression.rounding"),  # a mode, but not a study's
    ("compression.rounding", "stochastic:0", "compression.rounding"),
    ("measures.names", ["eis", "cosine"], "measures.names[1]"),
    ("corpus.fraction", 0.7, "corpus.fraction"),
    ("corpus.pair", "shuffle", "corpus.pair"),
    ("corpus.name", "no_such_corpus", "corpus.name"),
    ("downstream.0.task", "imdb", "downstream[0].task"),
    ("downstream", [], "downstream"),
    ("budgets", [True], "budgets[0]"),
    ("name", "a/b", "name"),
    # impossible combinations
    ("downstream.0.model", "bilstm", "downstream[0].model"),  # a tagger for a sentence task
    ("measures.top_n", 20, "measures.top_n"),                 # fewer words than dimensions for EIS
    ("budgets", [5, 100], "budgets[0]"),                      # below the smallest dim x bits
    ("measures.params", {"knn": {"k": 500}}, "measures.params.knn.k"),   # k >= top_n
    ("measures.params", {"knn": {"kk": 5}}, "measures.params.knn.kk"),   # not a parameter of knn
    ("measures.params", {"pip_loss": {}}, "measures.params.pip_loss"),   # a measure not asked for
    ("measures.params", {"knn": {"k": 0}}, "measures.params.knn.k"),
])
def test_bad_definitions_name_the_key(path, value, key):
    with pytest.raises(StudyDefinitionError) as info:
        parse_study(_with(path, value))
    assert info.value.key == key
    assert f"'{key}'" in str(info.value)
    assert isinstance(info.value, EmbstabError)


def test_measure_params_are_a_generic_mapping_and_legacy_keys_still_read():
    spec = parse_study(_with("measures.params", {"knn": {"k": 7, "n_queries": 50}, "eis": {"alpha": 2}}))
    assert spec.measures.params_dict() == {"knn": {"k": 7, "n_queries": 50}, "eis": {"alpha": 2.0}}
    legacy = _with("measures.knn_k", 7)
    legacy["measures"]["eis_alpha"] = 2
    legacy["measures"]["knn_queries"] = 50
    assert parse_study(legacy).measures == spec.measures
    assert parse_study(spec.to_dict()) == spec  # the saved form reads back


def test_duplicate_downstream_labels_rejected():
    data = _with("downstream", [{"task": "rt_sentiment"}, {"task": "rt_sentiment", "model": "cnn"}])
    with pytest.raises(StudyDefinitionError, match="duplicate label") as info:
        parse_study(data)
    assert info.value.key == "downstream[1].label"
    data["downstream"][1]["label"] = "rt_cnn"
    assert [d.label for d in parse_study(data).downstream] == ["rt_sentiment", "rt_cnn"]


def test_unknown_key_suggests_the_close_one():
    with pytest.raises(StudyDefinitionError, match="did you mean 'dimensions'"):
        parse_study(_with("training.dimension", [10]))


def test_load_study_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_with("compression.bit_widths", [3, 64])))
    with pytest.raises(StudyDefinitionError) as info:
        load_study(bad)
    assert str(bad) in str(info.value) and "compression.bit_widths[1]" in str(info.value)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    with pytest.raises(StudyDefinitionError, match="not valid YAML"):
        load_study(broken)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(StudyDefinitionError, match="empty"):
        load_study(empty)


@pytest.mark.parametrize("name, task", [("default.yaml", "rt_subjectivity"), ("quick.yaml", "rt_sentiment")])
def test_bundled_studies_are_valid(name, task):
    spec = load_study(REPO / "pipelines" / name)
    assert spec.budgets
    assert "eis" in spec.measures.names
    assert any(d.task == task for d in spec.downstream)


def test_default_study_matches_the_issue():
    spec = load_study(REPO / "pipelines" / "default.yaml")
    assert spec.training.algorithms == ("w2v_cbow",)
    assert min(spec.training.dimensions) == 25 and max(spec.training.dimensions) == 200
    assert min(spec.compression.bit_widths) == 1 and max(spec.compression.bit_widths) == 32
    assert len(spec.training.seeds) >= 2
    assert len(spec.downstream) >= 2
    # tasks whose linear model learns on this corpus (Rotten Tomatoes sentiment stays near its
    # majority class), trained full-batch so the flips are the embeddings', not the optimiser's
    assert {d.task for d in spec.downstream} == {"rt_subjectivity", "bbc_topic"}
    for entry in spec.downstream:
        options = dict(entry.options)
        assert entry.model == "linear" and options["batch_size"] >= 2048


def test_few_bit_stochastic_rounding_is_accepted_and_canonicalised():
    assert parse_study(_with("compression.rounding", "sr:8")).compression.rounding == "stochastic:8"
    assert parse_study(_with("compression.rounding", "stochastic")).compression.rounding == "stochastic"

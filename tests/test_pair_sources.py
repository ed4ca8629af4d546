"""Pair sources: `pair_disagreement` routes a pair to the source that claims it, through public registration only."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from embstab.downstream import (pair_disagreement, pair_source_for, pair_sources, register_pair_source,
                                unregister_pair_source)
from embstab.errors import ConfigError, UnknownNameError


@dataclass
class ToyResult:
    """The share of positions where the two names differ, scaled: a result any source could return."""

    disagreement: float
    task: str

    def to_dict(self) -> dict:
        return {"disagreement": self.disagreement, "task": self.task}


def _claims(spec: str, task: str) -> bool:
    return spec.startswith("toy:")


def _run(old: str, new: str, task: str, *, scale: float = 1.0, progress: bool = False) -> ToyResult:
    a, b = old[4:], new[4:]
    differ = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
    return ToyResult(scale * 100.0 * differ / max(len(a), len(b)), task)


@pytest.fixture
def toy():
    source = register_pair_source("toy", _claims, _run, label="toy pairs", members="toy names")
    try:
        yield source
    finally:
        if "toy" in pair_sources():
            unregister_pair_source("toy")


def test_a_registered_source_gets_the_pairs_it_claims(toy):
    assert pair_source_for("toy:abcd", "toy:abxy", "rt_sentiment") is toy
    assert pair_source_for("a.txt", "toy:abxy", "rt_sentiment") is toy  # NEW claims the pair too
    res = pair_disagreement("toy:abcd", "toy:abxy", "rt_sentiment", scale=0.5)
    assert isinstance(res, ToyResult) and res.disagreement == pytest.approx(25.0)
    assert json.loads(json.dumps(res.to_dict())) == {"disagreement": 25.0, "task": "rt_sentiment"}
    # the source's options are its run's keywords: another is refused in one line naming it and its takers
    with pytest.raises(ConfigError, match=r"^--epochs applies to word-embedding tasks, not to toy pairs$"):
        pair_disagreement("toy:a", "toy:b", "rt_sentiment", epochs=3, option_names={"epochs": "--epochs"})
    with pytest.raises(ConfigError, match="rt_sentiment compares two toy names: give OLD and NEW"):
        pair_disagreement("toy:a", None, "rt_sentiment")


def test_unregistering_restores_the_fallback(toy):
    assert unregister_pair_source("toy") is toy
    assert pair_source_for("toy:abcd", "toy:abxy", "rt_sentiment").name == "word"
    with pytest.raises(ConfigError, match="^unknown option scale: the pair sources take .*epochs"):
        pair_disagreement("toy:abcd", "toy:abxy", "rt_sentiment", scale=0.5)
    with pytest.raises(UnknownNameError, match="pair source 'toy'"):
        unregister_pair_source("toy")


def test_a_source_is_registered_by_its_public_contract_only():
    with pytest.raises(ConfigError, match="built-in word-embedding source"):
        register_pair_source("word", _claims, _run)
    with pytest.raises(ConfigError, match="must name its options"):
        register_pair_source("loose", _claims, lambda old, new, task, **options: None)
    assert "loose" not in pair_sources()


def test_the_kinds_register_their_sources(tmp_path):
    sources = pair_sources()  # reads embstab.kinds.KINDS, which imports the kinds
    assert list(sources)[-1] == "word" and {"kg", "contextual"} <= set(sources)
    assert {"bits", "seed", "batch_size"} == sources["kg"].options
    assert pair_source_for("a.txt", "b.txt", "link_prediction:umls").name == "kg"
    assert pair_source_for("builtin:minilm_l6", "builtin:minilm_l6", "wiki_retrieval").name == "contextual"
    assert pair_source_for("builtin:minilm_l6", None, "rt_sentiment").name == "word"  # trained tasks: word vectors
    assert pair_source_for("a.txt", "b.txt", "wiki_retrieval").name == "word"
    # a KG model folder given to a word task is the KG source's to refuse, before anything loads
    folder = tmp_path / "kg_model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"NEW \(.*kg_model\) is a KG model folder: use task link_prediction:GRAPH"):
        pair_disagreement("a.txt", str(folder), "rt_sentiment")
    with pytest.raises(ConfigError, match=r"OLD \(builtin:minilm_l6\) is a contextual model and NEW \(a.txt\) is not"):
        pair_disagreement("builtin:minilm_l6", "a.txt", "wiki_retrieval")
    with pytest.raises(ConfigError, match="^bits applies to KG tasks"):
        pair_disagreement("a.txt", "b.txt", "rt_sentiment", bits=4)

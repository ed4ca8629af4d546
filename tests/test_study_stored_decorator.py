"""The study's cache guard, ``stored``: a task whose output is in the store returns at once, one
whose output is missing (even one artifact of two) runs; under ``guarded``, failures keep their stage."""

from __future__ import annotations

import numpy as np
import pytest

from embstab import Embedding
from embstab.study import ArtifactStore
from embstab.study.steps import StudyTaskError, guarded, stored


def _task(calls: list):
    @stored(("docs", "corpus_new"), ("file", "graph_old", "npz"))
    def run(store, steps, key, config):
        calls.append(key)
        store.put_docs("corpus_new", key, [["a", "b"]], config)
        store.put_bytes("graph_old", key, "npz", b"graph", config)
        return key

    return run


def test_runs_when_an_artifact_is_missing_and_skips_once_all_exist(tmp_path):
    store, calls = ArtifactStore(tmp_path), []
    run = _task(calls)
    store.put_docs("corpus_new", "k1", [["x"]], {})  # one artifact of two: the task must still run
    assert run(store, None, "k1", {"n": 1}) == "k1"
    assert calls == ["k1"]
    assert run(store, None, "k1", {"n": 1}) == "k1"  # both exist now: nothing runs
    assert run(store, None, key="k1", config={"n": 1}) == "k1"  # the key given by name too
    assert calls == ["k1"]
    assert run(store, None, "k2", {"n": 2}) == "k2"  # another key is another output
    assert calls == ["k1", "k2"]


def test_load_returns_the_stored_json_and_embeddings_count(tmp_path):
    store, calls = ArtifactStore(tmp_path), []

    @stored(("json", "downstream"), load=True)
    def downstream(store, steps, key, config, pair_key):
        calls.append(pair_key)
        store.put_json("downstream", key, {"disagreement": 1.5}, config)
        return {"disagreement": 1.5, "fresh": True}

    assert downstream(store, None, "d", {}, "p") == {"disagreement": 1.5, "fresh": True}
    assert downstream(store, None, "d", {}, "p") == {"disagreement": 1.5}  # read back, not run
    assert calls == ["p"]

    @stored(("embedding", "pair_new"), ("embedding", "pair_old"))
    def compress(store, steps, key, config):
        calls.append(key)
        return "ran"

    emb = Embedding(["a", "b"], np.eye(2, dtype=np.float32))
    store.put_embedding("pair_new", "c", emb, {})
    assert compress(store, None, "c", {}) == "ran"
    store.put_embedding("pair_old", "c", emb, {})
    assert compress(store, None, "c", {}) == "c"
    assert calls == ["p", "c"]


def test_a_failing_lookup_under_guarded_keeps_the_stage(tmp_path):
    @guarded("train")
    @stored(("embedding", "embedding"))
    def train(store, steps, key, config):
        raise AssertionError("not reached")

    with pytest.raises(StudyTaskError) as info:
        train(object(), None, "k", {})  # no store: the look-up itself fails
    assert info.value.stage == "train"


@pytest.mark.parametrize("bad", [(), (("blob", "x"),), (("file", "x"),), (("json", "a", "b"),)])
def test_malformed_artifacts_are_refused(bad):
    with pytest.raises(ValueError, match="stored"):
        stored(*bad)
    with pytest.raises(ValueError, match="load"):
        stored(("docs", "corpus_new"), load=True)

"""The contextual study's retrieval tasks: the pipeline files, their options, and 1-bit features as sign codes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"


@pytest.mark.parametrize("name", ["retrieval.yaml", "retrieval_store.yaml", "retrieval_quick.yaml"])
def test_the_retrieval_pipelines_parse_as_contextual_studies_with_model_search(name):
    from embstab.study import load_study

    spec = load_study(PIPELINES / name)
    t = spec.training
    assert spec.kind == "contextual" and spec.n_rows() == len(t.seeds) * len(t.dimensions) * len(spec.compression.bit_widths)
    assert [(d.task, d.model) for d in spec.downstream] == [("wiki_retrieval", "search")]
    assert 1 in spec.compression.bit_widths and 32 in spec.compression.bit_widths


def test_retrieval_options_are_checked_with_their_key():
    import yaml

    from embstab.study.schema import StudyDefinitionError, parse_study

    data = yaml.safe_load((PIPELINES / "retrieval_quick.yaml").read_text(encoding="utf-8"))
    for options, key in (({"k": 0}, "downstream[0].options.k"), ({"limit": 5}, "downstream[0].options.limit"),
                         ({"epochs": 3}, "downstream[0].options.epochs")):
        data["downstream"] = [{"task": "wiki_retrieval", "model": "search", "options": options}]
        with pytest.raises(StudyDefinitionError) as caught:
            parse_study(data, source="r.yaml")
        assert caught.value.key == key
    data["downstream"] = [{"task": "bbc_retrieval", "model": "linear"}]
    with pytest.raises(StudyDefinitionError, match="model 'linear' cannot be used for contextual task 'bbc_retrieval'"):
        parse_study(data, source="r.yaml")


def _quick(**training):
    import yaml

    from embstab.study.schema import parse_study

    data = yaml.safe_load((PIPELINES / "retrieval_quick.yaml").read_text(encoding="utf-8"))
    data["training"].update(training)
    return parse_study(data, source="r.yaml")


def test_smaller_dimensions_of_a_pretrained_model_are_its_leading_ones_from_one_training():
    from embstab.study.plan import study_rows
    from embstab.study.schema import StudyDefinitionError
    from embstab.study.store import config_hash

    spec = _quick(dimensions=[384, 64])
    rows = list(study_rows(spec))
    assert len(rows) == 4 and {r.variant.dim for r in rows} == {384, 64}
    for r in rows:
        pair, anchor = r.config["measures"]["pair"], r.config["measures"]["anchor"]
        assert pair["old"]["dim"] == pair["new"]["dim"] == 384  # the member is trained once, at its hidden size
        assert pair.get("truncate") == (64 if r.variant.dim == 64 else None) and "truncate" not in anchor
    trained = {config_hash(r.config["measures"]["pair"][side]) for r in rows for side in ("old", "new")}
    assert len(trained) == 2
    # the full-width rows keep the names they had before truncation existed
    assert {r.row_id for r in rows if r.variant.dim == 384} == {r.row_id for r in study_rows(_quick())}
    with pytest.raises(StudyDefinitionError, match="512 is more") as caught:
        _quick(dimensions=[512, 384])
    assert caught.value.key == "training.dimensions"


def test_one_bit_features_are_the_sign_codes_of_the_float_vectors():
    """The pair protocol at 1 bit (symmetric clip) keeps each entry's sign only: the old member's
    compressed vectors hold the binary codes of its float vectors, and their binary search (the
    study's at 1 bit) is the float vectors' binary search; cosine search of the ±clip vectors ranks
    by the same Hamming distances, up to ties."""
    from embstab.compress.vectorstore import quantize_embeddings
    from embstab.contextual.compression import compress_features
    from embstab.contextual.retrieval import stored_search
    from embstab.downstream.retrieval import search

    rng = np.random.default_rng(3)
    old = rng.normal(size=(260, 32))
    new = old + 0.3 * rng.normal(size=old.shape)
    old_q, _ = compress_features(old, new, bits=1)
    assert np.unique(np.abs(old_q)).size == 1  # one level each side of zero
    assert np.array_equal(quantize_embeddings(old_q, "ubinary"), quantize_embeddings(old, "ubinary"))
    binary = stored_search(old[:60], old[60:], 10, precision="binary")
    assert np.array_equal(search(old_q[:60], old_q[60:], 10, precision="binary").top_k, binary.top_k)
    unit = old_q / np.linalg.norm(old_q, axis=1, keepdims=True)
    best_cosines = -np.sort(-(unit[:60] @ unit[60:].T), axis=1)[:, :10]
    signs = np.sign(old)
    best_hamming = -np.sort(-(signs[:60] @ signs[60:].T), axis=1)[:, :10] / 32  # 1 - 2 * distance / dim
    assert np.allclose(best_cosines, best_hamming, atol=1e-9)


@pytest.mark.slow  # MiniLM twice over 2 masked-LM steps and 100 wiki_retrieval pairs: about a minute on 2 cores
def test_the_quick_retrieval_study_runs_and_stores_recall_and_flips(tmp_path):
    import yaml

    from embstab.study import parse_study, run_study

    spec = _quick(dimensions=[384, 32])  # 32: each vector's leading 32 dimensions, re-normalised
    run = run_study(spec, tmp_path / "store", tmp_path / "results.sqlite", scheduler="synchronous", progress=False)
    rows = run.results
    assert run.n_failed == 0 and len(rows) == 4 and set(rows["task"]) == {"wiki_retrieval"}
    assert (rows["chance"] == 10.0).all()  # a random ranking's recall@10 of 100 documents
    assert (rows["quality"] > 50).all() and rows["disagreement"].between(0, 100).all()
    assert sorted(zip(rows["dim"], rows["bitrate"], rows["memory"])) == [(32, 1, 32), (32, 32, 1024), (384, 1, 384),
                                                                       (384, 32, 12288)]
    full = rows[(rows["dim"] == 384) & (rows["bitrate"] == 32)]["quality"].item()
    cut = rows[(rows["dim"] == 32) & (rows["bitrate"] == 32)]["quality"].item()
    assert cut < full  # MiniLM was not trained for truncation: its first 32 dimensions find fewer summaries
    from embstab.study import ArtifactStore

    models = [a for a in ArtifactStore(tmp_path / "store").iter_artifacts() if a[0] == "bert"]
    assert len(models) == 2  # one training per member, not per dimension

    # the same members stored as a vector store keeps them (its trainings and sentence vectors reused)
    data = yaml.safe_load((PIPELINES / "retrieval_quick.yaml").read_text(encoding="utf-8"))
    data["training"]["dimensions"] = [384, 32]
    data["compression"] = {"scheme": "vector_store", "bit_widths": [1, 8, 32]}
    data["budgets"] = [384]
    stored = run_study(parse_study(data), tmp_path / "store", tmp_path / "stored.sqlite", scheduler="synchronous",
                       progress=False).results
    assert len(stored) == 6 and (stored["quality"] > 50).all()
    key = ["dim", "bitrate"]
    both = stored.merge(rows, on=key, suffixes=("_store", "_pair"))
    one_bit = both[both["bitrate"] == 1]
    # 1 bit: the old member's sign codes are the same either way (the pair protocol leaves old unrotated)
    assert (one_bit["quality_old_store"] == one_bit["quality_old_pair"]).all()
    int8 = stored[stored["bitrate"] == 8].set_index("dim")["quality_old"]
    float32 = stored[stored["bitrate"] == 32].set_index("dim")["quality_old"]
    assert (abs(int8 - float32) <= 10).all()  # int8 codes find about as many summaries as float32
    assert len([a for a in ArtifactStore(tmp_path / "store").iter_artifacts() if a[0] == "bert"]) == 2

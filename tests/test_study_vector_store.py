"""``compression.scheme: vector_store``: a study stores each member as a vector store keeps it."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from embstab import Embedding
from embstab.compress.vectorstore import STORE_PRECISION_OF_BITS, compress_for_store, quantize_embeddings
from embstab.study import ArtifactStore, parse_study
from embstab.study.plan import study_rows
from embstab.study.schema import StudyDefinitionError
from embstab.study.steps import default_steps, run_compress

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"


def _study(name: str, **compression):
    data = yaml.safe_load((PIPELINES / name).read_text(encoding="utf-8"))
    data["compression"] = {**data["compression"], **compression}
    data.pop("budgets", None)
    return parse_study(data, source="s.yaml")


def test_the_scheme_is_recorded_only_when_asked_for():
    plain, stored = _study("quick.yaml"), _study("quick.yaml", scheme="vector_store", bit_widths=[1, 8, 32])
    assert "scheme" not in plain.to_dict()["compression"]  # older studies keep their fingerprints
    assert stored.to_dict()["compression"]["scheme"] == "vector_store"
    assert all("scheme" not in r.config["measures"]["pair"] for r in study_rows(plain))
    assert all(r.config["measures"]["pair"]["scheme"] == "vector_store" for r in study_rows(stored))


@pytest.mark.parametrize("name, compression, key, message", [
    ("quick.yaml", {"scheme": "vector_store", "bit_widths": [1, 4]}, "compression.bit_widths[1]",
     "a vector store keeps 32 (float32), 8 (int8), 1 (binary) bits per value, not 4"),
    ("quick.yaml", {"scheme": "vector_store", "bit_widths": [8], "transforms": ["hadamard"]},
     "compression.transforms", "no transforms"),
    ("kg_quick.yaml", {"scheme": "vector_store", "bit_widths": [8]}, "compression.scheme",
     "not of a kg study"),
    ("quick.yaml", {"scheme": "vectorstore"}, "compression.scheme", "vector_store"),
])
def test_a_scheme_that_does_not_fit_is_refused_with_its_key(name, compression, key, message):
    with pytest.raises(StudyDefinitionError, match=re.escape(message)) as caught:
        _study(name, **compression)
    assert caught.value.key == key


@pytest.mark.parametrize("bits", sorted(STORE_PRECISION_OF_BITS))
def test_each_member_is_stored_on_its_own_as_the_store_keeps_it(tmp_path, bits):
    rng = np.random.default_rng(bits)
    words = [f"w{i}" for i in range(120)]  # int8 buckets want at least 100 rows
    old, new = (Embedding(words, rng.normal(size=(120, 12)).astype(np.float32)) for _ in range(2))
    store = ArtifactStore(tmp_path)
    store.put_embedding("embedding", "a", old)
    store.put_embedding("embedding", "b", new)
    config = {"bits": bits, "rounding": "nearest", "seed": 0, "scheme": "vector_store", "truncate": 8}
    run_compress(store, default_steps(), "p", config, "a", "b")
    precision = STORE_PRECISION_OF_BITS[bits]
    for side, member in (("pair_old", old), ("pair_new", new)):
        got = store.get_embedding(side, "p")
        cut = Embedding(words, member.vectors[:, :8])
        np.testing.assert_array_equal(got.vectors, compress_for_store(cut, precision).vectors)
        if precision == "int8":  # the member's own buckets: its codes are sentence-transformers' for its rows
            np.testing.assert_array_equal(got.vectors, quantize_embeddings(cut.vectors, "int8").astype(np.float32))

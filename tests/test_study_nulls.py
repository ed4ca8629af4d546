"""Study rows carry each measure's null and signal; databases and stores written before nulls
existed still read, and a resumed study gives their rows nulls without training anything."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest

from embstab.measures import REGISTRY
from embstab.study import ArtifactStore, ResultDB, Steps, parse_study, plan_study, run_study, study_status
from embstab.study.plan import measure_inputs
from embstab.study.steps import measure_pair, nulls_key

MEASURES = ["eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap"]
TINY = {
    "name": "nulls_word",
    "corpus": {"name": "gensim_lee", "fraction": 0.1, "seed": 0},
    "training": {"algorithms": ["w2v_cbow"], "dimensions": [8, 16], "seeds": [1], "epochs": 2, "min_count": 3},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": MEASURES, "top_n": 300, "params": {"knn": {"n_queries": 100}}},
    "downstream": [{"task": "rt_sentiment", "options": {"limit": 300, "epochs": 2}}],
}


def _broken(*args, **kwargs):
    raise AssertionError("a resumed study must not train, compress or run a downstream model again")


#: Only the measures may run: everything upstream must come from the store.
MEASURE_ONLY = dataclasses.replace(Steps(*[_broken] * 6), measure_pair=measure_pair)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("nulls")
    spec = parse_study(TINY)
    run = run_study(spec, root / "store", root / "results.sqlite", progress=False)
    assert run.n_failed == 0, run.failures[["stage", "error"]].to_string()
    return spec, root, run


def _artifacts(root, kind):
    folder = root / "store" / kind
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_rows_carry_null_and_signal_for_every_measure(finished):
    spec, root, run = finished
    df = run.results
    for m in MEASURES:
        assert df[f"{m}_null"].notna().all() and df[f"{m}_signal"].notna().all(), m
        assert str(df[f"{m}_signal"].dtype) == "boolean"
        low, high = REGISTRY[m].range
        assert df[f"{m}_null"].between(low, high).all()
    full = df[df["bitrate"] == 32]
    # no two full-precision rows tie, so k-NN's null is the closed form k / (n - 1) over the 300 words
    assert np.allclose(full["knn_null"], 5 / 299)
    # full-precision pairs of one corpus pair are far from unrelated tables: their EIS shows signal
    assert full["eis_signal"].all() and (full["eis"] < full["eis_null"] / 2).all()
    # the Parquet export and the saved run keep the columns
    exported = pd.read_parquet(run.parquet_path)
    assert exported["eis_signal"].tolist() == df["eis_signal"].tolist()
    # each measures task wrote its nulls as their own artifact, named from the measures key
    inputs = measure_inputs(spec)
    keys = {i.key for i in inputs.values()}
    assert len(_artifacts(root, "nulls")) == 2 * len(keys)  # the value and its sidecar
    store = ArtifactStore(root / "store")
    assert all(store.has_json("measures", k) and store.has_json("nulls", nulls_key(k)) for k in keys)


def test_measure_inputs_are_the_planned_measures_tasks(finished, tmp_path):
    spec, _, _ = finished
    plan = plan_study(spec, ArtifactStore(tmp_path), Steps(*[_broken] * 6))
    planned = {node.args[2] for node in plan.nodes.values() if node.stage == "measures"}
    assert planned == {i.key for i in measure_inputs(spec).values()}


def _as_before_nulls(root, db, drop_column: bool):
    """Make the store and database look as embstab left them before nulls existed."""
    shutil.rmtree(root / "store" / "nulls")
    with sqlite3.connect(db) as conn:
        if drop_column:
            conn.execute("ALTER TABLE results DROP COLUMN nulls")
        else:
            conn.execute("UPDATE results SET nulls = NULL")


def test_an_older_database_reads_and_a_resumed_study_adds_the_nulls(finished, tmp_path):
    spec, root, run = finished
    old = tmp_path / "old"
    shutil.copytree(root, old)
    db = old / "results.sqlite"
    _as_before_nulls(old, db, drop_column=True)
    # read-only (embstab study status) and read-write, without a nulls column: no null columns
    with ResultDB(db, readonly=True) as rdb:
        before = rdb.results()
    assert not [c for c in before.columns if c.endswith(("_null", "_signal"))]
    kept = [c for c in before.columns if c != "row_id"]
    pd.testing.assert_frame_equal(before[kept], run.results[kept])
    summary, _ = study_status(str(db))
    assert int(summary["done"].sum()) == spec.n_rows()
    measures_before = _artifacts(old, "measures")
    embeddings_before = _artifacts(old, "pair_new") + _artifacts(old, "embedding")
    # a resumed run trains nothing (every other step is broken) and gives every row its nulls
    resumed = run_study(spec, old / "store", db, steps=MEASURE_ONLY, progress=False)
    assert resumed.n_new == 0 and resumed.n_failed == 0 and resumed.n_nulls_added == spec.n_rows()
    assert _artifacts(old, "measures") == measures_before  # the stored measures were reused as they are
    assert _artifacts(old, "pair_new") + _artifacts(old, "embedding") == embeddings_before
    pd.testing.assert_frame_equal(resumed.results, run.results)
    # once given, nulls are kept: nothing more to add
    again = run_study(spec, old / "store", db, steps=MEASURE_ONLY, progress=False)
    assert again.n_nulls_added == 0


def test_rows_whose_pairs_left_the_store_keep_no_nulls_and_train_nothing(finished, tmp_path):
    spec, root, run = finished
    old = tmp_path / "old"
    shutil.copytree(root, old)
    db = old / "results.sqlite"
    _as_before_nulls(old, db, drop_column=False)
    shutil.rmtree(old / "store" / "pair_new")
    resumed = run_study(spec, old / "store", db, steps=MEASURE_ONLY, progress=False)
    assert resumed.n_nulls_added == 0 and resumed.n_failed == 0 and len(resumed.results) == spec.n_rows()
    assert not [c for c in resumed.results.columns if c.endswith("_null")]
    pd.testing.assert_frame_equal(resumed.results, run.results.drop(
        columns=[c for c in run.results.columns if c.endswith(("_null", "_signal"))]))


def test_a_database_of_mixed_rows_reads_with_missing_nulls_as_na(finished, tmp_path):
    _, root, run = finished
    db = tmp_path / "mixed.sqlite"
    shutil.copy(root / "results.sqlite", db)
    with sqlite3.connect(db) as conn:
        first = conn.execute("SELECT row_id FROM results LIMIT 1").fetchone()[0]
        conn.execute("UPDATE results SET nulls = NULL WHERE row_id = ?", (first,))
    with ResultDB(db, readonly=True) as rdb:
        df = rdb.results()
        assert rdb.missing_nulls() == [first]
    row = df[df["row_id"] == first].iloc[0]
    assert pd.isna(row["eis_null"]) and pd.isna(row["eis_signal"])
    assert df["eis_signal"].notna().sum() == len(df) - 1


def test_measure_pair_gives_nulls_only_when_asked():
    spec = parse_study(TINY)
    assert spec.measures.names == tuple(MEASURES)
    from embstab import Embedding

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(200)]
    x = rng.normal(size=(200, 6))
    a, b = Embedding(words, x), Embedding(words, x + 0.2 * rng.normal(size=(200, 6)))
    cfg = {"names": ["eis", "knn"], "top_n": 200, "params": {}}
    plain = measure_pair(a, b, a, b, cfg)
    assert "nulls" not in plain
    withnull = measure_pair(a, b, a, b, {**cfg, "null": {"samples": 3, "seed": 0, "method": "auto"}})
    assert {k: v for k, v in withnull.items() if k != "nulls"} == plain
    assert set(withnull["nulls"]) == {"eis", "knn"}
    assert withnull["nulls"]["knn"]["method"] == "closed form"
    assert withnull["nulls"]["knn"]["value"] == pytest.approx(5 / 199)

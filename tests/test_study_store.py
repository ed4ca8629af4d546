"""Artifact store and results database: content addressing, atomic writes, concurrent writers."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import sqlite3

import numpy as np
import pandas as pd
import pytest

from embstab import Embedding
from embstab.study import ArtifactStore, ResultDB, config_hash
from embstab._fs import atomic_write, is_temp_name, temp_path_for


def _emb(seed: int = 0, n: int = 50, d: int = 8) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, d)), np.arange(n, 0, -1),
                     metadata={"clip": np.float32(1.5), "dims": (1, 2)})


def test_config_hash_is_canonical():
    a = {"stage": "train", "dim": 25, "corpus": {"name": "x", "seed": 0}, "dims": (1, 2)}
    b = {"corpus": {"seed": 0, "name": "x"}, "dims": [1, 2], "dim": 25, "stage": "train"}
    assert config_hash(a) == config_hash(b)
    assert config_hash({**a, "dim": 50}) != config_hash(a)
    assert len(config_hash(a)) == 64
    assert config_hash({"x": np.int64(3)}) == config_hash({"x": 3})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        config_hash({"x": object()})


@pytest.mark.parametrize("url", ["local", "memory://embstab-test-store"])
def test_round_trips(tmp_path, url):
    store = ArtifactStore(tmp_path / "s" if url == "local" else url)
    assert store.is_local == (url == "local")
    emb = _emb()
    key = config_hash({"k": 1})
    assert not store.has_embedding("embedding", key)
    store.put_embedding("embedding", key, emb, config={"k": 1})
    back = store.get_embedding("embedding", key)
    assert back.words == emb.words
    np.testing.assert_array_equal(back.vectors, emb.vectors)
    np.testing.assert_array_equal(back.counts, emb.counts)
    assert back.metadata == {"clip": 1.5, "dims": [1, 2]}
    # quantized matrices (few distinct values) are stored deflated
    coarse = _emb(1, n=2000, d=50)
    coarse = coarse.with_vectors(np.sign(coarse.vectors))
    store.put_embedding("pair_new", key, coarse)
    assert len(store.get_bytes("pair_new", key, "npz")) < coarse.vectors.nbytes / 4
    np.testing.assert_array_equal(store.get_embedding("pair_new", key).vectors, coarse.vectors)
    docs = [["a", "b", "c"], ["d"], ["é", "ü"]]
    store.put_docs("corpus_old", key, docs)
    assert store.get_docs("corpus_old", key) == docs
    store.put_json("measures", key, {"eis": 0.25})
    assert store.get_json("measures", key) == {"eis": 0.25}
    # the configuration sidecar records what produced the artifact
    assert store.get_bytes("embedding", key, "json") == b'{"k":1}'
    kinds = sorted(k for k, _, _ in store.iter_artifacts())
    assert kinds == ["corpus_old", "embedding", "measures", "pair_new"]
    assert store.temp_files() == []
    if url != "local":
        store.fs.rm(store.root, recursive=True)


def test_leftover_temp_file_is_never_an_artifact(tmp_path):
    store = ArtifactStore(tmp_path)
    key = config_hash({"k": 2})
    final = store.path("embedding", key, "npz")
    os.makedirs(os.path.dirname(final))
    # what a writer killed mid-write leaves behind: a truncated temporary file
    # (named exactly as atomic_write names its temporary file)
    with open(temp_path_for(final, "dead"), "wb") as fh:
        fh.write(b"PK\x03\x04 truncated")
    assert not store.has_embedding("embedding", key)
    assert list(store.iter_artifacts()) == []
    assert len(store.temp_files()) == 1
    assert store.clean_temp(older_than=3600) == 0  # too young: another writer may own it
    assert store.clean_temp(older_than=0) == 1
    assert store.temp_files() == []


def _writer(root: str, key: str, payloads: list[bytes], rounds: int) -> int:
    store = ArtifactStore(root)
    for i in range(rounds):
        store.put_bytes("blob", key, "bin", payloads[i % len(payloads)])
    return rounds


def test_concurrent_writers_never_expose_partial_artifacts(tmp_path):
    """Two worker processes finishing the same artifacts at once: every read sees a whole one."""
    # the same configuration always gives the same bytes, but use several keys so renames race
    payloads = [bytes([i]) * (2**20) + hashlib.sha256(bytes([i])).digest() for i in range(2)]
    keys = [config_hash({"blob": i}) for i in range(3)]
    store = ArtifactStore(tmp_path)
    digests = {hashlib.sha256(p).hexdigest() for p in payloads}
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        jobs = [pool.apply_async(_writer, (str(tmp_path), k, payloads, 15)) for k in keys for _ in range(2)]
        reads = 0
        while not all(j.ready() for j in jobs):
            for k in keys:
                if store.exists("blob", k, "bin"):
                    data = store.get_bytes("blob", k, "bin")
                    assert hashlib.sha256(data).hexdigest() in digests
                    reads += 1
        assert sum(j.get() for j in jobs) == 15 * 6
    assert reads > 0
    for k in keys:
        assert hashlib.sha256(store.get_bytes("blob", k, "bin")).hexdigest() in digests
    assert store.temp_files() == []


def _row(i: int) -> dict:
    return {"algo": "w2v_cbow", "seed": i % 2, "dim": 25, "bitrate": 1 + i, "memory": 25 * (1 + i),
            "task": "rt_sentiment", "model": "linear", "disagreement": 1.5 * i, "quality": 70.0,
            "quality_old": 71.0, "measures": {"eis": 0.1 * i, "knn": np.float64(0.5)}, "extra": {"n_test": 9}}


def test_results_db_round_trip_and_wal(tmp_path):
    with ResultDB(tmp_path / "r.sqlite") as db:
        assert db.journal_mode == "wal"
        assert db.add_result("a", _row(1))
        assert not db.add_result("a", _row(2))  # already stored: left unchanged
        db.add_failure("b", "train", "ValueError: boom", "tb")
        db.add_failure("b", "train", "ValueError: boom again", "tb")
        assert db.failures()["attempts"].tolist() == [2]
        assert db.add_result("b", _row(3))
        assert db.failures().empty  # success clears the failure
        df = db.results()
        assert df.columns.tolist()[:11] == ["row_id", "algo", "seed", "dim", "bitrate", "memory", "task", "model",
                                            "disagreement", "quality", "quality_old"]
        assert df["eis"].tolist() == pytest.approx([0.1, 0.3])
        assert df["bitrate"].dtype == np.int64
        out = db.export_parquet(tmp_path / "r.parquet", ["a"])
        back = pd.read_parquet(tmp_path / "r.parquet")
        assert len(back) == 1 and back["disagreement"].iloc[0] == 1.5
        pd.testing.assert_frame_equal(back, out.reset_index(drop=True), check_dtype=False)
    assert sqlite3.connect(tmp_path / "r.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _insert_all(path: str, n: int) -> int:
    with ResultDB(path) as db:
        return sum(db.add_result(f"row{i}", _row(i)) for i in range(n))


def test_two_processes_inserting_the_same_rows_store_each_once(tmp_path):
    path = str(tmp_path / "r.sqlite")
    ResultDB(path).close()
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        inserted = pool.starmap(_insert_all, [(path, 60), (path, 60)])
    assert sum(inserted) == 60  # each row stored by exactly one of the two writers
    with ResultDB(path) as db:
        df = db.results()
    assert len(df) == 60 and df["row_id"].is_unique


def _open_and_close(path: str) -> str:
    try:
        ResultDB(path).close()
    except Exception as exc:  # returned, not raised, so every opener's outcome is seen
        return f"{type(exc).__name__}: {exc}"
    return ""


def test_runners_opening_one_new_database_at_once_all_succeed(tmp_path):
    """Creating the tables, adding the newer columns and switching to WAL race when several runners
    open a database no one has opened yet; each opener must get a usable database."""
    ctx = mp.get_context("fork")
    paths = [str(tmp_path / f"r{i}.sqlite") for i in range(12)]
    with ctx.Pool(6) as pool:
        errors = [e for path in paths for e in pool.map(_open_and_close, [path] * 6) if e]
    assert errors == []
    with ResultDB(paths[0]) as db:
        assert db.journal_mode == "wal"


def test_atomic_write_temp_files_are_what_the_store_skips(tmp_path):
    """The temp file a writer leaves when killed mid-write is the one the store skips and sweeps."""
    store = ArtifactStore(tmp_path)
    key = config_hash({"k": 3})
    final = store.path("measures", key, "result.json")
    os.makedirs(os.path.dirname(final))
    with atomic_write(final) as fh:
        fh.write(b"{")
        # a SIGKILL here leaves exactly this file behind
        (leftover,) = [n for n in os.listdir(os.path.dirname(final))]
        assert is_temp_name(leftover)
        assert list(store.iter_artifacts()) == []
        assert len(store.temp_files()) == 1

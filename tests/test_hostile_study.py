"""Hostile conditions around the study machinery and the shared persistence layer."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

import embstab
from embstab._fs import OutputClashError, atomic_write, check_outputs, json_safe, to_json
from embstab.io.arrays import npz_bytes
from embstab.study.store import ArtifactStore, CorruptArtifactError, config_hash


def _emb():
    rng = np.random.default_rng(3)
    return embstab.Embedding(["a", "b", "c"], rng.normal(size=(3, 4)), counts=np.array([5, 3, 1]), name="e",
                             metadata={"bits": np.int64(4), "clip": 0.5, "live": object(), "nested": {"x": (1, 2)}})


def test_corrupt_artifact_names_itself_and_is_recomputable(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    path = store.put_embedding("emb", "ab" * 32, _emb(), {"k": 1})
    with open(path, "r+b") as fh:  # a damaged disk block in the middle of the archive
        fh.seek(40)
        fh.write(b"\x00" * 64)
    with pytest.raises(CorruptArtifactError) as info:
        store.get_embedding("emb", "ab" * 32)
    message = str(info.value)
    assert path in message and "--recompute" in message and "delete it" in message
    assert store.remove_corrupt() == [path]
    assert not store.has_embedding("emb", "ab" * 32)
    assert store.remove_corrupt() == []


def test_store_and_files_share_one_npz_codec(tmp_path):
    emb = _emb()
    store = ArtifactStore(tmp_path / "store")
    path = store.put_embedding("emb", "cd" * 32, emb)
    with open(path, "rb") as fh:
        assert fh.read() == npz_bytes(emb)
    embstab.save(emb, tmp_path / "e.npz")
    for loaded in (embstab.load(path), embstab.load(tmp_path / "e.npz"), store.get_embedding("emb", "cd" * 32)):
        assert loaded.words == emb.words and loaded.name == "e"
        np.testing.assert_array_equal(loaded.vectors, emb.vectors)
        np.testing.assert_array_equal(loaded.counts, emb.counts)
        assert loaded.metadata == {"bits": 4, "clip": 0.5, "nested": {"x": [1, 2]}}  # the live object is dropped


def test_one_json_encoding_keeps_config_hashes_stable():
    config = {"b": (1, 2), "a": {"z": np.float64(0.25), "y": {"s", "r"}}, "n": np.int32(7)}
    text = '{"a":{"y":["r","s"],"z":0.25},"b":[1,2],"n":7}'
    assert to_json(config) == text
    assert config_hash(config) == hashlib.sha256(text.encode()).hexdigest()
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        to_json({"f": print})
    assert json_safe({"ok": 1, "bad": print, "sub": {"bad": print, "ok": "x"}}) == {"ok": 1, "sub": {"ok": "x"}}


def test_atomic_write_keeps_symlinks_modes_and_old_content_on_failure(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.txt"
    os.symlink(target, link)
    with atomic_write(link, "w") as fh:
        fh.write("new")
    assert os.path.islink(link) and target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o640
    with pytest.raises(RuntimeError):
        with atomic_write(target, "w") as fh:
            fh.write("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["link.txt", "real.txt"]
    with pytest.raises(IsADirectoryError):
        with atomic_write(tmp_path, "w"):
            pass


def test_check_outputs_sees_through_links(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("x")
    os.link(src, tmp_path / "hard.txt")
    with pytest.raises(OutputClashError, match="OUT .* same file as the input IN"):
        check_outputs([("OUT", tmp_path / "hard.txt")], [("IN", src)])
    with pytest.raises(OutputClashError, match="same file"):
        check_outputs([("-o", tmp_path / "x"), ("-o", tmp_path / "sub" / ".." / "x")])
    check_outputs([("OUT", "/dev/null")], [("IN", src)])  # special files are written into, never replaced
    check_outputs([("OUT", tmp_path / "new.txt")], [("IN", src), ("--corpus", "gensim_lee")])


def test_a_corrupt_database_is_refused_before_any_folder_is_made(tmp_path, capsys):
    from embstab.cli import main

    bad = tmp_path / "bad.sqlite"
    bad.write_text("garbage, not SQLite")
    assert main(["study", "--quick", "--db", str(bad), "--store", str(tmp_path / "store"), "--no-report"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a readable results database" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.sqlite"]  # no empty store left behind

"""Readers other than ``.esq`` that a hostile file could stall or crash: triples files and a model
folder's ``embstab.json`` record."""

from __future__ import annotations

import json
import os
import signal

import pytest

from embstab._resources import read_regular_file, regular_file_size
from embstab.errors import DataFormatError
from embstab.kg import read_triples


@pytest.fixture
def alarm():
    """Fail instead of hanging if a read blocks (a FIFO opened the ordinary way waits for a writer)."""
    def hung(signum, frame):
        raise AssertionError("the read blocked")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_triples_from_a_device_or_a_pipe_are_refused_in_one_line(tmp_path, alarm):
    fifo = tmp_path / "train.txt"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "character device"), (str(fifo), "pipe")):
        with pytest.raises(DataFormatError) as err:
            read_triples(path)  # /dev/zero used to be read until memory ran out
        message = str(err.value)
        assert message.startswith(f"{path}: is a {kind}") and "triples file" in message and "\n" not in message


def test_a_regular_triples_file_still_reads(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("a\tr\tb\nb\tr\tc\n", encoding="utf-8")
    assert read_triples(path) == [("a", "r", "b"), ("b", "r", "c")]
    assert regular_file_size(path) == 12 and read_regular_file(path) == path.read_bytes()


def test_a_directory_is_still_an_os_error(tmp_path):
    with pytest.raises(IsADirectoryError):
        read_regular_file(tmp_path)


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    pytest.importorskip("transformers")
    from embstab.contextual import build_model, train_wordpiece

    tokenizer = train_wordpiece([["the", "cat", "sat", "on", "a", "mat"]] * 5, vocab_size=60)
    folder = tmp_path_factory.mktemp("model") / "m"
    build_model("tiny", tokenizer, 0, max_length=16).save(folder)
    return folder


@pytest.mark.parametrize("key, value, kind", [("metadata", [1, 2, 3], "list"), ("metadata", "x", "str"),
                                              ("name", {"a": 1}, "dict")])
def test_an_embstab_record_of_the_wrong_shape_is_refused_naming_file_and_key(model_folder, key, value, kind):
    from embstab.contextual import load_model_dir

    record = model_folder / "embstab.json"
    good = json.loads(record.read_text(encoding="utf-8"))
    try:
        record.write_text(json.dumps({**good, key: value}), encoding="utf-8")
        with pytest.raises(DataFormatError) as err:
            load_model_dir(model_folder)
        message = str(err.value)
        assert message.startswith(f"{record}: key {key!r} must be") and kind in message and "\n" not in message
    finally:
        record.write_text(json.dumps(good), encoding="utf-8")
    assert load_model_dir(model_folder).metadata["path"] == str(model_folder)

"""CLI: `embstab kg train`, `embstab kg downstream`, `embstab compare` on KG entity embeddings."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("pykeen")

import embstab.cli as cli  # noqa: E402
from embstab import load  # noqa: E402


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("kg")
    base = ["kg", "train", "--graph", "nations", "--dim", "6", "--epochs", "2", "--no-progress"]
    assert cli.main(base + ["-o", str(root / "old")]) == 0
    assert cli.main(base + ["--version", "remove", "--share", "0.1", "-o", str(root / "new")]) == 0
    return root / "old", root / "new"


def test_train_writes_a_model_folder(folders, capsys):
    old, new = folders
    cfg = json.loads((new / "config.json").read_text())
    assert cfg["graph"] == "nations-0.1" and cfg["dim"] == 6 and len(cfg["losses"]) == 2
    emb = load(old / "entities.npz")
    assert emb.shape == (14, 6) and not np.array_equal(emb.vectors, load(new / "entities.npz").vectors)
    assert cli.main(["compare", str(old / "entities.npz"), str(new / "entities.npz"), "--top-n", "14"]) == 0
    assert "eis" in capsys.readouterr().out


def test_downstream_link_prediction_and_classification(folders, capsys):
    old, new = folders
    assert cli.main(["kg", "downstream", str(old), str(new), "--graph", "nations", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["task"] == "link_prediction" and doc["n_queries"] == 402 and 0 <= doc["disagreement"] <= 100
    assert cli.main(["kg", "downstream", str(old), str(old), "--graph", "nations", "--bits", "2",
                     "--task", "triple_classification"]) == 0
    out = capsys.readouterr().out
    assert "quantized to 2 bits" in out and "disagreement: 0.00% of decisions differ" in out
    assert "(majority class: 50.00%:" in out  # each test triple beside one corrupted copy
    assert cli.main(["kg", "downstream", str(old), str(new), "--graph", "nations"]) == 0
    chance = re.search(r"random ranking: MRR (0\.\d+)", capsys.readouterr().out)
    assert chance and 0 < float(chance.group(1)) < 1


def test_bad_input_is_one_line(folders, capsys):
    old, _ = folders
    assert cli.main(["kg", "downstream", str(old), str(old), "--graph", "umls"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not those of graph 'umls'" in err
    assert cli.main(["kg", "train", "--graph", "nations", "--model", "TransX", "-o", str(old.parent / "x")]) == 2
    assert "unknown knowledge-graph model 'TransX'" in capsys.readouterr().err
    assert cli.main(["kg", "train", "--graph", "umsl", "-o", str(old.parent / "x")]) == 2
    assert "did you mean 'umls'" in capsys.readouterr().err
    assert cli.main(["kg", "--help"]) == 0
    assert "embstab kg downstream umls_old umls_new --graph umls" in capsys.readouterr().out


def test_downstream_command_takes_kg_tasks_through_the_same_path(folders, capsys):
    old, new = folders
    assert cli.main(["downstream", str(old), str(new), "--task", "link_prediction:nations", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert cli.main(["kg", "downstream", str(old), str(new), "--graph", "nations", "--output", "json"]) == 0
    alias = json.loads(capsys.readouterr().out)
    assert doc == alias  # `embstab kg downstream` is an alias of the one path
    assert doc["task"] == "link_prediction" and doc["n_queries"] == 402 and doc["bits"] is None
    assert 0 < doc["mrr_old"] <= 1 and 0 <= doc["top_k_overlap"] <= 1
    assert cli.main(["downstream", str(old), str(new), "--task", "triple_classification:nations",
                     "--bits", "4", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "quantized to 4 bits" in out and "of decisions differ" in out and "smaller than float32" in out


def test_downstream_command_reports_quantized_memory(folders, capsys):
    old, new = folders
    assert cli.main(["downstream", str(old), str(new), "--task", "link_prediction:nations", "--bits", "2",
                     "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # 14 entities + 55 relations, 6 dims at 2 bits, one float32 clip per table
    assert doc["bits"] == 2 and doc["memory_bits_old"] == pytest.approx((14 + 55) * 6 * 2 + 2 * 32)
    assert doc["compression_ratio"] > 10


@pytest.mark.parametrize("extra, message", [
    (["--task", "link_prediction:no_such_graph"], "unknown"),
    (["--task", "link_prediction:umls"], "not those of graph 'umls'"),
    (["--task", "link_prediction"], "needs the graph the models embed: link_prediction:GRAPH"),
    (["--task", "link_prediction:"], "names no graph"),
    (["--task", "node_prediction:umls"], "unknown knowledge-graph task 'node_prediction'"),
    (["--task", "sentiment"], "unknown task 'sentiment'"),
    (["--task", "link_prediction:nations", "--model", "linear"], "--model applies to word-embedding tasks"),
    (["--task", "link_prediction:nations", "--limit", "5"], "--limit applies to word-embedding tasks"),
    (["--task", "rt_sentiment"], "is a KG model folder: use --task link_prediction:GRAPH"),
    (["--task", "rt_sentiment", "--bits", "4"], "--bits applies to KG tasks"),
])
def test_downstream_kg_errors_are_one_line(folders, capsys, extra, message):
    old, new = folders
    assert cli.main(["downstream", str(old), str(new), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err


def test_downstream_kg_needs_two_model_folders(folders, tmp_path, capsys):
    old, _ = folders
    assert cli.main(["downstream", str(old), "--task", "link_prediction:nations", "--seed-baseline"]) == 2
    assert "--seed-baseline applies to word-embedding tasks" in capsys.readouterr().err
    assert cli.main(["downstream", str(old), "--task", "link_prediction:nations"]) == 2
    assert "give OLD and NEW" in capsys.readouterr().err
    assert cli.main(["downstream", str(old), str(old / "entities.npz"), "--task", "link_prediction:nations"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a KG model folder" in err and "it is a file" in err
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    assert cli.main(["downstream", str(old), str(tmp_path / "half"), "--task", "link_prediction:nations"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks entities.npz, relations.npz, model.safetensors" in err

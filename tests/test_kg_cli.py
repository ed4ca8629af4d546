"""CLI: `embstab kg train`, `embstab kg downstream`, `embstab compare` on KG entity embeddings."""

from __future__ import annotations

import json

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

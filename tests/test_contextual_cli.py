"""``embstab contextual``: pretrain a pair, extract word-type files that `embstab compare` reads, disagreement."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from embstab.cli import main  # noqa: E402
from embstab.io import load  # noqa: E402


def test_pretrain_features_compare_and_disagreement(tmp_path, capsys):
    out = tmp_path / "bert"
    assert main(["contextual", "pretrain", "--corpus", "gensim_lee", "--steps", "3", "--batch-size", "4",
                 "--vocab-size", "1500", "--max-length", "64", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "held-out loss" in printed and "perplexity" in printed
    summary = json.loads((out / "pretrain.json").read_text())
    assert set(summary["models"]) == {"a", "b", "baseline"}
    assert summary["models"]["a"]["steps"] == 3 and summary["pair"]["documents_a"] < 300
    for label in ("a", "b"):
        assert main(["contextual", "features", str(out / label), "--corpus", "gensim_lee", "--max-docs", "40",
                     "--min-count", "3", "--out", str(tmp_path / f"{label}.txt")]) == 0
    a, b = load(tmp_path / "a.txt"), load(tmp_path / "b.txt")
    assert a.dim == 128 and a.words == b.words and len(a) > 50  # same text, same tokenizer: same words
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--top-n", "0",
                 "--measures", "knn", "semantic_displacement", "--output", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n_words"] == len(a)
    assert {r["measure"] for r in report["measures"]} == {"knn", "semantic_displacement"}
    assert all(r["distance"] > 0 for r in report["measures"])  # two corpus versions: not the same model
    assert main(["contextual", "disagreement", str(out / "a"), "--quantize-new", "fp4_e2m1", "--limit", "200",
                 "--epochs", "5", "--output", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n_test"] == 20 and 0.0 <= res["disagreement"] <= 100.0 and res["model_new"].endswith("@fp4_e2m1")
    # brown_pos: the bilstm tagger on each model's frozen per-word features
    assert main(["contextual", "disagreement", str(out / "a"), str(out / "b"), "--task", "brown_pos", "--limit", "30",
                 "--epochs", "1", "--subword", "mean"]) == 0
    printed = capsys.readouterr().out
    assert "tagger bilstm on frozen layer -1 word features (mean pieces)" in printed and "test tokens" in printed
    assert "% of predictions differ" in printed and "majority class" not in printed
    assert main(["contextual", "disagreement", str(out / "a"), str(out / "b"), "--task", "brown_pos",
                 "--classifier", "linear", "--limit", "30"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'linear' is a classifier; tagging uses bilstm, bilstm_crf" in err


@pytest.mark.parametrize("argv,message", [
    (["contextual", "features", "builtin:minilm_l7", "--corpus", "gensim_lee", "--out", "x.txt"],
     "unknown contextual model 'minilm_l7' (did you mean 'minilm_l6'?)"),
    (["contextual", "features", "runs/none", "--corpus", "gensim_lee", "--out", "x.txt"],
     "model folder runs/none does not exist"),
    (["contextual", "pretrain", "--size", "huge", "--out", "o"], "unknown model size 'huge'"),
    (["contextual", "disagreement", "builtin:minilm_l6"], "give a new model NEW, or one of"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_text_files_with_empty_lines_or_no_known_word(tmp_path, capsys):
    model = tmp_path / "m"
    from _contextual import tiny_model

    tiny_model(0).save(model)
    empty = tmp_path / "empty.txt"
    empty.write_text("the government said\n\nmore text here\n")
    assert main(["contextual", "features", str(model), "--text", str(empty), "--out", str(tmp_path / "e.txt")]) == 2
    assert "empty.txt, line 2: empty line" in capsys.readouterr().err
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("αβγ δεζ\nηθι κλμ\n")
    assert main(["contextual", "features", str(model), "--text", str(foreign), "--out", str(tmp_path / "f.txt")]) == 2
    assert "knows none of the 4 candidate words" in capsys.readouterr().err
    assert not (tmp_path / "f.txt").exists()


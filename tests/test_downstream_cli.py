"""CLI: `embstab data`, `embstab train`, `embstab downstream`, end to end on offline real data."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import embstab.cli as cli
from embstab import Embedding, load
from embstab.data.registry import DATASETS
from embstab.data.sources import SOURCES, source_path


def _rt_available() -> bool:
    return source_path(SOURCES[DATASETS["rt_sentiment"].source]) is not None


def test_data_list_and_path(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path))
    assert cli.main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert f"cache directory: {tmp_path}" in out and "gensim_lee" in out and "conll2003" in out
    assert cli.main(["data", "list", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {d["name"] for d in doc["offline"]} == set(DATASETS)
    assert cli.main(["data", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path)


def test_train_from_a_text_file(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    corpus.write_text("\n".join(" ".join(rng.choice(["red", "green", "blue", "cat", "dog", "runs"], 12))
                                for _ in range(200)))
    out = tmp_path / "emb.txt"
    assert cli.main(["train", "--corpus", str(corpus), "-o", str(out), "--dim", "6", "--epochs", "2",
                     "--no-progress"]) == 0
    assert "6 words x 6 dims" in capsys.readouterr().err  # the summary on stderr: OUT may be /dev/stdout
    emb = load(out)
    assert sorted(emb.words) == ["blue", "cat", "dog", "green", "red", "runs"]


def test_train_argument_errors(tmp_path, capsys):
    assert cli.main(["train", "--corpus", "gensim_lee", "--pair", "leave_out", "-o", str(tmp_path / "a.txt")]) == 2
    assert "give 2 output path" in capsys.readouterr().err
    assert cli.main(["train", "--corpus", "no_such_corpus", "-o", str(tmp_path / "a.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown corpus 'no_such_corpus'" in err


def test_downstream_needs_two_embeddings_or_baseline(tmp_path, capsys):
    assert cli.main(["downstream", str(tmp_path / "a.txt")]) == 2
    assert "give two embeddings" in capsys.readouterr().err


@pytest.mark.skipif(not _rt_available(), reason="run `embstab data fetch rt_sentiment`")
def test_end_to_end_corpus_pair_to_disagreement(tmp_path, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    assert cli.main(["train", "--algo", "w2v_cbow", "--corpus", "gensim_lee", "--pair", "leave_out",
                     "--fraction", "0.1", "-o", str(a), str(b), "--dim", "20", "--epochs", "3",
                     "--min-count", "2", "--seed", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().err  # (the summary goes to stderr)
    assert printed.count("tokens/s") == 2 and "270 documents" in printed
    ea, eb = load(a), load(b)
    assert ea.dim == eb.dim == 20 and ea.words != eb.words
    assert cli.main(["downstream", str(a), str(b), "--task", "rt_sentiment", "--model", "linear", "--seed", "1",
                     "--limit", "2000", "--epochs", "20", "--lr", "0.01", "--output", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["task"] == "rt_sentiment" and res["model"] == "linear" and res["n_test"] == 200
    assert 0.0 < res["disagreement"] < 60.0
    assert 30.0 < res["quality_old"] <= 100.0
    assert cli.main(["downstream", str(a), "--seed-baseline", "--task", "rt_sentiment", "--limit", "2000",
                     "--epochs", "5"]) == 0
    text = capsys.readouterr().out
    assert "seeds 0/1000" in text and "majority class" in text


@pytest.mark.skipif(not _rt_available(), reason="run `embstab data fetch rt_sentiment`")
def test_downstream_trains_the_task_model_under_a_recipe(tmp_path, capsys):
    rng = np.random.default_rng(0)
    from embstab.downstream import load_task

    words = sorted({w for sent in load_task("rt_sentiment", limit=300).train_x for w in sent})
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    Embedding(words, rng.normal(size=(len(words), 8)).astype(np.float32)).save(a)
    Embedding(words, rng.normal(size=(len(words), 8)).astype(np.float32)).save(b)
    args = ["downstream", str(a), str(b), "--task", "rt_sentiment", "--limit", "300", "--epochs", "2",
            "--output", "json"]
    assert cli.main([*args, "--recipe", "bf16-kahan"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["recipe"] == "bf16-kahan"
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["recipe"] == "fp32"
    assert cli.main([*args, "--recipe", "bf17"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert cli.main(["downstream", str(a), str(b), "--task", "link_prediction:nations", "--recipe", "swalp"]) == 2
    assert "--recipe applies to word-embedding tasks" in capsys.readouterr().err


def test_train_to_stdout_writes_only_the_embedding(tmp_path):
    # the summary line must not land in the embedding when OUT is /dev/stdout
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    corpus.write_text("\n".join(" ".join(rng.choice(["red", "green", "blue", "cat", "dog", "runs"], 12))
                                for _ in range(200)))
    done = subprocess.run([sys.executable, "-m", "embstab", "train", "--corpus", str(corpus), "-o", "/dev/stdout",
                           "--dim", "4", "--epochs", "1", "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "6 4" and len(lines) == 7
    assert "6 words x 4 dims" in done.stderr


def test_a_model_near_chance_is_said_on_stderr(capsys):
    from embstab.cli.downstream import _warn_near_chance

    _warn_near_chance(52.0, 80.0, 50.0)
    err = capsys.readouterr().err
    assert "the old model scores within 5 points of chance (50.00%)" in err and "new" not in err.split("(")[0]
    _warn_near_chance(80.0, 80.0, 50.0)
    _warn_near_chance(50.0, 50.0, None)  # unknown chance: nothing to compare with
    assert capsys.readouterr().err == ""

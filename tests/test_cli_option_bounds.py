"""Out-of-range numeric options end in argparse's one-line error naming the flag, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from embstab.cli import main

HERE = Path(__file__).parent
GRAPH = "data/graphs/smalltree.edges"


@pytest.mark.parametrize("argv, flag", [
    (["recipes", "check", "adasum", "--seed", str(10**23)], "--seed"),
    (["recipes", "check", "adasum", "--seed", "-1"], "--seed"),
    (["hyperbolic", "embed", GRAPH, "-o", "unused.txt", "--method", "sgd", "--seed", "-1"], "--seed"),
    (["hyperbolic", "embed", GRAPH, "-o", "unused.txt", "--method", "sgd", "--epochs", "0"], "--epochs"),
    (["hyperbolic", "embed", GRAPH, "-o", "unused.txt", "--method", "sgd", "--lr", "-0.5"], "--lr"),
    (["hyperbolic", "embed", GRAPH, "-o", "unused.txt", "--method", "sgd", "--batch-size", "0"], "--batch-size"),
    (["hyperbolic", "eval", GRAPH, "unused.txt", "--rows", "0"], "--rows"),
    (["hyperbolic", "eval", GRAPH, "unused.txt", "--seed", str(2**32)], "--seed"),
])
def test_bad_number_is_one_line_naming_the_flag(argv, flag, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [str(HERE / GRAPH) if a == GRAPH else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 2 and f"argument {flag}" in err[-1] and "Traceback" not in "".join(err)
    assert not (tmp_path / "unused.txt").exists()


@pytest.mark.parametrize("argv, message", [
    (["hyperbolic", "embed", GRAPH, "-o", "unused.txt", "--method", "hmds", "--eps", "0.01"],
     "--eps applies to --method comb, not to --method hmds"),
    (["hyperbolic", "embed", GRAPH, "-o", "unused.txt", "--lr", "0.5"], "--lr applies to --method sgd"),
    (["hyperbolic", "embed", GRAPH, "-o", "unused.txt", "--method", "sgd", "--pga"], "--pga applies to --method hmds"),
    (["train", "--corpus", "gensim_lee", "--fraction", "0.2", "-o", "unused.txt"], "--fraction applies to a corpus pair"),
    (["kg", "train", "--graph", "nations", "--share", "0.1", "-o", "unused"], "--share and --pair-seed apply to a graph"),
])
def test_an_option_that_would_be_ignored_is_refused(argv, message, capsys, tmp_path, monkeypatch):
    # given for another method (or without the option it qualifies), it used to change nothing
    monkeypatch.chdir(tmp_path)
    argv = [str(HERE / GRAPH) if a == GRAPH else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "unused.txt").exists() and not (tmp_path / "unused").exists()

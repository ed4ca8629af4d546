"""Out-of-range numeric options end in argparse's one-line error naming the flag, never a traceback."""

from __future__ import annotations

import argparse
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


@pytest.mark.parametrize("argv, prog", [
    (["compare", "a.txt", "b.txt", "-o", "x.json"], "embstab compare"),
    (["recipes", "check", "swalp", "--zz"], "embstab recipes check"),
    (["kg", "graphs", "--zz"], "embstab kg graphs"),
])
def test_an_unknown_option_points_at_its_commands_help(argv, prog, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{prog}: error: unrecognized arguments:")
    assert err[0].endswith(f"(see `{prog} --help`)")


def test_every_progress_option_reads_no_progress_too():
    # the README's promise: --quiet, also spelt --no-progress, on every command that shows progress
    from embstab.cli import build_parser

    def walk(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from walk(sub)
        yield parser

    with_quiet = [p for p in walk(build_parser()) if "--quiet" in p._option_string_actions]
    assert len(with_quiet) >= 10
    assert all("--no-progress" in p._option_string_actions for p in with_quiet), \
        [p.prog for p in with_quiet if "--no-progress" not in p._option_string_actions]


def test_kg_train_no_clobber_keeps_an_existing_model_folder(tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert main(["kg", "train", "--graph", "nations", "--epochs", "1", "-o", str(folder), "--no-clobber",
                 "--quiet"]) == 2
    assert "--no-clobber refuses to write into it" in capsys.readouterr().err
    assert (folder / "config.json").read_text() == "{}"

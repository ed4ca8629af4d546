"""The command line starts light and reports progress by one rule.

Every ``--help`` (the root and each sub-command, nested ones included) answers without importing
the heavy libraries; the name lists the parser offers as choices equal the registries they copy;
progress bars show on a terminal's stderr, never on stdout, and ``--progress`` / ``--quiet``
override that default.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import fcntl
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

import embstab.cli as cli
from embstab.cli import names
from embstab.cli.options import show_progress, threads_or_all

from _graphs import graph_path

ROOT = Path(__file__).resolve().parents[1]

#: Libraries a ``--help`` must not import (numpy is embstab's one unavoidable import).
HEAVY = ("torch", "transformers", "pykeen", "dask", "gensim", "sklearn", "scipy", "pandas", "matplotlib")

#: Runs ``--help`` of every parser of the real tree in one process, noting what each one imported.
WALK = r"""
import argparse, contextlib, io, json, sys
from embstab.cli import build_parser, main

def walk(parser, path=()):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, path + (name,))

heavy = set(sys.argv[1:])
report = []
for path in walk(build_parser()):
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        code = main([*path, "--help"])
    report.append({"path": list(path), "code": code, "help": text.getvalue(),
                   "heavy": sorted({m.split(".")[0] for m in sys.modules} & heavy)})
print(json.dumps(report))
"""

#: The commands that can run for more than a few seconds, and those that accepted --no-progress before.
LONG_COMMANDS = [("train",), ("downstream",), ("compress",), ("study",), ("data", "fetch"), ("kg", "train"),
                 ("kg", "downstream"), ("kg", "fetch"), ("contextual", "pretrain"), ("contextual", "features"),
                 ("contextual", "disagreement"), ("contextual", "download"), ("hyperbolic", "embed"),
                 ("hyperbolic", "eval")]
HAD_NO_PROGRESS = [("train",), ("study",), ("data", "fetch"), ("kg", "train"), ("contextual", "download")]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _subparser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_every_help_answers_without_the_heavy_libraries():
    done = subprocess.run([sys.executable, "-c", WALK, *HEAVY], capture_output=True, text=True, env=_env(),
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    paths = {tuple(r["path"]) for r in report}
    # the walk reaches the nested commands, not only the top level
    assert {(), ("train",), ("contextual", "pretrain"), ("kg", "fetch"), ("data", "fetch"), ("recipes", "check"),
            ("hyperbolic", "eval"), ("study",)} <= paths
    assert len(report) >= 25
    for row in report:
        command = " ".join(["embstab", *row["path"]])
        assert row["code"] == 0, command
        assert row["help"].startswith(f"usage: {command}"), command
        assert row["heavy"] == [], f"`{command} --help` imported {row['heavy']}"


def test_the_module_entry_point_imports_nothing_heavy():
    # the real `python -m embstab --help`: the package's own imports, __main__ and the parser
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "embstab", "--help"], capture_output=True,
                          text=True, env=_env(), timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.startswith("usage: embstab")
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "numpy" in imported and "embstab" in imported  # the import log was read
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


def test_choice_names_equal_their_registries():
    from embstab.downstream import MODELS, TASKS
    from embstab.io import FORMATS
    from embstab.kg import KG_TASKS
    from embstab.measures import DEFAULT_MEASURES, REGISTRY, measures_for
    from embstab.recipes import TRAINING_RECIPES
    from embstab.train import ALGOS

    assert names.TRAINING_RECIPES == tuple(TRAINING_RECIPES)
    assert names.MEASURES == tuple(REGISTRY)
    assert names.EUCLIDEAN_MEASURES == tuple(measures_for("euclidean"))
    assert names.LARGER_IS_MORE_STABLE == tuple(n for n, m in REGISTRY.items() if m.larger_is_more_stable)
    assert names.DEFAULT_MEASURES == tuple(DEFAULT_MEASURES)
    assert names.DOWNSTREAM_TASKS == tuple(TASKS)
    assert names.DOWNSTREAM_MODELS == tuple(MODELS)
    assert names.KG_TASKS == tuple(KG_TASKS)
    assert names.TRAIN_ALGOS == tuple(ALGOS)
    assert names.EMBEDDING_FORMATS == tuple(FORMATS)


@pytest.mark.parametrize("argv", [["train", "--corpus", "c.txt", "-o", "e.txt", "--recipe", "bf16-kahn"],
                                  ["downstream", "a.txt", "b.txt", "--recipe", "bf16-kahn"]])
def test_an_unknown_recipe_is_one_line_naming_every_registered_recipe(argv, capsys):
    from embstab.recipes import TRAINING_RECIPES

    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    listed = ", ".join(repr(n) for n in TRAINING_RECIPES)
    assert err == [f"embstab {argv[0]}: error: argument --recipe: invalid choice: 'bf16-kahn' (choose from {listed}) "
                   f"(see `embstab {argv[0]} --help`)"]


def test_an_unknown_task_still_lists_the_tasks(capsys):
    assert cli.main(["downstream", "a.txt", "b.txt", "--task", "rt_sentimen"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "unknown task 'rt_sentimen': choose one of rt_sentiment, rt_subjectivity, bbc_topic, " \
                              "brown_pos, wiki_retrieval, bbc_retrieval, or link_prediction:GRAPH, triple_classification:GRAPH" in err[0]


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("progress,quiet,tty,shown", [
    (False, False, True, True),     # a person at a terminal sees the bars
    (False, False, False, False),   # a log file or a pipe does not
    (False, True, True, False),     # --quiet hides them on a terminal too
    (True, False, False, True),     # --progress forces them into a log
])
def test_show_progress_follows_the_terminal_and_the_flags(progress, quiet, tty, shown):
    args = argparse.Namespace(progress=progress, quiet=quiet)
    assert show_progress(args, _Stream(tty)) is shown


def test_show_progress_reads_stderr_when_called(monkeypatch):
    args = argparse.Namespace(progress=False, quiet=False)
    monkeypatch.setattr(sys, "stderr", _Stream(True))
    assert show_progress(args)
    monkeypatch.setattr(sys, "stderr", _Stream(False))
    assert not show_progress(args)
    with open(os.devnull, "w", encoding="utf-8") as closed:
        pass
    assert not show_progress(args, closed)  # a closed stream is no terminal (isatty raises)
    assert not show_progress(argparse.Namespace(), object())  # no isatty at all


@pytest.mark.parametrize("path", LONG_COMMANDS, ids=" ".join)
def test_every_long_command_takes_progress_and_quiet(path):
    parser = _subparser(path)
    assert {"--progress", "--quiet"} <= set(parser._option_string_actions)
    if path in HAD_NO_PROGRESS:
        assert parser._option_string_actions["--no-progress"].dest == "quiet"


def test_progress_and_quiet_exclude_each_other(capsys):
    assert cli.main(["kg", "train", "--graph", "umls", "-o", "out", "--progress", "--no-progress"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "not allowed with argument --progress" in err[0]


@pytest.fixture()
def tree_and_embedding(tmp_path):
    tree = tmp_path / "t.edges"
    tree.write_text(graph_path("smalltree").read_text())
    emb = tmp_path / "t.hyp"
    assert cli.main(["hyperbolic", "embed", str(tree), "--quiet", "-o", str(emb)]) == 0
    return tree, emb


def test_bars_go_to_stderr_and_leave_stdout_unchanged(tree_and_embedding, capsys):
    tree, emb = tree_and_embedding
    capsys.readouterr()
    runs = {}
    for flag in ("--progress", "--quiet", None):
        assert cli.main(["hyperbolic", "eval", str(tree), str(emb), "--json", *([flag] if flag else [])]) == 0
        runs[flag] = capsys.readouterr()
    assert runs["--progress"].out == runs["--quiet"].out == runs[None].out
    assert json.loads(runs["--progress"].out)["map"] == 1.0
    assert "evaluate" in runs["--progress"].err
    assert runs["--quiet"].err == "" and runs[None].err == ""  # captured stderr is no terminal


def test_a_terminal_gets_bars_by_default(tree_and_embedding):
    tree, emb = tree_and_embedding
    leader, follower = pty.openpty()
    # a fresh pseudo-terminal is 0 columns wide, where tqdm draws nothing; a real one has a size
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:  # read while the command runs: a full terminal buffer would block it
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "embstab", "hyperbolic", "eval", str(tree), str(emb), "--json"],
                                stdout=subprocess.PIPE, stderr=follower, env=_env(), cwd=ROOT)
        os.close(follower)
        out, _ = proc.communicate(timeout=120)
        reader.join(timeout=10)
    finally:
        os.close(leader)
    assert proc.returncode == 0
    assert json.loads(out)["map"] == 1.0  # stdout holds the result alone
    terminal = b"".join(chunks)
    assert b"evaluate: 100%" in terminal and b"40/40" in terminal


def test_contextual_threads_default_to_every_core_and_name_a_busy_machine(monkeypatch):
    import io

    import embstab._resources as R

    for action in ("pretrain", "features", "disagreement"):
        parser = _subparser(("contextual", action))
        assert parser._option_string_actions["--threads"].default is None
        assert "every usable core" in parser.format_help()
    assert threads_or_all(3) == 3
    monkeypatch.setattr(R, "usable_cores", lambda: 4)
    # the default never follows the load (the same arguments write the same files); a busy machine
    # gets one line naming the faster choice, an idle one nothing
    for load, idle in ((0.0, 4), (0.4, 4), (1.6, 2), (3.5, 1), (40.0, 1)):
        monkeypatch.setattr(R.os, "getloadavg", lambda load=load: (load, load, load))
        note = io.StringIO()
        assert R.idle_cores() == idle and threads_or_all(None, stream=note) == 4
        text = note.getvalue()
        assert (text == "") == (idle == 4)
        if text:
            assert text.count("\n") == 1 and f"--threads {idle} would be faster" in text
        quiet = io.StringIO()
        assert threads_or_all(None, stream=quiet, hint=False) == 4 and quiet.getvalue() == ""

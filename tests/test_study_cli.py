"""``embstab study``: argument handling, bad study files, status, and the --quick end-to-end run."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from embstab.cli import study as study_cli

REPO = Path(__file__).resolve().parents[1]


def _run(argv: list[str]) -> int:
    return study_cli.main(argv)


def test_register_adds_the_sub_command():
    parser = argparse.ArgumentParser(prog="embstab")
    study_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["study", "x.yaml", "--scheduler", "tcp://10.0.0.1:8786", "--store", "memory://s",
                              "--workers", "1", "-o", "r.html"])  # any machine runs 1 (more is bounded by it)
    assert (args.study, args.scheduler, args.store, args.workers, args.output) == (
        "x.yaml", "tcp://10.0.0.1:8786", "memory://s", 1, "r.html")
    assert args.func is study_cli.handle
    assert parser.parse_args(["study", "status"]).study == "status"


def test_bad_study_file_exits_2_naming_the_key(tmp_path, capsys):
    bad = yaml.safe_load((REPO / "pipelines" / "quick.yaml").read_text())
    bad["training"]["dimensons"] = [10]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    assert _run([str(path), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "training.dimensons" in err and "did you mean 'dimensions'" in err
    assert not (tmp_path / "s" / "results.sqlite").exists()  # rejected before anything ran


def test_usage_errors(tmp_path, capsys):
    assert _run([str(tmp_path / "missing.yaml"), "--store", str(tmp_path)]) == 2
    assert "not found" in capsys.readouterr().err
    assert _run(["x.yaml", "--quick"]) == 2
    assert "not both" in capsys.readouterr().err
    assert _run(["--quick", "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
    assert _run(["--quick", "--scheduler", "nonsense", "--store", str(tmp_path)]) == 2
    assert "tcp://HOST" in capsys.readouterr().err


def test_status_without_a_database_says_what_to_do(tmp_path, capsys):
    assert _run(["status", "--store", str(tmp_path)]) == 2
    assert "run `embstab study` first" in capsys.readouterr().err


def test_find_bundled_studies():
    assert study_cli.find_study_file("quick.yaml") == REPO / "pipelines" / "quick.yaml"
    with pytest.raises(Exception, match="pass a STUDY.yaml"):
        study_cli.find_study_file("nope.yaml")
    with pytest.raises(Exception, match="\\(did you mean 'kg_quick'\\?\\); the bundled ones: .*kg_quick"):
        study_cli.find_study_file("kg_quik.yaml")


def test_quick_study_end_to_end(tmp_path):
    """`embstab study --quick` on a LocalCluster: rows, report, recommendation; then status and resume."""
    store = tmp_path / "store"
    cmd = [sys.executable, str(REPO / "pipelines" / "run_study.py"), "--quick", "--store", str(store),
           "--workers", "2", "-o", str(tmp_path / "report.html"), "--timings"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "24/24 rows done" in done.stdout
    # --timings: one line per stage with its task count (2 dims x 2 seeds x 2 corpus versions
    # trainings, 24 downstream rows), then the report and the whole command
    assert re.search(r"^\s*train\s+8\s", done.stdout, re.M), done.stdout[-3000:]
    assert re.search(r"^\s*downstream\s+24\s", done.stdout, re.M)
    assert re.search(r"^\s*whole command\s+\d", done.stdout, re.M)
    # the quality table names each task's quality at the largest dimension beside its chance level
    assert re.search(r"task .*at 25 dims, 32 bits\s+chance", done.stdout), done.stdout[:3000]
    assert "ship w2v_cbow" in done.stdout
    assert "Spearman ρ of each measure" in done.stdout
    # every measure's pairs are counted against their null, in the summary and the report
    assert "Pairs whose value is clearly apart from its null (the level of unrelated tables): eis " in done.stdout
    assert (tmp_path / "report.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert 'id="nulls"' in (tmp_path / "report.html").read_text()
    status = subprocess.run([*cmd[:2], "status", "--store", str(store)], capture_output=True, text=True)
    assert status.returncode == 0 and "quick" in status.stdout
    # resumed, with the option the analyses' messages name (one the study takes)
    again = subprocess.run([*cmd, "--keep-near-chance", "--no-report"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0 and "24 resumed, 0 new" in again.stdout, again.stderr[-2000:]
    assert "kept in what follows (--keep-near-chance)" in again.stdout


def test_status_summarises_a_database(tmp_path, capsys):
    from embstab.study import ResultDB

    db_path = tmp_path / "store" / "results.sqlite"
    row = {"algo": "w2v_cbow", "seed": 1, "dim": 25, "bitrate": 4, "memory": 100, "task": "rt_sentiment",
           "model": "linear", "disagreement": 5.0, "quality": 70.0, "quality_old": 71.0, "measures": {"eis": 0.1}}
    with ResultDB(db_path) as db:
        db.register_study("demo", "abc123", {"name": "demo"}, ["r1", "r2", "r3", "r4"])
        db.add_result("r1", row)
        db.add_failure("r2", "downstream", "ValueError: Invalid learning rate: -1.0", "Traceback ...")
        db.add_failure("r3", "downstream", "ValueError: Invalid learning rate: -1.0", "Traceback ...")
    assert _run(["status", "--store", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("demo"))
    assert line.split()[-5:] == ["4", "1", "0", "2", "1"]  # planned, done, predicted, failed, pending
    assert "2 x [downstream] ValueError: Invalid learning rate" in out

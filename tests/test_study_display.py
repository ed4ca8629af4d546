"""A study run shows itself in a notebook: its rows, its phases, where its results are, what to run next."""

from __future__ import annotations

import html
import shlex

import pandas as pd

from embstab.study import parse_study
from embstab.study.runner import TIMING_COLUMNS, StudyRun

STUDY = {"name": "t", "corpus": {"name": "gensim_lee", "fraction": 0.1},
         "training": {"algorithms": ["w2v_cbow"], "dimensions": [10, 20], "seeds": [1, 2], "epochs": 2},
         "compression": {"bit_widths": [1, 32]}, "measures": {"names": ["eis", "knn"], "top_n": 500},
         "downstream": [{"task": "rt_sentiment"}], "budgets": [20, 100]}
# a user's folder: a quote, a space, markup and a command substitution, none of which may act
FOLDER = "/tmp/it's <b>here</b> $(touch x)"


def _run(spec: dict, *, stored: int = 6, n_rows: int = 8, predicted: int = 0, outside: int = 0,
         parquet: bool = True) -> StudyRun:
    results = pd.DataFrame({"algo": "w2v_cbow", "dim": 10, "bitrate": 1,
                            "memory": [10 * (i + 1) for i in range(stored)]})
    failures = pd.DataFrame({"row_id": ["r7"], "stage": ["train"], "error": ["<boom>"]})
    timings = pd.DataFrame([("k1", "train", 0.0, 2.0, 1.5), ("k2", "train", 1.0, 2.5, 2.0),
                            ("k3", "measures", 3.5, 0.5, 0.5)], columns=list(TIMING_COLUMNS))
    return StudyRun(spec=parse_study(spec), results=results, failures=failures, n_rows=n_rows, n_skipped=2,
                    n_new=stored - 2, n_failed=1, wall_s=12.34, db_path=f"{FOLDER}/results.sqlite",
                    parquet_path=f"{FOLDER}/t.parquet" if parquet else None, timings=timings,
                    phases={"plan": 0.25, "execute": 11.5, "export": 0.5}, n_predicted=predicted,
                    n_uncalibrated=outside)


def test_html_shows_the_rows_phases_paths_and_escapes_every_user_string():
    run = _run(STUDY)
    page = run._repr_html_()
    assert "<b>6 of 8</b> (2 missing)" in page
    assert "measured (downstream models ran)</th><td>6<" in page  # 6 stored, none predicted
    assert "predicted from" not in page  # not a calibrated study
    assert "1 in this run; 1 row(s) whose last attempt failed" in page
    assert "plan 0.2 s · execute 11.5 s · export 0.5 s" in page
    assert "4 row(s) computed, 2 resumed, 12.3 s" in page
    # the stages: two train tasks added up, one measures task
    assert "<td>train</td>" in page and "<td>4.5</td>" in page and "<td>measures</td>" in page
    # the user's folder never reaches the page as markup
    assert "<b>here</b>" not in page and "it&#x27;s &lt;b&gt;here&lt;/b&gt;" in page


def test_next_commands_are_quoted_and_paste_back_to_the_same_arguments():
    run = _run(STUDY)
    commands = run.next_commands()
    assert [shlex.split(c)[:3] for c in commands] == [["embstab", "study", "status"], ["embstab", "report",
                                                                                       f"{FOLDER}/t.parquet"],
                                                      ["embstab", "recommend", f"{FOLDER}/t.parquet"],
                                                      ["embstab", "recommend", f"{FOLDER}/t.parquet"]]
    assert shlex.split(commands[0]) == ["embstab", "study", "status", "--db", f"{FOLDER}/results.sqlite"]
    assert shlex.split(commands[1])[3:] == ["-o", f"{FOLDER}/t.html"]
    assert [shlex.split(c)[3:] for c in commands[2:]] == [["--budget", "20"], ["--budget", "100"]]
    page = run._repr_html_()
    for c in commands:
        assert html.escape(c) in page


def test_a_complete_calibrated_run_without_budgets_or_export():
    spec = {**STUDY, "calibrate": {"share": 0.5}}
    del spec["budgets"]
    run = _run(spec, stored=8, predicted=3, outside=1, parquet=False)
    page = run._repr_html_()
    assert "<b>8 of 8</b><" in page and "missing" not in page
    assert "measured (downstream models ran)</th><td>4<" in page
    assert "predicted from their measures</th><td>3<" in page
    assert "outside the calibration (no disagreement)</th><td>1<" in page
    assert "results table</th><td>not exported" in page
    commands = [shlex.split(c) for c in run.next_commands()]
    # no status (every row is stored); the database stands for the table; the largest memory as the budget
    assert commands == [["embstab", "report", f"{FOLDER}/results.sqlite", "-o", f"{FOLDER}/t.html"],
                        ["embstab", "recommend", f"{FOLDER}/results.sqlite", "--budget", "80"]]

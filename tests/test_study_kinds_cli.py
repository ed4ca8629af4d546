"""The tiny tiers of the KG and contextual studies run through ``embstab study`` (CI-sized)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may reach a hub

from embstab.cli import main  # noqa: E402
from embstab.selection import near_chance  # noqa: E402

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"


@pytest.mark.parametrize("name, kind, unit, tasks", [
    ("kg_quick", "kg", "bits per entity row", {"link_prediction", "triple_classification"}),
    ("contextual_quick", "contextual", "bits per feature vector", {"rt_subjectivity"}),
])
def test_quick_pipeline_runs_from_the_cli(name, kind, unit, tasks, tmp_path, capsys):
    start = time.perf_counter()
    code = main(["study", str(PIPELINES / f"{name}.yaml"), "--store", str(tmp_path / "store"), "--scheduler",
                 "synchronous", "--no-progress"])
    wall = time.perf_counter() - start
    out = capsys.readouterr().out
    assert code == 0, out
    parquet = tmp_path / "store" / f"{name}.parquet"
    results = pd.read_parquet(parquet)
    assert set(results["kind"]) == {kind} and set(results["task"]) == tasks
    assert results["disagreement"].notna().all() and results["eis"].notna().all()
    assert results["chance"].notna().all()
    # each task's quality against its chance level, with the rows near chance (the tiny tiers'
    # downstream models barely learn: the analyses that follow leave those rows out)
    assert "Downstream quality against chance" in out
    near = near_chance(results)
    for task in tasks:
        line = next(line for line in out.splitlines() if line.split()[:1] == [task])
        assert f"{int(near[results['task'] == task].sum())}/{int((results['task'] == task).sum())} rows" in line
    html = (tmp_path / "store" / f"{name}.html").read_text()
    assert 'id="chance"' in html
    assert wall < 120  # the tiny tier stays CI-sized (about 30 s on 2 shared cores)
    # with the rows near chance kept: the kind's report section, and a recommendation in its unit
    assert main(["report", str(parquet), "-o", str(tmp_path / "all.html"), "--keep-near-chance"]) == 0
    assert f'id="kind-{kind}"' in (tmp_path / "all.html").read_text()
    budget = str(int(results["memory"].max()))
    assert main(["recommend", str(parquet), "--budget", budget, "--kind", kind, "--keep-near-chance"]) == 0
    assert f"Under a budget of {budget} {unit}" in capsys.readouterr().out
    assert main(["recommend", str(parquet), "--budget", budget, "--kind", "word", "--keep-near-chance"]) == 2
    assert "no results of kind 'word'" in capsys.readouterr().err

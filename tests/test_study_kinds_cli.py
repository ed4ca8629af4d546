"""The tiny tiers of the KG and contextual studies run through ``embstab study`` (CI-sized)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may reach a hub

from embstab.cli import main  # noqa: E402

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
    results = pd.read_parquet(tmp_path / "store" / f"{name}.parquet")
    assert set(results["kind"]) == {kind} and set(results["task"]) == tasks
    assert results["disagreement"].notna().all() and results["eis"].notna().all()
    # the correlation table and a recommendation in the kind's memory unit are printed
    assert "Spearman ρ of each measure" in out and "[95 % bootstrap interval" in out and "eis" in out
    assert "Under a budget of" in out and unit in out
    html = (tmp_path / "store" / f"{name}.html").read_text()
    assert f'id="kind-{kind}"' in html
    assert wall < 120  # the tiny tier stays CI-sized (about 30 s on 2 shared cores)
    # `embstab recommend` reads the table, in the kind's unit, and --kind names what it keeps
    budget = str(int(results["memory"].max()))
    assert main(["recommend", str(tmp_path / "store" / f"{name}.parquet"), "--budget", budget, "--kind", kind]) == 0
    assert f"Under a budget of {budget} {unit}" in capsys.readouterr().out
    assert main(["recommend", str(tmp_path / "store" / f"{name}.parquet"), "--budget", budget, "--kind", "word"]) == 2
    assert "no results of kind 'word'" in capsys.readouterr().err

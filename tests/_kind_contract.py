"""The study-kind contract: what every registered kind must do, given a tiny study definition of it.

A kind plans its grid, runs a tiny study whose rows carry the kind, resumes without recomputing,
reproduces its rows in a fresh store, feeds the report and ``recommend``, and its schema errors name
the dotted key. ``tests/test_study_kinds.py`` runs it over every registered kind,
``tests/test_toy_kind.py`` over a kind registered from outside the package.
"""

from __future__ import annotations

import copy
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from embstab.study import ArtifactStore, Steps, StudyDefinitionError, parse_study, plan_study, run_study
from embstab.study.kinds import get_kind
from embstab.study.plan import study_rows

DROP = object()


def broken(*args: Any, **kwargs: Any) -> Any:
    """A computation that must not run (a resumed study trains nothing)."""
    raise AssertionError("a resumed study must not train again")


NEVER = Steps(*[broken] * 6)


def check_plans_its_grid(kind: str, definition: dict, root: Path) -> None:
    """The tiny definition (2 dims x 2 bit widths) plans one source pair, 4 trainings, 4 pairs and its rows."""
    spec = parse_study(definition)
    assert spec.kind == kind
    plan = plan_study(spec, ArtifactStore(root), NEVER)
    counts = plan.stage_counts()
    # one source pair; 2 sides x 2 dims trainings; 2 dims x 2 bits pairs (the 32-bit top pair is the anchor)
    assert counts[get_kind(kind).source_stage] == 1
    assert counts["train"] == 4 and counts["compress"] == 4 and counts["measures"] == 4
    assert counts["row"] == len(plan.all_rows) == spec.n_rows() == 4 * len(spec.downstream)
    assert {m["kind"] for m in plan.all_rows.values()} == {kind}
    # the definition round-trips through plain data (what StudyRun.save writes) with its fingerprint
    again = parse_study(spec.to_dict())
    assert again == spec and again.fingerprint() == spec.fingerprint()
    if kind != "word":  # a kind's configurations never collide with a word study's
        assert all(r.config["measures"]["pair"]["new"]["kind"] == kind for r in study_rows(spec))


def run_tiny(definition: dict, root: Path) -> tuple[Any, Any]:
    """The parsed tiny study and its run into ``root``."""
    spec = parse_study(definition)
    return spec, run_study(spec, root / "store", root / "results.sqlite", progress=False)


def check_rows(kind: str, spec: Any, run: Any) -> None:
    """Every row completed, carries the kind, its measures with their nulls, qualities and chance."""
    assert run.n_failed == 0, run.failures[["stage", "error"]].to_string()
    assert run.complete and len(run.results) == spec.n_rows()
    df = run.results
    assert set(df["kind"]) == {kind}
    for name in spec.measures.names:
        assert df[name].notna().all()
        # every kind's rows carry the measure's null and whether the value is apart from it
        assert df[f"{name}_null"].notna().all() and df[f"{name}_signal"].notna().all()
    assert df["disagreement"].between(0, 100).all() and df["quality"].between(0, 100).all()
    assert df["quality_old"].between(0, 100).all()
    assert df["chance"].between(0, 100).all()  # every row states its task's chance level
    # memory: the stored row's entries times the bits (KG: bits per entity row; contextual: per vector)
    assert (df["memory"] == df["dim"] * df["bitrate"]).all()
    # the fewest-bit members keep fewer of their own neighbourhoods than full-precision ones
    by_bits = df.groupby("bitrate")["agreement_uncompressed"].mean().sort_index()
    assert by_bits.iloc[0] < by_bits.iloc[-1]
    with sqlite3.connect(run.db_path) as conn:
        assert {r[0] for r in conn.execute("SELECT kind FROM results")} == {kind}


def check_resumes(spec: Any, root: Path, run: Any, steps: Steps) -> None:
    """A fresh results database over the same store rebuilds every row from stored artifacts, the
    same values; ``steps`` (with the caller's trainer broken) must train nothing."""
    again = run_study(spec, root / "store", run.db_path, steps=NEVER, progress=False)
    assert again.n_skipped == spec.n_rows() and again.n_new == 0  # same database: nothing planned
    resumed = run_study(spec, root / "store", root / "fresh.sqlite", steps=steps, progress=False)
    assert resumed.n_failed == 0 and resumed.n_new == spec.n_rows()
    pd.testing.assert_frame_equal(resumed.results, run.results)
    pd.testing.assert_frame_equal(again.results, run.results)


def check_reproduces(spec: Any, run: Any, root: Path) -> None:
    """Deterministic under the seeds: a second store computes every row again, to the same values."""
    again = run_study(spec, root / "store", root / "results.sqlite", progress=False)
    pd.testing.assert_frame_equal(again.results, run.results)


def check_report_and_recommend(kind: str, spec: Any, run: Any) -> None:
    """The report has the kind's section; ``recommend`` answers in the kind's memory unit."""
    from embstab.selection import as_results, recommend

    # the tiny studies' downstream models barely learn: keep the rows near chance to read every section
    document = run.report(keep_near_chance=True)
    assert 'id="chance"' in document
    if kind != "word":
        assert "kind-" + kind in document and document.count("<img ") == 2 + len(spec.measures.names)
    measure = "eis" if "eis" in spec.measures.names else spec.measures.names[0]
    rec = recommend(as_results(run.results, keep_near_chance=True), int(run.results["memory"].max()), measure)
    assert rec.kind == kind and rec.unit == get_kind(kind).memory_unit and rec.near_chance_left_out == 0
    assert rec.unit in str(rec)


def with_value(base: dict, path: str, value: Any) -> dict:
    """``base`` with the dotted ``path`` set to ``value`` (or removed, for :data:`DROP`)."""
    data = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = data
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is DROP:
        del node[last]
    else:
        node[last] = value
    return data


def check_rejects(base: dict, path: str, value: Any, key: str, words: str) -> None:
    """Setting ``path`` to ``value`` is refused with an error naming the dotted ``key``."""
    with pytest.raises(StudyDefinitionError) as err:
        parse_study(with_value(base, path, value), source="s.yaml")
    assert err.value.key == key, str(err.value)
    assert words in str(err.value)
    assert str(err.value).startswith(f"s.yaml: key '{key}': ")

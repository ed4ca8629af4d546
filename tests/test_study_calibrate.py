"""Calibrated studies: the ``calibrate`` key, the seeded stratified choice of the rows whose
downstream models run, the predicted rows (marked, with intervals, kept apart from the measured
ones) and a later full study that measures them.

The runs use fast stand-in steps (seeded random tables, a fixed linear probe as the downstream
model) with the real compression and measures, so the predictor sees real measure values."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embstab import Embedding
from embstab.compress import compress_pair
from embstab.data import make_corpus_pair
from embstab.selection.calibration import measured_rows
from embstab.study import (
    ArtifactStore,
    ResultDB,
    Steps,
    StudyDefinitionError,
    load_study,
    parse_study,
    plan_study,
    run_study,
)
from embstab.study.calibrate import (
    MEASURED,
    MIN_MEASURED,
    PREDICTED,
    SOURCE_COLUMN,
    UNCALIBRATED,
    analysable,
    choose_measured,
    predict_unmeasured,
)
from embstab.study.plan import study_rows
from embstab.study.schema import CalibrationSpec
from embstab.study.steps import measure_pair

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))

# --- stand-in steps: fast, seeded, and with a disagreement that follows the pair's instability

VOCAB = [f"w{i}" for i in range(240)]
#: (task, dim, seed) of every downstream model pair trained (the runs are synchronous: one process)
CALLS: list[tuple[str, int, int]] = []


def _load_corpus(name):
    rng = np.random.default_rng(0)
    return [[VOCAB[j] for j in rng.integers(0, len(VOCAB), 20)] for _ in range(200)]


def _train(docs, algo, dim, seed, epochs, min_count, window, progress=False, **kwargs):
    # the same seed shares a base table; each corpus version adds its own noise
    base = np.random.default_rng(seed).standard_normal((len(VOCAB), 64))[:, :dim]
    version = int(hashlib.sha256(" ".join(" ".join(d) for d in docs).encode()).hexdigest()[:8], 16)
    noise = np.random.default_rng([seed, version]).standard_normal((len(VOCAB), dim))
    return Embedding(VOCAB, base + 0.3 * noise)


def _disagreement(old, new, task, model, seed, **options):
    CALLS.append((task, new.dim, seed))
    probe = np.random.default_rng(new.dim).standard_normal(new.dim)
    flips = np.sign(old.vectors @ probe) != np.sign(new.vectors @ probe)
    return types.SimpleNamespace(disagreement=100.0 * float(flips.mean()), quality_new=90.0, quality_old=91.0,
                                 n_test=len(VOCAB), settings={})


FAST = Steps(load_corpus=_load_corpus, make_corpus_pair=make_corpus_pair, train_embedding=_train,
             compress_pair=compress_pair, measure_pair=measure_pair, disagreement=_disagreement)

GRID = {
    "name": "calibrated",
    "corpus": {"name": "gensim_lee", "fraction": 0.1, "seed": 0},
    "training": {"algorithms": ["w2v_cbow"], "dimensions": [4, 8, 16], "seeds": [1, 2, 3], "epochs": 1,
                 "min_count": 1},
    "compression": {"bit_widths": [1, 2, 4, 32]},
    "measures": {"names": ["eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap"], "top_n": 200,
                 "params": {"knn": {"n_queries": 100}}},
    "downstream": [{"task": "rt_sentiment"}, {"task": "rt_subjectivity"}],
    "budgets": [16, 64],
}
N_ROWS = 3 * 4 * 3 * 2
CALIBRATE = {"share": 0.34, "seed": 0}


def spec_of(**changes):
    return parse_study({**GRID, **changes})


# --- the key --------------------------------------------------------------------------------


@pytest.mark.parametrize("value, key, words", [
    ({"share": 0}, "calibrate.share", "(0.0, 1.0]"),
    ({"share": 1.5}, "calibrate.share", "(0.0, 1.0]"),
    ({"share": -0.2}, "calibrate.share", "(0.0, 1.0]"),
    ({"share": "a third"}, "calibrate.share", "must be a number"),
    ({"share": True}, "calibrate.share", "must be a number"),
    ({"seed": 0}, "calibrate.share", "required"),
    ({"share": 0.3, "seed": 1.5}, "calibrate.seed", "integer"),
    ({"share": 0.3, "seed": "0"}, "calibrate.seed", "integer"),
    ({"share": 0.3, "seed": -1}, "calibrate.seed", ">= 0"),
    ({"share": 0.3, "level": 1.0}, "calibrate.level", "(0.0, 1.0)"),
    ({"share": 0.3, "shares": 0.3}, "calibrate.shares", "unknown key"),
    (0.34, "calibrate", "must be a mapping"),
])
def test_a_bad_calibrate_key_is_one_line_naming_it(value, key, words):
    with pytest.raises(StudyDefinitionError) as caught:
        parse_study({**GRID, "calibrate": value}, source="study.yaml")
    message = str(caught.value)
    assert caught.value.key == key and f"key '{key}'" in message and words in message
    assert message.startswith("study.yaml: ") and "\n" not in message


def test_calibrate_is_parsed_with_its_defaults_and_round_trips():
    spec = spec_of(calibrate={"share": 1})
    assert spec.calibrate == CalibrationSpec(share=1.0, seed=0, level=0.9)
    assert spec_of(calibrate=None).calibrate is None and spec_of().calibrate is None
    again = parse_study(spec.to_dict())
    assert again == spec and again.fingerprint() == spec.fingerprint()
    assert spec.to_dict()["calibrate"] == {"share": 1.0, "seed": 0, "level": 0.9}


@pytest.fixture
def pinned_fingerprints(monkeypatch):
    import embstab

    data = json.loads((ROOT / "tests" / "data" / "study_fingerprints.json").read_text(encoding="utf-8"))
    monkeypatch.setattr(embstab, "__version__", data["embstab_version"])
    return data["studies"]


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_studies_without_the_key_keep_their_fingerprints_and_a_calibrated_one_keeps_its_row_ids(
        path, pinned_fingerprints):
    spec = load_study(path)
    assert spec.calibrate is None and "calibrate" not in spec.to_dict()
    assert spec.fingerprint() == pinned_fingerprints[path.name]["fingerprint"]
    calibrated = parse_study({**spec.to_dict(), "calibrate": CALIBRATE})
    # another definition (registered apart), the same rows: measured rows are shared with the full study
    assert calibrated.fingerprint() != spec.fingerprint()
    assert [r.row_id for r in study_rows(calibrated)] == [r.row_id for r in study_rows(spec)]


# --- the choice -----------------------------------------------------------------------------


def _rows(spec):
    return {r.row_id: r.columns for r in study_rows(spec)}


def test_the_choice_is_seeded_stratified_and_one_seed_per_configuration():
    spec = load_study(ROOT / "pipelines" / "default.yaml")  # 4 dims x 6 bit widths x 2 seeds x 2 tasks
    rows = _rows(spec)
    chosen = choose_measured(rows, CalibrationSpec(0.34, 0))
    assert chosen == choose_measured(dict(reversed(list(rows.items()))), CalibrationSpec(0.34, 0))
    assert chosen != choose_measured(rows, CalibrationSpec(0.34, 1))
    table = pd.DataFrame.from_dict(rows, orient="index").assign(chosen=lambda t: t.index.isin(chosen))
    for task, part in table.groupby("task"):
        picked = part[part["chosen"]]
        assert len(picked) == math.ceil(0.34 * len(part)) == 17, task
        assert set(picked["dim"]) == set(part["dim"]) and set(picked["bitrate"]) == set(part["bitrate"])
        assert set(picked["seed"]) == set(part["seed"])
        # balanced: no dimension or bit width taken twice as often as another
        assert picked["dim"].value_counts().max() - picked["dim"].value_counts().min() <= 1
        assert picked["bitrate"].value_counts().max() - picked["bitrate"].value_counts().min() <= 1
        assert not picked.duplicated(["dim", "bitrate"]).any()  # one seed per configuration
        corners = {(int(r.dim), int(r.bitrate)) for r in picked.itertuples()}
        assert (25, 1) in corners and (200, 32) in corners
    # each task draws its own rows
    by_task = {t: {(r.dim, r.bitrate, r.seed) for r in p[p["chosen"]].itertuples()} for t, p in table.groupby("task")}
    assert by_task["rt_subjectivity"] != by_task["bbc_topic"]


def test_the_share_takes_a_second_seed_only_once_every_configuration_has_one_and_has_a_floor():
    rows = _rows(spec_of())
    table = pd.DataFrame.from_dict(rows, orient="index")
    half = table.loc[sorted(choose_measured(rows, CalibrationSpec(0.5, 3)))]
    for _, part in half.groupby("task"):  # 18 of 36 rows: 12 configurations, each once, then 6 twice
        counts = part.groupby(["dim", "bitrate"]).size()
        assert len(counts) == 12 and sorted(counts.value_counts().items()) == [(1, 6), (2, 6)]
    assert choose_measured(rows, CalibrationSpec(1.0, 0)) == frozenset(rows)
    tiny = table.loc[sorted(choose_measured(rows, CalibrationSpec(0.01, 0)))]
    assert tiny.groupby("task").size().tolist() == [MIN_MEASURED, MIN_MEASURED]


def test_the_floor_is_what_the_predictor_needs():
    from embstab.selection import calibration

    assert MIN_MEASURED >= calibration.MIN_ROWS


def _unused(*args, **kwargs):
    raise AssertionError("planning must not run any step")


def test_the_plan_runs_downstream_models_for_the_chosen_rows_only(tmp_path):
    spec = spec_of(calibrate=CALIBRATE)
    chosen = choose_measured(_rows(spec), spec.calibrate)
    plan = plan_study(spec, ArtifactStore(tmp_path), Steps(*[_unused] * 6))
    counts = plan.stage_counts()
    assert counts["downstream"] == len(chosen) and counts["row"] == N_ROWS
    assert plan.unmeasured == set(plan.all_rows) - chosen
    for row_id in plan.unmeasured:  # their row task reads the measures only
        assert [plan.nodes[d].stage for d in plan.nodes[plan.rows[row_id]].deps] == ["measures"]
    # a resumed calibrated study plans the same choice; measured rows done are left out
    done = set(sorted(chosen)[:5])
    again = plan_study(spec, ArtifactStore(tmp_path), Steps(*[_unused] * 6), done)
    assert again.unmeasured == plan.unmeasured and set(again.rows) == set(plan.all_rows) - done


# --- runs -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The calibrated study run once with the stand-in steps."""
    root = tmp_path_factory.mktemp("calibrated")
    spec = spec_of(calibrate=CALIBRATE)
    CALLS.clear()
    run = run_study(spec, root / "store", root / "results.sqlite", steps=FAST, progress=False)
    return spec, root, run, list(CALLS)


def test_a_calibrated_run_trains_downstream_models_for_the_chosen_rows_only(calibrated):
    spec, root, run, calls = calibrated
    chosen = choose_measured(_rows(spec), spec.calibrate)
    assert len(calls) == len(chosen) == run.n_new == 2 * math.ceil(0.34 * 36)
    artifacts = ArtifactStore(root / "store").iter_artifacts()
    assert sum(1 for kind, _, _ in artifacts if kind == "downstream") == len(chosen)
    with ResultDB(run.db_path) as db:
        assert db.finished_ids() == set(chosen)  # only measured rows count as finished
        stored = db.predictions()
    assert len(stored) == N_ROWS - len(chosen) and not set(stored["row_id"]) & set(chosen)
    trained = pd.DataFrame(calls, columns=["task", "dim", "seed"]).value_counts().sort_index()
    measured = run.results[run.results[SOURCE_COLUMN] == MEASURED]
    assert trained.equals(measured[["task", "dim", "seed"]].value_counts().sort_index())


def test_the_other_rows_are_predicted_with_intervals_and_marked(calibrated):
    spec, _, run, _ = calibrated
    df = run.results
    assert run.complete and len(df) == N_ROWS and run.n_failed == 0
    sources = df[SOURCE_COLUMN].value_counts().to_dict()
    assert sources.get(PREDICTED, 0) == run.n_predicted > 0
    assert sources.get(UNCALIBRATED, 0) == run.n_uncalibrated
    assert sources[MEASURED] + run.n_predicted + run.n_uncalibrated == N_ROWS
    predicted = df[df[SOURCE_COLUMN] == PREDICTED]
    assert (predicted["disagreement_low"] <= predicted["disagreement"]).all()
    assert (predicted["disagreement"] <= predicted["disagreement_high"]).all()
    assert (predicted["disagreement_high"] > predicted["disagreement_low"]).any()
    assert predicted["quality"].isna().all() and predicted["eis"].notna().all()
    measured = df[df[SOURCE_COLUMN] == MEASURED]
    assert measured["quality"].notna().all()
    # a measured row keeps its own interval: the sampling interval of its flips over the test items
    assert (measured["disagreement_low"] <= measured["disagreement"]).all()
    assert (measured["disagreement"] <= measured["disagreement_high"]).all()
    outside = df[df[SOURCE_COLUMN] == UNCALIBRATED]
    assert outside["disagreement"].isna().all() and (outside["calibration_note"] != "").all()
    assert run.predictor is not None and {k[2] for k in run.predictor.groups} == {"rt_sentiment", "rt_subjectivity"}
    exported = pd.read_parquet(run.parquet_path)
    assert exported[SOURCE_COLUMN].value_counts().to_dict() == sources
    assert exported.attrs["measure_settings"] == df.attrs["measure_settings"] == run.predictor.measure_settings
    assert run.predictor.measure_settings["top_n"] == spec.measures.top_n
    assert len(analysable(df)) == N_ROWS - run.n_uncalibrated and int(measured_rows(df).sum()) == len(measured)
    with ResultDB(run.db_path) as db:  # the store says the same
        stored = db.predictions().set_index("row_id")
    assert int(stored["in_calibration"].sum()) == run.n_predicted
    assert np.allclose(np.sort(stored["disagreement"].dropna()), np.sort(predicted["disagreement"]))


def test_a_resumed_calibrated_run_trains_nothing_and_predicts_the_same(calibrated):
    spec, root, first, _ = calibrated
    CALLS.clear()
    run = run_study(spec, root / "store", root / "results.sqlite", steps=FAST, progress=False)
    assert CALLS == [] and run.n_new == 0 and run.n_skipped == first.n_new
    pd.testing.assert_frame_equal(run.results, first.results)


def test_a_later_full_study_measures_the_predicted_rows(calibrated, tmp_path):
    spec, root, first, _ = calibrated
    # a copy of the calibrated store and database: the module's fixture stays as it was
    import shutil

    shutil.copytree(root, tmp_path / "copy")
    CALLS.clear()
    full = run_study(spec_of(), tmp_path / "copy" / "store", tmp_path / "copy" / "results.sqlite", steps=FAST,
                     progress=False)
    unmeasured = N_ROWS - first.n_new
    assert len(CALLS) == full.n_new == unmeasured and full.n_skipped == first.n_new
    assert full.complete and SOURCE_COLUMN not in full.results.columns
    assert full.results["disagreement"].notna().all() and full.results["quality"].notna().all()
    with ResultDB(full.db_path) as db:
        assert db.predictions().empty and len(db.finished_ids()) == N_ROWS
    # the predicted values against what the full study measured for the same rows
    keys = ["algo", "seed", "dim", "bitrate", "task"]
    both = full.results.merge(first.results[first.results[SOURCE_COLUMN] == PREDICTED], on=keys,
                              suffixes=("", "_predicted"))
    assert len(both) == first.n_predicted
    inside = (both["disagreement"] >= both["disagreement_low"]) & (both["disagreement"] <= both["disagreement_high"])
    assert inside.mean() > 0.5  # a calibration that failed would miss nearly all
    # measured rows kept their values
    kept = full.results.merge(first.results[first.results[SOURCE_COLUMN] == MEASURED], on=keys,
                              suffixes=("", "_first"))
    assert np.array_equal(kept["disagreement"], kept["disagreement_first"])
    # calibrated again over the full study's rows: every row is measured, nothing is trained or predicted
    CALLS.clear()
    again = run_study(spec, tmp_path / "copy" / "store", tmp_path / "copy" / "results.sqlite", steps=FAST,
                      progress=False)
    assert CALLS == [] and again.n_predicted == again.n_uncalibrated == 0
    assert (again.results[SOURCE_COLUMN] == MEASURED).all() and len(again.results) == N_ROWS


def test_a_threaded_cluster_gives_the_calibrated_run_of_the_synchronous_one(calibrated, tmp_path):
    pytest.importorskip("distributed")
    spec, _, reference, _ = calibrated
    run = run_study(spec, tmp_path / "store", tmp_path / "r.sqlite", scheduler="threads", workers=2, steps=FAST,
                    progress=False)
    pd.testing.assert_frame_equal(run.results, reference.results)


def test_without_enough_measured_rows_every_row_stays_outside_the_calibration(calibrated):
    spec, _, run, _ = calibrated
    with ResultDB(run.db_path) as db:
        measured, unmeasured = db.results(), db.predictions()
    outcome = predict_unmeasured(measured.head(3), unmeasured, spec.calibrate)
    assert outcome.predictor is None and outcome.n_predicted == 0 and outcome.n_uncalibrated == len(unmeasured)
    assert outcome.note.startswith("no calibration") and (outcome.predictions["calibration_note"] == outcome.note).all()
    assert outcome.predictions["predicted"].isna().all()


def test_the_summary_and_the_report_mark_the_predicted_rows(calibrated, capsys):
    from embstab.cli.study import _calibration
    from embstab.report import build_report

    _, _, run, _ = calibrated
    _calibration(run)
    out = capsys.readouterr().out
    assert f"downstream models ran for {run.n_new} of {N_ROWS} rows" in out
    assert f"{run.n_predicted} row(s) predicted" in out and f"{run.n_uncalibrated} outside the calibration" in out
    assert "rt_subjectivity" in out  # the predictor's groups
    page = build_report(analysable(run.results), progress=False)
    assert f"Predicted rows ({run.n_predicted}, not measured)" in page
    assert page.count("<td>predicted</td>") == run.n_predicted
    # the analyses read the measured rows: the overview counts them alone
    assert f"<td>{run.n_new}</td>" in page


def test_predicted_rows_stay_out_of_the_results_table_of_the_database(calibrated):
    _, _, run, _ = calibrated
    with sqlite3.connect(run.db_path) as con:
        n_results = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        n_predicted = con.execute("SELECT COUNT(*) FROM predictions WHERE in_calibration = 1").fetchone()[0]
    assert n_results == run.n_new and n_predicted == run.n_predicted


def test_study_status_counts_predicted_rows_apart_from_pending(calibrated):
    from embstab.study import study_status

    _, _, run, _ = calibrated
    summary, failures = study_status(run.db_path)
    row = summary.iloc[0]
    assert row["predicted"] == run.n_predicted + run.n_uncalibrated and row["pending"] == 0
    assert row["done"] + row["predicted"] + row["failed"] + row["pending"] == row["planned"] == N_ROWS

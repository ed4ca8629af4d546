"""embstab.recommend: the configuration to ship under a memory budget, ranked on one scale (flips)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from embstab.errors import UnknownNameError
from embstab.selection import BudgetError, ResultsError, fit_predictor, from_published_csv
from embstab.selection.recommend import Recommendation, recommend

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"
TASKS = ["sst", "mr", "subj", "mpqa", "ner"]


@pytest.fixture(scope="module")
def cbow() -> pd.DataFrame:
    return from_published_csv(PUBLISHED)


def _pick_by_hand(df: pd.DataFrame, budget: float, level: float = 0.9):
    """The rule written out: per seed the mean over tasks; per configuration its mean over seeds with
    Student's t interval, the standard deviation pooled over every configuration; the best is the
    least; those whose value lies inside the best one's interval while the best one's lies inside
    theirs tie; the cheapest of the tie is shipped."""
    scores = df.groupby(["dim", "bitrate", "seed"])["disagreement"].mean()
    by_config = scores.groupby(level=[0, 1])
    mean, n = by_config.mean(), by_config.size()
    resid = scores - scores.groupby(level=[0, 1]).transform("mean")
    dof = int((n - 1).sum())
    half = stats.t.ppf((1 + level) / 2, dof) * math.sqrt(float((resid ** 2).sum()) / dof) / np.sqrt(n)
    fits = [k for k in mean.index if k[0] * k[1] <= budget]
    best = min(fits, key=lambda k: (mean[k], k[0] * k[1]))
    ties = [k for k in fits if mean[k] - half[k] <= mean[best] <= mean[k] + half[k]
            and mean[best] - half[best] <= mean[k] <= mean[best] + half[best]]
    pick = min(ties, key=lambda k: (k[0] * k[1], mean[k]))
    return best, pick, ties, mean


@pytest.mark.parametrize("budget", [50, 400, 800, 3000])
def test_ranks_by_measured_disagreement_and_ships_the_cheapest_of_the_tie(cbow, budget):
    rec = recommend(cbow, budget)
    assert isinstance(rec, Recommendation)
    best, pick, ties, mean = _pick_by_hand(cbow, budget)
    assert (rec.dim, rec.bitrate) == pick
    assert rec.memory == rec.dim * rec.bitrate <= budget
    assert rec.n_candidates == sum(d * b <= budget for d in (25, 50, 100, 200, 400, 800)
                                   for b in (1, 2, 4, 8, 16, 32))
    first = rec.candidates.iloc[0]
    assert (first["dim"], first["bitrate"]) == best and first["disagreement"] == pytest.approx(mean[best])
    assert rec.candidates["disagreement"].is_monotonic_increasing
    assert rec.n_ties == len(ties)
    assert (rec.candidates["source"] == "measured").all()
    if len(ties) > 1:
        assert "tie with the best" in rec.tie_note and "inside the other's interval" in rec.tie_note
        assert rec.tie_note in str(rec)
    assert list(rec.predicted_disagreement) == TASKS


def test_the_pick_is_never_chosen_by_raw_eis_across_dimensions(cbow):
    # raw EIS prefers the large tables; the measured disagreement and the tie rule do not care
    raw = cbow.drop_duplicates(["seed", "dim", "bitrate"]).groupby(["dim", "bitrate"])["eis"].mean()
    rec = recommend(cbow, 25600)
    assert raw.idxmin()[0] == 800 and rec.dim != 800
    assert rec.memory < 6400


def test_predicted_flips_come_from_the_calibrated_predictor(cbow):
    rec = recommend(cbow, 400)
    predictor = fit_predictor(cbow)
    chosen = cbow[(cbow["dim"] == rec.dim) & (cbow["bitrate"] == rec.bitrate)]
    pairs = chosen.drop_duplicates(["seed", "dim", "bitrate"])
    query = pd.DataFrame([{"algo": "w2v_cbow", "dim": rec.dim, "bitrate": rec.bitrate, "task": t,
                           **pairs[["eis", "knn", "semantic_displacement", "eigenspace_overlap"]].mean()}
                          for t in TASKS])
    expected = predictor.predict(query).set_index("task")
    for task in TASKS:
        assert rec.predicted_disagreement[task] == pytest.approx(expected.at[task, "predicted"])
        assert rec.predicted_interval[task] == pytest.approx((expected.at[task, "lower"], expected.at[task, "upper"]))
        lo, hi = rec.predicted_interval[task]
        assert lo <= rec.predicted_disagreement[task] <= hi
    observed = chosen.groupby("task")["disagreement"].mean()
    assert rec.observed_disagreement == pytest.approx(observed.to_dict())
    assert all(lo <= rec.observed_disagreement[t] <= hi for t, (lo, hi) in rec.observed_interval.items())
    assert set(rec.models) == set(TASKS) and rec.measure == "eis" and not rec.extrapolated
    assert rec.mean_predicted_disagreement == pytest.approx(np.mean(list(rec.predicted_disagreement.values())))
    assert rec.prediction_note == ""


def _two_algorithms(noise: float = 0.05) -> pd.DataFrame:
    """Algorithm B's EIS is tiny everywhere, A's large, but A flips fewer predictions: only the
    disagreement scale can rank across them."""
    rows = []
    for algo, scale, eis_scale in (("A", 1.0, 0.5), ("B", 3.0, 0.01)):
        for dim in (8, 16, 32):
            for bits in (1, 4, 32):
                for seed in (0, 1, 2):
                    memory = dim * bits
                    base = scale * (50 - 4 * math.log2(memory))
                    rows.append({"algo": algo, "seed": seed, "dim": dim, "bitrate": bits, "task": "t",
                                 "disagreement": base + noise * (seed - 1),
                                 "eis": eis_scale * base / 50 + 1e-4 * seed})
    return pd.DataFrame(rows)


def test_ranks_across_algorithms_on_one_scale():
    df = _two_algorithms()
    rec = recommend(df, 1024)
    assert rec.algo == "A" and (rec.dim, rec.bitrate) == (32, 32)
    raw = df.groupby(["algo", "dim", "bitrate"])["eis"].mean()
    assert raw.idxmin()[0] == "B"  # raw EIS would have shipped algorithm B
    assert set(rec.candidates["algo"]) == {"A", "B"} and rec.tie_note == ""


def test_ties_go_to_the_cheaper_configuration():
    def table(gap: float) -> pd.DataFrame:
        rows = []
        for (dim, bits), value in {(16, 4): 5.0 + gap, (32, 4): 5.0, (64, 4): 12.0}.items():
            for seed, shift in enumerate((-0.5, 0.0, 0.5)):
                rows.append({"algo": "a", "seed": seed, "dim": dim, "bitrate": bits, "task": "t",
                             "disagreement": value + shift, "eis": 0.1 / dim})
        return pd.DataFrame(rows)

    close = recommend(table(0.2), 1000)
    # (32, 4) measured least, (16, 4) within its interval: a tie, and the cheaper one ships
    assert (close.dim, close.bitrate) == (16, 4) and close.candidates.iloc[0]["dim"] == 32
    assert close.n_ties == 2
    assert close.tie_note.startswith("1 configuration(s) tie with the best, a dim=32 4-bit (128 bits per word)")
    assert "the cheapest, a dim=16 4-bit (64 bits per word)" in close.tie_note and "is shipped" in close.tie_note
    best = recommend(table(0.2), 1000, ties=False)
    assert (best.dim, best.bitrate) == (32, 4) and "ties off; the cheapest is a dim=16 4-bit" in best.tie_note
    far = recommend(table(3.0), 1000)
    assert (far.dim, far.bitrate) == (32, 4) and far.n_ties == 1 and far.tie_note == ""


def test_a_configuration_without_a_measured_task_is_placed_by_its_prediction(cbow):
    df = cbow[~((cbow["dim"] == 50) & (cbow["bitrate"] == 8) & (cbow["task"] == "mr"))]
    rec = recommend(df, 400)
    cell = rec.per_task[(rec.per_task["dim"] == 50) & (rec.per_task["bitrate"] == 8) & (rec.per_task["task"] == "mr")]
    assert cell["source"].tolist() == ["predicted"] and cell["disagreement"].notna().all()
    predictor = fit_predictor(df)
    pairs = df[(df["dim"] == 50) & (df["bitrate"] == 8)].drop_duplicates(["seed"])
    query = pd.DataFrame([{"algo": "w2v_cbow", "dim": 50, "bitrate": 8, "task": "mr",
                           **pairs[["eis", "knn", "semantic_displacement", "eigenspace_overlap"]].mean()}])
    assert cell["disagreement"].iloc[0] == pytest.approx(predictor.predict(query)["predicted"].iloc[0])
    row = rec.candidates[(rec.candidates["dim"] == 50) & (rec.candidates["bitrate"] == 8)].iloc[0]
    assert row["source"] == "mixed" and row["ranked"]


def test_the_rows_own_intervals_are_used_when_present(cbow):
    df = cbow.assign(disagreement_low=cbow["disagreement"] - 1.0, disagreement_high=cbow["disagreement"] + 2.0)
    rec = recommend(df, 400, task="sst")
    measured = rec.observed_disagreement["sst"]
    assert rec.observed_interval["sst"] == pytest.approx((measured - 1.0, measured + 2.0))
    first = rec.candidates.iloc[0]
    assert first["upper"] - first["lower"] == pytest.approx(3.0)


def test_one_seed_gives_the_measured_value_without_an_interval(cbow):
    rec = recommend(cbow[cbow["seed"] == 1234], 400, task="ner")
    lo, hi = rec.observed_interval["ner"]
    assert lo == hi == pytest.approx(rec.observed_disagreement["ner"])
    assert rec.n_ties == 1  # nothing overlaps a point, bar an equal value


def test_measure_restricts_what_the_predictions_read(cbow):
    rec = recommend(cbow, 400, measure="knn")
    assert rec.measure == rec.requested_measure == "knn"
    default = recommend(cbow, 400)
    assert (rec.dim, rec.bitrate) == (default.dim, default.bitrate)  # the measured values rank, not the measure
    assert rec.predicted_disagreement != pytest.approx(default.predicted_disagreement)


def test_task_and_algo_filters(cbow):
    rec = recommend(cbow, 400, task="ner", algo="w2v_cbow")
    assert list(rec.predicted_disagreement) == ["ner"]
    assert list(rec.observed_disagreement) == ["ner"]
    assert set(rec.per_task["task"]) == {"ner"}
    with pytest.raises(ResultsError, match="no results for task 'pos'"):
        recommend(cbow, 400, task="pos")
    with pytest.raises(ResultsError, match="no results for algo 'glove'; the results have: w2v_cbow"):
        recommend(cbow, 400, algo="glove")


@pytest.mark.parametrize("budget", [0, -5, float("nan"), "lots"])
def test_invalid_budget(cbow, budget):
    with pytest.raises(BudgetError, match="budget must be"):
        recommend(cbow, budget)


def test_budget_below_every_configuration(cbow):
    with pytest.raises(BudgetError, match="no configuration fits in 24 bits.*25 bits \\(dim=25, bitrate=1\\)"):
        recommend(cbow, 24)


def test_measure_errors(cbow):
    with pytest.raises(UnknownNameError, match="unknown measure 'eigs'"):
        recommend(cbow, 400, measure="eigs")
    with pytest.raises(ResultsError, match="no column for measure 'linear_cka'"):
        recommend(cbow, 400, measure="linear_cka")


def test_accepts_a_path_and_serialises(cbow, tmp_path):
    path = tmp_path / "results.parquet"
    cbow.to_parquet(path, index=False)
    rec = recommend(path, 800)
    assert rec == recommend(PUBLISHED, 800)
    data = json.loads(json.dumps(rec.to_dict()))
    assert data["dim"] == rec.dim and "candidates" not in data and "per_task" not in data
    assert data["predicted_interval"]["sst"] == pytest.approx(list(rec.predicted_interval["sst"]))
    text = str(rec)
    assert f"dim={rec.dim}" in text and f"{rec.bitrate}-bit" in text and "ner" in text
    assert "predicted" in text and "measured" in text
    page = rec._repr_html_()
    assert f"dim={rec.dim}" in page and "<table" in page
    assert f"dim={rec.dim}" in repr(rec)


def test_tiny_results_still_rank_by_what_was_measured():
    # two rows per configuration: too few to calibrate a predictor, enough to rank
    rows = [{"algo": "a", "seed": s, "dim": d, "bitrate": 4, "task": "t", "disagreement": 10.0 - d / 8 + 0.1 * s,
             "eis": 0.1} for d in (8, 16) for s in (0, 1)]
    rec = recommend(pd.DataFrame(rows), 100)
    assert rec.dim == 16 and rec.predicted_disagreement == {} and rec.extrapolated
    assert "no calibration" in rec.prediction_note and rec.prediction_note in str(rec)


def test_predicted_values_never_tie(cbow):
    # leave some configurations unmeasured for every task: they are placed by prediction, and a
    # prediction's interval (one row's noise) must not pull the pick to a cheaper predicted one
    unmeasured = cbow["dim"].isin([50, 200]) & cbow["bitrate"].isin([2, 8])
    results = cbow[~unmeasured]
    extra = cbow[unmeasured].assign(disagreement_source="predicted")
    table = pd.concat([results.assign(disagreement_source="measured"), extra], ignore_index=True)
    notes = []
    for budget in (200, 800, 3200):
        rec = recommend(table, budget)
        predicted = rec.candidates[rec.candidates["source"] == "predicted"]
        assert len(predicted) and not predicted.drop(index=0, errors="ignore")["tie"].any()
        if rec.candidates.iloc[0]["source"] != "measured":
            assert rec.n_ties == 1
        # but the output says which predicted places overlap the best one's interval
        ranked = rec.candidates[rec.candidates["ranked"]]
        best, others = ranked.iloc[0], ranked.iloc[1:]
        overlap = others[(others["lower"] <= best["upper"]) & (others["upper"] >= best["lower"])]
        if best["source"] == "measured":
            overlap = overlap[overlap["source"] != "measured"]
        said = re.search(r"(\d+) (?:other )?configuration\(s\) (?:placed by prediction )?overlap", rec.overlap_note)
        assert (int(said.group(1)) if said else 0) == len(overlap)
        if len(overlap):  # which to measure, cheapest first
            first = overlap.sort_values(["memory", "disagreement"], kind="stable").iloc[0]
            assert f"cheapest first: w2v_cbow dim={first['dim']} {first['bitrate']}-bit" in rec.overlap_note
        assert rec.overlap_note in str(rec) and rec.to_dict()["overlap_note"] == rec.overlap_note
        notes.append(rec.overlap_note)
    assert any(notes) and "the predictions cannot order them" in "".join(notes)


def test_a_best_placed_by_prediction_says_how_many_it_cannot_order(cbow):
    unmeasured = (cbow["dim"] == 200) & (cbow["bitrate"] == 8)
    table = pd.concat([cbow[~unmeasured].assign(disagreement_source="measured"),
                       cbow[unmeasured].assign(disagreement_source="predicted")], ignore_index=True)
    rec = recommend(table, 1600)
    best = rec.candidates.iloc[0]
    assert (best["dim"], best["bitrate"], best["source"]) == (200, 8, "predicted")
    others = rec.candidates[rec.candidates["ranked"]].iloc[1:]
    n = int(((others["lower"] <= best["upper"]) & (others["upper"] >= best["lower"])).sum())
    assert n > 1 and rec.overlap_note.startswith("The best, w2v_cbow dim=200 8-bit (1600 bits per word), is placed "
                                                 f"by prediction, [{best['lower']:.2f}, {best['upper']:.2f}], and {n} other")

"""embstab.recommend: the configuration to ship under a memory budget."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from embstab.errors import UnknownNameError
import pytest

from embstab.selection.recommend import Recommendation, recommend
from embstab.selection import BudgetError, ResultsError, fit_trend, from_published_csv

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"


@pytest.fixture(scope="module")
def cbow() -> pd.DataFrame:
    return from_published_csv(PUBLISHED)


def _best_by_hand(df: pd.DataFrame, budget: float, measure: str, larger: bool):
    pairs = df[df["task"] == df["task"].iloc[0]]
    mean = pairs.groupby(["dim", "bitrate"])[measure].mean()
    mean = mean[[d * b <= budget for d, b in mean.index]]
    return mean.idxmax() if larger else mean.idxmin()


@pytest.mark.parametrize("budget", [50, 400, 800, 3000])
def test_recommend_picks_the_best_eis_under_the_budget(cbow, budget):
    rec = recommend(cbow, budget)
    assert isinstance(rec, Recommendation)
    assert (rec.dim, rec.bitrate) == _best_by_hand(cbow, budget, "eis", larger=False)
    assert rec.memory == rec.dim * rec.bitrate <= budget
    assert rec.n_candidates == sum(d * b <= budget for d in (25, 50, 100, 200, 400, 800)
                                   for b in (1, 2, 4, 8, 16, 32))
    assert list(rec.predicted_disagreement) == ["sst", "mr", "subj", "mpqa", "ner"]


def test_recommend_knn_uses_the_larger_is_better_direction(cbow):
    rec = recommend(cbow, 400, measure="knn")
    assert (rec.dim, rec.bitrate) == _best_by_hand(cbow, 400, "knn", larger=True)
    assert rec.candidates["knn"].iloc[0] == rec.candidates["knn"].max()


def test_predicted_and_observed_disagreement(cbow):
    rec = recommend(cbow, 400)
    trend = fit_trend(cbow)
    c = dict(zip(trend.intercepts["task"], trend.intercepts["intercept"]))
    for task, value in rec.predicted_disagreement.items():
        assert value == pytest.approx(trend.slope * math.log2(rec.memory) + c[task])
    chosen = cbow[(cbow["dim"] == rec.dim) & (cbow["bitrate"] == rec.bitrate)]
    observed = chosen.groupby("task")["disagreement"].mean()
    assert rec.observed_disagreement == pytest.approx(observed.to_dict())
    assert rec.trend_slope == pytest.approx(trend.slope)
    assert not rec.extrapolated
    assert rec.mean_predicted_disagreement == pytest.approx(
        np.mean(list(rec.predicted_disagreement.values())))


def test_beyond_the_fitted_range_is_flagged_and_never_negative(cbow):
    rec = recommend(cbow, 25600)
    assert rec.extrapolated
    assert all(0 <= v <= 100 for v in rec.predicted_disagreement.values())
    assert min(rec.predicted_disagreement.values()) == 0.0  # subj's line crosses zero here


def test_task_and_algo_filters(cbow):
    rec = recommend(cbow, 400, task="ner", algo="w2v_cbow")
    assert list(rec.predicted_disagreement) == ["ner"]
    assert list(rec.observed_disagreement) == ["ner"]
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


def test_ties_prefer_the_cheaper_configuration():
    rows = []
    for seed in (1, 2):
        for d, b in [(10, 1), (10, 2), (20, 1), (20, 2), (40, 1)]:
            rows.append({"algo": "a", "seed": seed, "dim": d, "bitrate": b, "task": "t",
                         "disagreement": 10.0 - math.log2(d * b) + seed,
                         "eis": 0.01 if d * b >= 20 else 0.5})
    rec = recommend(pd.DataFrame(rows), 40)
    # Four configs tie on eis; the cheapest memory (20) wins, and of the two at 20 bits the one
    # listed first in the results.
    assert (rec.memory, rec.dim, rec.bitrate) == (20, 10, 2)
    assert rec.candidates["n_seeds"].eq(2).all()


def test_accepts_a_path_and_serialises(cbow, tmp_path):
    path = tmp_path / "results.parquet"
    cbow.to_parquet(path, index=False)
    rec = recommend(path, 800)
    assert rec == recommend(PUBLISHED, 800)
    data = json.loads(json.dumps(rec.to_dict()))
    assert data["dim"] == rec.dim and "candidates" not in data
    text = str(rec)
    assert f"dim={rec.dim}" in text and f"{rec.bitrate}-bit" in text and "ner" in text


def _one_dimension_results(bit_widths, dim: int = 384) -> pd.DataFrame:
    """A contextual-like table: one dimension, several bit widths, disagreement falling with memory."""
    rows = []
    for b in bit_widths:
        for seed in range(2):
            rows.append({"algo": "bert", "dim": dim, "bitrate": b, "seed": seed, "task": "rt_sentiment",
                         "eis": 0.01 / b + 0.001 * seed, "disagreement": 12.0 - 2.0 * math.log2(b) + seed})
    return pd.DataFrame(rows)


def test_trend_falls_back_to_every_row_when_the_threshold_leaves_one_memory():
    # 384 x 2 bits is the only memory below 1000 bits: the slope is fitted on every row instead
    df = _one_dimension_results([2, 3, 4, 8, 32])
    rec = recommend(df, 1536)
    assert (rec.dim, rec.bitrate) == (384, 4)
    assert "fitted on every row" in rec.trend_note and "fitted on every row" in str(rec)
    assert rec.trend_slope == pytest.approx(fit_trend(df, threshold=None).slope)
    assert rec.trend_slope == pytest.approx(-2.0)
    assert rec.predicted_disagreement["rt_sentiment"] == pytest.approx(12.0 - 2.0 * math.log2(4) + 0.5)
    # the word regime keeps its threshold and says nothing
    assert recommend(_one_dimension_results([1, 2, 4, 8, 32], dim=25), 100).trend_note == ""


def test_recommendation_without_any_trend_shows_the_measured_disagreement():
    df = _one_dimension_results([4])
    rec = recommend(df, 4000)
    assert rec.predicted_disagreement == {} and math.isnan(rec.trend_slope) and not rec.extrapolated
    assert math.isnan(rec.mean_predicted_disagreement)
    assert "No memory trend" in rec.trend_note
    text = str(rec)
    assert "no memory trend to predict from" in text and "rt_sentiment" in text
    assert rec.observed_disagreement["rt_sentiment"] == pytest.approx(8.5)

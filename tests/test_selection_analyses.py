"""The analyses on small hand-checkable tables: directions, ties, baselines, the trend fit."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from embstab.errors import UnknownNameError
import pytest

from embstab.selection import (
    ResultsError,
    fit_trend,
    oracle_decisions,
    oracle_gap,
    pairwise_votes,
    selection_error,
    spearman_table,
    wide,
)

DIMS = [25, 50, 100, 200]
BITS = [1, 2, 4, 8]


def grid(seeds=(1, 2), tasks=("sst", "ner"), algos=("w2v",), rng_seed=0) -> pd.DataFrame:
    """A full grid whose disagreement follows a clean linear-log trend plus noise."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for algo, seed, task, d, b in itertools.product(algos, seeds, tasks, DIMS, BITS):
        di = 20.0 - 1.5 * np.log2(d * b) + rng.normal(0, 0.3) + (2.0 if task == "ner" else 0.0)
        rows.append({"algo": algo, "seed": seed, "dim": d, "bitrate": b, "task": task,
                     "disagreement": di, "quality": 80.0})
    return pd.DataFrame(rows)


def with_measures(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    # eis equals the disagreement (a perfect distance); knn is a perfect similarity;
    # pip_loss ranks exactly backwards.
    out["eis"] = out["disagreement"] / 100
    out["knn"] = 1 - out["disagreement"] / 100
    out["pip_loss"] = 100 - out["disagreement"]
    return out


def test_pairwise_votes_ties_go_to_the_first_index():
    # Equal measure values: the vote goes to i; the truth is j (smaller disagreement) -> wrong.
    wrong, gap, pairs = pairwise_votes(np.array([1.0, 1.0]), np.array([3.0, 2.0]),
                                       larger_is_more_stable=False)
    assert wrong.tolist() == [True] and gap.tolist() == [1.0] and pairs.tolist() == [[0, 1]]
    # Equal disagreement: the truth is i; a distance that prefers j is wrong, one that ties is right.
    assert pairwise_votes(np.array([2.0, 1.0]), np.array([1.0, 1.0]),
                          larger_is_more_stable=False)[0].tolist() == [True]
    assert pairwise_votes(np.array([1.0, 1.0]), np.array([1.0, 1.0]),
                          larger_is_more_stable=True)[0].tolist() == [False]
    # A similarity votes for the larger value.
    assert pairwise_votes(np.array([0.2, 0.9]), np.array([3.0, 2.0]),
                          larger_is_more_stable=True)[0].tolist() == [False]


def test_pairwise_votes_enumerates_pairs_like_itertools():
    _, _, pairs = pairwise_votes(np.arange(5.0), np.arange(5.0), larger_is_more_stable=False)
    assert [tuple(p) for p in pairs] == list(itertools.combinations(range(5), 2))
    _, _, same = pairwise_votes(np.arange(4.0), np.arange(4.0), larger_is_more_stable=False,
                                memory=np.array([1, 2, 1, 2]), same_space=True)
    assert [tuple(p) for p in same] == [(0, 2), (1, 3)]


def test_perfect_and_backwards_measures():
    df = with_measures(grid())
    rho = wide(spearman_table(df), "spearman")
    np.testing.assert_allclose(rho.loc[["eis", "knn"]].to_numpy(), 1.0)
    np.testing.assert_allclose(rho.loc["pip_loss"].to_numpy(), -1.0)
    sel = selection_error(df).set_index(["measure", "task"])
    n_configs = len(DIMS) * len(BITS)
    assert (sel["n_pairs"] == 2 * n_configs * (n_configs - 1) // 2).all()
    assert (sel.loc["eis", "selection_error"] == 0).all()
    assert (sel.loc["knn", "selection_error"] == 0).all()
    assert (sel.loc["eis", "robustness"] == 0).all()
    assert (sel.loc["pip_loss", "selection_error"] == 1).all()
    # Backwards: the worst wrong vote is the widest disagreement gap of a seed.
    widest = df.groupby(["task", "seed"])["disagreement"].agg(lambda s: s.max() - s.min())
    for task in ("sst", "ner"):
        assert sel.loc[("pip_loss", task), "robustness"] == pytest.approx(widest[task].max())


def test_selection_error_by_hand():
    # One seed, three configs; measure order 0 < 2 < 1, disagreement order 1 < 0 < 2.
    df = pd.DataFrame({"algo": "a", "seed": 1, "dim": [1, 2, 3], "bitrate": 1, "task": "t",
                       "disagreement": [2.0, 1.0, 4.0], "eis": [0.1, 0.3, 0.2]})
    # pairs (0,1): vote 0, truth 1 -> wrong (gap 1); (0,2): vote 0, truth 0 -> right;
    # (1,2): vote 2, truth 1 -> wrong (gap 3).
    row = selection_error(df).iloc[0]
    assert row["selection_error"] == pytest.approx(2 / 3)
    assert row["robustness"] == 3.0
    assert selection_error(df, max_memory=2).iloc[0]["selection_error"] == 1.0
    with pytest.raises(ResultsError, match="memory <= 0.5"):
        selection_error(df, max_memory=0.5)
    with pytest.raises(ResultsError, match="no pair"):
        selection_error(df, same_space=True)


def test_spearman_constant_measure_is_nan():
    df = with_measures(grid(seeds=(1,)))
    df["eis"] = 0.5
    table = spearman_table(df, measures=["eis"])
    assert table["spearman"].isna().all()


def test_unknown_or_missing_measure_is_named():
    df = with_measures(grid(seeds=(1,)))
    with pytest.raises(UnknownNameError, match="unknown measure 'foo'"):
        spearman_table(df, measures=["foo"])
    with pytest.raises(ResultsError, match="no column for measure 'linear_cka'"):
        selection_error(df, measures=["linear_cka"])
    with pytest.raises(ResultsError, match="no measure column"):
        oracle_gap(grid(seeds=(1,)))


def test_oracle_gap_baselines_and_perfect_selector():
    df = with_measures(grid())
    decisions = oracle_decisions(df)
    # Budgets with >= 2 configs of a 4 x 4 grid of powers of two: 50 ... 800 minus the extremes.
    budgets = sorted(decisions["memory"].unique())
    memory = df["dim"] * df["bitrate"]
    expected = sorted(m for m, n in memory[df["task"] == "sst"].value_counts().items() if n >= 4)
    assert budgets == expected
    hp = decisions[decisions["selector"] == "highest_precision"]
    lp = decisions[decisions["selector"] == "lowest_precision"]
    for m, group in df.assign(memory=memory).groupby("memory"):
        if m in budgets:
            assert set(hp[hp["memory"] == m]["bitrate"]) == {group["bitrate"].max()}
            assert set(lp[lp["memory"] == m]["bitrate"]) == {group["bitrate"].min()}
    gap = oracle_gap(df).set_index(["selector", "task"])
    assert (gap.loc["eis", "max_gap"] == 0).all() and (gap.loc["knn", "max_gap"] == 0).all()
    assert (gap["mean_gap"] >= 0).all()
    assert (gap.loc["pip_loss", "mean_gap"] > 0).all()
    assert list(dict.fromkeys(oracle_gap(df)["selector"]))[-2:] == ["highest_precision",
                                                                    "lowest_precision"]


def test_oracle_gap_needs_a_budget_with_a_choice():
    df = pd.DataFrame({"algo": "a", "seed": 1, "dim": [1, 2], "bitrate": 1, "task": "t",
                       "disagreement": [2.0, 1.0], "eis": [0.1, 0.3]})
    with pytest.raises(ResultsError, match="two or more configurations"):
        oracle_gap(df)


def test_fit_trend_recovers_an_exact_trend_and_respects_the_threshold():
    df = grid(seeds=(1,), tasks=("sst", "mr"))
    df["disagreement"] = -2.0 * np.log2(df["dim"] * df["bitrate"]) + df["task"].map(
        {"sst": 30.0, "mr": 25.0})
    # Rows at or above the threshold are off-trend and must be ignored.
    df.loc[df["dim"] * df["bitrate"] >= 400, "disagreement"] = 99.0
    fit = fit_trend(df, threshold=400)
    assert fit.slope == pytest.approx(-2.0, abs=1e-12)
    assert dict(zip(fit.intercepts["task"], fit.intercepts["intercept"])) == pytest.approx(
        {"sst": 30.0, "mr": 25.0}, abs=1e-10)
    assert fit.r_squared == pytest.approx(1.0)
    assert fit.n_rows == int((df["dim"] * df["bitrate"] < 400).sum())
    query = pd.DataFrame({"algo": "w2v", "task": ["mr"], "dim": [1024], "bitrate": [4]})
    assert fit.predict(query)[0] == pytest.approx(-2.0 * 12 + 25.0)
    with pytest.raises(ResultsError, match="no fitted intercept for algo='w2v', task='zz'"):
        fit.predict(query.assign(task="zz"))


def test_fit_trend_variants_share_one_slope_across_algorithms():
    df = grid(algos=("a", "b"))
    for variant, extra in [("precision", "dim"), ("dimension", "bitrate")]:
        fit = fit_trend(df, variant=variant, threshold=None)
        assert fit.group_columns == ["algo", "task", extra]
        assert len(fit.intercepts) == 2 * 2 * 4  # algos x tasks x values of the extra column
        assert fit.slope == pytest.approx(-1.5, abs=0.2)


def test_fit_trend_errors():
    df = grid(seeds=(1,))
    with pytest.raises(UnknownNameError, match="unknown trend variant 'size'"):
        fit_trend(df, variant="size")
    with pytest.raises(ResultsError, match="no row has memory < 10"):
        fit_trend(df, threshold=10)
    with pytest.raises(ResultsError, match="positive number"):
        fit_trend(df, threshold=-1)
    one_bitrate = df[df["bitrate"] == 2]
    with pytest.raises(ResultsError, match="precision trend's slope is not identified"):
        fit_trend(one_bitrate, variant="precision", threshold=None)


def test_multiple_algorithms_are_analysed_separately():
    df = with_measures(grid(algos=("a", "b")))
    rho = wide(spearman_table(df), "spearman")
    assert rho.index.names == ["algo", "measure"]
    assert ("b", "knn") in rho.index
    gap = oracle_gap(df)
    assert set(gap["algo"]) == {"a", "b"}


def _literal_selection(df: pd.DataFrame, measure: str, larger: bool):
    """Literal float64 reference: loops over itertools.combinations with np.argmin/np.argmax."""
    errs, worst = [], []
    for seed in dict.fromkeys(df["seed"]):
        sub = df[df["seed"] == seed]
        v, di = sub[measure].tolist(), sub["disagreement"].tolist()
        wrong, n, rob = 0, 0, 0.0
        for i, j in itertools.combinations(range(len(sub)), 2):
            vote = np.argmax([v[i], v[j]]) if larger else np.argmin([v[i], v[j]])
            truth = np.argmin([di[i], di[j]])
            n += 1
            if vote != truth:
                wrong += 1
                rob = max(rob, abs(di[i] - di[j]))
        errs.append(wrong / n)
        worst.append(rob)
    return float(np.mean(errs)), float(np.max(worst))


def _literal_oracle(df: pd.DataFrame, measure: str, larger: bool):
    gaps = []
    for memory in sorted(set(df["dim"] * df["bitrate"])):
        for seed in dict.fromkeys(df["seed"]):
            sub = df[(df["dim"] * df["bitrate"] == memory) & (df["seed"] == seed)]
            if len(sub) < 2:
                continue
            v, di = sub[measure].to_numpy(), sub["disagreement"].to_numpy()
            k = np.argmax(v) if larger else np.argmin(v)
            gaps.append(di[k] - di.min())
    return float(np.mean(gaps)), float(np.max(gaps))


@pytest.mark.parametrize("rng_seed", [0, 1, 2])
def test_vectorised_analyses_match_a_literal_loop_with_many_ties(rng_seed):
    rng = np.random.default_rng(rng_seed)
    df = grid(seeds=(1, 2, 3), tasks=("sst",))
    # Coarse integer values make ties common, which is where first-index rules matter.
    df["disagreement"] = rng.integers(0, 4, len(df)).astype(float)
    df["eis"] = rng.integers(0, 3, len(df)) / 10
    df["knn"] = rng.integers(0, 3, len(df)) / 10
    df = df.sample(frac=1.0, random_state=rng_seed).reset_index(drop=True)  # arbitrary row order
    sel = selection_error(df).set_index("measure")
    gap = oracle_gap(df).set_index("selector")
    for name, larger in [("eis", False), ("knn", True)]:
        err, rob = _literal_selection(df, name, larger)
        assert sel.loc[name, "selection_error"] == pytest.approx(err, abs=1e-12)
        assert sel.loc[name, "robustness"] == rob
        mean, worst = _literal_oracle(df, name, larger)
        assert gap.loc[name, "mean_gap"] == pytest.approx(mean, abs=1e-12)
        assert gap.loc[name, "max_gap"] == worst

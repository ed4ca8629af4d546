"""Every Spearman ρ with its bootstrap interval: the intervals cover the true ρ at their nominal rate,
within-dimension tables partition the rows, and a best measure is named only where intervals separate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from embstab.selection import best_measures, bootstrap_interval, from_published_csv, spearman_table, with_intervals

PUBLISHED = Path(__file__).parent / "data" / "w2v_cbow_published.csv"


def test_intervals_cover_the_true_rho_at_about_their_level():
    # bivariate normal with Pearson r: Spearman's population ρ is (6/π) asin(r/2)
    r, n, trials = 0.6, 40, 300
    truth = 6 / np.pi * np.arcsin(r / 2)
    rng = np.random.default_rng(20261125)
    cov = [[1, r], [r, 1]]
    hits = 0
    for t in range(trials):
        x, y = rng.multivariate_normal([0, 0], cov, size=n).T
        low, high = bootstrap_interval(x, y, n_boot=1000, seed=t)
        hits += low <= truth <= high
    assert 0.88 <= hits / trials <= 0.99  # percentile intervals run a little short at n = 40


def test_interval_is_seeded_and_shrinks_with_more_rows():
    rng = np.random.default_rng(5)
    x = rng.normal(size=400)
    y = x + rng.normal(size=400)
    assert bootstrap_interval(x, y, seed=3) == bootstrap_interval(x, y, seed=3)
    small = bootstrap_interval(x[:25], y[:25], seed=3)
    large = bootstrap_interval(x, y, seed=3)
    assert large[1] - large[0] < small[1] - small[0]
    assert np.isnan(bootstrap_interval(x[:2], y[:2])).all()  # too few rows
    assert np.isnan(bootstrap_interval(np.ones(30), y[:30])[0])  # a constant side has no ranking


def test_published_table_rho_is_scipys_and_lies_in_its_interval():
    df = from_published_csv(PUBLISHED)
    table = spearman_table(df)
    assert {"ci_low", "ci_high"} <= set(table.columns)
    for row in table.itertuples():
        part = df[df["task"] == row.task]
        value = part[row.measure].to_numpy()
        dist = 1 - value if row.measure in ("knn", "eigenspace_overlap") else value
        assert row.spearman == pytest.approx(stats.spearmanr(dist, part["disagreement"]).statistic, abs=1e-12)
        assert row.ci_low <= row.spearman <= row.ci_high


def test_within_dimension_partitions_the_rows():
    df = from_published_csv(PUBLISHED)
    pooled = spearman_table(df, n_boot=0)
    inside = spearman_table(df, within="dim", n_boot=200)
    assert set(inside["dim"]) == set(df["dim"])
    sums = inside.groupby(["measure", "task"])["n_rows"].sum()
    assert sums.to_dict() == pooled.set_index(["measure", "task"])["n_rows"].to_dict()
    assert pooled["ci_low"].isna().all()  # n_boot=0: no interval


def _table(rows):
    return pd.DataFrame([{"algo": "x", "task": "t", "measure": m, "spearman": s, "ci_low": lo, "ci_high": hi,
                          "n_rows": 50} for m, s, lo, hi in rows])


def test_a_best_measure_is_named_only_where_intervals_separate():
    clear = best_measures(_table([("eis", 0.8, 0.7, 0.9), ("knn", 0.4, 0.2, 0.6)]))
    assert clear["best"].tolist() == ["eis"]
    tied = best_measures(_table([("eis", 0.8, 0.5, 0.9), ("knn", 0.6, 0.4, 0.7)]))
    assert tied["best"].tolist() == [None] and "eis, knn overlap" in tied["note"][0]
    nothing = best_measures(_table([("eis", 0.2, -0.1, 0.5), ("knn", -0.3, -0.6, 0.0)]))
    assert nothing["best"].tolist() == [None] and "above 0" in nothing["note"][0]
    # one task with a best measure, one without: None stays None (not NaN, which reads as true)
    mixed = best_measures(pd.concat([_table([("eis", 0.8, 0.7, 0.9), ("knn", 0.4, 0.2, 0.6)]),
                                     _table([("eis", 0.8, 0.5, 0.9), ("knn", 0.6, 0.4, 0.7)]).assign(task="u")]))
    assert mixed["best"].tolist() == ["eis", None]


def test_cells_show_rho_and_interval():
    shown = with_intervals(_table([("eis", 0.8, 0.7, 0.9), ("knn", np.nan, np.nan, np.nan)]))
    assert shown.loc["eis", "t"] == "0.80 [0.70, 0.90]" and shown.loc["knn", "t"] == "n/a"


@pytest.mark.parametrize("kwargs, message", [
    ({"n_boot": -1}, "n_boot must be an integer >= "),
    ({"n_boot": 2.5}, "n_boot must be an integer >= "),
    ({"level": 2}, "level must be a coverage in \\(0, 1\\)"),
    ({"level": 0}, "level must be a coverage in \\(0, 1\\)"),
])
def test_interval_settings_that_give_no_interval_are_refused(kwargs, message):
    # level = 0 used to give a zero-width "interval" without a word
    from embstab.errors import ConfigError
    from embstab.selection import spearman_table
    from embstab.selection.correlation import bootstrap_interval

    x = np.arange(10.0)
    with pytest.raises(ConfigError, match=message):
        bootstrap_interval(x, x[::-1], **kwargs)
    table = pd.DataFrame({"algo": "a", "task": "t", "dim": np.arange(10), "bits": 32, "seed": 0,
                          "disagreement": x, "eis": x[::-1]})
    with pytest.raises(ConfigError, match=message):
        spearman_table(table, **kwargs)

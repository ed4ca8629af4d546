"""Golden test: the port reproduces the reference scripts' CBOW tables (spec measures.md §6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embstab.selection import (
    fit_trend,
    from_published_csv,
    oracle_gap,
    selection_error,
    spearman_table,
    wide,
)

from _shared import shared_file

# The repository's copy of ../shared/data/anchor_stability/w2v_cbow_optimal_no_emb_norm_top_10000.csv,
# so that the golden tables are checked on a fresh clone too.
REPO_CSV = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"
TASKS = ["sst", "mr", "subj", "mpqa", "ner"]
MEASURES = ["eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap"]


@pytest.fixture(scope="module")
def cbow() -> pd.DataFrame:
    return from_published_csv(REPO_CSV)


def _table(rows: list[list[float]], index: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, index=index, columns=TASKS)


def _assert_printed(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Equal to the digits printed in the spec (2 decimals)."""
    got = actual.loc[expected.index, TASKS].round(2)
    pd.testing.assert_frame_equal(got, expected, check_names=False, check_exact=False,
                                  atol=1e-9, rtol=0)


def test_repo_copy_is_the_shared_fixture():
    # The notebooks and the golden tests use the in-repo copy; it must be the same published file.
    shared = shared_file("anchor_stability/w2v_cbow_optimal_no_emb_norm_top_10000.csv")
    assert REPO_CSV.read_bytes() == shared.read_bytes()


def test_spearman_table_matches_spec(cbow):
    expected = _table([[0.68, 0.86, 0.72, 0.75, 0.80],
                       [0.74, 0.85, 0.73, 0.77, 0.76],
                       [0.70, 0.63, 0.45, 0.68, 0.53],
                       [-0.40, -0.11, -0.14, -0.38, 0.01],
                       [0.63, 0.66, 0.50, 0.68, 0.58]], MEASURES)
    table = spearman_table(cbow)
    assert (table["n_rows"] == 108).all()  # all rows pooled: 6 dims x 6 bit widths x 3 seeds
    _assert_printed(wide(table, "spearman"), expected)


def test_selection_error_matches_spec(cbow):
    expected = _table([[0.23, 0.14, 0.24, 0.22, 0.20],
                       [0.21, 0.15, 0.23, 0.21, 0.21],
                       [0.24, 0.26, 0.34, 0.24, 0.29],
                       [0.64, 0.52, 0.57, 0.64, 0.50],
                       [0.28, 0.27, 0.32, 0.25, 0.29]], MEASURES)
    table = selection_error(cbow)
    assert (table["n_pairs"] == 3 * 630).all() and (table["n_seeds"] == 3).all()
    _assert_printed(wide(table, "selection_error"), expected)
    # Robustness is a disagreement gap between two configs of the table: bounded by its range.
    span = cbow.groupby("task")["disagreement"].agg(lambda s: s.max() - s.min())
    rob = wide(table, "robustness")
    assert (rob > 0).all().all()
    assert all((rob[t] <= span[t] + 1e-12).all() for t in TASKS)


def test_selection_error_same_space_uses_55_pairs(cbow):
    table = selection_error(cbow, same_space=True)
    assert (table["n_pairs"] == 3 * 55).all()
    assert table["selection_error"].between(0, 1).all()


def test_oracle_gap_matches_spec_including_baselines(cbow):
    mean = _table([[0.65, 0.69, 0.39, 0.34, 0.28],
                   [0.57, 0.71, 0.38, 0.32, 0.32],
                   [0.37, 0.72, 0.48, 0.56, 0.27],
                   [3.63, 3.33, 1.16, 3.24, 0.83],
                   [0.88, 0.84, 0.34, 0.51, 0.20],
                   [0.85, 1.55, 0.61, 0.40, 0.60],
                   [3.63, 3.33, 1.16, 3.24, 0.83]],
                  MEASURES + ["highest_precision", "lowest_precision"])
    worst = _table([[3.08, 3.94, 1.80, 1.32, 0.84],
                    [3.02, 3.94, 1.80, 1.60, 1.29]], ["eis", "knn"])
    table = oracle_gap(cbow)
    assert (table["n_decisions"] == 27).all()  # 9 budgets x 3 seeds
    _assert_printed(wide(table, "mean_gap", index="selector"), mean)
    _assert_printed(wide(table, "max_gap", index="selector"), worst)
    assert (table["mean_gap"] >= 0).all()


def test_sanity_values_of_the_published_table(cbow):
    di = cbow.groupby(["dim", "bitrate", "task"])["disagreement"].mean().unstack()[TASKS]
    np.testing.assert_allclose(di.loc[(25, 1)].round(2), [18.03, 14.46, 6.53, 9.24, 9.90])
    np.testing.assert_allclose(di.loc[(800, 32)].round(2), [4.87, 5.25, 1.77, 3.52, 4.64])
    pairs = cbow[cbow["task"] == "sst"].groupby(["dim", "bitrate"])[["eis", "knn"]].mean()
    assert round(pairs.loc[(25, 1), "eis"], 3) == 0.072
    assert round(pairs.loc[(800, 32), "eis"], 4) == 0.0024
    assert round(pairs.loc[(25, 1), "knn"], 2) == 0.32
    assert round(pairs.loc[(800, 32), "knn"], 2) == 0.93
    # 8-bit quantization is almost lossless: 16 vs 32 bits agree to 3 significant digits.
    hi = cbow[cbow["task"] == "sst"].set_index(["seed", "dim", "bitrate"])
    for name in MEASURES:
        a = hi.xs(16, level="bitrate")[name]
        b = hi.xs(32, level="bitrate")[name]
        np.testing.assert_allclose(a, b, rtol=5e-3)


def _lstsq_trend(df: pd.DataFrame, x_col: str, group_cols: list[str], threshold: float):
    """Independent formulation: dummy-coded design from pandas, solved by np.linalg.lstsq."""
    rows = df[df["memory"] < threshold]
    dummies = pd.get_dummies(rows[group_cols].astype(str).agg("|".join, axis=1), dtype=float)
    design = np.column_stack([np.log2(rows[x_col].to_numpy(float)), dummies.to_numpy()])
    coef, *_ = np.linalg.lstsq(design, rows["disagreement"].to_numpy(float), rcond=None)
    intercepts = dict(zip(dummies.columns, coef[1:]))
    return coef[0], intercepts, len(rows)


@pytest.mark.parametrize("variant,x_col,extra", [("memory", "memory", None),
                                                  ("precision", "bitrate", "dim"),
                                                  ("dimension", "dim", "bitrate")])
def test_fit_trend_matches_independent_least_squares(cbow, variant, x_col, extra):
    group_cols = ["algo", "task"] + ([extra] if extra else [])
    slope, intercepts, n_rows = _lstsq_trend(cbow, x_col, group_cols, 1000)
    fit = fit_trend(cbow, variant=variant, threshold=1000)
    assert fit.n_rows == n_rows == 315  # 21 configs x 3 seeds x 5 tasks below 1000 bits
    assert fit.slope == pytest.approx(slope, rel=1e-10, abs=1e-12)
    assert fit.slope < 0  # more memory, fewer flipped predictions
    assert len(fit.intercepts) == len(intercepts)
    for row in fit.intercepts.itertuples(index=False):
        key = "|".join(str(getattr(row, c)) for c in group_cols)
        assert row.intercept == pytest.approx(intercepts[key], rel=1e-10, abs=1e-10)


def test_fit_trend_memory_rows_per_group(cbow):
    fit = fit_trend(cbow)
    assert list(fit.intercepts["task"]) == TASKS
    assert (fit.intercepts["n_rows"] == 63).all()  # 21 configs x 3 seeds per algo-task
    assert 0 < fit.r_squared < 1

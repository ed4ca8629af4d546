"""Spearman rank correlation between each stability measure and downstream disagreement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from embstab._numbers import is_integer, is_real
from embstab.errors import ConfigError
from embstab.selection._common import groups, order_by, resolve_measures
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results, measure_distance, wide

__all__ = ["spearman_table", "bootstrap_interval", "best_measures", "with_intervals", "N_BOOT"]


#: Bootstrap resamples behind each interval.
N_BOOT = 2000


def _ranks(a: np.ndarray) -> np.ndarray:
    # average ranks along the last axis (ties shared), as Spearman's ρ defines them
    return stats.rankdata(a, axis=-1)


def _rho(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman ρ along the last axis (NaN where either side is constant)."""
    rx, ry = _ranks(x), _ranks(y)
    rx = rx - rx.mean(axis=-1, keepdims=True)
    ry = ry - ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)


def _check_interval(n_boot: Any, level: Any, at_least: int) -> None:
    """Refuse resample counts and coverages that give no interval (or a meaningless one)."""
    if not is_integer(n_boot) or n_boot < at_least:
        raise ConfigError(f"n_boot must be an integer >= {at_least}, got {n_boot!r}")
    if not is_real(level) or not 0 < level < 1:
        raise ConfigError(f"level must be a coverage in (0, 1), e.g. 0.95, got {level!r}")


def bootstrap_interval(x: np.ndarray, y: np.ndarray, *, n_boot: int = N_BOOT, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of Spearman's ρ, resampling rows (pairs) with replacement.

    Parameters
    ----------
    x, y : array of shape (n,)
        Paired values.
    n_boot : int
        Resamples.
    level : float
        Coverage of the interval.
    seed : int
        Seed of the resampling (a local generator).

    Returns
    -------
    (float, float)
        The interval; NaN when fewer than 3 rows, or when most resamples have a constant side.
    """
    _check_interval(n_boot, level, at_least=1)
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3:
        return np.nan, np.nan
    rng = np.random.default_rng(seed)
    rhos = np.empty(n_boot)
    for start in range(0, n_boot, 256):  # bounded memory: 256 resamples at a time
        idx = rng.integers(0, len(x), size=(min(256, n_boot - start), len(x)))
        rhos[start:start + len(idx)] = _rho(x[idx], y[idx])
    finite = rhos[np.isfinite(rhos)]
    if len(finite) < n_boot / 2:
        return np.nan, np.nan
    tail = (1 - level) / 2
    return float(np.quantile(finite, tail)), float(np.quantile(finite, 1 - tail))


def spearman_table(df: pd.DataFrame, measures: Sequence[str] | None = None, *, within: str | None = None,
                   n_boot: int = N_BOOT, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Spearman ρ between each measure (as a distance) and the disagreement, per task, with its interval.

    Follows the paper's correlation table: for every (measure, task), ρ is computed over **all**
    rows of an algorithm pooled (all seeds and memory budgets), with k-NN and eigenspace overlap
    turned into distances (``1 - value``) so that a positive ρ always means "the measure ranks
    unstable pairs as unstable". Each ρ comes with a percentile bootstrap interval over the rows
    (seeded): a ρ whose interval holds 0 does not show that the measure predicts anything, and two
    measures rank apart only where their intervals do not overlap.

    A ρ pooled over dimensions can measure the dimension rather than the instability (several
    measures move with d/n whatever the pair); ``within="dim"`` (or ``"bits"``) gives ρ inside
    each dimension (bit width) instead.

    Parameters
    ----------
    df : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention (or a path / published-format table).
    measures : sequence of str, optional
        Registry names to evaluate; default every measure column present.
    within : str, optional
        A column (``"dim"``, ``"bits"``) to compute ρ inside each of its values.
    n_boot : int, default 2000
        Bootstrap resamples per interval (0: no interval).
    level : float, default 0.95
        Coverage of the intervals.
    seed : int, default 0
        Seed of the bootstrap.

    Returns
    -------
    pandas.DataFrame
        Tidy table with columns ``algo, measure, task, spearman, ci_low, ci_high, n_rows`` (and
        the ``within`` column after ``task``); ρ is NaN when either side is constant.

    Examples
    --------
    >>> from embstab.selection import from_published_csv, spearman_table, wide
    >>> table = spearman_table(from_published_csv("w2v_cbow_optimal_no_emb_norm_top_10000.csv"))
    >>> wide(table, "spearman").round(2)  # doctest: +SKIP
    """
    _check_interval(n_boot, level, at_least=0)
    df = as_results(df)
    names = resolve_measures(df, measures)
    keys = ["algo", "task"] + ([within] if within else [])
    if within and within not in df.columns:
        raise ResultsError(f"the results table has no column {within!r} to compute ρ within")
    rows = []
    for key, part in groups(df, keys):
        di = part["disagreement"].to_numpy()
        for name in names:
            ok = part[name].notna().to_numpy()
            dist = measure_distance(part[name].to_numpy()[ok], name)
            rho, low, high = np.nan, np.nan, np.nan
            if ok.sum() >= 2:
                rho = float(_rho(dist, di[ok]))
                if n_boot:
                    low, high = bootstrap_interval(dist, di[ok], n_boot=n_boot, level=level, seed=seed)
            row = {"algo": key[0], "measure": name, "task": key[1]}
            if within:
                row[within] = key[2]
            rows.append({**row, "spearman": rho, "ci_low": low, "ci_high": high, "n_rows": int(ok.sum())})
    return order_by(pd.DataFrame(rows), "measure", names)


def with_intervals(table: pd.DataFrame, *, index: str = "measure", digits: int = 2) -> pd.DataFrame:
    """:func:`~embstab.selection.wide` of a :func:`spearman_table` with each cell ``ρ [low, high]``.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`spearman_table`.
    index : str, default "measure"
        The row label column.
    digits : int, default 2
        Decimals shown.

    Returns
    -------
    pandas.DataFrame
        Strings, one row per measure, one column per task.
    """
    def cell(row) -> str:
        if not np.isfinite(row["spearman"]):
            return "n/a"
        if not np.isfinite(row["ci_low"]):
            return f"{row['spearman']:.{digits}f}"
        return f"{row['spearman']:.{digits}f} [{row['ci_low']:.{digits}f}, {row['ci_high']:.{digits}f}]"

    shown = table.assign(shown=table.apply(cell, axis=1))
    return wide(shown, "shown", index=index)


def best_measures(table: pd.DataFrame) -> pd.DataFrame:
    """Per task, the measure whose ρ interval lies above every other measure's, if any does.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`spearman_table` (pooled: one row per algo, measure and task).

    Returns
    -------
    pandas.DataFrame
        Columns ``algo, task, best`` and ``note``: ``best`` is None where no interval separates
        (the note then says which measures cannot be told apart, or that no ρ is above 0).
    """
    rows = []
    for (algo, task), part in groups(table, ["algo", "task"]):
        part = part[np.isfinite(part["spearman"])]
        if part.empty:
            rows.append({"algo": algo, "task": task, "best": None, "note": "no ρ could be computed"})
            continue
        top = part.loc[part["spearman"].idxmax()]
        others = part.drop(index=top.name)
        if not np.isfinite(top["ci_low"]) or top["ci_low"] <= 0:
            rows.append({"algo": algo, "task": task, "best": None,
                         "note": f"no measure's interval lies above 0 (highest: {top['measure']})"})
        elif len(others) and not (top["ci_low"] > others["ci_high"]).all():
            tied = [top["measure"], *others.loc[~(top["ci_low"] > others["ci_high"]), "measure"]]
            rows.append({"algo": algo, "task": task, "best": None,
                         "note": f"the intervals of {', '.join(tied)} overlap: no measure is clearly best"})
        else:
            rows.append({"algo": algo, "task": task, "best": top["measure"],
                         "note": f"{top['measure']}'s interval lies above every other measure's"})
    out = pd.DataFrame(rows, columns=["algo", "task", "best", "note"])
    # a string column would turn None into NaN (truthy): keep None where no measure is best
    out["best"] = pd.Series([r["best"] for r in rows], index=out.index, dtype=object)
    return out

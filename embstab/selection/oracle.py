"""Gap to the oracle: choosing dimension and precision under a fixed memory budget."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from embstab.measures import REGISTRY
from embstab.selection._common import groups, order_by, resolve_measures
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results

__all__ = ["BASELINES", "oracle_decisions", "oracle_gap"]

#: Baseline selectors that ignore the measures: always the highest bit width (so the smallest
#: dimension) or always the lowest bit width (the largest dimension) that fits the budget.
BASELINES: tuple[str, ...] = ("highest_precision", "lowest_precision")


def oracle_decisions(df: pd.DataFrame, measures: Sequence[str] | None = None) -> pd.DataFrame:
    """Every budgeted decision of every selector, with its gap to the oracle.

    A decision is one (algo, task, memory budget m, seed) with at least two configurations of
    memory ``dim * bitrate == m`` (9 budgets, 50 … 12800 bits, on a 6 × 6 grid). The oracle picks
    the configuration with the smallest disagreement; a measure picks the one it rates most
    stable (first in table order on ties); the baselines pick the highest / lowest bit width.

    Parameters
    ----------
    df : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention (or a path / published-format table); rows near
        chance are left out unless it comes from ``as_results(..., keep_near_chance=True)``.
    measures : sequence of str, optional
        Registry names to use as selectors; default every measure column present.

    Returns
    -------
    pandas.DataFrame
        Columns ``algo, task, memory, seed, selector, dim, bitrate, disagreement,
        oracle_disagreement, gap, n_configs``.
    """
    df = as_results(df)
    names = resolve_measures(df, measures)
    rows = []
    for (algo, task, memory, seed), part in groups(df, ["algo", "task", "memory", "seed"]):
        if len(part) < 2:
            continue  # nothing to choose between
        di = part["disagreement"].to_numpy()
        best = float(di.min())
        choices = {}
        for name in names:
            values = part[name].to_numpy(dtype=np.float64)
            ok = np.flatnonzero(~np.isnan(values))
            if len(ok) == 0:
                continue
            pick = np.argmax if REGISTRY[name].larger_is_more_stable else np.argmin
            choices[name] = int(ok[pick(values[ok])])
        bitrate = part["bitrate"].to_numpy()
        choices["highest_precision"] = int(np.argmax(bitrate))
        choices["lowest_precision"] = int(np.argmin(bitrate))
        for selector, k in choices.items():
            rows.append({"algo": algo, "task": task, "memory": int(memory), "seed": int(seed),
                         "selector": selector, "dim": int(part["dim"].iloc[k]),
                         "bitrate": int(bitrate[k]), "disagreement": float(di[k]),
                         "oracle_disagreement": best, "gap": float(di[k]) - best,
                         "n_configs": len(part)})
    if not rows:
        raise ResultsError("no memory budget has two or more configurations (dim * bitrate) "
                           "to choose between")
    return pd.DataFrame(rows)


def oracle_gap(df: pd.DataFrame, measures: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean and worst-case gap to the oracle of each measure and of the two baselines.

    Port of the reference ``diff_to_oracle`` analysis: for every memory budget with at least two
    configurations and every seed, the disagreement of the selector's choice minus the smallest
    disagreement available under that budget (≥ 0), then the mean (the paper's table) and the max
    over all (budget, seed) decisions.

    Parameters
    ----------
    df : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention (or a path / published-format table); rows near
        chance are left out unless it comes from ``as_results(..., keep_near_chance=True)``.
    measures : sequence of str, optional
        Registry names to use as selectors; default every measure column present.

    Returns
    -------
    pandas.DataFrame
        Tidy table with columns ``algo, selector, task, mean_gap, max_gap, n_decisions``; the
        selectors are the measures followed by ``highest_precision`` and ``lowest_precision``.
        Gaps are in percentage points of disagreement.
    """
    decisions = oracle_decisions(df, measures)
    table = (decisions.groupby(["algo", "selector", "task"], sort=False)["gap"]
             .agg(mean_gap="mean", max_gap="max", n_decisions="size").reset_index())
    order = list(dict.fromkeys(decisions["selector"]))
    order = [s for s in order if s not in BASELINES] + list(BASELINES)
    return order_by(table, "selector", order)

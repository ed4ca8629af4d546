"""Spearman rank correlation between each stability measure and downstream disagreement."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from embstab.selection._common import groups, order_by, resolve_measures
from embstab.selection.results import as_results, measure_distance

__all__ = ["spearman_table"]


def spearman_table(df: pd.DataFrame, measures: Sequence[str] | None = None) -> pd.DataFrame:
    """Spearman ρ between each measure (as a distance) and the disagreement, per task.

    Follows the paper's correlation table: for every (measure, task), ρ is computed over **all**
    rows of an algorithm pooled (all seeds and memory budgets), with k-NN and eigenspace overlap
    turned into distances (``1 - value``) so that a positive ρ always means "the measure ranks
    unstable pairs as unstable".

    Parameters
    ----------
    df : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention (or a path / published-format table).
    measures : sequence of str, optional
        Registry names to evaluate; default every measure column present.

    Returns
    -------
    pandas.DataFrame
        Tidy table with columns ``algo, measure, task, spearman, n_rows``; ρ is NaN when either
        side is constant.

    Examples
    --------
    >>> from embstab.selection import from_published_csv, spearman_table, wide
    >>> table = spearman_table(from_published_csv("w2v_cbow_optimal_no_emb_norm_top_10000.csv"))
    >>> wide(table, "spearman").round(2)  # doctest: +SKIP
    """
    df = as_results(df)
    names = resolve_measures(df, measures)
    rows = []
    for (algo, task), part in groups(df, ["algo", "task"]):
        di = part["disagreement"].to_numpy()
        for name in names:
            ok = part[name].notna().to_numpy()
            dist = measure_distance(part[name].to_numpy()[ok], name)
            rho = np.nan
            if ok.sum() >= 2:
                with warnings.catch_warnings():
                    # A constant column has no ranking; NaN says so without a warning per cell.
                    warnings.simplefilter("ignore", stats.ConstantInputWarning)
                    rho = float(stats.spearmanr(dist, di[ok]).statistic)
            rows.append({"algo": algo, "measure": name, "task": task, "spearman": rho,
                         "n_rows": int(ok.sum())})
    return order_by(pd.DataFrame(rows), "measure", names)

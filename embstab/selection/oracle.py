"""Gap to the oracle: choosing dimension and precision under a fixed memory budget.

:func:`oracle_gap` scores each measure as a selector among the configurations of *exactly* one
memory; :func:`recommendation_gap` scores what :func:`~embstab.selection.recommend` ships under a
budget (every configuration of memory up to the budget) against the configuration that measured
the least disagreement under the same budget; :func:`prediction_gap` scores choosing by the
calibrated predictions (:func:`~embstab.selection.fit_predictor`) on a seed the fit never saw,
against choosing by the raw measure and at random.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from embstab.errors import lookup
from embstab.measures import REGISTRY
from embstab.selection._common import CONFIG, groups, order_by, resolve_measures
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results, ordered_tasks

__all__ = ["BASELINES", "oracle_decisions", "oracle_gap", "prediction_gap", "recommendation_gap",
           "recommendation_gap_of"]

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


def recommendation_gap_of(rec, results: pd.DataFrame) -> pd.DataFrame:
    """The measured disagreement of a recommendation against the best pick under its budget.

    For each task, the disagreement measured for the recommended configuration (mean over seeds)
    and the smallest mean disagreement measured for any configuration the recommender could have
    picked (every candidate of ``rec``: the configurations that fit the budget and have a value of
    its measure); the gap is their difference (≥ 0, in percentage points). The mean over the
    candidates is what picking one of them at random would give on average.

    Parameters
    ----------
    rec : Recommendation
        What :func:`~embstab.selection.recommend` returned for ``results``.
    results : pandas.DataFrame, str or os.PathLike
        The results table ``rec`` was computed from (read through :func:`as_results`, so rows near
        chance are left out exactly as the recommendation left them out).

    Returns
    -------
    pandas.DataFrame
        One row per task: ``budget, task, measure, algo, dim, bitrate, memory, disagreement,
        oracle_algo, oracle_dim, oracle_bitrate, oracle_memory, oracle_disagreement, gap,
        mean_disagreement, worst_disagreement, n_candidates``.

    Raises
    ------
    ResultsError
        If the results hold no row of the recommended configuration.
    """
    df = as_results(results)
    if "kind" in df.columns:
        df = df[df["kind"] == rec.kind]
    per_config = (df.groupby(["algo", "dim", "bitrate", "task"], sort=False)["disagreement"].mean())
    keys = list(rec.candidates[["algo", "dim", "bitrate", "memory"]].itertuples(index=False, name=None))
    chosen = (rec.algo, rec.dim, rec.bitrate)
    rows = []
    for task in ordered_tasks(df["task"]):
        measured = [(a, int(d), int(b), int(m), float(per_config[(a, d, b, task)])) for a, d, b, m in keys
                    if (a, d, b, task) in per_config.index]
        mine = [x for x in measured if x[:3] == chosen]
        if not mine:
            continue  # the chosen configuration has no row of this task (e.g. left out near chance)
        values = np.array([x[4] for x in measured])
        best = measured[int(np.argmin(values))]
        rows.append({"budget": rec.budget, "task": task, "measure": rec.measure, "algo": rec.algo,
                     "dim": rec.dim, "bitrate": rec.bitrate, "memory": rec.memory, "disagreement": mine[0][4],
                     "oracle_algo": best[0], "oracle_dim": best[1], "oracle_bitrate": best[2],
                     "oracle_memory": best[3], "oracle_disagreement": best[4], "gap": mine[0][4] - best[4],
                     "mean_disagreement": float(values.mean()), "worst_disagreement": float(values.max()),
                     "n_candidates": len(measured)})
    if not rows:
        raise ResultsError(f"the results hold no row of the recommended configuration ({rec.algo}, dim={rec.dim}, "
                           f"{rec.bitrate} bits)")
    return pd.DataFrame(rows)


def recommendation_gap(results: pd.DataFrame, budgets: Sequence[float] | None = None, measure: str | None = None, *,
                       kind: str | None = None, algo: str | None = None,
                       threshold: float | None = None) -> pd.DataFrame:
    """The oracle gap of :func:`~embstab.selection.recommend` at each budget, per task.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A study's results table (rows near chance are left out unless it comes from
        ``as_results(..., keep_near_chance=True)``).
    budgets : sequence of float, optional
        Memory budgets; default every memory value of the results. A budget nothing fits is skipped.
    measure : str, optional
        Passed to :func:`~embstab.selection.recommend` (the measure its predictions read; it does not
        change a pick among measured configurations).
    kind, algo : str, optional
        Passed to :func:`~embstab.selection.recommend`.
    threshold : float or None, optional
        No effect (kept so that existing calls work).

    Returns
    -------
    pandas.DataFrame
        The rows of :func:`recommendation_gap_of` for every budget.

    Raises
    ------
    ResultsError
        If no budget has a recommendation, or the results are malformed.
    """
    from embstab.selection.errors import BudgetError
    from embstab.selection.recommend import recommend

    df = as_results(results)
    parts = []
    for budget in sorted(set(df["memory"])) if budgets is None else list(budgets):
        try:
            rec = recommend(df, budget, measure, kind=kind, algo=algo)
        except BudgetError:
            continue
        parts.append(recommendation_gap_of(rec, df))
    if not parts:
        raise ResultsError("no budget has a recommendation to compare with the oracle")
    return pd.concat(parts, ignore_index=True)


#: The selectors of :func:`prediction_gap` beside the raw measure.
PREDICTION_SELECTORS: tuple[str, ...] = ("predicted", "random")


def prediction_gap(results: pd.DataFrame, budgets: Sequence[float] | None = None, *, measure: str = "eis",
                   measures: Sequence[str] | None = None, level: float = 0.9, seed: int = 0,
                   across_algorithms: bool = False, truth: str = "seed", per_task: bool = True) -> pd.DataFrame:
    """The oracle gap of choosing by calibrated predictions on a seed the calibration never saw.

    For every algorithm and every seed in turn, :func:`~embstab.selection.fit_predictor` is fitted on
    the other seeds' rows and predicts the held-out seed's disagreement from its measures alone.
    Then, per task and budget, among the held-out seed's configurations with memory ≤ the budget
    (those inside the calibration), each selector picks one and its *measured* disagreement is
    compared with the least measured among them:

    - ``predicted``: the least predicted disagreement (equal predictions: the cheaper; predictions
      never tie, as in :func:`~embstab.selection.recommend`);
    - ``measure`` (e.g. ``eis``): the best raw value of that measure, pooled over dimensions;
    - ``random``: a pick at random, on average (the mean over the candidates).

    With ``across_algorithms``, one decision per kind of embedding pools the configurations of every
    algorithm (what :func:`~embstab.selection.recommend` ranks), where raw measure values are least
    comparable.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A results table with two or more seeds per algorithm.
    budgets : sequence of float, optional
        Memory budgets; default every memory value of the algorithm's configurations.
    measure : str, default "eis"
        The raw measure to compare with.
    measures : sequence of str, optional
        Passed to :func:`~embstab.selection.fit_predictor`.
    level : float, default 0.9
        Interval level of the predictions.
    seed : int, default 0
        Passed to :func:`~embstab.selection.fit_predictor`.
    across_algorithms : bool, default False
        Choose among the configurations of every algorithm of a kind at once, instead of per algorithm.
    truth : {"seed", "mean"}, default "seed"
        What a pick is scored by: the held-out seed's own measured disagreement, or each
        configuration's mean over every seed (less seed noise in the score; the choice still sees
        only the held-out seed's measures).
    per_task : bool, default True
        Decide per task; False makes one decision per budget for all the tasks, as
        :func:`~embstab.selection.recommend` ships one configuration: the least mean over the tasks
        of the predictions (among configurations inside the calibration for every task), scored per
        task against that task's best candidate.

    Returns
    -------
    pandas.DataFrame
        One row per decision: ``kind, algo, task, budget, held_out_seed, selector, dim, bitrate,
        memory, disagreement, oracle_disagreement, gap, n_candidates, n_outside`` (candidates left
        out as outside the calibration); the random pick has no configuration. ``algo`` is the
        decision's algorithm, or with ``across_algorithms`` the chosen one's ("" for the random pick).

    Raises
    ------
    ResultsError
        If no algorithm has two seeds, or no budget has two candidates to choose between.
    """
    from embstab.selection.predict import fit_predictor  # noqa: PLC0415 - predict builds on this layer
    from embstab.selection.results import measure_distance  # noqa: PLC0415

    df = as_results(results)
    resolve_measures(df, [measure])
    lookup({"seed": 0, "mean": 0}, truth, "truth")
    config_mean = df.groupby(["algo", "dim", "bitrate", "task"])["disagreement"].mean()
    rows = []
    kinds = df["kind"].fillna("word").astype(str) if "kind" in df.columns else pd.Series("word", index=df.index)
    scopes = df.groupby(kinds if across_algorithms else [kinds, df["algo"]], sort=False)
    for scope, sub in scopes:
        kind = scope if across_algorithms else scope[0]
        seeds = sorted(sub["seed"].unique())
        if len(seeds) < 2:
            continue
        memories = sorted(set(sub["memory"])) if budgets is None else list(budgets)
        for held in seeds:
            train, test = sub[sub["seed"] != held], sub[sub["seed"] == held]
            try:
                fitted = fit_predictor(train, measures=measures, level=level, seed=seed)
            except ResultsError:
                continue
            answer = fitted.predict(test.drop(columns=["disagreement"]))
            test = test.assign(predicted=answer["predicted"], lower=answer["lower"], upper=answer["upper"],
                               inside=answer["in_calibration"], distance=measure_distance(test[measure], measure))
            tasks = ordered_tasks(test["task"])
            for budget in memories:
                fit = test[test["memory"] <= budget]
                usable = fit["inside"] & fit["distance"].notna()
                if not per_task:  # a configuration ranks only with a row inside the calibration for every task
                    by_config = usable.groupby([fit[c] for c in CONFIG])
                    usable &= by_config.transform("all") & (by_config.transform("size") == len(tasks))
                    shared = fit[usable].groupby(CONFIG, sort=False).agg(score=("predicted", "mean"),
                                                                         memory=("memory", "first"),
                                                                         distance=("distance", "first"))
                    if len(shared) < 2:
                        continue
                    pooled = {"predicted": shared.sort_values(["score", "memory"], kind="stable").index[0],
                              measure: shared.sort_values(["distance", "memory"], kind="stable").index[0]}
                for task in tasks:
                    part = fit[fit["task"] == task]
                    cands = part[usable[part.index]].reset_index(drop=True)
                    if len(cands) < 2:
                        continue
                    if truth == "mean":
                        keys = pd.MultiIndex.from_frame(cands[["algo", "dim", "bitrate", "task"]])
                        di = config_mean.reindex(keys).to_numpy(dtype=np.float64)
                    else:
                        di = cands["disagreement"].to_numpy(dtype=np.float64)
                    if per_task:
                        picks = {"predicted": cands.sort_values(["predicted", "memory"], kind="stable").index[0],
                                 measure: cands.sort_values(["distance", "memory"], kind="stable").index[0]}
                    else:
                        where = {k: i for i, k in enumerate(cands[CONFIG].itertuples(index=False, name=None))}
                        picks = {sel: where[key] for sel, key in pooled.items()}
                    base = {"kind": kind, "algo": "" if across_algorithms else scope[1], "task": task,
                            "budget": budget, "held_out_seed": int(held), "oracle_disagreement": float(di.min()),
                            "n_candidates": len(cands), "n_outside": int(len(part) - len(cands))}
                    for selector, k in picks.items():
                        rows.append({**base, "selector": selector, "algo": str(cands.at[k, "algo"]),
                                     "dim": int(cands.at[k, "dim"]),
                                     "bitrate": int(cands.at[k, "bitrate"]), "memory": int(cands.at[k, "memory"]),
                                     "disagreement": float(di[k]), "gap": float(di[k] - di.min())})
                    rows.append({**base, "selector": "random", "dim": np.nan, "bitrate": np.nan, "memory": np.nan,
                                 "disagreement": float(di.mean()), "gap": float(di.mean() - di.min())})
    if not rows:
        raise ResultsError("no algorithm has two seeds and a budget with two configurations to choose between")
    cols = ["kind", "algo", "task", "budget", "held_out_seed", "selector", "dim", "bitrate", "memory", "disagreement",
            "oracle_disagreement", "gap", "n_candidates", "n_outside"]
    return pd.DataFrame(rows)[cols]

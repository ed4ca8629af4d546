"""Recommend the dimension and precision to ship under a memory budget.

Given a study's results, the configuration (algorithm, dimension, bit width) whose stability
measure is best among those that fit the budget, with the disagreement the linear-log memory trend
predicts for it (:func:`embstab.selection.fit_trend`). A measure ranks only configurations on
which it shows signal (its value clearly apart from its null, see :mod:`embstab.selection.signal`).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from embstab.errors import lookup
from embstab.measures import REGISTRY
from embstab.selection.errors import BudgetError, ResultsError
from embstab.selection.results import (CONFIG_COLUMNS, NEAR_CHANCE_MARGIN, as_results, kind_label, kinds_of,
                                       measure_distance, near_chance_left_out, ordered_tasks)
from embstab.selection.signal import FALLBACK_ORDER, config_signal, has_nulls
from embstab.selection.trend import TrendFit, fit_trend

__all__ = ["Recommendation", "recommend"]


@dataclass(frozen=True)
class Recommendation:
    """What to ship under a memory budget, and what to expect downstream.

    Attributes
    ----------
    budget : float
        The budget, in bits per word (per entity row, per feature vector: see ``unit``).
    measure : str
        Registry name of the measure that chose the configuration (``requested_measure`` unless
        that one showed no signal on the configurations that fit).
    algo : str
        Embedding algorithm of the chosen configuration.
    dim : int
        Dimension to ship.
    bitrate : int
        Bits per entry to ship (32 = full precision).
    memory : int
        ``dim * bitrate``, bits per word (≤ budget).
    measure_value : float
        The measure's raw value for the chosen configuration, mean over seeds.
    n_candidates : int
        Configurations that fit the budget.
    predicted_disagreement : dict of str to float
        Disagreement (%) per task that the fitted memory trend predicts at ``memory``, clipped
        to [0, 100].
    observed_disagreement : dict of str to float
        Disagreement (%) per task measured for the chosen configuration, mean over seeds.
    trend_slope : float
        Slope of the memory trend, percentage points per doubling of memory.
    extrapolated : bool
        ``memory`` lies outside the memory range the trend was fitted on, so the prediction is an
        extrapolation (the trend flattens above about 1000 bits per word).
    candidates : pandas.DataFrame
        Every configuration that fits the budget, best first, with its mean measure value.
    kind : str
        The kind of embedding (``word``, ``kg``, ``contextual``).
    unit : str
        What one unit of memory is ("bits per word", "bits per entity row", ...).
    near_chance_left_out : int
        Rows of the results left out because a downstream model was within
        :data:`~embstab.selection.results.NEAR_CHANCE_MARGIN` points of its task's chance level
        (0 when the results were passed as ``as_results(..., keep_near_chance=True)``).
    requested_measure : str
        The measure asked for.
    signal_checked : bool
        Whether the results record the nulls of ``measure``, so that its signal was checked (a
        published table or a study stored before nulls existed does not).
    measure_null : float or None
        Mean null of ``measure`` over the chosen configuration's seeds (None when unchecked).
    n_ranked : int
        Configurations that fit and were ranked: those on which ``measure`` shows signal (all of
        them when unchecked).
    signal_note : str
        One line on how the measure was chosen: why the requested one was set aside, that the
        signal was not checked, or that only one configuration fits; empty otherwise.
    trend_note : str
        One line when the memory trend was not fitted as asked: fitted on every row because the
        rows below ``threshold`` cannot identify a slope, or not fitted at all (then
        ``predicted_disagreement`` is empty and ``trend_slope`` is NaN); empty otherwise.
    """

    budget: float
    measure: str
    algo: str
    dim: int
    bitrate: int
    memory: int
    measure_value: float
    n_candidates: int
    predicted_disagreement: dict[str, float]
    observed_disagreement: dict[str, float]
    trend_slope: float
    extrapolated: bool
    candidates: pd.DataFrame = field(repr=False, compare=False)
    kind: str = "word"
    unit: str = "bits per word"
    near_chance_left_out: int = 0
    requested_measure: str = ""
    signal_checked: bool = False
    measure_null: float | None = None
    n_ranked: int = 0
    signal_note: str = ""
    trend_note: str = ""

    def _ranked_phrase(self) -> str:
        if self.n_ranked and self.n_ranked < self.n_candidates:
            return (f"the {self.n_ranked} of {self.n_candidates} configurations that fit on which it shows signal")
        return f"{self.n_candidates} configuration(s) that fit"

    @property
    def mean_predicted_disagreement(self) -> float:
        """Predicted disagreement averaged over the tasks (%; NaN when no trend was fitted)."""
        if not self.predicted_disagreement:
            return float("nan")
        return float(np.mean(list(self.predicted_disagreement.values())))

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-serialisable), without the candidates table.

        Returns
        -------
        dict
            The fields except ``candidates``, plus ``mean_predicted_disagreement``.
        """
        out = {k: v for k, v in asdict(self).items() if k != "candidates"}
        out["mean_predicted_disagreement"] = self.mean_predicted_disagreement
        return out

    def __str__(self) -> str:
        # a switched measure or unranked configurations come first: they change how to read the rest
        first = bool(self.signal_note) and (self.measure != self.requested_measure
                                            or 0 < self.n_ranked < self.n_candidates)
        lines = [
            *([self.signal_note] if first else []),
            f"Under a budget of {self.budget:g} {self.unit}, ship {self.algo} with dim={self.dim} "
            f"at {self.bitrate}-bit precision ({self.memory} {self.unit}).",
            f"Chosen by {self.measure} = {self.measure_value:.4g} ({REGISTRY[self.measure].direction}"
            + (f"; null {self.measure_null:.4g}" if self.measure_null is not None else "")
            + f"), the best of {self._ranked_phrase()}.",
        ]
        if self.predicted_disagreement:
            lines.append(f"Disagreement the memory trend predicts ({self.trend_slope:+.2f} points per doubling of "
                         f"memory{'; extrapolated beyond the fitted range' if self.extrapolated else ''}):")
            for task, pred in self.predicted_disagreement.items():
                seen = self.observed_disagreement.get(task)
                observed = f"   (measured: {seen:.2f} %)" if seen is not None else ""
                lines.append(f"  {task:<12} {pred:6.2f} %{observed}")
        else:
            lines.append("Disagreement measured for it (no memory trend to predict from):")
            for task, seen in self.observed_disagreement.items():
                lines.append(f"  {task:<12} {seen:6.2f} %")
        if self.trend_note:
            lines.append(self.trend_note)
        if self.signal_note and not first:
            lines.append(self.signal_note)
        if self.near_chance_left_out:
            lines.append(f"{self.near_chance_left_out} result row(s) left out: a downstream model within "
                         f"{NEAR_CHANCE_MARGIN:g} points of its task's chance level "
                         "(its disagreement is mostly noise).")
        return "\n".join(lines)


def recommend(results: pd.DataFrame | str | os.PathLike, budget_bits_per_word: float,
              measure: str = "eis", *, task: str | None = None, algo: str | None = None,
              kind: str | None = None, threshold: float | None = 1000, fallback: bool = True) -> Recommendation:
    """Choose the dimension and precision to ship under a memory budget.

    Among the configurations in ``results`` with memory ``dim * bitrate`` ≤ the budget, pick the one
    with the best ``measure`` (averaged over seeds; on a tie, the smaller memory), and predict its
    downstream disagreement with the linear-log memory trend fitted to the results.

    A measure never ranks configurations on which it shows no signal. Where the results record
    each pair's null (``<measure>_signal`` columns, as a study's do):

    * a configuration *shows signal* for a measure when more than half of its seeds' pairs that
      record a null are clearly apart from it (:func:`embstab.measures.null.has_signal`: at least
      twice as far from the uninformative end as the null, and beyond 3 standard deviations of
      the shuffles); a configuration without a recorded null does not;
    * a measure *has signal on the candidates* when it shows signal on at least half of the
      configurations that fit the budget (and on two or more). It then ranks only those, and the
      others are left unranked (a value at its null is small or large with the dimension, not the
      stability);
    * when ``measure`` has no signal on the candidates, the next measure of ``measure``, then
      :data:`~embstab.selection.signal.FALLBACK_ORDER` (eis, knn, semantic_displacement,
      eigenspace_overlap, weighted_eigenspace_overlap, linear_cka, procrustes_distance) present
      in the results that has is used, and ``signal_note`` says so in one line; when none has,
      :class:`BudgetError` says that no measure can decide.

    Results without recorded nulls for ``measure`` are ranked by it as they are, and
    ``signal_note`` says the signal was not checked. A single configuration that fits is
    recommended whatever its signal: there is nothing to rank.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A study's results table in the shared convention, a published-format table, or a path to
        either (CSV or Parquet). Rows whose downstream model is near chance are left out unless
        the table comes from ``as_results(..., keep_near_chance=True)``
        (:func:`~embstab.selection.as_results`).
    budget_bits_per_word : float
        Memory budget in bits per word (e.g. 400 = 100 dimensions at 4 bits).
    measure : str, default "eis"
        Registry name of the stability measure that ranks the configurations.
    task : str, optional
        Only predict (and report) the disagreement of this task; default every task.
    algo : str, optional
        Only consider this embedding algorithm; default every algorithm in the results.
    kind : str, optional
        Only consider this kind of embedding (``word``, ``kg``, ``contextual``); required when the
        results hold several kinds and no ``algo`` is given, since their memory units differ.
    threshold : float or None, default 1000
        Fit the trend on rows with memory below this many bits per word (see
        :func:`embstab.selection.fit_trend`); None fits on all rows.
    fallback : bool, default True
        Turn to another measure when ``measure`` shows no signal; False raises
        :class:`BudgetError` instead.

    Returns
    -------
    Recommendation
        The chosen configuration, the predicted and measured disagreement, and all candidates.

    Raises
    ------
    BudgetError
        If the budget is not a positive number, no configuration fits under it, or no measure
        (``measure`` alone with ``fallback=False``) shows signal on the configurations that fit.
    ResultsError
        If the results table is malformed, lacks the measure, the task or the algorithm.

    Examples
    --------
    >>> rec = recommend("results.parquet", 400, measure="eis")  # doctest: +SKIP
    >>> rec.dim, rec.bitrate, rec.predicted_disagreement["sst"]  # doctest: +SKIP
    """
    budget = _check_budget(budget_bits_per_word)
    df = as_results(results)
    left_out = near_chance_left_out(df)
    lookup(REGISTRY, measure, "measure")
    if measure not in df.columns:
        present = [c for c in REGISTRY if c in df.columns]
        raise ResultsError(f"the results have no column for measure {measure!r}; they have: "
                           f"{', '.join(present) or 'none'}")
    if algo is not None:
        if algo not in set(df["algo"]):
            raise ResultsError(f"no results for algo {algo!r}; the results have: "
                               f"{', '.join(sorted(set(df['algo'])))}")
        df = df[df["algo"] == algo]
    present = kinds_of(df)
    if kind is not None:
        if kind not in present:
            raise ResultsError(f"no results of kind {kind!r}; the results have: {', '.join(present)}")
        df = df[df["kind"] == kind] if "kind" in df.columns else df
    elif len(present) > 1:
        raise ResultsError(f"the results hold several kinds of embedding ({', '.join(present)}) whose memory "
                           "is counted in different units; choose one with kind= (--kind)")
    kind = kinds_of(df)[0]
    unit = kind_label(kind).unit
    if task is not None and task not in set(df["task"]):
        dropped = int(df.attrs.get("near_chance_by_task", {}).get(task, 0))
        if dropped:
            raise ResultsError(f"all {dropped} rows of task {task!r} have a downstream model near its chance level "
                               "and were left out; keep them with keep_near_chance=True (--keep-near-chance)")
        raise ResultsError(f"no results for task {task!r}; the results have: "
                           f"{', '.join(sorted(set(df['task'])))}")

    candidates = _candidates(df, measure)
    fits = candidates[candidates["memory"] <= budget]
    if fits.empty:
        smallest = candidates.sort_values("memory").iloc[0]
        raise BudgetError(f"no configuration fits in {budget:g} {unit}; the smallest in the "
                          f"results uses {int(smallest['memory'])} bits (dim={int(smallest['dim'])},"
                          f" bitrate={int(smallest['bitrate'])})")
    used, fits, checked, note = _choose_measure(df, measure, budget, unit, fits, fallback)
    # Best measure first among the ranked; on an exact tie the cheaper configuration wins.
    fits = fits.sort_values(["ranked", "distance", "memory"], ascending=[False, True, True],
                            kind="stable").reset_index(drop=True)
    best = fits.iloc[0]
    n_ranked = int(fits["ranked"].sum())

    trend, fitted_on, trend_note = _memory_trend(df, threshold, unit)
    chosen = df[(df["algo"] == best["algo"]) & (df["dim"] == best["dim"])
                & (df["bitrate"] == best["bitrate"])]
    tasks = [task] if task is not None else ordered_tasks(chosen["task"])
    query = pd.DataFrame({"algo": best["algo"], "task": tasks, "dim": int(best["dim"]),
                          "bitrate": int(best["bitrate"])})
    # A disagreement cannot be negative; far outside the fitted range the line can cross zero.
    predicted = ({} if trend is None else
                 dict(zip(tasks, map(float, np.clip(trend.predict(query), 0.0, 100.0)))))
    observed = chosen.groupby("task")["disagreement"].mean()
    fitted_memory = df["memory"] if fitted_on is None else df.loc[df["memory"] < fitted_on, "memory"]
    return Recommendation(
        budget=budget, measure=used, algo=str(best["algo"]), dim=int(best["dim"]),
        bitrate=int(best["bitrate"]), memory=int(best["memory"]),
        measure_value=float(best[used]), n_candidates=len(fits),
        predicted_disagreement=predicted,
        observed_disagreement={t: float(observed[t]) for t in tasks if t in observed.index},
        trend_slope=float("nan") if trend is None else trend.slope,
        extrapolated=trend is not None and bool(best["memory"] > fitted_memory.max()
                                                or best["memory"] < fitted_memory.min()),
        candidates=fits, kind=kind, unit=unit, near_chance_left_out=left_out, requested_measure=measure,
        signal_checked=checked, measure_null=float(best["null"]) if checked and pd.notna(best["null"]) else None,
        n_ranked=n_ranked, signal_note=note, trend_note=trend_note)


def _memory_trend(df: pd.DataFrame, threshold: float | None, unit: str) -> tuple[TrendFit | None, float | None, str]:
    """The memory trend, the threshold it was fitted under, and a note when that is not ``threshold``.

    The default threshold is the word-embedding regime (about 1000 bits per word); a kind whose
    rows mostly lie above it (a 384-d contextual model at 3 bits is 1152) cannot identify a slope
    there, and is fitted on all its rows instead. With one memory per (algo, task) there is no
    trend at all, and the recommendation stands on the measured disagreement alone.
    """
    try:
        return fit_trend(df, "memory", threshold=threshold), threshold, ""
    except ResultsError:
        pass
    if threshold is not None:
        try:
            return fit_trend(df, "memory", threshold=None), None, (
                f"The memory trend is fitted on every row: below {threshold:g} {unit} the rows cannot identify "
                "its slope.")
        except ResultsError:
            pass
    return None, None, ("No memory trend: every (algo, task) has one memory in the results, so only the "
                        "measured disagreement is shown.")


def _choose_measure(df: pd.DataFrame, measure: str, budget: float, unit: str, fits: pd.DataFrame,
                    fallback: bool) -> tuple[str, pd.DataFrame, bool, str]:
    """The measure that ranks, the candidates that fit (``ranked`` marks those it ranks), whether
    its signal was checked, and the one-line note on the choice."""
    if len(fits) == 1:
        verdict = fits.assign(ranked=True)
        return measure, verdict, bool(verdict["signal"].notna().any()), (
            f"Only one configuration fits in {budget:g} {unit}: nothing to rank.")
    if not has_nulls(df, measure):
        return measure, fits.assign(ranked=True), False, (
            f"The results record no null for {measure}: whether its values are apart from the level of "
            "unrelated tables was not checked.")
    order = [measure, *[m for m in FALLBACK_ORDER if m != measure and m in df.columns]] if fallback else [measure]
    tried = []
    for m in order:
        cands = fits if m == measure else _candidates(df, m)
        cands = cands[cands["memory"] <= budget]
        if cands.empty or not has_nulls(df, m):
            continue
        shows = cands["signal"].fillna(False).astype(bool)
        if 2 * int(shows.sum()) >= len(cands) and int(shows.sum()) >= 2:
            cands = cands.assign(ranked=shows.to_numpy())
            unranked = len(cands) - int(shows.sum())
            rest = (f"; {unranked} configuration(s) where it shows none are not ranked" if unranked else "")
            if m == measure:
                return m, cands, True, (f"{m} shows no signal on {unranked} of the {len(cands)} configurations that "
                                        f"fit: they are not ranked." if unranked else "")
            return m, cands, True, (f"{measure} shows no signal on {_count(tried[0])} configurations that fit "
                                    f"(values at the level of unrelated tables): ranked by {m} instead, the next "
                                    f"measure with signal (order: {', '.join(order)}){rest}.")
        tried.append((m, int(shows.sum()), len(cands)))
    shown = ", ".join(f"{m} on {hits} of {n}" for m, hits, n in tried)
    raise BudgetError(f"cannot decide under a budget of {budget:g} {unit}: no measure shows signal on half of "
                      f"the {len(fits)} configurations that fit ({shown}); their values sit at the level of "
                      "unrelated tables" + ("" if fallback else " (fallback to other measures is off)"))


def _count(tried: tuple[str, int, int]) -> str:
    _, hits, n = tried
    return f"{n - hits} of the {n}"


def _check_budget(budget) -> float:
    try:
        value = float(budget)
    except (TypeError, ValueError):
        raise BudgetError(f"the budget must be a number of bits per word, got {budget!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"the budget must be a positive number of bits per word, got {budget!r}")
    return value


def _candidates(df: pd.DataFrame, measure: str) -> pd.DataFrame:
    # The measure belongs to the embedding pair, not to the task: one value per (config, seed).
    pairs = df.drop_duplicates(list(CONFIG_COLUMNS))
    pairs = pairs[pairs[measure].notna()]
    if pairs.empty:
        raise ResultsError(f"the results hold no value for measure {measure!r}")
    table = (pairs.groupby(["algo", "dim", "bitrate", "memory"], sort=False)
             .agg(**{measure: (measure, "mean"), "n_seeds": ("seed", "nunique")}).reset_index())
    table["distance"] = measure_distance(table[measure].to_numpy(), measure)
    mean_di = df.groupby(["algo", "dim", "bitrate"], sort=False)["disagreement"].mean()
    table["mean_disagreement"] = [mean_di[(a, d, b)] for a, d, b in
                                  table[["algo", "dim", "bitrate"]].itertuples(index=False)]
    verdict = config_signal(pairs, measure).set_index(["algo", "dim", "bitrate"])
    keys = list(table[["algo", "dim", "bitrate"]].itertuples(index=False, name=None))
    table["null"] = [verdict.at[k, "null"] for k in keys]
    table["signal"] = pd.array([verdict.at[k, "signal"] for k in keys], dtype="boolean")
    return table


"""Recommend the dimension and precision to ship under a memory budget, on one scale: flips.

Every configuration that fits the budget is placed on the scale of its downstream disagreement
(the % of predictions that flip), never on a raw measure value: EIS shrinks with the dimension
(its null too) and means different things for different algorithms, so raw values cannot rank
configurations across dimensions or algorithms. Where the results measured a configuration's
disagreement, that measurement (mean over seeds) with its interval is its place on the scale;
where they did not, the calibrated prediction from its measures (:func:`embstab.selection.fit_predictor`,
fitted per algorithm and task on the same results) with its conformal interval. A configuration
measured like the best one ties with it when each one's value lies inside the other's interval (the
difference is within the noise of either), and the cheapest of a tie is shipped. Predicted values
never tie: a prediction's interval covers one row's noise, not the doubt about a configuration's mean.

The recommendation also states the flips that the calibrated predictor expects for its pick, per
task, with the interval: what a new pair of that configuration would likely flip.
"""

from __future__ import annotations

import html
import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from embstab.downstream.intervals import INTERVAL_LEVEL
from embstab.errors import lookup
from embstab.measures import REGISTRY
from embstab.selection._common import CONFIG, ties_with
from embstab.selection.calibration import measured_rows
from embstab.selection.errors import BudgetError, ResultsError
from embstab.selection.predict import DisagreementPredictor, fit_predictor
from embstab.selection.results import (
    CONFIG_COLUMNS,
    NEAR_CHANCE_MARGIN,
    as_results,
    kind_label,
    kinds_of,
    near_chance_left_out,
    ordered_tasks,
)
from embstab.selection.signal import (
    FALLBACK_ORDER,
    config_signal,
    has_nulls,
    null_column,
)

__all__ = ["Recommendation", "recommend"]


def _plain(value):
    """NaN/inf as None, numpy scalars as Python (JSON has neither)."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class Recommendation:
    """What to ship under a memory budget, and how many downstream predictions it will flip.

    Attributes
    ----------
    budget : float
        The budget, in bits per word (per entity row, per feature vector: see ``unit``).
    measure : str
        The measure the calibrated predictions of the pick lean on first (the requested one, or
        the next with signal when it has none); "" when they read none: no measure shows signal,
        or the models chosen by cross-validation predict from dimension and bit width alone.
    algo : str
        Embedding algorithm of the chosen configuration.
    dim : int
        Dimension to ship.
    bitrate : int
        Bits per entry to ship (32 = full precision).
    memory : int
        ``dim * bitrate``, bits per word (≤ budget).
    measure_value : float
        ``measure``'s raw value for the chosen configuration, mean over seeds (NaN without a measure).
    n_candidates : int
        Configurations that fit the budget.
    predicted_disagreement : dict of str to float
        Disagreement (%) per task that the calibrated predictor expects for the chosen
        configuration from its measures, dimension and bit width (tasks outside its calibration
        left out, see ``prediction_note``).
    predicted_interval : dict of str to (float, float)
        The predictor's interval at ``level`` for each task of ``predicted_disagreement``.
    observed_disagreement : dict of str to float
        Disagreement (%) per task measured for the chosen configuration, mean over seeds.
    observed_interval : dict of str to (float, float)
        Its interval: the rows' ``disagreement_low``/``disagreement_high`` (mean over seeds)
        where the results carry them, else Student's t interval of the mean across seeds at
        ``level``; a single seed without those columns gives the value itself at both ends.
    extrapolated : bool
        Some task of the chosen configuration lies outside the predictor's calibration, so no
        prediction is given for it.
    candidates : pandas.DataFrame
        Every configuration that fits the budget, best first: ``algo, dim, bitrate, memory,
        n_seeds``, ``disagreement`` (mean over the tasks of each task's value), ``lower``,
        ``upper`` (the same mean of the bounds), ``source`` (``measured``, ``predicted`` or
        ``mixed`` over the tasks), ``ranked`` (every task has a value), ``tie`` (its value and
        the best one's each lie inside the other's interval) and the mean raw value of ``measure``.
    per_task : pandas.DataFrame
        The candidates' places on the scale per task: ``algo, dim, bitrate, memory, task,
        disagreement, lower, upper, source``.
    kind : str
        The kind of embedding (``word``, ``kg``, ``contextual``).
    unit : str
        What one unit of memory is ("bits per word", "bits per entity row", ...).
    near_chance_left_out : int
        Rows of the results left out because a downstream model was within
        :data:`~embstab.selection.results.NEAR_CHANCE_MARGIN` points of its task's chance level.
    requested_measure : str
        The measure asked for ("" for every measure with signal).
    signal_checked : bool
        Whether the results record the nulls of ``measure``, so that its signal was checked.
    measure_null : float or None
        Mean null of ``measure`` over the chosen configuration's seeds (None when unchecked).
    n_ranked : int
        Candidates with a value for every task (the others are not ranked).
    signal_note : str
        One line on the measures: that the requested one was set aside for lack of signal, that no
        measure shows signal (a pick without signal), or that the signal was not checked.
    tie_note : str
        One line when measured candidates tie with the best one (each value inside the other's
        interval) and the cheapest is shipped; empty otherwise.
    overlap_note : str
        One line when configurations placed by prediction overlap the best one's interval (predicted
        values never tie, but the predictions cannot order them either); empty otherwise.
    prediction_note : str
        One line on the predictions of the pick: the tasks outside the calibration; empty otherwise.
    level : float
        Nominal coverage of the intervals.
    models : dict of str to str
        The predictor's chosen model per task (``linear``, ``loglinear``, ``isotonic``, ``monotone``,
        ``ensemble``, ``memory``).
    measured_interval : str
        What a measured value's interval is: the rows' own sampling interval over the test items
        (at the level the study computed it) or the interval across seeds at ``level``.
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
    predicted_interval: dict[str, tuple[float, float]]
    observed_disagreement: dict[str, float]
    observed_interval: dict[str, tuple[float, float]]
    extrapolated: bool
    candidates: pd.DataFrame = field(repr=False, compare=False)
    per_task: pd.DataFrame = field(repr=False, compare=False)
    kind: str = "word"
    unit: str = "bits per word"
    near_chance_left_out: int = 0
    requested_measure: str = ""
    signal_checked: bool = False
    measure_null: float | None = None
    n_ranked: int = 0
    signal_note: str = ""
    tie_note: str = ""
    overlap_note: str = ""
    prediction_note: str = ""
    level: float = 0.9
    models: dict[str, str] = field(default_factory=dict)
    measured_interval: str = ""

    @property
    def mean_predicted_disagreement(self) -> float:
        """Predicted disagreement averaged over the tasks (%; NaN when no task has a prediction)."""
        if not self.predicted_disagreement:
            return float("nan")
        return float(np.mean(list(self.predicted_disagreement.values())))

    @property
    def n_ties(self) -> int:
        """Candidates that tie with the best one (each value inside the other's interval), the best included."""
        return int(self.candidates["tie"].sum()) if "tie" in self.candidates.columns else 0

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-serialisable), without the candidate tables.

        Returns
        -------
        dict
            The fields except ``candidates`` and ``per_task`` (intervals as [low, high] lists,
            NaN as None), plus ``mean_predicted_disagreement``.
        """
        out = {}
        for name in self.__dataclass_fields__:
            if name in ("candidates", "per_task"):
                continue
            value = getattr(self, name)
            out[name] = {k: _plain(v) for k, v in value.items()} if isinstance(value, dict) else _plain(value)
        out["mean_predicted_disagreement"] = _plain(self.mean_predicted_disagreement)
        return out

    def _task_lines(self) -> list[str]:
        lines = []
        tasks = list(dict.fromkeys([*self.predicted_disagreement, *self.observed_disagreement]))
        width = max([12, *map(len, tasks)])
        for task in tasks:
            text = f"  {task:<{width}}"
            if task in self.predicted_disagreement:
                lo, hi = self.predicted_interval[task]
                text += f" predicted {self.predicted_disagreement[task]:6.2f} % [{lo:.2f}, {hi:.2f}]"
            else:
                text += " predicted      –" + " " * 16
            if task in self.observed_disagreement:
                lo, hi = self.observed_interval[task]
                text += f"   measured {self.observed_disagreement[task]:6.2f} % [{lo:.2f}, {hi:.2f}]"
            lines.append(text)
        return lines

    def __str__(self) -> str:
        switched = bool(self.signal_note) and self.requested_measure not in ("", self.measure)
        lines = [
            *([self.signal_note] if switched else []),
            f"Under a budget of {self.budget:g} {self.unit}, ship {self.algo} with dim={self.dim} "
            f"at {self.bitrate}-bit precision ({self.memory} {self.unit}).",
            f"Ranked by downstream disagreement (% of predictions that flip; measured where the results measured "
            f"it, else predicted): the best of {self._ranked_phrase()}.",
        ]
        lines += [note for note in (self.tie_note, self.overlap_note) if note]
        lines.append(f"Flips per task (predicted by the calibrated model of {self.algo} from the pair's measures"
                     + (f", leaning on {self.measure}" if self.measure else ", from dimension and bits alone")
                     + f", {self.level:.0%} intervals; measured: {self.measured_interval or 'as stored'}):")
        lines += self._task_lines()
        if self.prediction_note:
            lines.append(self.prediction_note)
        if self.signal_note and not switched:
            lines.append(self.signal_note)
        if self.near_chance_left_out:
            lines.append(f"{self.near_chance_left_out} result row(s) left out: a downstream model within "
                         f"{NEAR_CHANCE_MARGIN:g} points of its task's chance level "
                         "(its disagreement is mostly noise).")
        return "\n".join(lines)

    def _ranked_phrase(self) -> str:
        if self.n_ranked < self.n_candidates:
            return f"the {self.n_ranked} of {self.n_candidates} configurations that fit with a value for every task"
        return f"{self.n_candidates} configuration(s) that fit"

    def __repr__(self) -> str:
        return (f"Recommendation(budget={self.budget:g}, algo={self.algo!r}, dim={self.dim}, bitrate={self.bitrate}, "
                f"memory={self.memory}, predicted={ {k: round(v, 2) for k, v in self.predicted_disagreement.items()} }, "
                f"ties={self.n_ties})")

    def _repr_html_(self) -> str:
        rows = []
        for task in dict.fromkeys([*self.predicted_disagreement, *self.observed_disagreement]):
            p = self.predicted_disagreement.get(task, np.nan)
            plo, phi = self.predicted_interval.get(task, (np.nan, np.nan))
            o = self.observed_disagreement.get(task, np.nan)
            olo, ohi = self.observed_interval.get(task, (np.nan, np.nan))
            rows.append({"task": task, "predicted (%)": p, "predicted interval": f"[{plo:.2f}, {phi:.2f}]",
                         "measured (%)": o, "measured interval": f"[{olo:.2f}, {ohi:.2f}]",
                         "model": self.models.get(task, "")})
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in (self.tie_note, self.overlap_note, self.prediction_note,
                                                             self.signal_note) if n)
        head = (f"<p><b>Ship {html.escape(self.algo)} with dim={self.dim} at {self.bitrate}-bit precision</b> "
                f"({self.memory} {html.escape(self.unit)}; budget {self.budget:g}), the best of "
                f"{html.escape(self._ranked_phrase())} by downstream disagreement.</p>")
        shown = self.candidates.head(10)
        return (head + notes + pd.DataFrame(rows).to_html(index=False, float_format=lambda v: f"{v:.2f}")
                + "<p>Candidates, best first:</p>" + shown.to_html(index=False, float_format=lambda v: f"{v:.4g}"))

    def plot(self, ax=None):
        """Draw the candidates' disagreement against their memory, the pick and the budget marked.

        Each ranked candidate (a value for every task) is a point at its place on the scale (mean
        over the tasks) with its interval as a bar, coloured by bit width: filled where the results
        measured it, hollow where it is predicted (or mixed). The configurations that tie with the
        best are ringed, the shipped one is a star, and the budget is a dashed vertical line.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; default a new figure's.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from embstab.selection.plots import axes_or_new, bit_colors, interval_points, memory_axes  # noqa: PLC0415

        ax = axes_or_new(ax)
        table = self.candidates
        shown = table[table["ranked"] & np.isfinite(table["disagreement"].to_numpy(dtype=np.float64))]
        palette = bit_colors(shown["bitrate"])
        several = shown["algo"].nunique() > 1
        markers = dict(zip(dict.fromkeys(shown["algo"]), "osD^v<>p*h"))
        for (algo, bits, source), part in shown.groupby(["algo", "bitrate", "source"], sort=True):
            color = palette[int(bits)]
            interval_points(ax, part["memory"], part["disagreement"], part["lower"], part["upper"],
                            fmt=markers[algo], color=color, mfc=color if source == "measured" else "none",
                            label=(f"{algo}, " if several else "") + f"{int(bits)}-bit, {source}")
        ties = shown[shown["tie"]] if "tie" in shown.columns else shown.iloc[:0]
        if len(ties) > 1:
            ax.plot(ties["memory"], ties["disagreement"], "o", ms=10, mfc="none", mec="0.2", lw=0,
                    label="ties with the best")
        pick = shown[(shown["algo"] == self.algo) & (shown["dim"] == self.dim) & (shown["bitrate"] == self.bitrate)]
        if len(pick):
            ax.plot(pick["memory"].iloc[:1], pick["disagreement"].iloc[:1], "*", ms=14, color="crimson",
                    mec="black", mew=0.6, lw=0, label=f"shipped: {self.algo} dim={self.dim} {self.bitrate}-bit")
        ax.axvline(self.budget, color="crimson", ls="--", lw=1, label=f"budget {self.budget:g}")
        memory_axes(ax, self.unit)
        ax.set_title(f"Under {self.budget:g} {self.unit}: the {len(shown)} ranked candidate(s)", fontsize=10)
        ax.legend(fontsize=7)
        return ax


def recommend(results: pd.DataFrame | str | os.PathLike, budget_bits_per_word: float,
              measure: str | None = None, *, task: str | None = None, algo: str | None = None,
              kind: str | None = None, level: float = 0.9, threshold: float | None = None,
              fallback: bool = True, ties: bool = True) -> Recommendation:
    """Choose the dimension and precision to ship under a memory budget, by downstream disagreement.

    Every configuration with memory ``dim * bitrate`` ≤ the budget is placed, per task, on one
    scale: the disagreement measured for it (mean over seeds, with its interval) where the results
    measured it, else the disagreement :func:`~embstab.selection.fit_predictor` predicts from its
    measures (fitted per algorithm and task on the same results; its conformal interval). Its
    place is the mean over the tasks (of the values and of the bounds). Raw measure values never
    rank configurations: they are not comparable across dimensions or algorithms.

    A calibrated study's rows whose ``disagreement_source`` is ``predicted`` count as not measured:
    their configurations are placed by this function's own predictor, fitted on the measured rows.

    The best configuration is the one with the least disagreement. When it was measured, every
    measured configuration whose value lies inside the best one's interval while the best one's lies
    inside its own is a tie, and the cheapest of the tie (least memory, then the least disagreement)
    is shipped; ``tie_note`` says so. Predicted values never tie.

    The calibrated predictor also states what the pick will flip per task, with its interval.
    Its measures are those with signal (each value clearly apart from its null, on more than half
    of the pairs that record one, see :mod:`embstab.selection.signal`); with ``measure`` given,
    that measure alone, or, when it shows no signal on the configurations that fit, the next one
    of :data:`~embstab.selection.signal.FALLBACK_ORDER` that does (``signal_note`` says so). With no
    measure showing signal, the predictions rest on the dimension and bit width alone, and
    ``signal_note`` says so.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A study's results in any form :func:`~embstab.selection.as_results` accepts (rows near
        chance are left out unless the table comes from ``as_results(..., keep_near_chance=True)``).
    budget_bits_per_word : float
        Memory budget in bits per word (e.g. 400 = 100 dimensions at 4 bits).
    measure : str, optional
        The one measure the predictions may read; default every measure with signal.
    task : str, optional
        Only this task's disagreement ranks and is reported; default every task.
    algo : str, optional
        Only consider this embedding algorithm; default every algorithm in the results.
    kind : str, optional
        Only consider this kind of embedding; required when the results hold several kinds and no
        ``algo`` is given, since their memory units differ.
    level : float, default 0.9
        Coverage of the intervals (across seeds, and of the predictions).
    threshold : float or None, optional
        No effect: the disagreement is no longer predicted by the memory trend (whose fit this
        bounded); kept so that existing calls work.
    fallback : bool, default True
        Turn to another measure when ``measure`` shows no signal; False raises :class:`BudgetError`.
    ties : bool, default True
        Ship the cheapest configuration that ties with the best; False ships the best itself (the
        ties are still marked in ``candidates`` and named in ``tie_note``).

    Returns
    -------
    Recommendation
        The chosen configuration, its predicted and measured flips per task, and all candidates.

    Raises
    ------
    BudgetError
        If the budget is not a positive number, no configuration fits under it, none has a value
        for every task, or ``measure`` shows no signal and ``fallback`` is False.
    ResultsError
        If the results table is malformed, lacks the measure, the task or the algorithm.

    Examples
    --------
    >>> rec = recommend("results.parquet", 400)  # doctest: +SKIP
    >>> rec.dim, rec.bitrate, rec.predicted_disagreement["sst"], rec.predicted_interval["sst"]  # doctest: +SKIP
    """
    del threshold  # the memory trend no longer makes the prediction
    budget = _check_budget(budget_bits_per_word)
    df = as_results(results)
    left_out = near_chance_left_out(df)
    if measure is not None:
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
    configs = df.drop_duplicates(CONFIG)[[*CONFIG, "memory"]]
    fits = configs[configs["memory"] <= budget]
    if fits.empty:
        smallest = configs.sort_values("memory").iloc[0]
        raise BudgetError(f"no configuration fits in {budget:g} {unit}; the smallest in the "
                          f"results uses {int(smallest['memory'])} bits (dim={int(smallest['dim'])},"
                          f" bitrate={int(smallest['bitrate'])})")
    used, checked, signal_note = _choose_measure(df, measure, fits, budget, unit, fallback)
    try:
        predictor = fit_predictor(df, measures=[used] if used else (None if measure is None else []), level=level)
    except ResultsError as exc:  # too few rows in every group: the measured values still rank
        predictor, no_calibration = None, str(exc)
    tasks = [task] if task is not None else ordered_tasks(df["task"])
    per_task = _places(df, fits, tasks, predictor, level)
    candidates = _rank(per_task, fits, tasks, _seed_intervals(df, tasks, level))
    ranked = candidates[candidates["ranked"]]
    if ranked.empty:
        raise BudgetError(f"cannot decide under a budget of {budget:g} {unit}: none of the {len(candidates)} "
                          "configurations that fit has a measured or calibrated disagreement for every task")
    best = ranked.iloc[0]
    pick = ranked[ranked["tie"]].sort_values(["memory", "disagreement"], kind="stable").iloc[0] if ties else best
    key = (pick["algo"], pick["dim"], pick["bitrate"])
    chosen = df[(df["algo"] == key[0]) & (df["dim"] == key[1]) & (df["bitrate"] == key[2])]
    lean = used or ("" if predictor is None else _first_used(predictor, kind, str(key[0]), tasks))
    if lean:
        means = df.drop_duplicates(list(CONFIG_COLUMNS)).groupby(CONFIG, sort=False)[lean].mean()
        candidates[lean] = [means.get(k, np.nan) for k in candidates[CONFIG].itertuples(index=False, name=None)]
    mine = per_task[(per_task["algo"] == key[0]) & (per_task["dim"] == key[1]) & (per_task["bitrate"] == key[2])]
    if predictor is None:
        predicted, predicted_interval, outside = {}, {}, [f"no calibration ({no_calibration})"]
    else:
        predicted, predicted_interval, outside = _predict_pick(predictor, chosen, kind, tasks)
    observed = {r.task: float(r.disagreement) for r in mine.itertuples() if r.source == "measured"}
    observed_interval = {r.task: (float(r.lower), float(r.upper)) for r in mine.itertuples()
                         if r.source == "measured"}
    pairs = chosen.drop_duplicates(list(CONFIG_COLUMNS))
    null = None
    if lean and checked and null_column(lean) in pairs.columns and pairs[null_column(lean)].notna().any():
        null = float(pairs[null_column(lean)].mean())
    return Recommendation(
        budget=budget, measure=lean, algo=str(key[0]), dim=int(key[1]), bitrate=int(key[2]),
        memory=int(pick["memory"]),
        measure_value=float(pairs[lean].mean()) if lean else float("nan"),
        n_candidates=len(candidates), predicted_disagreement=predicted, predicted_interval=predicted_interval,
        observed_disagreement=observed, observed_interval=observed_interval, extrapolated=bool(outside),
        candidates=candidates, per_task=per_task, kind=kind, unit=unit, near_chance_left_out=left_out,
        requested_measure=measure or "", signal_checked=checked, measure_null=null, n_ranked=len(ranked),
        signal_note=signal_note, tie_note=_tie_note(ranked, best, pick, unit), overlap_note=_overlap_note(ranked, unit),
        prediction_note=("Outside the predictor's calibration, so not predicted: " + "; ".join(outside) + "."
                         if outside else ""),
        level=level, models={} if predictor is None else
        {t: predictor.groups[(kind, str(key[0]), t)].model for t in tasks if (kind, str(key[0]), t) in predictor.groups},
        measured_interval=(f"the rows' own {INTERVAL_LEVEL:.0%} intervals over the test items"
                           if {"disagreement_low", "disagreement_high"} <= set(df.columns)
                           else f"{level:.0%} intervals across seeds"))


def _first_used(predictor: DisagreementPredictor, kind: str, algo: str, tasks: list[str]) -> str:
    """The first measure the predictor's models of the pick read, over its tasks ("" when none does)."""
    for t in tasks:
        group = predictor.groups.get((kind, algo, t))
        if group is not None and group.used_measures:
            return group.used_measures[0]
    return ""


def _choose_measure(df: pd.DataFrame, measure: str | None, fits: pd.DataFrame, budget: float, unit: str,
                    fallback: bool) -> tuple[str, bool, str]:
    """The measure the predictions read ("" for all with signal, or none), whether its signal was
    checked, and the one-line note on the choice."""
    pairs = df.drop_duplicates(list(CONFIG_COLUMNS))
    if measure is None:
        names = [m for m in FALLBACK_ORDER if m in df.columns]
        checked = [m for m in names if has_nulls(pairs, m)]
        if not names:
            return "", False, "The results hold no stability measure: the predictions rest on dimension and bits alone."
        if not checked:
            return "", False, ("The results record no null for their measures: whether their values are apart from "
                               "the level of unrelated tables was not checked.")
        silent = [m for m in checked if not _shows_signal(pairs, fits, m)]
        if len(silent) == len(names):
            return "", True, (f"No measure shows signal on the configurations that fit ({', '.join(silent)} sit at the "
                              "level of unrelated tables): a pick without signal; the predictions rest on dimension "
                              "and bits alone.")
        return "", True, (f"{', '.join(silent)} show{'s' if len(silent) == 1 else ''} no signal and "
                          f"{'is' if len(silent) == 1 else 'are'} not used by the predictions." if silent else "")
    if not has_nulls(pairs, measure):
        return measure, False, (f"The results record no null for {measure}: whether its values are apart from the "
                                "level of unrelated tables was not checked.")
    order = [measure, *[m for m in FALLBACK_ORDER if m != measure and m in df.columns]] if fallback else [measure]
    for m in order:
        if has_nulls(pairs, m) and _shows_signal(pairs, fits, m):
            if m == measure:
                return m, True, ""
            return m, True, (f"{measure} shows no signal on the configurations that fit (values at the level of "
                             f"unrelated tables): the predictions read {m} instead, the next measure with signal "
                             f"(order: {', '.join(order)}).")
    if not fallback:
        raise BudgetError(f"cannot predict under a budget of {budget:g} {unit}: {measure} shows no signal on half of "
                          f"the {len(fits)} configurations that fit (fallback to other measures is off)")
    return "", True, (f"No measure shows signal on the configurations that fit ({', '.join(order)} sit at the level "
                      "of unrelated tables): a pick without signal; the predictions rest on dimension and bits alone.")


def _shows_signal(pairs: pd.DataFrame, fits: pd.DataFrame, measure: str) -> bool:
    """Whether ``measure`` shows signal on at least half of the configurations that fit (and on one)."""
    verdict = config_signal(pairs, measure).merge(fits[CONFIG], on=CONFIG)
    shows = int(verdict["signal"].fillna(False).astype(bool).sum())
    return shows >= 1 and 2 * shows >= len(verdict)


def _pooled_halfwidths(samples: dict[tuple, np.ndarray], level: float) -> dict[tuple, float]:
    """Half-width of Student's t interval at ``level`` of each sample's mean, its standard deviation
    pooled over the samples (per algorithm: the seed noise of one algorithm is much the same for
    all its configurations, and three seeds alone give a standard deviation on two degrees of
    freedom, wide one time and near zero the next). Samples of one value get no entry."""
    from scipy import stats  # noqa: PLC0415 - loaded on use

    out: dict[tuple, float] = {}
    for algo in dict.fromkeys(k[0] for k in samples):
        mine = {k: v for k, v in samples.items() if k[0] == algo and len(v) >= 2}
        dof = sum(len(v) - 1 for v in mine.values())
        if not dof:
            continue
        pooled = math.sqrt(sum(float(((v - v.mean()) ** 2).sum()) for v in mine.values()) / dof)
        t = float(stats.t.ppf((1 + level) / 2, dof))
        out.update({k: t * pooled / math.sqrt(len(v)) for k, v in mine.items()})
    return out


def _places(df: pd.DataFrame, fits: pd.DataFrame, tasks: list[str], predictor: DisagreementPredictor | None,
            level: float) -> pd.DataFrame:
    """Each candidate's place on the scale per task: measured (mean over seeds, interval) or predicted."""
    kinds = df["kind"].fillna("word").astype(str) if "kind" in df.columns else pd.Series("word", index=df.index)
    rows, wanted = [], []
    measures = [c for c in REGISTRY if c in df.columns]
    bounds = {"disagreement_low", "disagreement_high"} <= set(df.columns)
    measured = measured_rows(df)
    # the seed noise of each task, pooled over every configuration of the algorithm (not only those that fit)
    samples = {(a, d, b, t): g["disagreement"].to_numpy(dtype=np.float64)
               for (a, d, b, t), g in df[measured].groupby([*CONFIG, "task"], sort=False)}
    halves = {}
    for t in tasks:
        halves.update({k: h for k, h in _pooled_halfwidths({k[:3]: v for k, v in samples.items() if k[3] == t},
                                                           level).items() for k in [(*k, t)]})
    by_config = dict(iter(df.assign(_measured=measured).groupby(CONFIG, sort=False)))
    for cfg in fits.itertuples(index=False):
        own = by_config[(cfg.algo, cfg.dim, cfg.bitrate)]
        pairs = own.drop_duplicates(list(CONFIG_COLUMNS))
        for t in tasks:
            part = own[(own["task"] == t) & own["_measured"]]
            base = {"algo": cfg.algo, "dim": int(cfg.dim), "bitrate": int(cfg.bitrate), "memory": cfg.memory, "task": t}
            if len(part):
                mean = float(part["disagreement"].mean())
                if bounds and part[["disagreement_low", "disagreement_high"]].notna().all().all():
                    lo, hi = float(part["disagreement_low"].mean()), float(part["disagreement_high"].mean())
                elif (cfg.algo, cfg.dim, cfg.bitrate, t) in halves:
                    half = halves[(cfg.algo, cfg.dim, cfg.bitrate, t)]
                    lo, hi = mean - half, mean + half
                else:  # one seed and no interval of its own: the value alone
                    lo = hi = mean
                rows.append({**base, "disagreement": mean, "lower": max(lo, 0.0), "upper": min(hi, 100.0),
                             "source": "measured"})
            else:
                # not measured for this task: predicted from the configuration's mean measures
                query = {**base, "kind": kinds[pairs.index[0]], **{m: pairs[m].mean() for m in measures}}
                wanted.append((len(rows), query))
                rows.append({**base, "disagreement": np.nan, "lower": np.nan, "upper": np.nan, "source": "predicted"})
    if wanted and predictor is not None:
        answer = predictor.predict(pd.DataFrame([q for _, q in wanted]))
        for (i, _), r in zip(wanted, answer.itertuples()):
            if r.in_calibration:
                rows[i].update(disagreement=r.predicted, lower=r.lower, upper=r.upper)
    return pd.DataFrame(rows, columns=["algo", "dim", "bitrate", "memory", "task", "disagreement", "lower", "upper",
                                       "source"])


def _seed_intervals(df: pd.DataFrame, tasks: list[str], level: float) -> dict[tuple, tuple[float, float]]:
    """Per configuration measured on every task by two or more seeds: the interval across seeds of the
    per-seed mean over the tasks (the tasks' noises partly cancel in the mean, so it is narrower than
    the mean of the tasks' intervals), its standard deviation pooled over the algorithm's configurations."""
    if {"disagreement_low", "disagreement_high"} <= set(df.columns):
        return {}  # the rows carry their own intervals: those are used
    part = df[df["task"].isin(tasks) & measured_rows(df)]
    wide = part.pivot_table(index=[*CONFIG, "seed"], columns="task", values="disagreement", aggfunc="mean")
    scores = wide.reindex(columns=tasks).dropna().mean(axis=1)
    samples = {k: v.to_numpy(dtype=np.float64) for k, v in scores.groupby(level=[0, 1, 2], sort=False)}
    return {k: (max(float(samples[k].mean() - h), 0.0), min(float(samples[k].mean() + h), 100.0))
            for k, h in _pooled_halfwidths(samples, level).items()}


def _rank(per_task: pd.DataFrame, fits: pd.DataFrame, tasks: list[str],
          seed_intervals: dict[tuple, tuple[float, float]]) -> pd.DataFrame:
    """The candidates on the scale (mean over tasks), best first, with the tie to the best marked."""
    grouped = per_task.groupby(CONFIG, sort=False)
    table = grouped.agg(memory=("memory", "first"), disagreement=("disagreement", "mean"),
                        lower=("lower", "mean"), upper=("upper", "mean"),
                        n_values=("disagreement", "count")).reset_index()
    sources = grouped["source"].agg(lambda s: s.iloc[0] if s.nunique() == 1 else "mixed").reset_index(drop=True)
    table["source"] = sources.to_numpy()
    for i, key in enumerate(table[CONFIG].itertuples(index=False, name=None)):
        if table.at[i, "source"] == "measured" and key in seed_intervals:
            table.at[i, "lower"], table.at[i, "upper"] = seed_intervals[key]
    table["ranked"] = table["n_values"] == len(tasks)
    table = table.drop(columns="n_values")
    # Least disagreement first among the ranked; equal values: the cheaper first
    table = table.sort_values(["ranked", "disagreement", "memory"], ascending=[False, True, True],
                              kind="stable").reset_index(drop=True)
    table["tie"] = False
    if table["ranked"].any():
        # only measured values tie: a prediction's interval covers one row's noise, not the doubt about
        # the configuration's mean, and ties on it shipped configurations 2.6 points worse (UMLS, held out)
        measured = (table["source"] == "measured").to_numpy()
        table["tie"] = table["ranked"] & measured & bool(measured[0]) & ties_with(
            table["disagreement"], table["lower"], table["upper"], 0)
        table.loc[0, "tie"] = True
    return table


def _predict_pick(predictor: DisagreementPredictor, chosen: pd.DataFrame, kind: str,
                  tasks: list[str]) -> tuple[dict, dict, list[str]]:
    """The predictor's flips for the chosen configuration (its mean measures), per task."""
    pairs = chosen.drop_duplicates(list(CONFIG_COLUMNS))
    measures = [c for c in REGISTRY if c in chosen.columns]
    first = pairs.iloc[0]
    query = pd.DataFrame([{"kind": kind, "algo": first["algo"], "dim": int(first["dim"]),
                           "bitrate": int(first["bitrate"]), "task": t, **{m: pairs[m].mean() for m in measures}}
                          for t in tasks])
    answer = predictor.predict(query)
    predicted, interval, outside = {}, {}, []
    for r in answer.itertuples():
        if r.in_calibration:
            predicted[r.task] = float(r.predicted)
            interval[r.task] = (float(r.lower), float(r.upper))
        else:
            outside.append(f"{r.task} ({r.calibration_note})")
    return predicted, interval, outside


def _describe(row, unit: str) -> str:
    return f"{row['algo']} dim={int(row['dim'])} {int(row['bitrate'])}-bit ({int(row['memory'])} {unit})"


def _tie_note(ranked: pd.DataFrame, best, pick, unit: str) -> str:
    ties = ranked[ranked["tie"]]
    if len(ties) < 2:
        return ""
    head = (f"{len(ties) - 1} configuration(s) tie with the best, {_describe(best, unit)} at "
            f"{best['disagreement']:.2f} % [{best['lower']:.2f}, {best['upper']:.2f}]: each lies inside the other's interval")
    if (pick["algo"], pick["dim"], pick["bitrate"]) == (best["algo"], best["dim"], best["bitrate"]):
        cheapest = ties.sort_values(["memory", "disagreement"], kind="stable").iloc[0]
        if (cheapest["algo"], cheapest["dim"], cheapest["bitrate"]) == (best["algo"], best["dim"], best["bitrate"]):
            return head + "; it is also the cheapest of them."
        return head + f"; the best is shipped all the same (ties off; the cheapest is {_describe(cheapest, unit)})."
    return (head + f"; the cheapest, {_describe(pick, unit)} at {pick['disagreement']:.2f} % "
            f"[{pick['lower']:.2f}, {pick['upper']:.2f}], is shipped.")


def _overlap_note(ranked: pd.DataFrame, unit: str) -> str:
    """How many configurations placed by prediction overlap the best one's interval, in one line ("" for none)."""
    best, others = ranked.iloc[0], ranked.iloc[1:]
    overlap = others[(others["lower"] <= best["upper"]) & (others["upper"] >= best["lower"])]
    # a measured best against measured others is the tie rule's business
    unordered = overlap[overlap["source"] != "measured"] if best["source"] == "measured" else overlap
    if unordered.empty:
        return ""
    interval = f"[{best['lower']:.2f}, {best['upper']:.2f}]"
    cheapest = unordered.sort_values(["memory", "disagreement"], kind="stable")
    named = "; ".join(_describe(r, unit) for _, r in cheapest.head(3).iterrows())
    named += f"; and {len(cheapest) - 3} more" if len(cheapest) > 3 else ""
    if best["source"] == "measured":
        return (f"{len(unordered)} configuration(s) placed by prediction overlap the best one's interval, {interval}: "
                f"the predictions cannot order them against it (measuring them would; cheapest first: {named}).")
    return (f"The best, {_describe(best, unit)}, is placed by prediction, {interval}, and {len(unordered)} other "
            f"configuration(s) overlap that interval (cheapest first: {named}): the predictions cannot order them; "
            "measuring the best, and those of them placed by prediction, would.")


def _check_budget(budget) -> float:
    try:
        value = float(budget)
    except (TypeError, ValueError):
        raise BudgetError(f"the budget must be a number of bits per word, got {budget!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"the budget must be a positive number of bits per word, got {budget!r}")
    return value

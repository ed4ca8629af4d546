"""Assemble the study report: analyses of :mod:`embstab.selection`, figures and tables in HTML."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from embstab._fs import atomic_write
from embstab.measures import REGISTRY
from embstab.selection.recommend import recommend
import embstab.report.html as H
from embstab.report.plots import disagreement_vs_memory, measure_vs_disagreement, to_base64_png
from embstab.errors import OptionalDependencyError
from embstab.selection import (
    BASELINES,
    BudgetError,
    ResultsError,
    as_results,
    best_measures,
    fit_trend,
    measure_columns,
    oracle_decisions,
    oracle_gap,
    prediction_gap,
    recommendation_gap_of,
    selection_error,
    spearman_table,
    with_intervals,
    wide,
)
from embstab.selection.results import NEAR_CHANCE_MARGIN, chance_table, kind_label, kinds_of, ordered_tasks
from embstab.selection.correlation import MIN_INTERVAL_ROWS
from embstab.selection.signal import EIS_NULL, signal_summary, signal_table, without_signal
from embstab.selection.trend import VARIANTS

__all__ = ["build_report", "write_report"]


def build_report(results: pd.DataFrame | str | os.PathLike, *, title: str | None = None,
                 measure: str | None = None, budgets: Sequence[float] | None = None,
                 threshold: float | None = 1000, progress: bool | None = None,
                 keep_near_chance: bool = False) -> str:
    """Build the self-contained HTML report of a study's results.

    The report holds the disagreement-vs-memory plot with the fitted linear-log trend, one plot of
    each measure against the disagreement, the Spearman correlation table, the pairwise selection
    error and robustness, the gap to the oracle under memory budgets, and the recommended
    configuration for each budget. Plots are embedded as base64 PNG, so the file needs nothing
    else to open in a browser.

    Results that record each pair's null (a study's) also get a table of each measure against its
    null (the value for an unrelated partner) and how many pairs show signal; the correlations
    name the measures that show none, and the recommendations never rank configurations by a
    measure at its null (see :func:`embstab.selection.recommend`).

    Results that state their tasks' chance levels (a study's) also get a table of each task's
    downstream quality against its chance level. Rows whose downstream model is near chance are
    left out of every analysis unless ``keep_near_chance``; when every row is, the report holds
    that table and says so.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention or the published format, or a path to one.
    title : str, optional
        Page title; default names the algorithms and the input file.
    measure : str, optional
        Measure used for the recommendations; default ``"eis"`` when present, else the first
        measure column.
    budgets : sequence of float, optional
        Memory budgets (bits per word) to recommend for; default every memory value in the results.
    threshold : float or None, default 1000
        Memory threshold of the trend fit (:func:`embstab.selection.fit_trend`).
    progress : bool, optional
        Show a progress bar; default only on a terminal.
    keep_near_chance : bool, default False
        Keep the rows whose downstream model is within
        :data:`~embstab.selection.results.NEAR_CHANCE_MARGIN` points of its task's chance level.

    Returns
    -------
    str
        The HTML document.
    """
    source = None if isinstance(results, pd.DataFrame) else Path(results).name
    everything = as_results(results, keep_near_chance=True)
    chance = _chance_section(everything, keep_near_chance)
    try:
        df = as_results(everything, keep_near_chance=keep_near_chance)
    except ResultsError as exc:  # every row is near chance: nothing left to analyse
        algos = list(dict.fromkeys(everything["algo"]))
        page_title = title or (f"embstab stability report: {', '.join(algos)}" + (f" ({source})" if source else ""))
        note = H.Section("No analysis", "no-analysis").add(H.paragraph(str(exc).split(": ", 1)[-1], "note"))
        return H.page(page_title, [H.table(_overview(everything, kinds_of(everything)), index=False)],
                      [s for s in (chance, note) if s is not None])
    df, predicted = _measured_and_predicted(df)
    measures = measure_columns(df)
    if not measures:
        raise ResultsError("the results have no measure column to report on; expected one of "
                           + ", ".join(REGISTRY))
    measure = measure or ("eis" if "eis" in measures else measures[0])
    if measure not in measures:
        raise ResultsError(f"the results have no column for measure {measure!r}; they have: "
                           + ", ".join(measures))
    algos = list(dict.fromkeys(df["algo"]))
    title = title or (f"embstab stability report: {', '.join(algos)}"
                      + (f" ({source})" if source else ""))

    steps = ["analyses", "trend", "recommendations", "memory plot", *measures]
    bar = tqdm(total=len(steps), desc="report", unit="step",
               disable=(None if progress is None else not progress))
    try:
        rho = spearman_table(df, control="memory")
        inside = _within_tables(df)
        sel = _or_reason(selection_error, df)
        gap = _or_reason(oracle_gap, df)
        decisions = _or_reason(oracle_decisions, df)
        predicted_gap = _prediction_gaps(df, measure)
        bar.update()
        trends = _trends(df, threshold)
        bar.update()
        recs = _recommendations(df, measure, budgets, threshold)
        bar.update()
        memory_trend = trends["memory"]
        kinds = kinds_of(df)
        unit = kind_label(kinds[0]).unit if len(kinds) == 1 else "bits per row"
        memory_fig = to_base64_png(disagreement_vs_memory(
            df, None if isinstance(memory_trend, str) else memory_trend, unit))
        bar.update()
        kind_sections = _kind_sections(df, kinds, threshold)
        measure_figs = {}
        for name in measures:
            measure_figs[name] = to_base64_png(measure_vs_disagreement(df, name, rho))
            bar.update()
    finally:
        bar.close()

    intro = [H.paragraph(_summary_sentence(df, measures)), H.table(_overview(df, kinds), index=False)]
    nulls = _null_section(df)
    sections = [
        *([chance] if chance is not None else []),
        *([nulls] if nulls is not None else []),
        _recommend_section(recs, measure, unit),
        *([_predicted_section(predicted)] if len(predicted) else []),
        _trend_section(memory_fig, trends, threshold),
        _correlation_section(rho, without_signal(df)),
        *([_within_section(inside)] if inside else []),
        *kind_sections,
        _selection_section(sel),
        _oracle_section(gap, decisions),
        _prediction_section(predicted_gap, measure, unit),
        _measures_section(measure_figs),
    ]
    variants = _variant_table(df, measures)
    if variants is not None:
        sections.insert(1 + (chance is not None) + (nulls is not None), _variant_section(variants))
    return H.page(title, intro, sections)


def write_report(results: pd.DataFrame | str | os.PathLike, path: str | os.PathLike,
                 **kwargs) -> Path:
    """Build the report (see :func:`build_report`) and write it atomically to ``path``.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention or the published format, or a path to one.
    path : str or os.PathLike
        The HTML file to write (missing parent folders are created).
    **kwargs
        ``title``, ``measure``, ``budgets``, ``threshold``, ``progress`` and ``keep_near_chance`` of
        :func:`build_report`.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    document = build_report(results, **kwargs)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a crash never leaves half a report behind; /dev/stdout and pipes are written into
    with atomic_write(target, "w", encoding="utf-8") as fh:
        fh.write(document)
    return target


# --- analyses, each tolerant of small or partial studies --------------------------------------

def _or_reason(analysis, df: pd.DataFrame) -> pd.DataFrame | str:
    """The analysis' table, or why it cannot be computed (e.g. a partial study) as a string."""
    try:
        return analysis(df)
    except ResultsError as exc:
        return str(exc)


def _trends(df: pd.DataFrame, threshold: float | None) -> dict[str, object]:
    """Each variant's fit, or the reason it could not be fitted (a string)."""
    out: dict[str, object] = {}
    for variant in VARIANTS:
        try:
            out[variant] = fit_trend(df, variant, threshold=threshold)
        except ResultsError as exc:
            out[variant] = str(exc)
    return out


def _recommendations(df: pd.DataFrame, measure: str, budgets, threshold) -> pd.DataFrame | str:
    kinds = kinds_of(df)
    rows = []
    # memory units differ between kinds: each kind's budgets are its own
    for kind in kinds:
        part = df if len(kinds) == 1 else df[df["kind"] == kind]
        for budget in sorted(set(part["memory"])) if budgets is None else list(budgets):
            try:
                rec = recommend(part, budget, measure, threshold=threshold)
            except BudgetError as exc:
                if "cannot decide" in str(exc):  # configurations fit, but no measure can rank them
                    rows.append({**({"kind": kind} if len(kinds) > 1 or kinds != ["word"] else {}),
                                 "budget": budget, "note": f"no recommendation: {exc}"})
                continue  # otherwise nothing fits this budget
            except ResultsError as exc:  # e.g. too few rows below the threshold to fit the trend
                if len(kinds) == 1:
                    return str(exc)
                break
            rows.append(_recommendation_row(rec, budget, measure, kinds, part))
    out = pd.DataFrame(rows)
    for col in ("dim", "bitrate", "memory"):
        if col in out.columns:  # a budget without a recommendation leaves them empty: keep them whole
            out[col] = out[col].astype("Int64")
    return out


def _recommendation_row(rec, budget: float, measure: str, kinds: list[str], results: pd.DataFrame) -> dict:
    row = {"kind": rec.kind} if len(kinds) > 1 or kinds != ["word"] else {}
    lows = [lo for lo, _ in rec.predicted_interval.values()]
    highs = [hi for _, hi in rec.predicted_interval.values()]
    row.update({"budget": budget, "algo": rec.algo, "dim": rec.dim, "bitrate": rec.bitrate,
                "memory": rec.memory, "predictions lean on": rec.measure, "value": rec.measure_value,
                "null": np.nan if rec.measure_null is None else rec.measure_null,
                # the value and its interval in one cell: one column less on a table that is already wide
                "predicted disagreement (%)": (f"{rec.mean_predicted_disagreement:.2f}"
                                               + (f" [{np.mean(lows):.2f}, {np.mean(highs):.2f}]" if lows else "")
                                               if np.isfinite(rec.mean_predicted_disagreement) else "–"),
                "measured disagreement (%)": float(np.mean(list(rec.observed_disagreement.values())))})
    try:
        gap = recommendation_gap_of(rec, results)
    except ResultsError:
        gap = None
    # the best pick under the same budget, per task (mean over tasks): what the choice cost
    row["best under budget (%)"] = np.nan if gap is None else float(gap["oracle_disagreement"].mean())
    row["gap to best (points)"] = np.nan if gap is None else float(gap["gap"].mean())
    row["outside calibration"] = "yes" if rec.extrapolated else ""
    # the note matters where a tie chose a cheaper configuration, or the predictions need a caveat
    notes = [n for n in (rec.tie_note, rec.overlap_note, rec.prediction_note) if n]
    if rec.measure != measure or 0 < rec.n_ranked < rec.n_candidates:
        notes.append(rec.signal_note)
    if notes:
        row["note"] = " ".join(notes)
    return row


# --- sections ---------------------------------------------------------------------------------

def _overview(df: pd.DataFrame, kinds: list[str]) -> pd.DataFrame:
    def listing(col):
        return ", ".join(str(v) for v in sorted(df[col].unique()))

    table = pd.DataFrame({
        "": ["algorithms", "tasks", "seeds", "dimensions", "bits per entry", "rows"],
        "values": [", ".join(dict.fromkeys(df["algo"])), ", ".join(ordered_tasks(df["task"])),
                   listing("seed"), listing("dim"), listing("bitrate"), str(len(df))],
    })
    if kinds != ["word"]:
        described = "; ".join(f"{k}: {kind_label(k).title}, memory in {kind_label(k).unit}" for k in kinds)
        table = pd.concat([pd.DataFrame({"": ["kinds"], "values": [described]}), table], ignore_index=True)
    return table


def _measured_and_predicted(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A calibrated study's rows split by ``disagreement_source``: the measured ones, which every
    analysis reads (a predicted disagreement would only echo the measures it was predicted from),
    and the predicted ones (none for other results). Without measured rows, every row is analysed."""
    if "disagreement_source" not in df.columns:
        return df, df.iloc[:0]
    measured = df[df["disagreement_source"] == "measured"]
    return (measured if len(measured) else df), df[df["disagreement_source"] == "predicted"]


def _predicted_section(predicted: pd.DataFrame) -> H.Section:
    """The rows whose disagreement was predicted, not measured, with their intervals."""
    sec = H.Section(f"Predicted rows ({len(predicted)}, not measured)", "predicted")
    sec.add(H.paragraph(
        "This study ran the downstream models for a share of its rows only (calibrate). The disagreement of the "
        "rows below is predicted from each pair's measures, dimension and bit width by a model fitted on the "
        "measured rows, per algorithm and task, with its interval; no analysis above or below reads them (a "
        "recommendation predicts the configurations that no measured row covers). Run the study without "
        "'calibrate' to measure them."))
    shown = predicted[["algo", "task", "seed", "dim", "bitrate"]].copy()
    shown["source"] = "predicted"
    shown["disagreement (%)"] = predicted["disagreement"].to_numpy()
    shown["interval (%)"] = [f"[{lo:.2f}, {hi:.2f}]" for lo, hi in zip(predicted["disagreement_low"],
                                                                        predicted["disagreement_high"])]
    return sec.add(H.table(shown, digits=2, index=False))


def _summary_sentence(df: pd.DataFrame, measures: list[str]) -> str:
    n_pairs = len(df.drop_duplicates(["algo", "seed", "dim", "bitrate"]))
    return (f"{n_pairs} embedding pairs (one per algorithm, seed, dimension and precision), "
            f"measured with {', '.join(measures)}, and the percentage of downstream predictions "
            f"that flip between the two embeddings of each pair (the disagreement).")


def _chance_section(everything: pd.DataFrame, keep: bool) -> H.Section | None:
    """Each task's downstream quality against its chance level, and the rows near chance; None
    for results that do not state chance levels (a published table)."""
    if "chance" not in everything.columns:
        return None
    table = chance_table(everything, keep_near_chance=keep)
    shown = pd.DataFrame({
        "task": table["task"], "rows": table["rows"],
        "quality (%)": [f"{lo:.1f} – {hi:.1f}" if np.isfinite(lo) else "–"
                        for lo, hi in zip(table["quality_min"], table["quality_max"])],
        "mean quality (%)": table["quality_mean"], "chance (%)": table["chance"],
        "rows near chance": table["near_chance"], "left out": table["left_out"]})
    sec = H.Section("Downstream quality against chance", "chance")
    sec.add(H.paragraph(
        "Test quality of the downstream models (both models of every row; the task's own metric) "
        "beside what a model that learned nothing scores: the majority-class rate, the score of "
        "always predicting the most frequent tag, a random ranking's filtered MRR. A row is near "
        f"chance when either of its models is within {NEAR_CHANCE_MARGIN:g} points of that level: "
        "its disagreement is mostly noise, so "
        + ("it is kept in the analyses below only because the report was asked to keep such rows."
           if keep else "it is left out of every analysis below.")))
    sec.add(H.table(shown, digits=1, index=False))
    if table["chance"].isna().any():
        sec.add(H.paragraph("'–' as chance: rows stored before embstab recorded chance levels; "
                            "they are never counted as near chance.", "note"))
    return sec


def _recommend_section(recs, measure: str, unit: str) -> H.Section:
    sec = H.Section("Recommendations by memory budget", "recommend")
    if isinstance(recs, str):
        return sec.add(H.paragraph(f"No recommendation: {recs}", "note"))
    several = "kind" in recs.columns and recs["kind"].nunique() > 1
    unit = "in each kind's unit" if several else unit
    shown = recs.rename(columns={"budget": f"budget ({unit})", "memory": f"memory ({unit})",
                                 "bitrate": "bits per entry"})
    # columns that say nothing on this page are left out, so the table fits a laptop's window: the
    # empty ones, and those holding one value throughout, which the text above the table names instead
    empty = [c for c in ("null", "outside calibration", "note") if c in shown.columns
             and not shown[c].replace("", np.nan).notna().any()]
    lean = shown["predictions lean on"].dropna().unique() if "predictions lean on" in shown.columns else []
    algos = shown["algo"].dropna().unique() if "algo" in shown.columns else []
    constant = [c for c, values in (("predictions lean on", lean), ("algo", algos)) if len(values) == 1]
    shown = shown.drop(columns=empty + constant)
    null_text = "" if "null" in empty else " and 'null' its level for unrelated tables"
    whose = (f"Every prediction leans on {lean[0]} (requested: {measure}); 'value' is its raw value "
             if "predictions lean on" in constant else
             f"'predictions lean on' names the measure the predictions use (requested: {measure}), 'value' its raw "
             "value ")
    sec.add(H.paragraph(
        f"For each budget ({unit}), the configurations with dim × bits ≤ budget ranked by their downstream "
        "disagreement (the share of predictions that flip): measured where the results measured it "
        "(mean over seeds), else predicted from the configuration's measures by the calibrated model "
        "of its algorithm and task. A configuration ties with the best when each one's value lies "
        "inside the other's interval; the cheapest of a tie is shipped ('note' says so). 'predicted "
        "disagreement' is what the calibrated model predicts for the pick from its measures alone "
        "(mean over tasks, in percent of predictions, with its 90 % interval), beside the disagreement "
        "measured for it, the least measured under the same budget and the gap between the two (in "
        f"percentage points). {whose}for the pick{null_text}."
        + (f" Every pick is of {algos[0]}." if "algo" in constant else "")))
    sec.add(H.table(shown, digits={"value": 4, "null": 4}, index=False))
    if (recs.get("outside calibration", pd.Series(dtype=str)) == "yes").any():
        sec.add(H.paragraph("'outside calibration': some task of the pick lies outside the measures, "
                            "dimensions or bit widths the calibrated model saw, so it predicts nothing "
                            "there; the measured value stands alone.", "note"))
    return sec


def _trend_section(fig_b64: str, trends: dict, threshold) -> H.Section:
    sec = H.Section("Disagreement vs memory", "trend")
    sec.add(H.image(fig_b64, "downstream disagreement against memory with the fitted trend"))
    where = f"rows with memory < {threshold:g} bits" if threshold is not None else "all rows"
    rows = []
    for variant, fit in trends.items():
        if isinstance(fit, str):
            rows.append({"variant": variant, "slope (points per doubling)": np.nan,
                         "r²": np.nan, "rows": 0, "note": fit})
        else:
            rows.append({"variant": variant, "slope (points per doubling)": fit.slope,
                         "r²": fit.r_squared, "rows": fit.n_rows, "note": ""})
    sec.add(H.paragraph(
        f"Pooled least-squares fits over {where}, with one shared slope: disagreement = "
        "slope · log2(x) + intercept, where x is the memory (intercept per algorithm and task), "
        "the bits per entry (intercept per algorithm, task and dimension) or the dimension "
        "(intercept per algorithm, task and bits)."))
    sec.add(H.table(pd.DataFrame(rows), digits=3, index=False))
    memory = trends["memory"]
    if not isinstance(memory, str):
        sec.add(H.paragraph("Intercepts of the memory trend: the disagreement (%) each fit gives at x = 1, "
                            "over the rows it was fitted on:"))
        sec.add(H.table(memory.intercepts.rename(columns={"intercept": "intercept (%)", "n_rows": "rows"}),
                        digits=3, index=False))
    return sec


def _variant_table(df: pd.DataFrame, measures: list[str]) -> pd.DataFrame | None:
    """Mean measures and disagreement per training recipe and compression transform, or None when
    the study swept neither."""
    axes = [c for c in ("recipe", "transform") if c in df.columns and df[c].nunique() > 1]
    if not axes:
        return None
    cols = ["disagreement", *[c for c in ("quality", "agreement_uncompressed") if c in df.columns], *measures]
    table = df.groupby([*axes, "bitrate"], sort=False)[cols].mean()
    table.insert(0, "memory", df.groupby([*axes, "bitrate"], sort=False)["memory"].mean())
    table.insert(0, "rows", df.groupby([*axes, "bitrate"], sort=False).size())
    return table.reset_index()


def _variant_section(table: pd.DataFrame) -> H.Section:
    sec = H.Section("Training recipes and compression transforms", "variants")
    sec.add(H.paragraph("Means over algorithms, seeds, dimensions and tasks, per training recipe "
                        "(precision of the tables while they were fitted) and compression transform, "
                        "at each bit width. Measures compare the two corpus versions trained with the "
                        "same seed; memory is the bits per word each variant really stores; "
                        "agreement_uncompressed is the k-NN overlap of each compressed embedding with "
                        "its own uncompressed version (a transform can look stable while keeping few "
                        "of its neighbourhoods)."))
    return sec.add(H.table(table, index=False, digits=4))


def _kind_sections(df: pd.DataFrame, kinds: list[str], threshold) -> list[H.Section]:
    """One section per kind of embedding (only when the results hold more than word embeddings):
    its Spearman table and its disagreement-vs-memory plot, in its own memory unit."""
    if kinds == ["word"]:
        return []
    out = []
    for kind in kinds:
        part = df[df["kind"] == kind] if "kind" in df.columns else df
        label = kind_label(kind)
        sec = H.Section(f"{label.title[0].upper()}{label.title[1:]}", f"kind-{kind}")
        sec.add(H.paragraph(f"{len(part)} rows of kind '{kind}'. Spearman ρ between each measure (as a "
                            "distance) and the disagreement, over the rows of each algorithm pooled (higher "
                            f"is better), and the disagreement against memory in {label.unit}."))
        rho = spearman_table(part, control="memory")
        sec.add(H.table(with_intervals(rho)))
        sec.add(_too_few_note(rho))
        # the question a reader brings: which measure ranks this kind's pairs best? Only where the
        # intervals separate is one named
        for row in best_measures(rho).itertuples():
            sec.add(H.paragraph(f"{row.algo} / {row.task}: {row.note}."))
        try:
            trend = fit_trend(part, "memory", threshold=threshold)
        except ResultsError:
            trend = None  # too few rows below the threshold: the plot shows the points alone
        sec.add(H.image(to_base64_png(disagreement_vs_memory(part, trend, label.unit)),
                        f"downstream disagreement against memory for {label.title}"))
        out.append(sec)
    return out


def _correlation_section(rho: pd.DataFrame, silent: list[str] | None = None) -> H.Section:
    sec = H.Section("Correlation with downstream disagreement", "correlation")
    sec.add(H.paragraph("Spearman ρ between each measure (as a distance: 1 − value for k-NN and "
                        "the overlaps) and the disagreement, over all rows pooled, with its 95 % "
                        "bootstrap interval over the pairs. Higher is better; a negative ρ means the "
                        "measure ranks stability backwards, and an interval that holds 0 shows no "
                        "relation at all."))
    sec.add(H.paragraph(_BEYOND_MEMORY))
    sec.add(H.table(with_intervals(rho)))
    sec.add(_too_few_note(rho))
    if silent:
        sec.add(H.paragraph(f"No signal: {', '.join(silent)} {'sits' if len(silent) == 1 else 'sit'} at the level of "
                            "unrelated tables on half of the pairs or more (see 'Measures against their null'), so "
                            f"{'its ρ follows' if len(silent) == 1 else 'their ρ follow'} how that level moves with "
                            "the dimension, not the pairs' stability.", "note"))
    for row in best_measures(rho).itertuples():
        sec.add(H.paragraph(f"{row.algo} / {row.task}: {row.note}."))
    return sec


#: What the rows under each ρ of a table controlled for memory say.
_BEYOND_MEMORY = (
    "Memory alone ranks the pairs too (fewer bits, more flips): the row 'memory' is its ρ, memory read "
    "as a distance, and each measure's second row is its ρ controlling for memory (a partial Spearman ρ: "
    "the ranks of the measure and of the disagreement each regressed on the ranks of memory, the "
    "residuals correlated), what the measure adds beyond memory. A measure whose controlled ρ holds 0 "
    "ranks the pairs no better than their memory does.")


def _too_few_note(rho: pd.DataFrame) -> str:
    """A note on the cells shown without an interval (empty when every cell has one)."""
    if not (rho["n_rows"] < MIN_INTERVAL_ROWS).any():
        return ""
    return H.paragraph(f"'(too few rows)': a cell of fewer than {MIN_INTERVAL_ROWS} rows shows its ρ without an "
                       "interval; resampling so few rows gives intervals that look decisive and mean nothing, "
                       "so such a ρ ranks nothing.", "note")


def _within_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """ρ inside each dimension and inside each bit width (only along an axis with two values or more),
    every algorithm of the results with its own rows."""
    out = {}
    for column, label in (("dim", "dimension"), ("bitrate", "bit width")):
        if df[column].nunique() > 1:
            out[label] = spearman_table(df, within=column, control="memory")
    return out


def _within_section(tables: dict[str, pd.DataFrame]) -> H.Section:
    sec = H.Section("Correlation within one dimension and within one bit width", "within")
    sec.add(H.paragraph("A ρ pooled over dimensions can follow the dimension instead of the pairs' stability "
                        "(the null of several measures moves with it), and one pooled over bit widths the bit "
                        "width. The same ρ inside each dimension and inside each bit width, per algorithm; "
                        "inside one dimension memory varies with the bit width only, inside one bit width with "
                        "the dimension only, so 'controlling for memory' there controls for the other axis."))
    for label, rho in tables.items():
        sec.add(H.paragraph(f"Within each {label}:"))
        sec.add(H.table(with_intervals(rho)))
        sec.add(_too_few_note(rho))
    return sec


def _null_section(df: pd.DataFrame) -> H.Section | None:
    """Each measure against its null, per algorithm and dimension; None for results without nulls."""
    summary = signal_summary(df)
    if not summary:
        return None
    by = ["algo", "dim"] if df["algo"].nunique() > 1 else ["dim"]
    table = signal_table(df, by=by)
    shown = table.assign(**{"pairs with signal": [f"{w}/{c}" for w, c in zip(table["with_signal"], table["checked"])]})
    shown = shown.drop(columns=["pairs", "checked", "with_signal"]).rename(columns={"value": "mean value",
                                                                                    "null": "mean null"})
    sec = H.Section("Measures against their null", "nulls")
    sec.add(H.paragraph(
        "Each measure beside its null: its value for an unrelated partner (the other side's rows "
        "shuffled, its anchor with them), mean over the pairs of each dimension. A pair shows signal "
        "when its value is at least twice as far from the uninformative end as the null and beyond "
        "3 standard deviations of the shuffles; a value at its null says nothing about the pair's "
        "stability, however small."))
    if "eis" in summary:
        sec.add(H.paragraph(EIS_NULL))
    sec.add(H.paragraph("Pairs with signal: " + "; ".join(f"{m} {hits}/{checked}" for m, (hits, checked)
                                                           in summary.items()) + "."))
    silent = [m for m, (hits, checked) in summary.items() if checked and 2 * hits <= checked]
    if silent:
        sec.add(H.paragraph(f"No signal on half of the pairs or more: {', '.join(silent)}.", "note"))
    return sec.add(H.table(shown, digits=4, index=False))


def _selection_section(sel) -> H.Section:
    sec = H.Section("Pairwise selection error and robustness", "selection")
    if isinstance(sel, str):
        return sec.add(H.paragraph(f"Not computed: {sel}", "note"))
    sec.add(H.paragraph("Selection error: share of pairs of configurations (a fraction from 0 to 1, per seed, "
                        "mean over seeds) that the measure orders differently from their disagreement; a random order gets "
                        "about 0.5 wrong. Lower is better."))
    sec.add(H.table(wide(sel, "selection_error"), digits=2))
    sec.add(H.paragraph("Robustness: the largest disagreement gap (percentage points) among the "
                        "wrongly ordered pairs, max over seeds. Lower is better."))
    return sec.add(H.table(wide(sel, "robustness"), digits=2))


#: What each baseline selector of :func:`embstab.selection.oracle_decisions` does, in words.
_RULES = {"highest_precision": "always the highest precision", "lowest_precision": "always the lowest precision"}


def _oracle_section(gap, decisions) -> H.Section:
    sec = H.Section("Choosing dimension and precision under a memory budget", "oracle")
    if isinstance(gap, str):
        return sec.add(H.paragraph(f"Not computed: {gap}", "note"))
    sec.add(H.paragraph("For each memory budget with two or more configurations and each seed, "
                        "the disagreement of the selector's choice minus the smallest one "
                        "available, in percentage points of disagreement (0 = the best choice). "
                        "Baselines that ignore the embeddings: always the highest precision (the smallest "
                        "dimension that fits) or always the lowest (the largest). Mean over budgets and "
                        "seeds (lower is better):"))
    same = {} if isinstance(decisions, str) else _same_as_baselines(decisions)
    # a measure that only ever repeats a baseline's picks is labelled so in the tables themselves
    labels = {key: f"{key[1]} (= {rule})" for key, (rule, _) in same.items()}
    shown = gap.assign(selector=[labels.get((a, m), m) for a, m in zip(gap["algo"], gap["selector"])])
    sec.add(H.table(wide(shown, "mean_gap", index="selector"), digits=2))
    several = gap["algo"].nunique() > 1
    for (algo, measure), (rule, tasks) in same.items():
        where = "every budget, task and seed" if tasks is None else f"every budget and seed of {', '.join(tasks)}"
        sec.add(H.paragraph(
            f"{f'{algo}: ' if several else ''}{measure} picks exactly what '{_RULES[rule]}' picks, at {where}: "
            "there it ranks the configurations as their bit width alone does, so its gap is that rule's and it "
            "adds nothing over ignoring the embeddings.", "note"))
    sec.add(H.paragraph("Worst case (max over budgets and seeds, percentage points of disagreement):"))
    return sec.add(H.table(wide(shown, "max_gap", index="selector"), digits=2))


def _same_as_baselines(decisions: pd.DataFrame) -> dict[tuple[str, str], tuple[str, list[str] | None]]:
    """The measures whose pick equals a baseline's in every decision of one task or more.

    Returns ``{(algo, measure): (baseline, tasks)}``, ``tasks`` None when it is every task of the
    algorithm; a measure matching both baselines somewhere is reported against the first.
    """
    keys = ["algo", "task", "memory", "seed"]
    config = ["dim", "bitrate"]
    base = {b: decisions[decisions["selector"] == b].set_index(keys)[config] for b in BASELINES}
    out = {}
    measured = decisions[~decisions["selector"].isin(BASELINES)]
    for (algo, measure), part in measured.groupby(["algo", "selector"], sort=False):
        mine = part.set_index(keys)[config]
        all_tasks = list(dict.fromkeys(part["task"]))
        for rule, theirs in base.items():
            equal = (mine == theirs.reindex(mine.index)).all(axis=1)
            tasks = [t for t, hit in equal.groupby(level="task", sort=False) if hit.all()]
            if tasks:
                out[(algo, measure)] = (rule, None if tasks == all_tasks else tasks)
                break
    return out


def _prediction_gaps(df: pd.DataFrame, measure: str) -> pd.DataFrame | str:
    """Mean oracle gap of each selector per kind and budget, on held-out seeds (see
    :func:`embstab.selection.prediction_gap`), or why it cannot be computed."""
    try:
        gaps = prediction_gap(df, measure=measure)
    except (ResultsError, OptionalDependencyError) as exc:
        return str(exc)
    kinds = kinds_of(df)
    if len(kinds) > 1:  # memory units differ between kinds: each kind's budgets apart
        kind_of = df.drop_duplicates("algo").set_index("algo")["kind"]
        gaps = gaps.assign(kind=gaps["algo"].map(kind_of))
    keys = (["kind"] if len(kinds) > 1 else []) + ["budget"]
    selectors = list(dict.fromkeys(gaps["selector"]))
    table = gaps.pivot_table(index=keys, columns="selector", values="gap", aggfunc="mean", sort=False)[selectors]
    table.insert(0, "decisions", gaps[gaps["selector"] == selectors[0]].groupby(keys, sort=False).size())
    overall = gaps.groupby((["kind"] if len(kinds) > 1 else []) + ["selector"], sort=False)["gap"].mean()
    if len(kinds) > 1:
        rows = [table.reset_index()]
        for kind in kinds:
            if kind in overall.index.get_level_values(0):
                rows.append(pd.DataFrame([{"kind": kind, "budget": "all budgets",
                                           "decisions": int(table.loc[kind, "decisions"].sum()),
                                           **overall.loc[kind].to_dict()}]))
        return pd.concat(rows, ignore_index=True)
    total = pd.DataFrame([{"budget": "all budgets", "decisions": int(table["decisions"].sum()), **overall.to_dict()}])
    return pd.concat([table.reset_index(), total], ignore_index=True)


def _prediction_section(table, measure: str, unit: str) -> H.Section:
    sec = H.Section("Choosing by predicted disagreement, on a seed the calibration never saw", "predicted-gap")
    if isinstance(table, str):
        return sec.add(H.paragraph(f"Not computed: {table}", "note"))
    sec.add(H.paragraph(
        "For each algorithm and each seed in turn, the disagreement predictor is calibrated on the other "
        "seeds' rows and predicts the held-out seed's disagreement from its measures alone; per task and "
        "budget, each selector picks one of the held-out seed's configurations that fit (inside the "
        "calibration), and its measured disagreement is compared with the least measured among them. "
        "'predicted': the least predicted disagreement (what the recommendation ships where nothing was "
        f"measured; predictions never tie); '{measure}': the best raw value of the measure, pooled over dimensions; 'random': a "
        "pick at random, on average. Each selector's cell is its mean gap to the best pick, in percentage points of "
        "disagreement, over algorithms, tasks "
        "and held-out seeds (lower is better); 'decisions' counts the (algorithm, task, seed) decisions."))
    unit = "in each kind's unit" if "kind" in table.columns else unit
    return sec.add(H.table(table.rename(columns={"budget": f"budget ({unit})"}), digits=2, index=False))


def _measures_section(figs: dict[str, str]) -> H.Section:
    sec = H.Section("Each measure vs disagreement", "measures")
    for name, b64 in figs.items():
        sec.add(H.image(b64, f"{name} against downstream disagreement"))
    return sec

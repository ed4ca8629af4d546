"""Check a calibration on rows it never saw: each seed, or each interior dimension, held out in turn."""

from __future__ import annotations

import dataclasses
import html
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from embstab.errors import ConfigError
from embstab.selection.calibration import (
    _BY,
    _check_level,
    _kind_column,
    _memory,
    _records,
    measured_rows,
)
from embstab.selection.errors import ResultsError
from embstab.selection.predict import DisagreementPredictor, fit_predictor
from embstab.selection.results import as_results, ordered_tasks

__all__ = ["PredictorValidation", "validate_predictor", "fit_validated_predictor"]


# --- validation ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PredictorValidation:
    """Held-out figures of :func:`fit_predictor`: each group of rows predicted by a fit without it.

    Attributes
    ----------
    by : {"seed", "dim"}
        What was held out: each seed, or each interior dimension.
    level : float
        Nominal coverage of the intervals.
    rows : pandas.DataFrame
        Every held-out row: ``kind, algo, task, seed, dim, bitrate, held_out, disagreement,
        predicted, lower, upper, in_calibration, covered, reference``.
    table : pandas.DataFrame
        Per (kind, algo, task): ``held_out_by, n_rows, n_predicted`` (rows inside the
        calibration), ``coverage`` (share of those inside their interval), ``mean_width``,
        ``mae`` (over the rows inside the calibration), ``reference_mae`` (over those of them the
        reference can predict: the seed-noise floor needs the configuration on another seed),
        ``ratio`` (the predictor's error over the reference's, on the same rows) and ``reference``
        (what the reference is).
    notes : tuple of str
        Algorithms that could not be validated this way, and why.
    """

    by: str
    level: float
    rows: pd.DataFrame = field(repr=False)
    table: pd.DataFrame = field(repr=False)
    notes: tuple[str, ...] = ()

    @property
    def coverage(self) -> float:
        """Share of all held-out rows inside the calibration that lie inside their interval."""
        inside = self.rows[self.rows["in_calibration"]]
        return float(inside["covered"].mean()) if len(inside) else float("nan")

    @property
    def mae(self) -> float:
        """Mean absolute error averaged over the tasks (points)."""
        return float(self.table["mae"].mean())

    @property
    def reference_mae(self) -> float:
        """The reference's mean absolute error averaged over the tasks (points)."""
        return float(self.table["reference_mae"].mean())

    @property
    def ratio(self) -> float:
        """:attr:`mae` / :attr:`reference_mae`."""
        return self.mae / self.reference_mae if self.reference_mae > 0 else float("nan")

    def to_frame(self) -> pd.DataFrame:
        """The per-task table.

        Returns
        -------
        pandas.DataFrame
            A copy of :attr:`table`.
        """
        return self.table.copy()

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-serialisable), without the per-row frame.

        Returns
        -------
        dict
            ``by``, ``level``, ``coverage``, ``mae``, ``reference_mae``, ``ratio``, ``notes`` and
            ``tasks`` (the table's records).
        """
        def plain(v):
            return None if isinstance(v, float) and not math.isfinite(v) else v

        return {"by": self.by, "level": self.level, "coverage": plain(self.coverage), "mae": plain(self.mae),
                "reference_mae": plain(self.reference_mae), "ratio": plain(self.ratio), "notes": list(self.notes),
                "tasks": _records(self.table)}

    def _reference_name(self) -> str:
        return ("the seed-noise floor (the configuration's mean over the other seeds)" if self.by == "seed"
                else "the memory trend (linear in log2 memory, fitted on the same rows)")

    def __str__(self) -> str:
        held = "each seed" if self.by == "seed" else "each interior dimension"
        lines = [f"Held out {held} in turn; {self.level:.0%} intervals; reference: {self._reference_name()}.",
                 self.table.drop(columns=["reference", "held_out_by"]).to_string(
                     index=False, float_format=lambda v: f"{v:.3g}"),
                 f"Overall: coverage {self.coverage:.1%}, MAE {self.mae:.3f} against {self.reference_mae:.3f} "
                 f"({self.ratio:.2f}×)."]
        lines += list(self.notes)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"PredictorValidation(by={self.by!r}, level={self.level:g}, tasks={len(self.table)}, "
                f"coverage={self.coverage:.3f}, mae={self.mae:.3f}, reference_mae={self.reference_mae:.3f}, "
                f"ratio={self.ratio:.3f})")

    def _repr_html_(self) -> str:
        head = (f"<p><b>PredictorValidation</b> by {html.escape(self.by)}: coverage {self.coverage:.1%} "
                f"(nominal {self.level:.0%}), MAE {self.mae:.3f} against {html.escape(self._reference_name())} "
                f"{self.reference_mae:.3f} ({self.ratio:.2f}×)</p>")
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return head + self.table.to_html(index=False, float_format=lambda v: f"{v:.3g}") + notes

    def plot(self, ax=None):
        """Draw each held-out row's predicted disagreement against its measured one, with its interval.

        One colour per task (per algorithm and task when several algorithms were validated); the
        rows outside the calibration, which have no prediction, are left out. The dashed diagonal
        is a perfect prediction: a bar that crosses it is a covered row.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; default a new figure's.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from embstab.selection.plots import axes_or_new, colors, interval_points  # noqa: PLC0415

        ax = axes_or_new(ax)
        rows = self.rows[self.rows["in_calibration"].astype(bool)]
        several = rows["algo"].nunique() > 1
        order = {t: i for i, t in enumerate(ordered_tasks(rows["task"]))}
        keys = sorted(dict.fromkeys(zip(rows["algo"], rows["task"])), key=lambda k: (k[0], order[k[1]]))
        for (algo, task), color in zip(keys, colors(len(keys))):
            part = rows[(rows["algo"] == algo) & (rows["task"] == task)]
            interval_points(ax, part["disagreement"], part["predicted"], part["lower"], part["upper"],
                            color=color, alpha=0.8, label=f"{algo}, {task}" if several else str(task))
        if len(rows):
            values = rows[["disagreement", "predicted"]].to_numpy(dtype=np.float64)
            low, high = float(np.nanmin(values)), float(np.nanmax(values))
            ax.plot([low, high], [low, high], color="0.4", ls="--", lw=0.8, label="predicted = measured")
        ax.set_xlabel("measured disagreement (%)")
        ax.set_ylabel(f"predicted (%), {self.level:.0%} interval")
        ax.set_title(f"Held out by {self.by}: coverage {self.coverage:.0%}, MAE {self.mae:.2f} ({self.ratio:.2f}×)",
                     fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        return ax


def _memory_line(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    """The memory trend of one task: least squares of the disagreement on log2 memory."""
    x = np.log2(_memory(train))
    if np.ptp(x) == 0:
        return np.full(len(test), float(train["disagreement"].mean()))
    slope, intercept = np.polyfit(x, train["disagreement"].to_numpy(dtype=np.float64), 1)
    return slope * np.log2(_memory(test)) + intercept


def validate_predictor(results: pd.DataFrame | str | os.PathLike, *, by: str = "seed", level: float = 0.9,
                       measures: Sequence[str] | str | None = None, seed: int = 0) -> PredictorValidation:
    """Check :func:`fit_predictor` on rows it never saw: leave one seed, or one dimension, out.

    For every algorithm (and kind), each seed (``by="seed"``) or each interior dimension
    (``by="dim"``: all but the smallest and the largest, so that the held-out rows lie inside the
    calibrated range) is held out in turn; :func:`fit_predictor` is run on the other rows alone
    (the model choice and the conformal quantile included) and predicts the held-out rows from
    their measures, dimensions and bit widths. The reference is what the prediction has to beat:

    - ``by="seed"``: the seed-noise floor, each held-out row predicted by its own configuration's
      mean disagreement over the other seeds (which needs the downstream models a prediction spares);
    - ``by="dim"``: the memory trend, a line in log2 memory per task fitted on the same rows.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A results table (any form :func:`~embstab.selection.as_results` accepts).
    by : {"seed", "dim"}, default "seed"
        What to hold out.
    level : float, default 0.9
        Nominal coverage of the intervals.
    measures : sequence of str or str, optional
        Passed to :func:`fit_predictor`.
    seed : int, default 0
        Passed to :func:`fit_predictor`.

    Returns
    -------
    PredictorValidation

    Raises
    ------
    ResultsError
        If no algorithm has two seeds (``by="seed"``) or three dimensions (``by="dim"``).
    ConfigError
        If ``by`` or ``level`` is invalid.
    """
    if by not in _BY:
        raise ConfigError(f"by must be 'seed' or 'dim', got {by!r}")
    level = _check_level(level)
    df = as_results(results)
    df = df[measured_rows(df)]  # only measured rows can check a prediction
    kinds = _kind_column(df)
    parts, notes = [], []
    for (kind, algo), idx in df.groupby([kinds, df["algo"]], sort=False).groups.items():
        sub = df.loc[idx]
        values = sorted(sub[by].unique())
        held = values if by == "seed" else values[1:-1]
        if by == "seed" and len(values) < 2:
            notes.append(f"{algo}: one seed, nothing to hold out by seed (validate by dim)")
            continue
        if by == "dim" and not held:
            notes.append(f"{algo}: {len(values)} dimension(s), no interior one to hold out")
            continue
        for value in held:
            train, test = sub[sub[by] != value], sub[sub[by] == value]
            try:
                fitted = fit_predictor(train, measures=measures, level=level, seed=seed)
            except ResultsError as exc:
                notes.append(f"{algo}, {by} {value} held out: {exc}")
                continue
            # the held-out disagreement is never shown to the fit, nor to its predict
            answer = fitted.predict(test.drop(columns=["disagreement"]))
            part = test[["algo", "task", "seed", "dim", "bitrate", "disagreement"]].assign(
                kind=kind, held_out=value, predicted=answer["predicted"], lower=answer["lower"],
                upper=answer["upper"], in_calibration=answer["in_calibration"])
            part["reference"] = _reference(train, test, by)
            parts.append(part)
    if not parts:
        raise ResultsError("nothing to validate: " + "; ".join(notes) if notes else "nothing to validate")
    rows = pd.concat(parts, ignore_index=True)
    rows["covered"] = (rows["disagreement"] >= rows["lower"]) & (rows["disagreement"] <= rows["upper"])
    rows = rows[["kind", "algo", "task", "seed", "dim", "bitrate", "held_out", "disagreement", "predicted", "lower",
                 "upper", "in_calibration", "covered", "reference"]]
    table = []
    reference = "seed-noise floor" if by == "seed" else "memory trend"
    for (kind, algo, task), part in rows.groupby(["kind", "algo", "task"], sort=False):
        predicted = part[part["in_calibration"]]
        mae = float((predicted["predicted"] - predicted["disagreement"]).abs().mean()) if len(predicted) else np.nan
        # the reference needs the configuration on another seed; the ratio compares the same rows
        both = predicted[predicted["reference"].notna()]
        ref = float((both["reference"] - both["disagreement"]).abs().mean()) if len(both) else np.nan
        mae_both = float((both["predicted"] - both["disagreement"]).abs().mean()) if len(both) else np.nan
        table.append({"kind": kind, "algo": algo, "task": task, "held_out_by": by, "n_rows": len(part),
                      "n_predicted": int(part["in_calibration"].sum()),
                      "coverage": float(part.loc[part["in_calibration"], "covered"].mean())
                      if part["in_calibration"].any() else np.nan,
                      "mean_width": float((part["upper"] - part["lower"]).mean()),
                      "mae": mae, "reference_mae": ref, "ratio": mae_both / ref if ref > 0 else np.nan,
                      "reference": reference})
    table = pd.DataFrame(table)
    order = {t: i for i, t in enumerate(ordered_tasks(table["task"]))}
    table = table.sort_values(["kind", "algo", "task"], key=lambda s: s.map(order) if s.name == "task" else s,
                              kind="stable").reset_index(drop=True)
    return PredictorValidation(by=by, level=level, rows=rows, table=table, notes=tuple(notes))


def _reference(train: pd.DataFrame, test: pd.DataFrame, by: str) -> np.ndarray:
    if by == "seed":
        means = train.groupby(["task", "dim", "bitrate"])["disagreement"].mean()
        return np.array([means.get((t, d, b), np.nan) for t, d, b in
                         test[["task", "dim", "bitrate"]].itertuples(index=False, name=None)])
    out = np.full(len(test), np.nan)
    for task in test["task"].unique():
        mask = (test["task"] == task).to_numpy()
        tr = train[train["task"] == task]
        if len(tr) >= 2:
            out[mask] = _memory_line(tr, test[mask])
    return out


def fit_validated_predictor(results: pd.DataFrame | str | os.PathLike, *,
                            measures: Sequence[str] | str | None = None, level: float = 0.9,
                            seed: int = 0) -> DisagreementPredictor:
    """:func:`~embstab.selection.fit_predictor`, with its held-out check kept in ``validation``.

    The check is :func:`validate_predictor` by seed where an algorithm has two or more seeds, else
    by dimension; its figures are saved with the predictor and printed beside its predictions.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        As for :func:`~embstab.selection.fit_predictor`.
    measures : sequence of str or str, optional
        As for :func:`~embstab.selection.fit_predictor`.
    level : float, default 0.9
        Nominal coverage of the intervals.
    seed : int, default 0
        As for :func:`~embstab.selection.fit_predictor`.

    Returns
    -------
    DisagreementPredictor

    Raises
    ------
    ResultsError
        As :func:`~embstab.selection.fit_predictor` and :func:`validate_predictor` do.
    ConfigError
        If ``level`` or ``seed`` is malformed.
    """
    predictor = fit_predictor(results, measures=measures, level=level, seed=seed)
    df = as_results(results)
    df = df[measured_rows(df)]
    by = "seed" if df.groupby([_kind_column(df), df["algo"]])["seed"].nunique().ge(2).any() else "dim"
    checked = validate_predictor(df, by=by, level=level, measures=measures, seed=seed)
    return dataclasses.replace(predictor, validation=checked.to_frame())

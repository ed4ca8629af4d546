"""Predict how many downstream predictions flip, with an interval, from a pair's stability measures.

A results table (a study's rows or a published table) relates each pair's measures to its
measured disagreement. :func:`fit_predictor` learns that relation separately for every
(kind, algorithm, task): calibrations do not transfer across algorithms (the same EIS means 40 %
flips for one knowledge-graph model and 60 % for another), and raw measure values are not
comparable across dimensions (EIS and its null shrink with the dimension), so every model also
sees the dimension and the bit width, or is monotone in one measure.

Within a group, a small fixed set of models competes, chosen by grouped cross-validation (one
seed held out at a time; one dimension when the table has a single seed):

- ``linear``: ridge regression on the measures' distances (larger = less stable), log2 dim,
  log2 bits and an indicator of 1-bit entries (1-bit tables lie off the others' trend);
- ``loglinear``: the same on the logarithms of the distances;
- ``isotonic``: a monotone fit of the disagreement on the log distance of the first measure;
- ``monotone``: a monotone (isotonic) function of the ``loglinear`` model's index, for the
  saturating shapes of knowledge-graph tasks (1- and 2-bit tables far off the others' trend);
- ``memory``: a straight line in log2 memory (the measures unused).

The interval at ``level`` is split-conformal on the chosen model's out-of-fold residuals (via
``crepes``): as wide as the errors on held-out folds were. :func:`validate_predictor` checks it on groups the
fit never saw: each seed (or each interior dimension) held out in turn, the model choice and the
conformal quantile refitted without it, against the seed-noise floor (the configuration's mean
over the other seeds) or the memory trend.

A prediction is made only inside the calibration: a known (kind, algorithm, task), a dimension
and bit width within the calibrated ranges, and measure values within the calibrated range
widened by :data:`MEASURE_TOLERANCE` of its span on each side. Elsewhere ``in_calibration`` is
False, the prediction NaN, and ``calibration_note`` says why.
"""

from __future__ import annotations

import html
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from embstab._fs import atomic_write, to_json
from embstab._numbers import is_integer, is_real
from embstab.compress.memory import memory_bits
from embstab.errors import ConfigError, DataFormatError, OptionalDependencyError, lookup
from embstab.io.modelfolder import read_json_file
from embstab.measures import REGISTRY
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results, measure_distance, ordered_tasks
from embstab.selection.signal import FALLBACK_ORDER, has_nulls, signal_flags

__all__ = ["MODELS", "MEASURE_TOLERANCE", "RIDGE_ALPHA", "GroupCalibration", "DisagreementPredictor",
           "PredictorValidation", "PairPrediction", "fit_predictor", "validate_predictor", "predict_pair",
           "load_predictor", "measured_rows"]

#: The candidate models of every (kind, algorithm, task), in the order a tie in cross-validated
#: error is broken (the simpler first).
MODELS: tuple[str, ...] = ("memory", "linear", "loglinear", "isotonic", "monotone")
#: A measure value counts as calibrated up to this share of the calibrated span beyond its
#: smallest and largest value.
MEASURE_TOLERANCE = 0.1
#: Ridge penalty on the standardised features of the ``linear`` and ``loglinear`` models.
RIDGE_ALPHA = 1.0
#: Fewest rows a group needs to be calibrated.
MIN_ROWS = 6
#: Identifies a saved predictor file.
FILE_FORMAT = "embstab-disagreement-predictor"
FILE_VERSION = 1
# the floor under a distance before its logarithm (a pair identical up to rounding)
_LOG_FLOOR = 1e-9
_BY = ("seed", "dim")
#: The column of a calibrated study's table that says where a row's disagreement comes from; only
#: rows whose value is ``measured`` (or that lack the column) calibrate anything.
SOURCE_COLUMN = "disagreement_source"


def measured_rows(df: pd.DataFrame) -> pd.Series:
    """Which rows hold a measured disagreement (not one a calibration predicted).

    Parameters
    ----------
    df : pandas.DataFrame
        A results table; a calibrated study's carries ``disagreement_source``.

    Returns
    -------
    pandas.Series of bool
        Aligned with ``df``; all True without the column.
    """
    if SOURCE_COLUMN not in df.columns:
        return pd.Series(True, index=df.index)
    source = df[SOURCE_COLUMN]
    return (source.isna() | (source.astype(str) == "measured")).astype(bool)


# --- the models ----------------------------------------------------------------------------------

def _distances(frame: pd.DataFrame, measure: str) -> np.ndarray:
    return measure_distance(pd.to_numeric(frame[measure], errors="coerce").to_numpy(dtype=np.float64), measure)


def _memory(frame: pd.DataFrame) -> np.ndarray:
    if "memory" in frame.columns:
        memory = pd.to_numeric(frame["memory"], errors="coerce").to_numpy(dtype=np.float64)
        if np.isfinite(memory).all():
            return memory
    return np.asarray(memory_bits(frame["dim"], frame["bitrate"]), dtype=np.float64)


def _features(frame: pd.DataFrame, model: str, measures: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The named feature columns ``model`` reads from ``frame`` (before dropping constant ones)."""
    names: list[str] = []
    cols: list[np.ndarray] = []
    if model in ("linear", "loglinear", "monotone"):
        for m in measures:
            d = _distances(frame, m)
            names.append(m if model == "linear" else f"log {m}")
            cols.append(d if model == "linear" else np.log(np.maximum(d, _LOG_FLOOR)))
        bits = frame["bitrate"].to_numpy(dtype=np.float64)
        names += ["log2 dim", "log2 bits", "1-bit"]
        cols += [np.log2(frame["dim"].to_numpy(dtype=np.float64)), np.log2(bits), (bits == 1).astype(np.float64)]
    elif model == "isotonic":
        names = [f"log {measures[0]}"]
        cols = [np.log(np.maximum(_distances(frame, measures[0]), _LOG_FLOOR))]
    else:  # memory
        names = ["log2 memory"]
        cols = [np.log2(_memory(frame))]
    return names, np.column_stack(cols) if cols else np.zeros((len(frame), 0))


def _fit_model(model: str, frame: pd.DataFrame, measures: Sequence[str]) -> dict[str, Any]:
    """Fit one candidate on ``frame``; its parameters as plain Python (what a saved file stores)."""
    if model == "monotone":
        # a monotone function of the loglinear model's index: saturating shapes, the dimension adjusted
        inner = _fit_model("loglinear", frame, measures)
        score = _apply_model("loglinear", inner, frame, measures)
        from sklearn.isotonic import IsotonicRegression  # noqa: PLC0415 - loaded on use

        iso = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(score, frame["disagreement"].to_numpy())
        return {**inner, "x": iso.X_thresholds_.tolist(), "y": iso.y_thresholds_.tolist()}
    names, x = _features(frame, model, measures)
    y = frame["disagreement"].to_numpy(dtype=np.float64)
    if model in ("linear", "loglinear"):
        center, scale = x.mean(axis=0), x.std(axis=0)
        keep = scale > 1e-12  # a feature constant in the training rows carries nothing (one dimension, one bit width)
        z = (x[:, keep] - center[keep]) / scale[keep]
        coef = np.linalg.solve(z.T @ z + RIDGE_ALPHA * np.eye(z.shape[1]), z.T @ (y - y.mean())) if keep.any() \
            else np.zeros(0)
        return {"features": [n for n, k in zip(names, keep) if k], "center": center[keep].tolist(),
                "scale": scale[keep].tolist(), "coef": coef.tolist(), "intercept": float(y.mean())}
    if model == "isotonic":
        from sklearn.isotonic import IsotonicRegression  # noqa: PLC0415 - loaded on use

        iso = IsotonicRegression(increasing=True, out_of_bounds="clip").fit(x[:, 0], y)
        return {"features": names, "x": iso.X_thresholds_.tolist(), "y": iso.y_thresholds_.tolist()}
    if np.ptp(x[:, 0]) == 0:  # one memory: the line is its mean
        return {"features": names, "slope": 0.0, "intercept": float(y.mean())}
    slope, intercept = np.polyfit(x[:, 0], y, 1)
    return {"features": names, "slope": float(slope), "intercept": float(intercept)}


def _apply_model(model: str, params: Mapping[str, Any], frame: pd.DataFrame, measures: Sequence[str]) -> np.ndarray:
    """Predictions of a fitted candidate for ``frame`` (unclipped)."""
    if model == "monotone":
        score = _apply_model("loglinear", params, frame, measures)
        return np.interp(score, np.asarray(params["x"]), np.asarray(params["y"]))
    names, x = _features(frame, model, measures)
    if model in ("linear", "loglinear"):
        cols = [names.index(n) for n in params["features"]]
        z = (x[:, cols] - np.asarray(params["center"])) / np.asarray(params["scale"]) if cols else x[:, :0]
        return params["intercept"] + z @ np.asarray(params["coef"], dtype=np.float64)
    if model == "isotonic":
        # what IsotonicRegression(out_of_bounds="clip").predict does: linear between the knots
        return np.interp(x[:, 0], np.asarray(params["x"]), np.asarray(params["y"]))
    return params["slope"] * x[:, 0] + params["intercept"]


def _conformal_halfwidth(residuals: np.ndarray, level: float) -> float:
    """The split-conformal quantile of the absolute out-of-fold residuals at ``level`` (crepes); inf
    when there are too few residuals for a finite interval at that level."""
    try:
        from crepes import ConformalRegressor  # noqa: PLC0415 - loaded on use
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise OptionalDependencyError("calibrated intervals need the 'crepes' package: pip install crepes") from exc
    regressor = ConformalRegressor().fit(residuals)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too few residuals: crepes warns and answers inf, reported as such
        interval = regressor.predict_int(np.zeros(1), confidence=level)
    return float(interval[0, 1])


def _cv_folds(frame: pd.DataFrame, seed: int) -> tuple[str, list[np.ndarray]]:
    """How a group is cross-validated: by seed (two or more), else by dimension, else shuffled folds."""
    for by in _BY:
        values = frame[by].to_numpy()
        levels = list(dict.fromkeys(values))
        if len(levels) >= 2:
            return by, [np.flatnonzero(values == v) for v in levels]
    k = min(5, len(frame))
    order = np.random.default_rng(seed).permutation(len(frame))
    return "rows", [np.sort(order[i::k]) for i in range(k)]


# --- one group's calibration ---------------------------------------------------------------------

@dataclass(frozen=True)
class GroupCalibration:
    """The calibration of one (kind, algorithm, task): the chosen model and its interval.

    Attributes
    ----------
    kind, algo, task : str
        The group.
    model : str
        The chosen model, one of :data:`MODELS`.
    measures : tuple of str
        The measures the candidate models read (those that show signal in the group), in order.
    params : dict
        The chosen model's fitted parameters (ridge centre, scale, coefficients and intercept;
        isotonic knots, ``x`` and ``y``; both for ``monotone``, whose knots lie on the ridge's index;
        the memory line's slope and intercept).
    halfwidth : float
        The conformal quantile of the absolute out-of-fold residuals at ``level``, points (inf
        when the group has too few rows for a finite interval).
    level : float
        Nominal coverage of the intervals.
    n_rows, n_seeds : int
        Rows and seeds the group was fitted on.
    cv_by : str
        What a cross-validation fold held out: ``seed``, ``dim`` or ``rows``.
    cv_mae : float
        Out-of-fold mean absolute error of the chosen model, percentage points.
    cv_coverage : float
        Share of the out-of-fold residuals inside the interval (by construction near ``level``).
    candidate_mae : dict of str to float
        Out-of-fold mean absolute error of every candidate.
    dims, bits : (int, int)
        Smallest and largest dimension and bit width seen.
    ranges : dict of str to (float, float)
        Smallest and largest distance of each measure the chosen model reads.
    """

    kind: str
    algo: str
    task: str
    model: str
    measures: tuple[str, ...]
    params: dict = field(repr=False)
    halfwidth: float
    level: float
    n_rows: int
    n_seeds: int
    cv_by: str
    cv_mae: float
    cv_coverage: float
    candidate_mae: dict = field(repr=False)
    dims: tuple[int, int]
    bits: tuple[int, int]
    ranges: dict = field(repr=False)

    @property
    def used_measures(self) -> tuple[str, ...]:
        """The measures the chosen model reads (none for the memory line)."""
        if self.model == "memory":
            return ()
        if self.model == "isotonic":
            return self.measures[:1]
        return self.measures

    def predict_frame(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Predictions, interval bounds and calibration checks for rows of this group.

        Parameters
        ----------
        frame : pandas.DataFrame
            Rows with ``dim``, ``bitrate`` and the columns of :attr:`used_measures`.

        Returns
        -------
        pandas.DataFrame
            Same index; ``predicted``, ``lower``, ``upper`` (percent, in [0, 100]; NaN outside the
            calibration), ``in_calibration`` and ``calibration_note``.
        """
        notes = pd.Series("", index=frame.index, dtype=object)
        dims = pd.to_numeric(frame["dim"], errors="coerce")
        bits = pd.to_numeric(frame["bitrate"], errors="coerce")
        _flag(notes, ~dims.between(*self.dims), lambda i: f"dim {_num(dims[i])} is outside the calibrated "
                                                          f"{self.dims[0]}–{self.dims[1]}")
        _flag(notes, ~bits.between(*self.bits), lambda i: f"{_num(bits[i])}-bit entries are outside the calibrated "
                                                          f"{self.bits[0]}–{self.bits[1]} bits")
        for m in self.used_measures:
            if m not in frame.columns:
                _flag(notes, pd.Series(True, index=frame.index), lambda i, m=m: f"no value of {m}")
                continue
            dist = pd.Series(_distances(frame, m), index=frame.index)
            lo, hi = self.ranges[m]
            slack = MEASURE_TOLERANCE * (hi - lo)
            _flag(notes, dist.isna(), lambda i, m=m: f"no value of {m}")
            _flag(notes, (dist < lo - slack) | (dist > hi + slack),
                  lambda i, m=m, d=dist, lo=lo, hi=hi: f"{m} distance {d[i]:.4g} is outside the calibrated "
                                                       f"{lo:.4g}–{hi:.4g} (±{MEASURE_TOLERANCE:.0%} of the span)")
        inside = notes.eq("")
        out = pd.DataFrame({"predicted": np.nan, "lower": np.nan, "upper": np.nan}, index=frame.index)
        if inside.any():
            part = frame.loc[inside]
            raw = _apply_model(self.model, self.params, part, self.measures)
            half = self.halfwidth
            out.loc[inside, "predicted"] = np.clip(raw, 0.0, 100.0)
            out.loc[inside, "lower"] = np.clip(raw - half, 0.0, 100.0)
            out.loc[inside, "upper"] = np.clip(raw + half, 0.0, 100.0)
        out["in_calibration"] = inside.to_numpy()
        out["calibration_note"] = notes.to_numpy()
        return out

    def to_dict(self) -> dict:
        """Plain-Python form, as a saved predictor stores it.

        Returns
        -------
        dict
        """
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["measures"] = list(self.measures)
        out["dims"], out["bits"] = list(self.dims), list(self.bits)
        out["ranges"] = {m: list(r) for m, r in self.ranges.items()}
        for key in ("halfwidth", "cv_mae", "cv_coverage"):  # JSON has no inf/NaN
            out[key] = None if not math.isfinite(out[key]) else out[key]
        out["candidate_mae"] = {k: (None if not math.isfinite(v) else v) for k, v in self.candidate_mae.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupCalibration:
        """Rebuild a group's calibration from :meth:`to_dict`'s form.

        Parameters
        ----------
        data : mapping
            What :meth:`to_dict` returned (read back from JSON).

        Returns
        -------
        GroupCalibration

        Raises
        ------
        KeyError, TypeError, ValueError
            When a field is missing or malformed (:func:`load_predictor` turns them into one error).
        """
        def real(v):
            return float("inf") if v is None else float(v)

        model = str(data["model"])
        if model not in MODELS:
            raise ValueError(f"unknown model {model!r}")
        return cls(kind=str(data["kind"]), algo=str(data["algo"]), task=str(data["task"]), model=model,
                   measures=tuple(str(m) for m in data["measures"]), params=dict(data["params"]),
                   halfwidth=real(data["halfwidth"]), level=float(data["level"]), n_rows=int(data["n_rows"]),
                   n_seeds=int(data["n_seeds"]), cv_by=str(data["cv_by"]),
                   cv_mae=float("nan") if data["cv_mae"] is None else float(data["cv_mae"]),
                   cv_coverage=float("nan") if data["cv_coverage"] is None else float(data["cv_coverage"]),
                   candidate_mae={str(k): real(v) for k, v in dict(data["candidate_mae"]).items()},
                   dims=(int(data["dims"][0]), int(data["dims"][1])),
                   bits=(int(data["bits"][0]), int(data["bits"][1])),
                   ranges={str(m): (float(r[0]), float(r[1])) for m, r in dict(data["ranges"]).items()})


def _records(frame: pd.DataFrame) -> list[dict]:
    """A frame's rows as plain-Python dicts at full precision (NaN as None, numpy scalars as Python)."""
    def plain(v):
        if hasattr(v, "item") and not isinstance(v, (str, bytes)):
            v = v.item()
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return [{str(k): plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _num(value) -> str:
    return f"{value:g}" if is_real(value) and math.isfinite(value) else repr(value)


def _flag(notes: pd.Series, mask: pd.Series, say) -> None:
    """Give the rows of ``mask`` that have no note yet the note ``say(index)`` (the first reason wins)."""
    for i in notes.index[mask.fillna(True).to_numpy(dtype=bool) & notes.eq("").to_numpy()]:
        notes[i] = say(i)


def _signal_measures(group: pd.DataFrame, candidates: Sequence[str]) -> list[str]:
    """The candidate measures with a value on every row of the group that show signal on it: where
    nulls are recorded, on more than half of the pairs that record one (unchecked measures count)."""
    keep = []
    pairs = group.drop_duplicates(["seed", "dim", "bitrate"])
    for m in candidates:
        if m not in group.columns or pd.to_numeric(group[m], errors="coerce").isna().any():
            continue
        if has_nulls(pairs, m):
            flags = signal_flags(pairs, m)
            checked = int(flags.notna().sum())
            if 2 * int(flags.fillna(False).astype(bool).sum()) <= checked:
                continue
        keep.append(m)
    return keep


def _fit_group(key: tuple[str, str, str], group: pd.DataFrame, measures: Sequence[str], level: float,
               seed: int) -> GroupCalibration | str:
    """Choose and fit one group's model; a one-line reason instead when it cannot be calibrated."""
    kind, algo, task = key
    if len(group) < MIN_ROWS:
        return f"{len(group)} row(s), fewer than the {MIN_ROWS} a calibration needs"
    used = _signal_measures(group, measures)
    cv_by, folds = _cv_folds(group, seed)
    if len(folds) < 2:
        return "a single row: nothing to cross-validate"
    y = group["disagreement"].to_numpy(dtype=np.float64)
    candidates = [m for m in MODELS if m not in ("isotonic", "monotone") or used]
    if len(group[["dim", "bitrate"]].drop_duplicates()) == 1 and not used:  # one configuration
        candidates = ["memory"]
    oof = {}
    for model in candidates:
        pred = np.full(len(group), np.nan)
        for test in folds:
            train = np.setdiff1d(np.arange(len(group)), test)
            params = _fit_model(model, group.iloc[train], used)
            pred[test] = _apply_model(model, params, group.iloc[test], used)
        oof[model] = np.clip(pred, 0.0, 100.0)
    mae = {m: float(np.mean(np.abs(p - y))) for m, p in oof.items()}
    chosen = min(candidates, key=lambda m: (round(mae[m], 9), MODELS.index(m)))
    residuals = y - oof[chosen]
    half = _conformal_halfwidth(residuals, level)
    params = _fit_model(chosen, group, used)
    readers = () if chosen == "memory" else (tuple(used[:1]) if chosen == "isotonic" else tuple(used))
    ranges = {}
    for m in readers:
        d = _distances(group, m)
        ranges[m] = (float(np.min(d)), float(np.max(d)))
    return GroupCalibration(
        kind=kind, algo=algo, task=task, model=chosen, measures=tuple(used), params=params, halfwidth=half,
        level=level, n_rows=len(group), n_seeds=int(group["seed"].nunique()), cv_by=cv_by, cv_mae=mae[chosen],
        cv_coverage=float(np.mean(np.abs(residuals) <= half)), candidate_mae=mae,
        dims=(int(group["dim"].min()), int(group["dim"].max())),
        bits=(int(group["bitrate"].min()), int(group["bitrate"].max())), ranges=ranges)


# --- the predictor -------------------------------------------------------------------------------

def _kind_column(frame: pd.DataFrame) -> pd.Series:
    if "kind" not in frame.columns:
        return pd.Series("word", index=frame.index, dtype=object)
    return frame["kind"].fillna("word").astype(str)


@dataclass(frozen=True)
class DisagreementPredictor:
    """Calibrated predictions of the disagreement (% of downstream predictions that flip).

    Made by :func:`fit_predictor`; :meth:`predict` answers for new pairs, inside the calibration only.

    Attributes
    ----------
    groups : dict of (str, str, str) to GroupCalibration
        One calibration per (kind, algo, task).
    level : float
        Nominal coverage of the intervals.
    skipped : dict of (str, str, str) to str
        Groups of the results that could not be calibrated, with the reason.
    source : str
        Where the calibration rows came from (a path, or ``"results"``).
    requested_measures : tuple of str
        The measures the fit was allowed to use.
    validation : pandas.DataFrame or None
        Held-out figures per group (:meth:`PredictorValidation.to_frame`) when the fit was validated.
    """

    groups: dict = field(repr=False)
    level: float
    skipped: dict = field(default_factory=dict, repr=False)
    source: str = "results"
    requested_measures: tuple[str, ...] = ()
    validation: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    # --- predictions ---------------------------------------------------------------------------

    def predict(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Predicted disagreement with its interval for every row, inside the calibration only.

        Parameters
        ----------
        rows : pandas.DataFrame
            One row per pair and task: ``algo``, ``dim``, ``bitrate``, ``task`` (and ``kind`` if
            the calibration holds several kinds; missing means ``word``) and the measure columns
            (raw values, registry names). A ``disagreement`` column is neither needed nor read.

        Returns
        -------
        pandas.DataFrame
            ``rows`` (same index and columns) plus ``predicted``, ``lower``, ``upper`` (percent, in
            [0, 100]), ``in_calibration`` and ``calibration_note`` (why a row is outside, else
            empty). Outside the calibration the three numbers are NaN.

        Raises
        ------
        ResultsError
            If ``rows`` is not a DataFrame or lacks ``algo``, ``dim``, ``bitrate`` or ``task``.
        """
        if not isinstance(rows, pd.DataFrame):
            raise ResultsError(f"predict takes a DataFrame of pairs, got {type(rows).__name__}")
        missing = [c for c in ("algo", "dim", "bitrate", "task") if c not in rows.columns]
        if missing:
            raise ResultsError(f"cannot predict: the rows lack column(s) {', '.join(missing)}")
        out = rows.copy()
        result = pd.DataFrame({"predicted": np.nan, "lower": np.nan, "upper": np.nan, "in_calibration": False,
                               "calibration_note": ""}, index=rows.index)
        result["calibration_note"] = result["calibration_note"].astype(object)
        kinds = _kind_column(rows)
        keys = pd.Series(list(zip(kinds, rows["algo"].astype(str), rows["task"].astype(str))), index=rows.index)
        for key in dict.fromkeys(keys):
            mask = (keys == key).to_numpy()
            if key in self.groups:
                answer = self.groups[key].predict_frame(rows.loc[mask])
                for col in result.columns:
                    result.loc[mask, col] = answer[col].to_numpy()
            else:
                result.loc[mask, "calibration_note"] = self._unknown(key)
        for col in ("predicted", "lower", "upper"):
            out[col] = result[col].astype("float64")
        out["in_calibration"] = result["in_calibration"].astype(bool)
        out["calibration_note"] = result["calibration_note"]
        return out

    def _unknown(self, key: tuple[str, str, str]) -> str:
        kind, algo, task = key
        if key in self.skipped:
            return f"{algo} × {task} is not calibrated: {self.skipped[key]}"
        known = list(self.groups) + list(self.skipped)
        if not any(k[0] == kind for k in known):
            return f"no calibration for {kind} embeddings (calibrated: {', '.join(sorted({k[0] for k in known}))})"
        algos = sorted({k[1] for k in known if k[0] == kind})
        if algo not in algos:
            return f"no calibration for algo {algo!r} (calibrated: {', '.join(algos)})"
        tasks = ordered_tasks(k[2] for k in known if k[:2] == (kind, algo))
        return f"no calibration for task {task!r} of {algo} (calibrated: {', '.join(tasks)})"

    def tasks(self, algo: str, kind: str = "word") -> list[str]:
        """The calibrated tasks of an algorithm, in task order.

        Parameters
        ----------
        algo : str
            Algorithm name.
        kind : str, default "word"
            Kind of embedding.

        Returns
        -------
        list of str
        """
        return ordered_tasks(k[2] for k in self.groups if k[:2] == (kind, algo))

    # --- results -------------------------------------------------------------------------------

    def to_frame(self) -> pd.DataFrame:
        """One row per calibrated group: the chosen model and its figures.

        Returns
        -------
        pandas.DataFrame
            ``kind, algo, task, model, measures, n_rows, n_seeds, cv_by, cv_mae, cv_coverage,
            halfwidth`` and one ``mae_<model>`` column per candidate; with a validation, also its
            ``held_out_by``, ``coverage``, ``mae``, ``reference_mae`` and ``ratio``.
        """
        rows = []
        for g in self.groups.values():
            rows.append({"kind": g.kind, "algo": g.algo, "task": g.task, "model": g.model,
                         "measures": ", ".join(g.used_measures) or "none", "n_rows": g.n_rows, "n_seeds": g.n_seeds,
                         "cv_by": g.cv_by, "cv_mae": g.cv_mae, "cv_coverage": g.cv_coverage,
                         "halfwidth": g.halfwidth, **{f"mae_{m}": g.candidate_mae.get(m, np.nan) for m in MODELS}})
        table = pd.DataFrame(rows)
        if self.validation is not None and not table.empty:
            cols = ["kind", "algo", "task", "held_out_by", "coverage", "mae", "reference_mae", "ratio"]
            table = table.merge(self.validation[[c for c in cols if c in self.validation.columns]],
                                on=["kind", "algo", "task"], how="left")
        return table

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-serialisable): what :meth:`save` writes.

        Returns
        -------
        dict
            ``format``, ``version``, ``level``, ``source``, ``requested_measures``, ``groups`` (one
            dict per group, see :meth:`GroupCalibration.to_dict`), ``skipped`` and ``validation``
            (records, or None).
        """
        validation = None if self.validation is None else _records(self.validation)
        return {"format": FILE_FORMAT, "version": FILE_VERSION, "level": self.level, "source": self.source,
                "requested_measures": list(self.requested_measures),
                "groups": [g.to_dict() for g in self.groups.values()],
                "skipped": [{"kind": k[0], "algo": k[1], "task": k[2], "reason": r} for k, r in self.skipped.items()],
                "validation": validation}

    def save(self, path: str | os.PathLike) -> None:
        """Write the predictor as JSON (parameters only: no code, no pickle).

        Parameters
        ----------
        path : str or os.PathLike
            The file to write (atomically).
        """
        with atomic_write(path, "w", encoding="utf-8") as fh:
            fh.write(to_json(self.to_dict()))

    @classmethod
    def load(cls, path: str | os.PathLike) -> DisagreementPredictor:
        """Read a predictor written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            The JSON file.

        Returns
        -------
        DisagreementPredictor

        Raises
        ------
        DataFormatError
            If the file is not a saved predictor or a field is malformed.
        FileNotFoundError
            If the file does not exist.
        """
        return load_predictor(path)

    def __repr__(self) -> str:
        models: dict[str, int] = {}
        for g in self.groups.values():
            models[g.model] = models.get(g.model, 0) + 1
        algos = ", ".join(dict.fromkeys(k[1] for k in self.groups)) or "none"
        return (f"DisagreementPredictor(level={self.level:g}, groups={len(self.groups)} ({algos}), models="
                + ", ".join(f"{m}×{n}" for m, n in models.items())
                + (f", skipped={len(self.skipped)}" if self.skipped else "") + f", source={self.source!r})")

    def __str__(self) -> str:
        lines = [f"Disagreement predictor, {self.level:.0%} intervals, calibrated on {self.source}:"]
        table = self.to_frame()
        if not table.empty:
            shown = table[[c for c in ("algo", "task", "model", "measures", "n_rows", "cv_mae", "coverage", "mae",
                                       "reference_mae") if c in table.columns]]
            lines.append(shown.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        for (kind, algo, task), reason in self.skipped.items():
            lines.append(f"not calibrated: {algo} × {task}: {reason}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        table = self.to_frame()
        head = (f"<p><b>DisagreementPredictor</b>: {self.level:.0%} intervals, {len(self.groups)} calibrated "
                f"group(s), calibrated on {html.escape(self.source)}</p>")
        skipped = "".join(f"<p>not calibrated: {html.escape(a)} × {html.escape(t)}: {html.escape(r)}</p>"
                          for (_, a, t), r in self.skipped.items())
        return head + table.to_html(index=False, float_format=lambda v: f"{v:.3g}") + skipped


def load_predictor(path: str | os.PathLike) -> DisagreementPredictor:
    """Read a predictor that :meth:`DisagreementPredictor.save` wrote.

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file.

    Returns
    -------
    DisagreementPredictor

    Raises
    ------
    DataFormatError
        If the file is not a saved predictor or a field is malformed.
    FileNotFoundError
        If the file does not exist.
    """
    if not os.path.lexists(path):
        raise FileNotFoundError(2, "no such saved predictor", os.fspath(path))
    # bounded by the file's size, refusing devices and pipes; never unpickled
    data = read_json_file(path, "saved disagreement predictor")
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
        raise DataFormatError(f"{path}: not a saved disagreement predictor (no \"format\": \"{FILE_FORMAT}\")")
    if data.get("version") != FILE_VERSION:
        raise DataFormatError(f"{path}: a disagreement predictor of version {data.get('version')!r}; this embstab "
                              f"reads version {FILE_VERSION}")
    try:
        groups = {}
        for item in data["groups"]:
            g = GroupCalibration.from_dict(item)
            groups[(g.kind, g.algo, g.task)] = g
        skipped = {(str(s["kind"]), str(s["algo"]), str(s["task"])): str(s["reason"]) for s in data["skipped"]}
        validation = None if data.get("validation") is None else pd.DataFrame(data["validation"])
        return DisagreementPredictor(groups=groups, level=float(data["level"]), skipped=skipped,
                                     source=str(data["source"]),
                                     requested_measures=tuple(str(m) for m in data["requested_measures"]),
                                     validation=validation)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DataFormatError(f"{path}: malformed disagreement predictor: {type(exc).__name__}: {exc}") from None


def _check_level(level) -> float:
    if not is_real(level) or not 0 < float(level) < 1:
        raise ConfigError(f"level must be a number between 0 and 1 (e.g. 0.9), got {level!r}")
    return float(level)


def _candidate_measures(df: pd.DataFrame, measures: Sequence[str] | str | None) -> list[str]:
    if measures is None:
        # the scale-dependent PIP loss and Frobenius distance rank precisions, not stability
        return [m for m in FALLBACK_ORDER if m in df.columns]
    if isinstance(measures, str):
        measures = [measures]
    out = []
    for m in measures:
        lookup(REGISTRY, m, "measure")
        if m not in df.columns:
            raise ResultsError(f"the results have no column for measure {m!r}")
        out.append(m)
    return out


def fit_predictor(results: pd.DataFrame | str | os.PathLike, *, measures: Sequence[str] | str | None = None,
                  level: float = 0.9, seed: int = 0, validate: bool = False) -> DisagreementPredictor:
    """Fit a calibrated predictor of the disagreement per (kind, algorithm, task).

    Only measured rows calibrate (a calibrated study's rows whose ``disagreement_source`` is
    ``predicted`` are left out). Within each group, every candidate of :data:`MODELS` is cross-validated with one seed held out
    at a time (one dimension when the group has a single seed; shuffled folds when it has one
    dimension too), the one with the least out-of-fold mean absolute error is chosen and refitted on
    every row, and the interval is the split-conformal quantile of its out-of-fold residuals.
    Measures enter only where they show signal in the group (:mod:`embstab.selection.signal`).

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A results table in any form :func:`~embstab.selection.as_results` accepts (a study's
        rows, its ``results.sqlite``, a published table).
    measures : sequence of str or str, optional
        The measures the models may read; default those of
        :data:`~embstab.selection.signal.FALLBACK_ORDER` present in the results (never the
        scale-dependent PIP loss or Frobenius distance).
    level : float, default 0.9
        Nominal coverage of the intervals.
    seed : int, default 0
        Seed of the shuffled folds (used only by a group with one seed and one dimension).
    validate : bool, default False
        Also run :func:`validate_predictor` (by seed where there are two or more seeds, else by
        dimension) and keep its figures in ``validation`` (they are saved with the predictor).

    Returns
    -------
    DisagreementPredictor

    Raises
    ------
    ResultsError
        If the results are malformed, lack a requested measure, or no group can be calibrated.
    ConfigError
        If ``level`` is not between 0 and 1 or ``seed`` is not an integer.
    """
    level = _check_level(level)
    if not is_integer(seed):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    source = str(results) if isinstance(results, (str, os.PathLike)) else "results"
    df = as_results(results)
    df = df[measured_rows(df)]  # a predicted disagreement never calibrates the predictor
    names = _candidate_measures(df, measures)
    kinds = _kind_column(df)
    groups, skipped = {}, {}
    for key, idx in df.groupby([kinds, df["algo"], df["task"]], sort=False).groups.items():
        key = tuple(str(k) for k in key)
        fitted = _fit_group(key, df.loc[idx].reset_index(drop=True), names, level, int(seed))
        if isinstance(fitted, str):
            skipped[key] = fitted
        else:
            groups[key] = fitted
    if not groups:
        reasons = "; ".join(f"{a} × {t}: {r}" for (_, a, t), r in skipped.items())
        raise ResultsError(f"{source}: no (algo, task) could be calibrated ({reasons})")
    predictor = DisagreementPredictor(groups=groups, level=level, skipped=skipped, source=source,
                                      requested_measures=tuple(names))
    if validate:
        by = "seed" if df.groupby([kinds, df["algo"]])["seed"].nunique().ge(2).any() else "dim"
        checked = validate_predictor(df, by=by, level=level, measures=measures, seed=seed)
        predictor = DisagreementPredictor(groups=groups, level=level, skipped=skipped, source=source,
                                          requested_measures=tuple(names), validation=checked.to_frame())
    return predictor


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
        return head + self.table.to_html(index=False, float_format=lambda v: f"{v:.3g}")


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


# --- one pair ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PairPrediction:
    """How many downstream predictions flip between two embeddings, per task, predicted from their measures.

    Attributes
    ----------
    old, new : str
        Names of the two embeddings.
    algo : str
        The algorithm the pair was given as (whose calibration applies).
    kind : str
        Kind of embedding.
    dim, bitrate : int
        The pair's dimension and bits per entry.
    measures : dict of str to float
        The pair's raw measure values.
    signal : dict of str to bool or None
        Whether each measure is clearly apart from its null for this pair.
    predictions : pandas.DataFrame
        One row per task: ``task, predicted, lower, upper, in_calibration, calibration_note,
        model`` and the calibration's held-out ``coverage`` and ``mae`` where validated.
    level : float
        Nominal coverage of the intervals.
    calibration : str
        Where the calibration came from.
    validated_by : str
        What the calibration's held-out figures held out (``seed``, ``dim``), or "" when not validated.
    """

    old: str
    new: str
    algo: str
    kind: str
    dim: int
    bitrate: int
    measures: dict
    signal: dict
    predictions: pd.DataFrame = field(repr=False)
    level: float
    calibration: str
    validated_by: str = ""

    def to_frame(self) -> pd.DataFrame:
        """The per-task predictions.

        Returns
        -------
        pandas.DataFrame
        """
        return self.predictions.copy()

    def to_dict(self) -> dict:
        """Plain-Python form (JSON-serialisable).

        Returns
        -------
        dict
            The fields, ``predictions`` as records (NaN as None).
        """
        records = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                   for r in self.predictions.to_dict(orient="records")]
        return {"old": self.old, "new": self.new, "algo": self.algo, "kind": self.kind, "dim": self.dim,
                "bitrate": self.bitrate,
                "measures": {k: (None if not math.isfinite(v) else v) for k, v in self.measures.items()},
                "signal": self.signal, "level": self.level, "calibration": self.calibration,
                "validated_by": self.validated_by, "predictions": records}

    def __str__(self) -> str:
        lines = [f"{self.old} vs {self.new}: {self.algo}, dim={self.dim}, {self.bitrate}-bit; calibration "
                 f"{self.calibration} ({self.level:.0%} intervals)",
                 "measures: " + ", ".join(f"{m} {v:.4g}" + (" (no signal)" if self.signal.get(m) is False else "")
                                          for m, v in self.measures.items())]
        held = {"seed": "one seed held out", "dim": "one dimension held out"}.get(self.validated_by, "")
        lines.append("predicted flips per task" + (f" (calibration checked with {held}: coverage of its "
                                                   "intervals, mean absolute error)" if held else "") + ":")
        width = max([12, *map(len, self.predictions["task"])])
        for r in self.predictions.itertuples():
            if not r.in_calibration:
                lines.append(f"  {r.task:<{width}} outside the calibration: {r.calibration_note}")
                continue
            check = ""
            if held and pd.notna(getattr(r, "coverage", np.nan)):
                check = f"   [{r.model}; held out: coverage {r.coverage:.0%}, MAE {r.mae:.2f} points]"
            lines.append(f"  {r.task:<{width}} {r.predicted:6.2f} %  [{r.lower:.2f}, {r.upper:.2f}]{check}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        inside = self.predictions[self.predictions["in_calibration"]]
        shown = ", ".join(f"{r.task}={r.predicted:.2f}" for r in inside.itertuples())
        return (f"PairPrediction(algo={self.algo!r}, dim={self.dim}, bitrate={self.bitrate}, "
                f"predicted={{{shown}}}, calibration={self.calibration!r})")

    def _repr_html_(self) -> str:
        head = (f"<p><b>{html.escape(self.old)}</b> vs <b>{html.escape(self.new)}</b>: {html.escape(self.algo)}, "
                f"dim={self.dim}, {self.bitrate}-bit; calibration {html.escape(self.calibration)}</p>")
        return head + self.predictions.to_html(index=False, float_format=lambda v: f"{v:.3g}")


def _load_embedding(spec):
    if isinstance(spec, (str, os.PathLike)):
        from embstab.io import load  # noqa: PLC0415 - loaded on use

        return load(spec)
    return spec


def predict_pair(old, new, calibration: DisagreementPredictor | pd.DataFrame | str | os.PathLike, *,
                 algo: str | None = None, bits: int = 32, task: str | None = None, kind: str = "word", anchors="self",
                 top_n: int | None = None, level: float = 0.9, device: str | None = None) -> PairPrediction:
    """Predict how many downstream predictions flip between two embeddings, per task, with intervals.

    The pair's measures are computed with :func:`embstab.compare` (the measures the calibration
    reads, each beside its null), and the calibration of ``algo`` predicts each task's disagreement
    from them, the pair's dimension and ``bits``.

    Parameters
    ----------
    old, new : Embedding or str
        The pair, old first: embeddings, or files / ``builtin:`` names :func:`embstab.io.load` reads.
    calibration : DisagreementPredictor, pandas.DataFrame, str or os.PathLike
        A fitted predictor, a saved predictor (``.json``), or results to fit one on (a CSV,
        Parquet, a study's ``results.sqlite`` or a published table); results are also validated by
        seed (by dimension with one seed), so the held-out coverage and error come with the answer.
    algo : str, optional
        The algorithm that trained the pair (whose calibration applies); may be left out when the
        calibration holds a single algorithm of ``kind``.
    bits : int, default 32
        Bits per entry of the pair (32 = full precision).
    task : str, optional
        Only this task; default every task calibrated for ``algo``.
    kind : str, default "word"
        Kind of embedding.
    anchors : "self" or (Embedding or str, Embedding or str), default "self"
        EIS anchors, as for :func:`embstab.compare` (files are loaded); a study's measures use the
        largest full-precision pair of each side, so give those anchors for a calibration from a study.
    top_n : int, optional
        Words compared (default: 10,000 or all shared, as :func:`embstab.compare`).
    level : float, default 0.9
        Interval level when the calibration is fitted here.
    device : str, optional
        Passed to :func:`embstab.compare`.

    Returns
    -------
    PairPrediction

    Raises
    ------
    ConfigError
        If the pair lies outside the calibration for every requested task (an algorithm, task or
        kind it never saw, a dimension, bit width or measure value outside its range), or the
        dimensions of ``old`` and ``new`` differ.
    """
    if not is_integer(bits) or not 1 <= bits <= 64:
        raise ConfigError(f"bits must be an integer from 1 to 64, got {bits!r}")
    predictor = _as_predictor(calibration, level)
    if algo is None:
        algos = list(dict.fromkeys(k[1] for k in predictor.groups if k[0] == kind))
        if not algos:
            raise ConfigError(f"the pair is outside the calibration: {predictor._unknown((kind, '?', '?'))}")
        if len(algos) > 1:
            raise ConfigError(f"name the pair's algorithm (--algo); the calibration has: {', '.join(algos)}")
        algo = algos[0]
    tasks = predictor.tasks(str(algo), kind)
    if not tasks:
        raise ConfigError(f"the pair is outside the calibration: {predictor._unknown((kind, str(algo), '?'))}")
    if task is not None:
        if task not in tasks:
            raise ConfigError(f"the pair is outside the calibration: {predictor._unknown((kind, str(algo), task))}")
        tasks = [task]
    a, b = _load_embedding(old), _load_embedding(new)
    if anchors != "self" and anchors is not None:
        anchors = (_load_embedding(anchors[0]), _load_embedding(anchors[1]))
    if a.dim != b.dim:
        raise ConfigError(f"the pair's dimensions differ (old {a.dim}, new {b.dim}); a calibration is per dimension")
    needed = list(dict.fromkeys(m for t in tasks for m in predictor.groups[(kind, str(algo), t)].measures))
    from embstab.measures.compare import compare  # noqa: PLC0415 - loaded on use

    values, signal = {}, {}
    if needed:
        shared = len(set(a.words).intersection(b.words))
        top = min(10000, shared) if top_n is None else top_n
        table = compare(a, b, anchors=anchors, measures=needed, top_n=top or None, device=device)
        for r in table.itertuples():
            values[r.measure] = float(r.value)
            signal[r.measure] = None if r.signal is None or (isinstance(r.signal, float) and math.isnan(r.signal)) \
                else bool(r.signal)
    rows = pd.DataFrame([{"kind": kind, "algo": str(algo), "task": t, "dim": int(a.dim), "bitrate": int(bits),
                          **values} for t in tasks])
    answer = predictor.predict(rows)
    answer["model"] = [predictor.groups[(kind, str(algo), t)].model for t in tasks]
    cols = ["task", "predicted", "lower", "upper", "in_calibration", "calibration_note", "model"]
    answer = answer[cols]
    if predictor.validation is not None and len(predictor.validation):
        v = predictor.validation
        v = v[(v["kind"] == kind) & (v["algo"] == str(algo))][["task", "coverage", "mae"]]
        answer = answer.merge(v, on="task", how="left")
    if not answer["in_calibration"].any():
        raise ConfigError(f"the pair is outside the calibration: {answer['calibration_note'].iloc[0]}")
    by = "" if predictor.validation is None or not len(predictor.validation) \
        else str(predictor.validation["held_out_by"].iloc[0])
    return PairPrediction(old=str(a.name or old), new=str(b.name or new), algo=str(algo), kind=kind, dim=int(a.dim),
                          bitrate=int(bits), measures=values, signal=signal, predictions=answer.reset_index(drop=True),
                          level=predictor.level, calibration=predictor.source, validated_by=by)


def _as_predictor(calibration, level: float) -> DisagreementPredictor:
    if isinstance(calibration, DisagreementPredictor):
        return calibration
    if isinstance(calibration, (str, os.PathLike)) and str(calibration).lower().endswith(".json"):
        return load_predictor(calibration)
    return fit_predictor(calibration, level=level, validate=True)

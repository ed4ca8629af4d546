"""The calibration of one (kind, algorithm, task): the candidate models, their cross-validated
choice and the conformal half-width of the chosen one's interval.

:func:`embstab.selection.fit_predictor` fits one :class:`GroupCalibration` per group; the
module-level constants say what a calibration may do.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from embstab._numbers import is_real
from embstab.compress.memory import memory_bits
from embstab.errors import ConfigError, OptionalDependencyError, lookup
from embstab.measures import REGISTRY
from embstab.measures.registry import fallback_order
from embstab.selection.errors import ResultsError
from embstab.selection.results import measure_distance
from embstab.selection.signal import has_nulls, signal_flags

__all__ = ["MODELS", "MEASURE_TOLERANCE", "RIDGE_ALPHA", "MIN_ROWS", "SOURCE_COLUMN", "GroupCalibration",
           "measured_rows"]

#: The candidate models of every (kind, algorithm, task), in the order a tie in cross-validated
#: error is broken (the simpler first).
MODELS: tuple[str, ...] = ("memory", "linear", "loglinear", "isotonic", "monotone", "ensemble")
#: The members of ``ensemble``: the mean of their predictions (equal weights, so that choosing the
#: ensemble by its cross-validated error needs no weights fitted on the same folds).
ENSEMBLE: tuple[str, ...] = ("linear", "loglinear", "isotonic", "monotone")
#: A measure value counts as calibrated up to this share of the calibrated span beyond its
#: smallest and largest value.
MEASURE_TOLERANCE = 0.1
#: Ridge penalty on the standardised features of the ``linear`` and ``loglinear`` models.
RIDGE_ALPHA = 1.0
#: Fewest rows a group needs to be calibrated.
MIN_ROWS = 6
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
    if model == "ensemble":
        return {"members": {m: _fit_model(m, frame, measures) for m in ENSEMBLE}}
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
    if model == "ensemble":
        members = params["members"]
        return np.mean([np.clip(_apply_model(m, members[m], frame, measures), 0.0, 100.0) for m in ENSEMBLE],
                       axis=0)
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
        the memory line's slope and intercept; for ``ensemble``, ``members``: each member's own).
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
    seen_dims, seen_bits : tuple of int
        Every dimension and bit width the calibration measured (empty when not recorded, in a
        predictor saved before they were).
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
    seen_dims: tuple[int, ...] = ()
    seen_bits: tuple[int, ...] = ()

    def unseen(self, dim, bits) -> str:
        """Which of a configuration's dimension and bit width the calibration never measured ("" for none).

        Parameters
        ----------
        dim, bits : int
            The configuration.

        Returns
        -------
        str
            E.g. "dim 75 (calibrated: 25, 50, 100, 200)"; empty when both were measured or the
            calibration does not record what it measured.
        """
        parts = []
        if self.seen_dims and int(dim) not in self.seen_dims:
            parts.append(f"dim {_num(dim)} (calibrated: {', '.join(map(str, self.seen_dims))})")
        if self.seen_bits and int(bits) not in self.seen_bits:
            parts.append(f"{_num(bits)}-bit entries (calibrated: {', '.join(map(str, self.seen_bits))} bits)")
        return "; ".join(parts)

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
            calibration), ``in_calibration``, ``calibration_note`` and ``interpolated`` (inside the
            calibration, at a dimension or bit width it never measured).
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
        measured = (dims.isin(self.seen_dims) | (not self.seen_dims)) & (bits.isin(self.seen_bits) | (not self.seen_bits))
        out["interpolated"] = inside.to_numpy() & ~measured.to_numpy(dtype=bool)
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
        out["seen_dims"], out["seen_bits"] = list(self.seen_dims), list(self.seen_bits)
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
                   seen_dims=tuple(int(d) for d in data.get("seen_dims", ())),
                   seen_bits=tuple(int(b) for b in data.get("seen_bits", ())),
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
    candidates = [m for m in MODELS if m not in ("isotonic", "monotone", "ensemble") or used]
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
        bits=(int(group["bitrate"].min()), int(group["bitrate"].max())), ranges=ranges,
        seen_dims=tuple(sorted({int(d) for d in group["dim"]})),
        seen_bits=tuple(sorted({int(b) for b in group["bitrate"]})))



def _check_level(level) -> float:
    if not is_real(level) or not 0 < float(level) < 1:
        raise ConfigError(f"level must be a number between 0 and 1 (e.g. 0.9), got {level!r}")
    return float(level)


def _candidate_measures(df: pd.DataFrame, measures: Sequence[str] | str | None) -> list[str]:
    if measures is None:
        # the scale-dependent PIP loss and Frobenius distance rank precisions, not stability
        return [m for m in fallback_order() if m in df.columns]
    if isinstance(measures, str):
        measures = [measures]
    out = []
    for m in measures:
        lookup(REGISTRY, m, "measure")
        if m not in df.columns:
            raise ResultsError(f"the results have no column for measure {m!r}")
        out.append(m)
    return out


def _kind_column(frame: pd.DataFrame) -> pd.Series:
    if "kind" not in frame.columns:
        return pd.Series("word", index=frame.index, dtype=object)
    return frame["kind"].fillna("word").astype(str)

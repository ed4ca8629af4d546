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
- ``ensemble``: the mean of the four above (equal weights: averaging models whose errors differ
  lowered the held-out error on UMLS link prediction and cost nothing on the CBOW table);
- ``memory``: a straight line in log2 memory (the measures unused).

The interval at ``level`` is split-conformal on the chosen model's out-of-fold residuals (via
``crepes``): as wide as the errors on held-out folds were. :func:`~embstab.selection.validate_predictor`
checks it on groups the
fit never saw: each seed (or each interior dimension) held out in turn, the model choice and the
conformal quantile refitted without it, against the seed-noise floor (the configuration's mean
over the other seeds) or the memory trend.

A prediction is made only inside the calibration: a known (kind, algorithm, task), a dimension
and bit width within the calibrated ranges, and measure values within the calibrated range
widened by :data:`MEASURE_TOLERANCE` of its span on each side. Elsewhere ``in_calibration`` is
False, the prediction NaN, and ``calibration_note`` says why.
"""

from __future__ import annotations

import hashlib
import html
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from embstab._fs import atomic_write, to_json
from embstab._numbers import is_integer
from embstab.errors import ConfigError, DataFormatError
from embstab.io.modelfolder import read_json_file
from embstab.selection.calibration import (
    MODELS,
    GroupCalibration,
    _candidate_measures,
    _check_level,
    _fit_group,
    _kind_column,
    _records,
    measured_rows,
)
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results, measure_settings, ordered_tasks

__all__ = ["DisagreementPredictor", "fit_predictor", "load_predictor"]

#: Identifies a saved predictor file.
FILE_FORMAT = "embstab-disagreement-predictor"
FILE_VERSION = 1


# --- the predictor -------------------------------------------------------------------------------


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
    measure_settings : dict or None
        How the calibration's measures were taken (``top_n`` and per-measure ``params``), as its
        study recorded them; None when the results do not say (a CSV, a published table).
    """

    groups: dict = field(repr=False)
    level: float
    skipped: dict = field(default_factory=dict, repr=False)
    source: str = "results"
    requested_measures: tuple[str, ...] = ()
    validation: pd.DataFrame | None = field(default=None, repr=False, compare=False)
    measure_settings: dict | None = field(default=None, repr=False)

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
            [0, 100]), ``in_calibration``, ``calibration_note`` (why a row is outside, else
            empty) and ``interpolated`` (inside, at a dimension or bit width the calibration never
            measured: its check by seed does not speak for it). Outside the calibration the three
            numbers are NaN.

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
                               "calibration_note": "", "interpolated": False}, index=rows.index)
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
        out["interpolated"] = result["interpolated"].astype(bool)
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
            ``format``, ``version``, ``level``, ``source``, ``requested_measures``,
            ``measure_settings`` (or None), ``groups`` (one dict per group, see
            :meth:`GroupCalibration.to_dict`), ``skipped`` and ``validation`` (records, or None).
        """
        validation = None if self.validation is None else _records(self.validation)
        return {"format": FILE_FORMAT, "version": FILE_VERSION, "level": self.level, "source": self.source,
                "requested_measures": list(self.requested_measures), "measure_settings": self.measure_settings,
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
        settings = data.get("measure_settings")  # absent from files saved before it was recorded
        if settings is not None and not (isinstance(settings, dict) and isinstance(settings.get("params"), dict)):
            raise ValueError(f"measure_settings must be an object with params, got {settings!r}")
        return DisagreementPredictor(groups=groups, level=float(data["level"]), skipped=skipped,
                                     source=str(data["source"]),
                                     requested_measures=tuple(str(m) for m in data["requested_measures"]),
                                     validation=validation, measure_settings=settings)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DataFormatError(f"{path}: malformed disagreement predictor: {type(exc).__name__}: {exc}") from None


def fit_predictor(results: pd.DataFrame | str | os.PathLike, *, measures: Sequence[str] | str | None = None,
                  level: float = 0.9, seed: int = 0) -> DisagreementPredictor:
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
    settings = measure_settings(df)
    df = df[measured_rows(df)]  # a predicted disagreement never calibrates the predictor
    names = _candidate_measures(df, measures)
    key = _fit_key(df, names, level, int(seed), source, settings)
    with _FITS_LOCK:
        if key is not None and key in _FITS:
            _FITS.move_to_end(key)
            return _FITS[key]
    fitted = _fit(df, names, level, int(seed), source, settings)
    if key is not None:
        with _FITS_LOCK:
            _FITS[key] = fitted
            while len(_FITS) > _FITS_KEPT:
                _FITS.popitem(last=False)
    return fitted


# recommend, the report and a study's summary ask for the same calibration once per budget; a fit
# is a pure function of the rows and the options, so the last few are kept (about 0.35 s each)
_FITS: OrderedDict[str, DisagreementPredictor] = OrderedDict()
_FITS_KEPT = 8
_FITS_LOCK = threading.Lock()


def _fit_key(df: pd.DataFrame, names: Sequence[str], level: float, seed: int, source: str,
             settings: dict | None) -> str | None:
    """A digest of the rows (in order) and the options; None for rows pandas cannot hash."""
    try:
        rows = pd.util.hash_pandas_object(df, index=False).to_numpy()
    except TypeError:  # a column of unhashable values: fit afresh
        return None
    digest = hashlib.blake2b(rows.tobytes(), digest_size=16)
    digest.update(repr((list(map(str, df.columns)), list(names), level, seed, source, settings)).encode())
    return digest.hexdigest()


def _fit(df: pd.DataFrame, names: Sequence[str], level: float, seed: int, source: str,
         settings: dict | None = None) -> DisagreementPredictor:
    """One calibration per (kind, algorithm, task) of measured rows already read."""
    kinds = _kind_column(df)
    groups, skipped = {}, {}
    for key, idx in df.groupby([kinds, df["algo"], df["task"]], sort=False).groups.items():
        key = tuple(str(k) for k in key)
        fitted = _fit_group(key, df.loc[idx].reset_index(drop=True), names, level, seed)
        if isinstance(fitted, str):
            skipped[key] = fitted
        else:
            groups[key] = fitted
    if not groups:
        reasons = "; ".join(f"{a} × {t}: {r}" for (_, a, t), r in skipped.items())
        raise ResultsError(f"{source}: no (algo, task) could be calibrated ({reasons})")
    return DisagreementPredictor(groups=groups, level=level, skipped=skipped, source=source,
                                 requested_measures=tuple(names), measure_settings=settings)

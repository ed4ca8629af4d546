"""Calibrated studies: the downstream models of a seeded share of the rows, the others predicted.

A study with ``calibrate: {share, seed, level}`` trains, compresses and measures every pair as
before, but runs the downstream models only for the rows :func:`choose_measured` picks. After
the run, :func:`predict_unmeasured` fits :func:`embstab.selection.predict.fit_predictor` on the
measured rows and predicts the disagreement of the others, with an interval; :func:`mark_sources`
joins both into one table whose ``disagreement_source`` column says which is which.

Unmeasured rows are kept apart from the measured ones in the results database
(:meth:`embstab.study.ResultDB.add_unmeasured`): their ids never count as finished, so the same
study without ``calibrate`` later runs their downstream models.

The unit of choice is one (configuration, seed) row, at most one seed per configuration until
every configuration has one: the downstream runs then cover twice as many configurations (with
two seeds) as whole configurations would, and the predictor's cross-validation, which holds out
one seed at a time, holds out whole configurations too, the situation of the rows it predicts, so
its intervals are as wide as errors on unseen configurations are.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from embstab.errors import EmbstabError
from embstab.selection.calibration import SOURCE_COLUMN
from embstab.study.schema import CalibrationSpec
from embstab.study.steps import STORED_QUALITY_KEYS, assemble_row, guarded

__all__ = ["STRATUM", "MIN_MEASURED", "SOURCE_COLUMN", "MEASURED", "PREDICTED", "UNCALIBRATED",
           "choose_measured", "assemble_unmeasured_row", "CalibrationOutcome", "predict_unmeasured",
           "mark_sources", "analysable"]

#: Row metadata that makes one stratum of the choice: the rows one calibration group predicts
#: (the predictor calibrates each algorithm, training recipe, compression transform and task apart).
STRATUM = ("algo", "recipe", "transform", "task")
#: Fewest measured rows per stratum (the predictor calibrates no group with fewer), however small
#: the share.
MIN_MEASURED = 6
#: The values of :data:`~embstab.selection.calibration.SOURCE_COLUMN`, the column that says where a
#: row's disagreement comes from.
MEASURED, PREDICTED, UNCALIBRATED = "measured", "predicted", "uncalibrated"


def choose_measured(rows: Mapping[str, Mapping[str, Any]], calibration: CalibrationSpec) -> frozenset[str]:
    """The rows whose downstream models run: a seeded, stratified share of each stratum.

    In each (algorithm, recipe, transform, task), ``ceil(share × rows)`` rows (at least
    :data:`MIN_MEASURED`, at most all): the configurations (dimension × bit width) are ordered with
    the two corners of the grid first (smallest dimension at the fewest bits, largest at the
    most, so the calibrated ranges span the grid), then always the one whose dimension and bit
    width have been taken least (ties broken by the seed); they are taken in that order with one
    seed each, the seeds in turn, then a second seed each, and so on. The choice depends only on the
    grid, the share and the seed, never on what is already stored.

    Parameters
    ----------
    rows : mapping of str to mapping
        Row id → row metadata (``algo``, ``recipe``, ``transform``, ``task``, ``dim``,
        ``bitrate``, ``seed``), as :attr:`embstab.study.plan.StudyPlan.all_rows`.
    calibration : CalibrationSpec
        The share and the seed.

    Returns
    -------
    frozenset of str
        The ids of the rows to measure.
    """
    strata: dict[tuple, dict[tuple[int, int, int], str]] = {}
    for row_id, meta in rows.items():
        key = tuple(str(meta.get(c, "")) for c in STRATUM)
        strata.setdefault(key, {})[(int(meta["dim"]), int(meta["bitrate"]), int(meta["seed"]))] = row_id
    chosen: set[str] = set()
    for key in sorted(strata):
        cells = strata[key]
        n = len(cells)
        # round first: 0.34 x 50 must not become 18 by a floating-point hair
        k = min(n, max(math.ceil(round(calibration.share * n, 9)), MIN_MEASURED))
        rng = np.random.default_rng(_stratum_seed(calibration.seed, key))
        configs = sorted({(d, b) for d, b, _ in cells})
        seeds = sorted({s for _, _, s in cells})
        order = _config_order(configs, rng)
        start = int(rng.integers(len(seeds)))
        picked: list[str] = []
        for turn in range(len(seeds)):
            for i, (d, b) in enumerate(order):
                if len(picked) == k:
                    break
                seed = seeds[(start + i + turn) % len(seeds)]
                if (d, b, seed) in cells:
                    picked.append(cells[(d, b, seed)])
        if len(picked) < k:  # a grid with holes (a seed missing at a configuration): seeded pick of the rest
            taken = set(picked)
            rest = [cells[c] for c in sorted(cells) if cells[c] not in taken]
            picked += [rest[i] for i in rng.permutation(len(rest))[: k - len(picked)]]
        chosen.update(picked)
    return frozenset(chosen)


def _stratum_seed(seed: int, key: tuple) -> int:
    """A seed per stratum from the calibration's seed and the stratum's names (stable across runs,
    unlike ``hash``)."""
    digest = hashlib.sha256(repr((int(seed), key)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _config_order(configs: list[tuple[int, int]], rng: np.random.Generator) -> list[tuple[int, int]]:
    """Corners first, then the configuration whose dimension and bit width were taken least."""
    priority = dict(zip(configs, rng.permutation(len(configs)).tolist()))
    order: list[tuple[int, int]] = []
    for corner in (min(configs), max(configs)):  # (smallest dim, fewest bits), (largest dim, most bits)
        if corner not in order:
            order.append(corner)
    dims: dict[int, int] = {}
    bits: dict[int, int] = {}
    for d, b in order:
        dims[d], bits[b] = dims.get(d, 0) + 1, bits.get(b, 0) + 1
    left = [c for c in configs if c not in order]
    while left:
        best = min(left, key=lambda c: (dims.get(c[0], 0) + bits.get(c[1], 0),
                                        max(dims.get(c[0], 0), bits.get(c[1], 0)), priority[c]))
        order.append(best)
        left.remove(best)
        dims[best[0]], bits[best[1]] = dims.get(best[0], 0) + 1, bits.get(best[1], 0) + 1
    return order


#: What an unmeasured row's downstream part holds: nothing was run.
_NO_DOWNSTREAM = {"disagreement": None, **dict.fromkeys(STORED_QUALITY_KEYS.values())}


@guarded("row")
def assemble_unmeasured_row(meta: Mapping[str, Any], measures: Mapping[str, Any]) -> dict[str, Any]:
    """A row whose downstream models did not run: its measures, no disagreement, no qualities.

    Parameters
    ----------
    meta : mapping
        The row's configuration columns.
    measures : mapping
        The output of :func:`embstab.study.steps.run_measures`.

    Returns
    -------
    dict
        What :func:`embstab.study.steps.assemble_row` gives, with ``disagreement``, ``quality``,
        ``quality_old`` and ``chance`` None.

    Raises
    ------
    StudyTaskError
        Any failure of the task, with stage ``row`` (an upstream task's error passes through unchanged).
    """
    return assemble_row(meta, measures, _NO_DOWNSTREAM)


@dataclass(frozen=True)
class CalibrationOutcome:
    """The predictions of a calibrated study's unmeasured rows.

    Attributes
    ----------
    predictions : pandas.DataFrame
        One row per unmeasured row: ``row_id``, ``predicted``, ``lower``, ``upper`` (percent; NaN
        outside the calibration), ``in_calibration`` and ``calibration_note`` (why not, else empty).
    predictor : DisagreementPredictor or None
        The predictor fitted on the measured rows; None when none could be fitted.
    note : str
        Why no predictor was fitted (empty when one was).
    """

    predictions: pd.DataFrame
    predictor: Any = None
    note: str = ""

    @property
    def n_predicted(self) -> int:
        """Rows given a predicted disagreement."""
        return int(self.predictions["in_calibration"].sum())

    @property
    def n_uncalibrated(self) -> int:
        """Rows outside the calibration: no disagreement."""
        return int((~self.predictions["in_calibration"].astype(bool)).sum())


#: Columns :meth:`embstab.study.ResultDB.predictions` adds to the results' convention.
_PREDICTION_EXTRAS = ("disagreement_low", "disagreement_high", "in_calibration", "calibration_note")


def predict_unmeasured(measured: pd.DataFrame, unmeasured: pd.DataFrame,
                       calibration: CalibrationSpec) -> CalibrationOutcome:
    """Fit the disagreement predictor on the measured rows and predict the unmeasured ones.

    The predictor (:func:`embstab.selection.predict.fit_predictor`, one calibration per algorithm
    and task) sees the measured rows as every analysis does (rows near chance left out); the
    unmeasured rows are named as the analyses name them (training recipes and transforms folded
    into the algorithm, several models of one task into the task), so each finds its group.

    Parameters
    ----------
    measured : pandas.DataFrame
        The study's measured rows (:meth:`embstab.study.ResultDB.results`, with ``row_id``).
    unmeasured : pandas.DataFrame
        The rows to predict (:meth:`embstab.study.ResultDB.predictions`, with ``row_id``).
    calibration : CalibrationSpec
        The intervals' level and the seed of the predictor's folds.

    Returns
    -------
    CalibrationOutcome
        Every unmeasured row outside the calibration (with the reason) when no predictor can be
        fitted, e.g. with too few measured rows.
    """
    from embstab.selection import as_results  # noqa: PLC0415 - the analyses load on use
    from embstab.selection.predict import fit_predictor  # noqa: PLC0415

    out = pd.DataFrame({"row_id": unmeasured["row_id"].to_numpy(), "predicted": np.nan, "lower": np.nan,
                        "upper": np.nan, "in_calibration": False, "calibration_note": ""})
    out["calibration_note"] = out["calibration_note"].astype(object)
    if unmeasured.empty:
        return CalibrationOutcome(out)
    try:
        predictor = fit_predictor(measured.drop(columns=["row_id"]), level=calibration.level, seed=calibration.seed)
    except EmbstabError as exc:  # too few measured rows (failures, near chance): nothing can be predicted
        note = f"no calibration: {exc}"
        out["calibration_note"] = note
        return CalibrationOutcome(out, None, note)
    asked = unmeasured.drop(columns=[c for c in _PREDICTION_EXTRAS if c in unmeasured.columns])
    # fold the names together with the measured rows: a recipe folds into the algorithm only when
    # the table holds another recipe, a model into the task only when the task has another model
    both = pd.concat([measured.assign(_unmeasured=False),
                      asked.assign(_unmeasured=True, disagreement=0.0)], ignore_index=True)
    folded = as_results(both, keep_near_chance=True)
    answer = predictor.predict(folded[folded["_unmeasured"].astype(bool)]).set_index("row_id")
    answer = answer.reindex(out["row_id"])
    for col in ("predicted", "lower", "upper"):
        out[col] = answer[col].astype("float64").to_numpy()
    out["in_calibration"] = answer["in_calibration"].fillna(False).astype(bool).to_numpy()
    out["calibration_note"] = answer["calibration_note"].fillna("").astype(str).to_numpy()
    return CalibrationOutcome(out, predictor, "")


def mark_sources(measured: pd.DataFrame, unmeasured: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """One table of measured and predicted rows, each marked with where its disagreement comes from.

    Parameters
    ----------
    measured : pandas.DataFrame
        Measured rows (:meth:`embstab.study.ResultDB.results`).
    unmeasured : pandas.DataFrame
        Unmeasured rows (:meth:`embstab.study.ResultDB.predictions`), with ``row_id``.
    predictions : pandas.DataFrame
        :attr:`CalibrationOutcome.predictions` of those rows.

    Returns
    -------
    pandas.DataFrame
        The columns of ``measured`` with, after ``disagreement``, :data:`SOURCE_COLUMN`
        (``measured``, ``predicted``, or ``uncalibrated`` for a row outside the calibration, whose
        disagreement stays NaN), ``disagreement_low`` and ``disagreement_high`` (a predicted
        row's interval; a measured row's own, or NaN); and ``calibration_note`` (why a row is
        outside the calibration, else empty). Sorted as the results are.
    """
    p = predictions.set_index("row_id").reindex(unmeasured["row_id"])
    rows = unmeasured.drop(columns=[c for c in _PREDICTION_EXTRAS if c in unmeasured.columns]).copy()
    inside = p["in_calibration"].fillna(False).astype(bool).to_numpy()
    rows["disagreement"] = p["predicted"].astype("float64").to_numpy()
    rows[SOURCE_COLUMN] = np.where(inside, PREDICTED, UNCALIBRATED)
    rows["disagreement_low"] = p["lower"].astype("float64").to_numpy()
    rows["disagreement_high"] = p["upper"].astype("float64").to_numpy()
    rows["calibration_note"] = p["calibration_note"].fillna("").astype(str).to_numpy()
    # a measured row keeps an interval of its own (the sampling interval of its flips) where it has one
    marked = measured.assign(**{SOURCE_COLUMN: MEASURED, "calibration_note": "",
                                **{c: np.nan for c in ("disagreement_low", "disagreement_high")
                                   if c not in measured.columns}})
    parts = [part for part in (marked, rows) if len(part)]
    out = pd.concat(parts, ignore_index=True) if parts else marked
    # an empty part (nothing measured yet) must not turn the integer columns into objects
    for col in ("seed", "dim", "bitrate"):
        out[col] = out[col].astype("int64")
    columns = [c for c in measured.columns if c not in ("disagreement_low", "disagreement_high")]
    at = columns.index("disagreement") + 1
    columns[at:at] = [SOURCE_COLUMN, "disagreement_low", "disagreement_high"]
    columns += [c for c in out.columns if c not in columns]
    return (out[columns].sort_values(["algo", "task", "dim", "bitrate", "seed"], kind="stable")
            .reset_index(drop=True))


def analysable(results: pd.DataFrame) -> pd.DataFrame:
    """The rows an analysis can read: every row with a disagreement (measured or predicted).

    Parameters
    ----------
    results : pandas.DataFrame
        A study's results, marked or not.

    Returns
    -------
    pandas.DataFrame
        ``results`` without the rows outside a calibration (no disagreement); the table itself
        when it marks none.
    """
    if SOURCE_COLUMN not in results.columns:
        return results
    return results[results[SOURCE_COLUMN] != UNCALIBRATED]

"""Predict the flips of one pair of embedding files from its measures and a calibration."""

from __future__ import annotations

import html
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from embstab._numbers import is_integer
from embstab.embedding import DEFAULT_TOP_N, shared_vocabulary
from embstab.errors import ConfigError
from embstab.selection.predict import (
    DisagreementPredictor,
    load_predictor,
)
from embstab.selection.calibration import measured_rows
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results
from embstab.selection.validation import fit_validated_predictor, validate_predictor

__all__ = ["PairPrediction", "predict_pair"]


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
        interpolated, unseen`` (the dimension or bit width the calibration never measured, if
        any), ``model`` and the calibration's held-out ``coverage`` and ``mae`` where validated.
    level : float
        Nominal coverage of the intervals.
    calibration : str
        Where the calibration came from.
    validated_by : str
        What the calibration's held-out figures held out (``seed``, ``dim``), or "" when not validated;
        ``dim`` when the pair's dimension is one a calibration fitted here from results never
        measured (then each interior dimension is held out in turn: the check that speaks for it).
    measured_with : dict
        How the pair's measures were taken: ``top_n`` (None = every shared word), ``params`` (per
        measure, those that override the registry's defaults) and ``source``: ``calibration`` (its
        study's settings), ``given`` (some set by the caller) or ``defaults`` (the calibration does
        not record its settings).
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
    measured_with: dict = field(default_factory=dict)

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
                "validated_by": self.validated_by, "measured_with": self.measured_with, "predictions": records}

    def __str__(self) -> str:
        lines = [f"{self.old} vs {self.new}: {self.algo}, dim={self.dim}, {self.bitrate}-bit; calibration "
                 f"{self.calibration} ({self.level:.0%} intervals)",
                 "measures: " + ", ".join(f"{m} {v:.4g}" + (" (no signal)" if self.signal.get(m) is False else "")
                                          for m, v in self.measures.items())]
        if self.measured_with:
            lines.append(_measured_with_line(self.measured_with))
        unseen = next((u for u in self.predictions.get("unseen", pd.Series(dtype=object)) if u), "")
        if unseen:
            caveat = " (the check below held seeds out, not dimensions)" \
                if self.validated_by == "seed" and unseen.startswith("dim") else ""
            lines.append(f"never measured by the calibration: {unseen}; the predictions interpolate between the "
                         f"configurations it measured{caveat}")
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
        if self.measured_with:
            head += f"<p>{html.escape(_measured_with_line(self.measured_with))}</p>"
        return head + self.predictions.to_html(index=False, float_format=lambda v: f"{v:.3g}")


def _load_embedding(spec):
    if isinstance(spec, (str, os.PathLike)):
        from embstab.io import load  # noqa: PLC0415 - loaded on use

        return load(spec)
    return spec


def predict_pair(old, new, calibration: DisagreementPredictor | pd.DataFrame | str | os.PathLike, *,
                 algo: str | None = None, bits: int = 32, task: str | None = None, kind: str = "word", anchors="self",
                 top_n: int | None = None, params: Mapping[str, Mapping[str, Any]] | None = None,
                 level: float = 0.9, device: str | None = None) -> PairPrediction:
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
        Words compared: those the pair and its anchors share, in the new member's frequency order,
        as a study measures its rows (0 = all). Default: the calibration's study's ``top_n`` when
        it records one, else 10,000 (or all when fewer are shared).
    params : mapping, optional
        Per-measure parameters, ``{measure: {parameter: value}}`` as :func:`embstab.compare`
        takes them, over those of the calibration's study (which apply by default, when recorded);
        give them when the calibration does not record how its rows were measured.
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

    measured_with = _measure_settings(predictor.measure_settings, needed, top_n, params)
    values, signal = {}, {}
    if needed:
        # the words a study row compares: those the pair (and its anchors) share, in the new
        # member's frequency order, so that the values are on the calibration's scale
        also = anchors if isinstance(anchors, tuple) else ()
        words = shared_vocabulary(a, b, measured_with["top_n"], rank_by="b", also_in=also)
        table = compare(a, b, anchors=anchors, measures=needed, top_n=len(words) or None, rank_by="new",
                        params=measured_with["params"] or None, device=device)
        for r in table.itertuples():
            values[r.measure] = float(r.value)
            signal[r.measure] = None if r.signal is None or (isinstance(r.signal, float) and math.isnan(r.signal)) \
                else bool(r.signal)
    rows = pd.DataFrame([{"kind": kind, "algo": str(algo), "task": t, "dim": int(a.dim), "bitrate": int(bits),
                          **values} for t in tasks])
    answer = predictor.predict(rows)
    groups = [predictor.groups[(kind, str(algo), t)] for t in tasks]
    answer["model"] = [g.model for g in groups]
    answer["unseen"] = [g.unseen(a.dim, bits) if inside else "" for g, inside in zip(groups, answer["in_calibration"])]
    cols = ["task", "predicted", "lower", "upper", "in_calibration", "calibration_note", "interpolated", "unseen",
            "model"]
    answer = answer[cols]
    if not answer["in_calibration"].any():
        raise ConfigError(f"the pair is outside the calibration: {answer['calibration_note'].iloc[0]}")
    validation = predictor.validation
    new_dim = any(g.seen_dims and int(a.dim) not in g.seen_dims for g in groups)
    if new_dim and not isinstance(calibration, DisagreementPredictor) and not _is_json(calibration):
        # a dimension the calibration never measured: the check that speaks for it holds dimensions out
        validation = _by_dimension(calibration, level)
    if validation is not None and len(validation):
        v = validation[(validation["kind"] == kind) & (validation["algo"] == str(algo))][["task", "coverage", "mae"]]
        answer = answer.merge(v, on="task", how="left")
    by = "" if validation is None or not len(validation) else str(validation["held_out_by"].iloc[0])
    return PairPrediction(old=str(a.name or old), new=str(b.name or new), algo=str(algo), kind=kind, dim=int(a.dim),
                          bitrate=int(bits), measures=values, signal=signal, predictions=answer.reset_index(drop=True),
                          level=predictor.level, calibration=predictor.source, validated_by=by,
                          measured_with=measured_with)


def _measure_settings(recorded: dict | None, needed: Sequence[str], top_n: int | None,
                      params: Mapping[str, Mapping[str, Any]] | None) -> dict:
    """How to measure the pair: the calibration's study's settings (for the measures read), under
    the caller's; with the recorded ones, so that a difference can be said."""
    if params is not None and not (isinstance(params, Mapping) and all(isinstance(v, Mapping)
                                                                       for v in params.values())):
        raise ConfigError(f"params must map a measure to its parameters, e.g. {{'knn': {{'k': 10}}}}; got {params!r}")
    if top_n is not None and (not is_integer(top_n) or top_n < 0):
        raise ConfigError(f"top_n must be a non-negative integer (0 = every shared word), got {top_n!r}")
    base = recorded or {"top_n": DEFAULT_TOP_N, "params": {}}
    chosen = {m: dict(p) for m, p in (base.get("params") or {}).items() if m in needed}
    for m, p in (params or {}).items():
        chosen[str(m)] = {**chosen.get(str(m), {}), **dict(p)}
    top = base.get("top_n") if top_n is None else (int(top_n) or None)
    out = {"top_n": top, "params": chosen, "source": "defaults" if recorded is None else "calibration"}
    if recorded is not None:
        as_recorded = {"top_n": recorded.get("top_n"),
                       "params": {m: dict(p) for m, p in (recorded.get("params") or {}).items() if m in needed}}
        if as_recorded != {"top_n": top, "params": chosen}:
            out.update(source="given", calibration=as_recorded)
    elif top_n is not None or params:
        out["source"] = "given"
    return out


def _settings_text(top_n, params: Mapping) -> str:
    words = "every shared word" if top_n is None else f"top_n {top_n}"
    return "; ".join([words, *(f"{m} " + ", ".join(f"{k}={v}" for k, v in p.items()) for m, p in params.items())])


def _measured_with_line(measured: dict) -> str:
    """One line on how the pair was measured, and whether that is how the calibration's rows were."""
    text = _settings_text(measured["top_n"], measured["params"])
    if measured["source"] == "calibration":
        return f"measured as the calibration's study measured its rows: {text}"
    if "calibration" in measured:
        theirs = measured["calibration"]
        used = _settings_text(theirs["top_n"], theirs["params"])
        return f"measured with {text}; the calibration's study used {used}: the values may be off its scale"
    return (f"measured with {text} (other parameters at their defaults); the calibration does not record how its "
            "rows were measured: give the same settings (top_n, params) if they differed")


def _is_json(calibration) -> bool:
    return isinstance(calibration, (str, os.PathLike)) and str(calibration).lower().endswith(".json")


def _as_predictor(calibration, level: float) -> DisagreementPredictor:
    if isinstance(calibration, DisagreementPredictor):
        return calibration
    if _is_json(calibration):
        return load_predictor(calibration)
    return fit_validated_predictor(calibration, level=level)


def _by_dimension(calibration, level: float) -> pd.DataFrame | None:
    """The calibration checked with each interior dimension held out; None where it has too few dimensions."""
    rows = as_results(calibration)
    try:
        return validate_predictor(rows[measured_rows(rows)], by="dim", level=level).to_frame()
    except ResultsError:  # fewer than three dimensions: nothing to hold out inside the range
        return None

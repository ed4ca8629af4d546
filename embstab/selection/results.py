"""Results tables: the shared tidy convention, the published-CSV importer and file loading.

A results table has one row per (algo, seed, dim, bitrate, task) embedding pair with the columns
``algo, seed, dim, bitrate, memory, task, disagreement, quality`` plus one column per stability
measure, named by its :data:`embstab.measures.REGISTRY` name and holding the *raw* value.

A study's rows also carry ``quality_old`` and ``chance``: the task's chance level in the unit of
``quality``. A row whose downstream model (either one) comes within :data:`NEAR_CHANCE_MARGIN`
points of chance learned next to nothing, so its disagreement is mostly noise: :func:`as_results`
(and with it every analysis) leaves such rows out unless asked to keep them, and says how many it
left out (see :func:`near_chance_left_out`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from embstab.errors import lookup
from embstab.kinds import KINDS
from embstab.measures import REGISTRY
from embstab.selection.errors import ResultsError

__all__ = [
    "NEAR_CHANCE_MARGIN",
    "NULL_SUFFIX",
    "SIGNAL_SUFFIX",
    "chance_table",
    "near_chance",
    "near_chance_left_out",
    "KIND_LABELS",
    "KindLabel",
    "kind_label",
    "kinds_of",
    "CONFIG_COLUMNS",
    "KEY_COLUMNS",
    "MEASURE_SETTINGS",
    "PUBLISHED_MEASURES",
    "PUBLISHED_TASKS",
    "TASK_ORDER",
    "as_results",
    "from_published_csv",
    "is_published_format",
    "measure_columns",
    "measure_distance",
    "measure_settings",
    "measure_settings_of",
    "ordered_tasks",
    "read_results",
    "validate_results",
    "wide",
]

#: The key of a results table's ``attrs`` that says how its measures were taken, when known: a
#: study's ``{"top_n": ..., "params": {measure: {parameter: value}}}`` (a CSV or a published
#: table records none).
MEASURE_SETTINGS = "measure_settings"

#: Suffixes of the columns that hold a measure's null and whether the pair shows signal against it
#: (``eis_null``, ``eis_signal``; see :mod:`embstab.selection.signal`).
NULL_SUFFIX, SIGNAL_SUFFIX = "_null", "_signal"

#: Columns that identify one configuration of an embedding pair.
CONFIG_COLUMNS: tuple[str, ...] = ("algo", "seed", "dim", "bitrate")
#: Columns that identify one row of a results table.
KEY_COLUMNS: tuple[str, ...] = (*CONFIG_COLUMNS, "task")
#: Display order of the published tasks; other tasks follow in order of appearance.
TASK_ORDER: tuple[str, ...] = ("sst", "mr", "subj", "mpqa", "ner")

#: Published CSV task columns → (disagreement column, quality column).
PUBLISHED_TASKS: dict[str, tuple[str, str]] = {
    "sst": ("la_sst_no_emb_norm", "la_sst_quality_no_emb_norm"),
    "mr": ("la_mr_no_emb_norm", "la_mr_quality_no_emb_norm"),
    "subj": ("la_subj_no_emb_norm", "la_subj_quality_no_emb_norm"),
    "mpqa": ("la_mpqa_no_emb_norm", "la_mpqa_quality_no_emb_norm"),
    "ner": ("rnn_no_crf_ner", "rnn_no_crf_ner_quality"),
}
#: Published CSV measure columns → registry names. The PIP column is named ``pip`` in the MC and
#: CBOW files and ``pip_top_10000`` in the GloVe and fastText files.
PUBLISHED_MEASURES: dict[str, str] = {
    "anchor_eigen_overlap_3.0_top_10000": "eis",
    "knn_top_10000_nquery_1000_nn_5": "knn",
    "sem_disp_top_10000": "semantic_displacement",
    "pip": "pip_loss",
    "pip_top_10000": "pip_loss",
    "eigen_overlap_top_10000": "eigenspace_overlap",
}

#: Percentage points above its task's chance level that a downstream model's test quality must
#: reach for its row to count; closer, the model learned next to nothing and its disagreement is
#: mostly noise.
NEAR_CHANCE_MARGIN = 5.0


@dataclass(frozen=True)
class KindLabel:
    """How results of one kind of embedding are described: what they are and what a memory unit is."""

    title: str
    unit: str


class _KindLabels(Mapping[str, KindLabel]):
    """Kind name → :class:`KindLabel`, read from the kinds' registry (:data:`embstab.kinds.KINDS`,
    which imports the kinds only when first read: importing this package imports no kind)."""

    @staticmethod
    def _kinds() -> Mapping[str, Any]:
        return KINDS

    def __getitem__(self, kind: str) -> KindLabel:
        k = self._kinds()[kind]
        return KindLabel(k.label, k.memory_unit)

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds())

    def __len__(self) -> int:
        return len(self._kinds())


#: The values of the ``kind`` column of study results (a table without one holds word embeddings):
#: each registered study kind's :attr:`~embstab.study.kinds.StudyKind.label` and
#: :attr:`~embstab.study.kinds.StudyKind.memory_unit`.
KIND_LABELS: Mapping[str, KindLabel] = _KindLabels()


def kind_label(kind: str) -> KindLabel:
    """The :class:`KindLabel` of a ``kind`` value (an unknown one reads as its own name).

    Parameters
    ----------
    kind : str
        A value of the ``kind`` column.

    Returns
    -------
    KindLabel
    """
    return KIND_LABELS.get(kind, KindLabel(f"{kind} embeddings", "bits per row"))


def kinds_of(df: pd.DataFrame) -> list[str]:
    """The kinds of embedding a results table holds, in order of appearance (``["word"]`` without a
    ``kind`` column).

    Parameters
    ----------
    df : pandas.DataFrame
        A results table.

    Returns
    -------
    list of str
    """
    if "kind" not in df.columns:
        return ["word"]
    return list(dict.fromkeys(df["kind"].fillna("word").astype(str)))


_REQUIRED = ("algo", "seed", "dim", "bitrate", "task", "disagreement")
_PUBLISHED_REQUIRED = ("algo", "seed", "dim", "bitrate")


def ordered_tasks(tasks: Iterable[str]) -> list[str]:
    """Distinct task names, the published tasks first in paper order, others as they appear.

    Parameters
    ----------
    tasks : iterable of str
        Task names, repeats allowed.

    Returns
    -------
    list of str
        Each name once.
    """
    seen = list(dict.fromkeys(tasks))
    known = [t for t in TASK_ORDER if t in seen]
    return known + [t for t in seen if t not in TASK_ORDER]


def measure_columns(df: pd.DataFrame) -> list[str]:
    """Names of the stability-measure columns of a results table, in registry order.

    Parameters
    ----------
    df : pandas.DataFrame
        A results table in the shared convention.

    Returns
    -------
    list of str
        The columns of ``df`` that are :data:`embstab.measures.REGISTRY` names.
    """
    return [name for name in REGISTRY if name in df.columns]


def measure_distance(values, measure: str) -> np.ndarray:
    """Turn raw measure values into distances (larger = less stable), as the analyses use.

    k-NN and eigenspace overlap are similarities and become ``1 - value``; distances pass through.

    Parameters
    ----------
    values : array-like
        Raw values of ``measure``.
    measure : str
        Registry name of the measure.

    Returns
    -------
    numpy.ndarray
        float64 distances, same shape as ``values``.
    """
    lookup(REGISTRY, measure, "measure")
    arr = np.asarray(values, dtype=np.float64)
    # The registry's conversion keeps one definition of "distance form" for the whole package.
    return np.asarray(REGISTRY[measure].to_distance(arr), dtype=np.float64)


def measure_settings_of(definitions: Iterable[Mapping[str, Any]]) -> dict | None:
    """How the measures of some studies were taken, when they all took them alike.

    Parameters
    ----------
    definitions : iterable of mapping
        Study definitions as a study stores them (each with a ``measures`` mapping holding
        ``top_n`` and ``params``).

    Returns
    -------
    dict or None
        ``{"top_n": int or None, "params": {measure: {parameter: value}}}``; None without a
        definition, or when the studies took their measures differently (then no setting is the
        rows' setting).
    """
    found = []
    for definition in definitions:
        m = definition.get("measures") if isinstance(definition, Mapping) else None
        if not isinstance(m, Mapping):
            return None
        params = m.get("params") or {}
        settings = {"top_n": m.get("top_n"),
                    "params": {str(k): dict(v) for k, v in params.items() if isinstance(v, Mapping)}}
        if settings not in found:
            found.append(settings)
    return found[0] if len(found) == 1 else None


def measure_settings(results: pd.DataFrame) -> dict | None:
    """How a results table's measures were taken, when it records it (a study's export does).

    Parameters
    ----------
    results : pandas.DataFrame
        A results table.

    Returns
    -------
    dict or None
        ``{"top_n": ..., "params": {...}}`` as :func:`measure_settings_of` gives it, or None.
    """
    settings = results.attrs.get(MEASURE_SETTINGS)
    return settings if isinstance(settings, dict) else None


def is_published_format(df: pd.DataFrame) -> bool:
    """Whether ``df`` looks like a published anchor-stability CSV (tasks as wide columns).

    Parameters
    ----------
    df : pandas.DataFrame
        A results table.

    Returns
    -------
    bool
        True when ``df`` has a published task's disagreement column and no ``task`` column.
    """
    has_task_cols = any(di in df.columns for di, _ in PUBLISHED_TASKS.values())
    return has_task_cols and "task" not in df.columns


def _coerce_int(df: pd.DataFrame, column: str, source: str) -> None:
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna() | (values != np.round(values)) | (values <= 0 if column != "seed" else False)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ResultsError(f"{source}: column {column!r} must hold "
                           f"{'integers' if column == 'seed' else 'positive integers'}; "
                           f"row {row} has {df[column].iloc[row]!r}")
    df[column] = values.astype(np.int64)


def validate_results(df: pd.DataFrame, *, source: str = "results",
                     keep_near_chance: bool | None = None) -> pd.DataFrame:
    """Check a results table in the shared convention and return a clean copy.

    Integer columns are coerced, ``memory`` is added (or checked) as ``dim * bitrate``, a task
    with several downstream models (column ``model``) becomes one task per model
    (``"task:model"``), rows with a
    missing disagreement are dropped with a warning (a failed task in a study), rows near chance
    are left out (see below), and the rows are
    ordered by task (published task order first) while keeping their order within a task, which
    the analyses' tie-breaking ("first index wins") depends on.

    A table with a ``chance`` column gains a boolean ``near_chance`` column (:func:`near_chance`).
    Unless kept, those rows are left out; the returned frame's ``attrs`` record the decision
    (``"keep_near_chance"``) and how many rows it left out (``"near_chance_left_out"``, also
    counting those an earlier validation of the same table left out), and a later validation
    without ``keep_near_chance`` follows the recorded decision: an analysis given
    ``as_results(df, keep_near_chance=True)`` keeps the rows.

    Parameters
    ----------
    df : pandas.DataFrame
        Table with at least ``algo, seed, dim, bitrate, task, disagreement``.
    source : str, default "results"
        Name used in error messages (e.g. the file path).
    keep_near_chance : bool, optional
        Keep rows whose downstream model is near chance. Default: what ``df.attrs`` records from an
        earlier validation, else False (leave them out).

    Returns
    -------
    pandas.DataFrame
        A validated copy with a fresh RangeIndex.

    Raises
    ------
    ResultsError
        If a required column is missing, a value has the wrong type, a (algo, seed, dim, bitrate,
        task) key repeats, ``memory`` disagrees with ``dim * bitrate`` or no rows remain (also
        when every row is near chance and they are not kept).
    """
    if not isinstance(df, pd.DataFrame):
        raise ResultsError(f"{source}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in _REQUIRED if c not in df.columns]
    if missing:
        raise ResultsError(f"{source}: missing column(s) {', '.join(missing)}; a results table "
                           f"needs {', '.join(_REQUIRED)} (or the published CSV format)")
    out = df.copy()
    for col in ("seed", "dim", "bitrate"):
        _coerce_int(out, col, source)
    out["algo"] = out["algo"].astype(str)
    out["task"] = out["task"].astype(str)
    if "model" in out.columns and out["model"].notna().any():
        models = out.groupby("task")["model"].nunique()
        # A study may train several downstream models on one task; each (task, model) is then its
        # own "task" of the analyses, e.g. "sst:linear" and "sst:rnn".
        several = models.index[models > 1]
        if len(several):
            pick = out["task"].isin(several)
            out.loc[pick, "task"] = out.loc[pick, "task"] + ":" + out.loc[pick, "model"].astype(str)
    transformed = _fold_variants(out)
    if "kind" in out.columns:
        out["kind"] = out["kind"].fillna("word").astype(str)
        # a KG model's entity row may hold more than dim entries (a complex model's real view)
        transformed = transformed | (out["kind"] != "word")
    from embstab.compress.memory import memory_bits  # noqa: PLC0415 - the one formula, loaded on use

    memory = memory_bits(out["dim"], out["bitrate"]).astype(np.float64)
    if "memory" in out.columns:
        given = pd.to_numeric(out["memory"], errors="coerce")
        # a compression transform stores what it really needs (OCS columns, TT cores), not dim * bits
        memory[transformed] = given[transformed]
        bad = given.to_numpy() != memory.to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ResultsError(f"{source}: column 'memory' must equal dim * bitrate; row {row} has "
                               f"memory={out['memory'].iloc[row]!r} for dim={out['dim'].iloc[row]}"
                               f", bitrate={out['bitrate'].iloc[row]}")
    out["memory"] = memory.astype(np.int64) if (memory == memory.round()).all() else memory
    measures = measure_columns(out)
    nulls = [m + NULL_SUFFIX for m in measures if m + NULL_SUFFIX in out.columns]
    for col in ["disagreement", "quality", "quality_old", "chance", *measures, *nulls]:
        if col in out.columns:
            converted = pd.to_numeric(out[col], errors="coerce")
            if (converted.isna() & out[col].notna()).any():
                row = int(np.flatnonzero((converted.isna() & out[col].notna()).to_numpy())[0])
                raise ResultsError(f"{source}: column {col!r} must be numeric; row {row} has "
                                   f"{out[col].iloc[row]!r}")
            out[col] = converted.astype(np.float64)
    for measure in measures:
        if measure + SIGNAL_SUFFIX in out.columns:
            out[measure + SIGNAL_SUFFIX] = _flags(out[measure + SIGNAL_SUFFIX], measure + SIGNAL_SUFFIX, source)
    missing_di = out["disagreement"].isna()
    if missing_di.any():
        # a calibrated study leaves the rows outside its calibration without a value, by design
        outside = (missing_di & (out["disagreement_source"].astype(str) == "uncalibrated")
                   if "disagreement_source" in out.columns else pd.Series(False, index=out.index))
        why = [f"{int(n)} {what}" for n, what in (((missing_di & ~outside).sum(), "of failed downstream tasks"),
                                                  (outside.sum(), "outside the study's calibration")) if n]
        warnings.warn(f"{source}: dropping {int(missing_di.sum())} row(s) without a disagreement value "
                      f"({'; '.join(why)})", stacklevel=2)
        out = out[~missing_di]
    if out.empty:
        raise ResultsError(f"{source}: the results table has no rows with a disagreement value")
    out = _leave_out_near_chance(out, df.attrs, keep_near_chance, source)
    dup = out.duplicated(list(KEY_COLUMNS), keep=False)
    if dup.any():
        first = out[dup].iloc[0]
        key = ", ".join(f"{c}={first[c]}" for c in KEY_COLUMNS)
        raise ResultsError(f"{source}: {int(dup.sum())} rows repeat a (algo, seed, dim, bitrate, "
                           f"task) key, e.g. {key}")
    order = {t: i for i, t in enumerate(ordered_tasks(out["task"]))}
    # Stable sort: within a task the input order is kept, so ties resolve as in the source table.
    out = out.sort_values("task", key=lambda s: s.map(order), kind="stable")
    front = ["algo", "seed", "dim", "bitrate", "memory", "task", "disagreement"]
    if "quality" in out.columns:
        front.append("quality")
    rest = [c for c in out.columns if c not in front]
    return out[front + rest].reset_index(drop=True)


_TRUE, _FALSE = {"true", "1", "1.0", "yes"}, {"false", "0", "0.0", "no"}


def _flags(column: pd.Series, name: str, source: str) -> pd.Series:
    """A signal column as nullable booleans (a CSV gives strings or objects; empty is NA)."""
    out = []
    for i, v in enumerate(column):
        if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
            out.append(pd.NA)
            continue
        text = str(v).strip().lower()
        if text in _TRUE or text in _FALSE:
            out.append(text in _TRUE)
        elif text == "":
            out.append(pd.NA)
        else:
            raise ResultsError(f"{source}: column {name!r} must hold True, False or nothing; row {i} has {v!r}")
    return pd.Series(out, index=column.index, dtype="boolean")


def near_chance(df: pd.DataFrame, margin: float = NEAR_CHANCE_MARGIN) -> pd.Series:
    """Which rows have a downstream model within ``margin`` points of its task's chance level.

    A row is near chance when ``quality - chance < margin`` or ``quality_old - chance < margin``;
    a row whose chance is unknown (NaN, or a table without a ``chance`` column) is not.

    Parameters
    ----------
    df : pandas.DataFrame
        A results table (``quality``, ``chance`` and optionally ``quality_old``, in percent).
    margin : float, default NEAR_CHANCE_MARGIN
        Percentage points above chance a model must reach.

    Returns
    -------
    pandas.Series of bool
        Aligned with ``df``'s index.
    """
    flags = pd.Series(False, index=df.index)
    if "chance" not in df.columns:
        return flags
    chance = pd.to_numeric(df["chance"], errors="coerce")
    for col in ("quality", "quality_old"):
        if col in df.columns:
            # NaN comparisons are False: an unknown quality or chance never flags a row
            flags |= (pd.to_numeric(df[col], errors="coerce") - chance < margin).fillna(False).astype(bool)
    return flags


def near_chance_left_out(df: pd.DataFrame) -> int:
    """How many rows near chance the validations that made ``df`` left out (0 when they kept them).

    Parameters
    ----------
    df : pandas.DataFrame
        A table returned by :func:`as_results` (or :func:`validate_results`).

    Returns
    -------
    int
    """
    return int(df.attrs.get("near_chance_left_out", 0))


def _leave_out_near_chance(out: pd.DataFrame, attrs: dict, keep: bool | None, source: str) -> pd.DataFrame:
    """Flag rows near chance and drop them unless kept; record the decision in ``attrs``."""
    if keep is None:
        keep = bool(attrs.get("keep_near_chance", False))
    left_out = int(attrs.get("near_chance_left_out", 0))
    if "chance" in out.columns:
        flags = near_chance(out)
        out["near_chance"] = flags
        if not keep and flags.any():
            if flags.all():
                raise ResultsError(
                    f"{source}: every row ({len(out)}) has a downstream model within {NEAR_CHANCE_MARGIN:g} "
                    "points of its task's chance level, so its disagreement is mostly noise and nothing "
                    "is left to analyse; train the downstream models longer, or keep the rows with "
                    "keep_near_chance=True (--keep-near-chance)")
            left_out += int(flags.sum())
            by_task = dict(attrs.get("near_chance_by_task", {}))
            for task, count in out.loc[flags, "task"].value_counts().items():
                by_task[str(task)] = by_task.get(str(task), 0) + int(count)
            attrs = {**attrs, "near_chance_by_task": by_task}
            out = out[~flags]
    # a fresh dict: the caller's frame keeps its own record
    out.attrs = {**out.attrs, "keep_near_chance": bool(keep), "near_chance_left_out": left_out,
                 "near_chance_by_task": dict(attrs.get("near_chance_by_task", {}))}
    return out


def chance_table(results: pd.DataFrame | str | os.PathLike, *, keep_near_chance: bool = False) -> pd.DataFrame:
    """Per task: how good its downstream models are, its chance level, and the rows near chance.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A results table in any form :func:`as_results` accepts, with every row (near chance or not).
    keep_near_chance : bool, default False
        Whether the analyses keep the rows near chance (then none is left out).

    Returns
    -------
    pandas.DataFrame
        One row per task (task order; ``task:model`` where a task has several models) with
        ``rows``, ``quality_min``, ``quality_mean``, ``quality_max`` (both models of each row
        pooled, percent), ``chance`` (mean over the rows that state it; NaN when none does),
        ``near_chance`` (rows with a model within :data:`NEAR_CHANCE_MARGIN` points of chance) and
        ``left_out`` (rows the analyses leave out).
    """
    df = as_results(results, keep_near_chance=True)
    flags = near_chance(df)
    rows = []
    for task in ordered_tasks(df["task"]):
        part = df[df["task"] == task]
        quality = pd.concat([part[c] for c in ("quality", "quality_old") if c in part.columns])
        quality = pd.to_numeric(quality, errors="coerce")
        chance = part["chance"] if "chance" in part.columns else pd.Series(np.nan, index=part.index)
        near = int(flags[part.index].sum())
        rows.append({"task": task, "rows": len(part), "quality_min": quality.min(), "quality_mean": quality.mean(),
                     "quality_max": quality.max(), "chance": chance.mean(), "near_chance": near,
                     "left_out": 0 if keep_near_chance else near})
    return pd.DataFrame(rows, columns=["task", "rows", "quality_min", "quality_mean", "quality_max", "chance",
                                       "near_chance", "left_out"])


def _fold_variants(out: pd.DataFrame) -> pd.Series:
    """Make training recipes and compression transforms part of the configuration's ``algo``.

    A study that sweeps them holds several pairs per (algo, seed, dim, bitrate); like several
    models on one task, each variant becomes its own configuration, e.g. ``"mc/bf16-kahan"`` or
    ``"glove+hadamard"``. Returns which rows carry a transform (their memory is their own).
    """
    transformed = pd.Series(False, index=out.index)
    if "recipe" in out.columns:
        recipe = out["recipe"].fillna("fp32").astype(str)
        if (recipe != "fp32").any():
            out["algo"] = out["algo"] + "/" + recipe
    if "transform" in out.columns:
        transform = out["transform"].fillna("none").astype(str)
        transformed = transform != "none"
        out.loc[transformed, "algo"] = out.loc[transformed, "algo"] + "+" + transform[transformed]
    return transformed


def from_published_csv(path: str | os.PathLike | pd.DataFrame) -> pd.DataFrame:
    """Read a published anchor-stability results CSV into the shared tidy convention.

    The published files (``{algo}_optimal_no_emb_norm_top_10000.csv``) hold one row per embedding
    pair with the five tasks as wide columns; this returns one row per (pair, task) with
    ``task`` in sst, mr, subj, mpqa, ner and the measures renamed to their registry names
    (EIS, k-NN, semantic displacement, PIP, eigenspace overlap; raw values).

    Parameters
    ----------
    path : str, os.PathLike or pandas.DataFrame
        The CSV file, or a DataFrame already read from one.

    Returns
    -------
    pandas.DataFrame
        Columns ``algo, seed, dim, bitrate, memory, task, disagreement, quality`` and the measure
        columns; rows grouped by task in published order, source row order within a task.

    Raises
    ------
    ResultsError
        If the file lacks the identifying columns or any task column, or ``space`` is not
        ``dim * bitrate``.
    """
    if isinstance(path, pd.DataFrame):
        return _from_published_frame(path, "published results")
    return _from_published_frame(_read_table(path), str(path))


def _from_published_frame(raw: pd.DataFrame, source: str) -> pd.DataFrame:
    missing = [c for c in _PUBLISHED_REQUIRED if c not in raw.columns]
    if missing:
        raise ResultsError(f"{source}: not a published results CSV: missing column(s) "
                           f"{', '.join(missing)}")
    tasks = [t for t, (di, _) in PUBLISHED_TASKS.items() if di in raw.columns]
    if not tasks:
        expected = ", ".join(di for di, _ in PUBLISHED_TASKS.values())
        raise ResultsError(f"{source}: not a published results CSV: no disagreement column "
                           f"(expected one of {expected})")
    measure_map = {col: name for col, name in PUBLISHED_MEASURES.items() if col in raw.columns}
    if len(set(measure_map.values())) != len(measure_map):
        raise ResultsError(f"{source}: both 'pip' and 'pip_top_10000' are present; keep one")
    base = raw[list(_PUBLISHED_REQUIRED)].copy()
    if "space" in raw.columns:
        base["memory"] = raw["space"]
    for col, name in measure_map.items():
        base[name] = raw[col]
    frames = []
    for task in tasks:
        di_col, q_col = PUBLISHED_TASKS[task]
        part = base.copy()
        part["task"] = task
        part["disagreement"] = raw[di_col]
        part["quality"] = raw[q_col] if q_col in raw.columns else np.nan
        frames.append(part)
    return validate_results(pd.concat(frames, ignore_index=True), source=source)


def _read_table(path: str | os.PathLike) -> pd.DataFrame:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory", str(p))
    if p.is_dir():
        if (p / "results.sqlite").is_file():  # a study's store folder: the database the study wrote there
            p = p / "results.sqlite"
        else:
            raise ResultsError(f"{p}: is a directory without a results.sqlite; expected a study's store folder, "
                               "or a CSV, Parquet or results.sqlite file")
    if not p.is_file():  # a device or a pipe would be read without end
        raise ResultsError(f"{p}: is not a regular file; expected a CSV, Parquet or results.sqlite file")
    with open(p, "rb") as fh:
        if fh.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
            return _read_sqlite(p)
    kind = "Parquet" if p.suffix.lower() in (".parquet", ".pq") else "CSV"
    try:
        return pd.read_parquet(p) if kind == "Parquet" else pd.read_csv(p)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError,
            ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ResultsError(f"{p}: cannot read as a {kind} table: {exc}") from exc


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _read_sqlite(p: Path) -> pd.DataFrame:
    """The result rows of a study's ``results.sqlite``, read-only: the stored columns, one column per
    measure, ``<measure>_null`` / ``<measure>_signal`` from the stored nulls, and the extra details."""
    import contextlib  # noqa: PLC0415
    import json  # noqa: PLC0415
    import sqlite3  # noqa: PLC0415

    # without a -wal file beside it nobody is writing: immutable, so that reading creates no -wal/-shm
    live = os.path.exists(f"{p}-wal")
    uri = f"{p.resolve().as_uri()}?mode=ro" + ("" if live else "&immutable=1")
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            raw = pd.read_sql_query("SELECT * FROM results", conn)
            # how the measures were taken: from the definitions of the studies that planned these rows
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            definitions = [row[0] for row in conn.execute(
                "SELECT DISTINCT s.definition FROM studies s JOIN plan p ON p.name = s.name "
                "AND p.fingerprint = s.fingerprint JOIN results r ON r.row_id = p.row_id")] \
                if {"studies", "plan"} <= tables else []
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
        raise ResultsError(f"{p}: cannot read the results of a study database: {exc}") from None

    def parsed(column: str) -> list[dict]:
        return [json.loads(v) if isinstance(v, str) else {} for v in raw.get(column, pd.Series([None] * len(raw)))]

    measures = pd.DataFrame(parsed("measures"), index=raw.index)
    nulls = parsed("nulls")
    for m in dict.fromkeys(m for row in nulls for m in row):
        measures[m + NULL_SUFFIX] = [float(r[m]["value"]) if r.get(m, {}).get("value") is not None else np.nan
                                     for r in nulls]
        measures[m + SIGNAL_SUFFIX] = pd.array([r[m].get("signal") if m in r else None for r in nulls], dtype="boolean")
    extra = pd.DataFrame([{k: v for k, v in e.items() if k not in ("n_words", "n_test")} for e in parsed("extra")],
                         index=raw.index)
    base = raw.drop(columns=[c for c in ("row_id", "measures", "nulls", "extra", "finished") if c in raw.columns])
    out = pd.concat([base, measures, extra.drop(columns=[c for c in extra.columns if c in base.columns
                                                         or c in measures.columns])], axis=1)
    try:
        settings = measure_settings_of(json.loads(d) for d in definitions)
    except (TypeError, ValueError):  # a definition that is not JSON records no settings
        settings = None
    if settings is not None:
        out.attrs[MEASURE_SETTINGS] = settings
    return out


def as_results(results: pd.DataFrame | str | os.PathLike, *, keep_near_chance: bool | None = None) -> pd.DataFrame:
    """Accept a results table in any supported form and return the validated tidy table.

    Every analysis of :mod:`embstab.selection` reads its input through this function, so rows whose
    downstream model is near chance (:func:`near_chance`) are left out of all of them by default;
    pass an analysis ``as_results(table, keep_near_chance=True)`` to keep them. How many were left
    out: :func:`near_chance_left_out` of the returned table.

    Parameters
    ----------
    results : pandas.DataFrame, str or os.PathLike
        A tidy table, a published-format table, or a path to either (CSV or Parquet), or to a
        study's ``results.sqlite``.
    keep_near_chance : bool, optional
        Keep the rows near chance. Default: the decision recorded by an earlier validation of
        ``results`` (see :func:`validate_results`), else False.

    Returns
    -------
    pandas.DataFrame
        The table in the shared convention (see :func:`validate_results`).
    """
    if isinstance(results, pd.DataFrame):
        if is_published_format(results):
            return from_published_csv(results)
        return validate_results(results, keep_near_chance=keep_near_chance)
    return read_results(results, keep_near_chance=keep_near_chance)


def read_results(path: str | os.PathLike, *, keep_near_chance: bool | None = None) -> pd.DataFrame:
    """Read a results file (CSV, Parquet or a study's SQLite database), detecting the shared or the published format.

    A study's ``results.sqlite`` is read without writing to it (not even a journal): its result
    rows become the shared convention, each measure a column beside its ``<measure>_null`` and
    ``<measure>_signal``.

    Parameters
    ----------
    path : str or os.PathLike
        ``.csv`` or ``.parquet`` file, a study's SQLite database (recognised by its header), or a
        study's store folder (its ``results.sqlite`` is read).
    keep_near_chance : bool, optional
        Keep rows whose downstream model is near chance (default: leave them out; see
        :func:`validate_results`).

    Returns
    -------
    pandas.DataFrame
        The table in the shared convention.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ResultsError
        If the file cannot be parsed or is in neither format, is a device or a pipe, or is a folder
        without a ``results.sqlite``.
    """
    raw = _read_table(path)
    if is_published_format(raw):
        return _from_published_frame(raw, str(path))
    return validate_results(raw, source=str(path), keep_near_chance=keep_near_chance)


def wide(table: pd.DataFrame, values: str, *, index: str = "measure") -> pd.DataFrame:
    """Pivot a tidy analysis table to the paper's layout: one row per measure, one column per task.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`spearman_table`, :func:`selection_error` or :func:`oracle_gap`.
    values : str
        The value column to show (e.g. ``"spearman"``, ``"selection_error"``, ``"mean_gap"``).
    index : str, default "measure"
        The row label column (``"selector"`` for :func:`oracle_gap`).

    Returns
    -------
    pandas.DataFrame
        Rows in input order (prefixed by ``algo`` when several algorithms are present), columns
        in task order.
    """
    for col in (index, "task", values):
        if col not in table.columns:
            raise ResultsError(f"cannot pivot: the table has no column {col!r}")
    rows = [index]
    if "algo" in table.columns and table["algo"].nunique() > 1:
        rows = ["algo", index]
    out = table.pivot(index=rows, columns="task", values=values)
    # pivot sorts its labels; restore the input order of rows and the task order of columns.
    row_order = list(dict.fromkeys(map(tuple, table[rows].to_numpy()))) if len(rows) > 1 \
        else list(dict.fromkeys(table[index]))
    out = out.reindex(index=row_order, columns=ordered_tasks(table["task"]))
    out.columns.name = None
    return out

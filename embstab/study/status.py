"""``embstab study status``: how far each study in a results database has got."""

from __future__ import annotations

import os

import pandas as pd

from embstab.study.results import ResultDB

__all__ = ["study_status", "format_status"]


def study_status(db_path: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Progress of every study in a results database.

    Parameters
    ----------
    db_path : path-like
        The SQLite results database of a study store.

    Returns
    -------
    summary : pandas.DataFrame
        One row per study definition: ``name``, ``fingerprint``, ``created`` (UTC), ``planned``,
        ``done``, ``predicted`` (rows a calibrated study predicted instead of measuring: not done,
        not pending either), ``failed``, ``pending`` (planned rows neither done, predicted nor failed).
    failures : pandas.DataFrame
        The failed rows of those studies: ``name``, ``row_id``, ``stage``, ``error``, ``attempts``.

    Raises
    ------
    FileNotFoundError
        If the database does not exist (no study has been run with that store).
    """
    db_path = os.fspath(db_path)
    if not os.path.exists(db_path):
        raise FileNotFoundError(2, "no study results database (run `embstab study` first, or pass --store/--db)",
                                db_path)
    with ResultDB(db_path, readonly=True) as rdb:
        studies = rdb.studies()
        done = rdb.finished_ids()
        predicted = set(rdb.predictions()["row_id"]) - done
        fails = rdb.failures()
        rows, fail_rows = [], []
        for s in studies.itertuples(index=False):
            planned = set(rdb.planned(s.name, s.fingerprint))
            n_done, n_predicted = len(planned & done), len(planned & predicted)
            failed = fails[fails["row_id"].isin(planned - done - predicted)]
            rows.append({"name": s.name, "fingerprint": s.fingerprint,
                         "created": pd.Timestamp(s.created, unit="s", tz="UTC").floor("s"),
                         "planned": len(planned), "done": n_done, "predicted": n_predicted, "failed": len(failed),
                         "pending": len(planned) - n_done - n_predicted - len(failed)})
            fail_rows += [{"name": s.name, "row_id": f.row_id, "stage": f.stage, "error": f.error,
                           "attempts": f.attempts} for f in failed.itertuples(index=False)]
    summary = pd.DataFrame(rows, columns=["name", "fingerprint", "created", "planned", "done", "predicted", "failed",
                                          "pending"])
    failures = pd.DataFrame(fail_rows, columns=["name", "row_id", "stage", "error", "attempts"])
    return summary, failures


def format_status(summary: pd.DataFrame, failures: pd.DataFrame, max_errors: int = 5) -> str:
    """Human-readable text of :func:`study_status` (a table, then the most frequent errors).

    Parameters
    ----------
    summary : pandas.DataFrame
        The per-study summary of :func:`study_status`.
    failures : pandas.DataFrame
        The failed rows of :func:`study_status` (columns ``stage`` and ``error`` at least).
    max_errors : int, default 5
        How many distinct errors to list, most frequent first (longer than 200 characters: cut).

    Returns
    -------
    str
        The text, or ``"no studies in this database yet"`` for an empty summary.
    """
    if summary.empty:
        return "no studies in this database yet"
    lines = [summary.to_string(index=False)]
    if not failures.empty:
        lines.append("")
        lines.append(f"failed rows ({len(failures)}); most frequent errors:")
        counts = failures.groupby(["stage", "error"]).size().sort_values(ascending=False)
        for (stage, error), n in counts.head(max_errors).items():
            short = error if len(error) <= 200 else error[:197] + "..."
            lines.append(f"  {n:4d} x [{stage}] {short}")
        lines.append("re-run the same `embstab study` command to retry them")
    return "\n".join(lines)

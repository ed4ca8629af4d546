"""The results database: one SQLite file (WAL mode) holding result rows, failures and study plans.

Only the runner's client process writes result rows (workers return them), each in its own
transaction keyed by the row's configuration hash, so a row is stored exactly once however often
a study is restarted. WAL mode lets ``embstab study status`` read while a study writes.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from embstab._fs import atomic_write, check_inputs
from embstab.errors import DataFormatError
from embstab.measures import REGISTRY
from embstab.selection.results import NULL_SUFFIX, SIGNAL_SUFFIX

__all__ = ["ResultDB", "ResultDBError", "ROW_COLUMNS", "NULL_SUFFIX", "SIGNAL_SUFFIX"]


class ResultDBError(DataFormatError):
    """The results database cannot be opened or read (not SQLite, damaged, wrong tables)."""

#: Fixed columns of a result row (the shared result-table convention), before the measure columns.
#: ``chance`` is the downstream task's chance level, in the unit of ``quality``.
ROW_COLUMNS = ("algo", "seed", "dim", "bitrate", "memory", "task", "model", "disagreement", "quality",
               "quality_old", "chance", "recipe", "transform", "kind")
#: Columns added after the first release, with the value older rows hold: (name, SQL type, default;
#: None: NULL, read back as NaN).
_ADDED_COLUMNS = (("recipe", "TEXT", "fp32"), ("transform", "TEXT", "none"), ("kind", "TEXT", "word"),
                  ("chance", "REAL", None), ("nulls", "TEXT", None))


#: Keys of a row's ``extra`` that are not result columns (how many words and test examples were used).
_BOOKKEEPING = ("n_words", "n_test")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS studies (
    name TEXT NOT NULL, fingerprint TEXT NOT NULL, definition TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (name, fingerprint));
CREATE TABLE IF NOT EXISTS plan (
    name TEXT NOT NULL, fingerprint TEXT NOT NULL, row_id TEXT NOT NULL,
    PRIMARY KEY (name, fingerprint, row_id));
CREATE TABLE IF NOT EXISTS results (
    row_id TEXT PRIMARY KEY, algo TEXT, seed INTEGER, dim INTEGER, bitrate INTEGER, memory REAL,
    task TEXT, model TEXT, disagreement REAL, quality REAL, quality_old REAL,
    measures TEXT NOT NULL, extra TEXT NOT NULL, finished REAL NOT NULL);
CREATE TABLE IF NOT EXISTS failures (
    row_id TEXT PRIMARY KEY, stage TEXT, error TEXT NOT NULL, traceback TEXT, attempts INTEGER NOT NULL,
    failed REAL NOT NULL);
CREATE TABLE IF NOT EXISTS predictions (
    row_id TEXT PRIMARY KEY, algo TEXT, seed INTEGER, dim INTEGER, bitrate INTEGER, memory REAL,
    task TEXT, model TEXT, disagreement REAL, quality REAL, quality_old REAL, chance REAL, recipe TEXT,
    transform TEXT, kind TEXT, measures TEXT NOT NULL, nulls TEXT, extra TEXT NOT NULL, finished REAL NOT NULL,
    lower REAL, upper REAL, in_calibration INTEGER, note TEXT, fingerprint TEXT);
"""
#: Columns of a predicted row beside a result row's: its interval, whether it lies inside the
#: calibration (and why not), and the study definition whose calibration predicted it.
_PREDICTION_COLUMNS = ("lower", "upper", "in_calibration", "note", "fingerprint")


class ResultDB:
    """A study results database (SQLite, WAL mode).

    Parameters
    ----------
    path : path-like
        The database file (created with its tables if missing). Must be on a local disk: SQLite's
        locking is unreliable on network filesystems, which is why the artifact store may be remote
        but the database is not. A device, pipe or socket (or a symlink to one) is refused.
    timeout : float
        Seconds to wait for another writer's lock before failing.
    readonly : bool
        Only read an existing database: nothing is created, migrated or written (not even a journal
        beside it); a file without the result tables is refused.

    Raises
    ------
    ResultDBError
        The file is a directory, not SQLite, or (read-only) not a results database.
    embstab.data.errors.DataFormatError
        The path is a device, pipe or socket.
    FileNotFoundError
        Read-only, and the file does not exist.
    """

    def __init__(self, path: str | os.PathLike, timeout: float = 60.0, *, readonly: bool = False) -> None:
        self.path = os.fspath(path)
        self.readonly = readonly
        if os.path.isdir(self.path):
            raise ResultDBError(f"results database {self.path} is a directory, not a file")
        # SQLite puts its journal beside the file: beside /dev/zero that is /dev/zero-journal
        check_inputs([("the results database", self.path)])
        try:
            if readonly:
                self._conn = self._connect_readonly(timeout)
            else:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                self._conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
                self._enter_wal(timeout)
                # NORMAL is durable against process kills (SIGKILL) in WAL mode; only a power cut can
                # lose the last transactions, which a restart then recomputes.
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._create_schema()
        except sqlite3.DatabaseError as exc:
            raise ResultDBError(f"results database {self.path} cannot be used ({exc}); move it away or pass "
                                "another --db") from None

    def _connect_readonly(self, timeout: float) -> sqlite3.Connection:
        """Open an existing database without writing or creating anything (``embstab study status``)."""
        if not os.path.isfile(self.path):
            raise FileNotFoundError(2, "no study results database (run `embstab study` first, or pass --store/--db)",
                                    self.path)
        # A read-only connection to a WAL database creates -wal and -shm files when they are missing
        # and cannot remove them. They exist while a study writes (then read through them and see
        # its latest rows); when they do not, nobody is writing and the file alone is the database (a
        # study that starts meanwhile writes into its own new -wal, not into the file).
        live = os.path.exists(self.path + "-wal")
        uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro" + ("" if live else "&immutable=1")
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = sorted({"studies", "plan", "results", "failures"} - have)
        if missing:
            conn.close()
            raise ResultDBError(f"results database {self.path} is not a study results database (no table "
                                f"{', '.join(missing)}); check --db")
        return conn

    def _enter_wal(self, timeout: float) -> None:
        # Switching a new file to WAL needs it to itself, and SQLite answers "locked" at once rather
        # than waiting when another runner is opening it too; so wait here, as every other write does.
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _create_schema(self) -> None:
        # One write transaction: two runners opening a new (or an older) database at once would
        # otherwise both see a column missing and both add it.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            self._add_missing_columns()
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _add_missing_columns(self) -> None:
        # a database written before an axis existed gains its column, older rows holding the default
        have = {r[1] for r in self._conn.execute("PRAGMA table_info(results)")}
        for name, sql_type, default in _ADDED_COLUMNS:
            if name not in have:
                fill = "" if default is None else f" DEFAULT '{default}'"
                self._conn.execute(f"ALTER TABLE results ADD COLUMN {name} {sql_type}{fill}")

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> ResultDB:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def journal_mode(self) -> str:
        """The SQLite journal mode in force (``"wal"``)."""
        return str(self._conn.execute("PRAGMA journal_mode").fetchone()[0])

    # --- plans ---------------------------------------------------------------------------------

    def register_study(self, name: str, fingerprint: str, definition: Mapping[str, Any],
                       row_ids: Iterable[str]) -> None:
        """Record a study and the row ids it plans (idempotent).

        Parameters
        ----------
        name : str
            The study's name.
        fingerprint : str
            The definition's fingerprint (:meth:`StudySpec.fingerprint <embstab.study.schema.StudySpec.fingerprint>`).
        definition : mapping
            The definition as plain data (stored as JSON).
        row_ids : iterable of str
            The ids of the rows the study plans.
        """
        with self._tx() as cur:
            cur.execute("INSERT OR IGNORE INTO studies VALUES (?, ?, ?, ?)",
                        (name, fingerprint, json.dumps(definition, sort_keys=True), time.time()))
            cur.executemany("INSERT OR IGNORE INTO plan VALUES (?, ?, ?)",
                            [(name, fingerprint, r) for r in row_ids])

    def studies(self) -> pd.DataFrame:
        """One row per registered study: name, fingerprint, created (UTC timestamp), planned rows.

        Returns
        -------
        pandas.DataFrame
            Columns ``name``, ``fingerprint``, ``created``, ``planned``, oldest study first.
        """
        return pd.read_sql_query(
            "SELECT s.name, s.fingerprint, s.created, COUNT(p.row_id) AS planned FROM studies s "
            "LEFT JOIN plan p ON p.name = s.name AND p.fingerprint = s.fingerprint "
            "GROUP BY s.name, s.fingerprint ORDER BY s.created", self._conn)

    def planned(self, name: str, fingerprint: str) -> list[str]:
        """Row ids planned for a study.

        Parameters
        ----------
        name : str
            The study's name.
        fingerprint : str
            The definition's fingerprint.

        Returns
        -------
        list of str
            The row ids (empty for an unknown study).
        """
        cur = self._conn.execute("SELECT row_id FROM plan WHERE name = ? AND fingerprint = ?", (name, fingerprint))
        return [r[0] for r in cur.fetchall()]

    # --- rows ----------------------------------------------------------------------------------

    def finished_ids(self) -> set[str]:
        """Ids of every stored result row.

        Returns
        -------
        set of str
            The row ids in the results table.
        """
        return {r[0] for r in self._conn.execute("SELECT row_id FROM results")}

    def add_result(self, row_id: str, row: Mapping[str, Any]) -> bool:
        """Store a result row; return False when it was already stored (it is then left unchanged).

        ``row`` holds the :data:`ROW_COLUMNS` plus ``measures`` (name → raw value) and optionally
        ``nulls`` (name → its null level and ``signal``, as :func:`embstab.study.steps.run_measures`
        gives them) and ``extra`` (anything else worth keeping, e.g. test-set sizes).

        Parameters
        ----------
        row_id : str
            The row's id.
        row : mapping
            The row (see above); a column added after the first release takes its default when absent.

        Returns
        -------
        bool
            True when the row was inserted. Either way, a recorded failure of the row is removed.
        """
        defaults = {name: default for name, _, default in _ADDED_COLUMNS}
        columns = ["row_id", *ROW_COLUMNS, "measures", "nulls", "extra", "finished"]
        values = [row_id, *[_plain(row.get(c, defaults.get(c))) for c in ROW_COLUMNS],
                  json.dumps({k: _plain(v) for k, v in dict(row.get("measures", {})).items()}, sort_keys=True),
                  _nulls_json(row.get("nulls")), json.dumps(row.get("extra", {}), sort_keys=True, default=str),
                  time.time()]
        with self._tx() as cur:
            cur.execute(f"INSERT OR IGNORE INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(values))})",
                        values)
            inserted = cur.rowcount == 1
            cur.execute("DELETE FROM failures WHERE row_id = ?", (row_id,))
            # measured now: a prediction made for it earlier is no longer the row's value
            cur.execute("DELETE FROM predictions WHERE row_id = ?", (row_id,))
        return inserted

    def add_unmeasured(self, row_id: str, row: Mapping[str, Any], fingerprint: str) -> None:
        """Keep a row whose downstream models did not run (a calibrated study) apart from the results.

        It goes into the ``predictions`` table, never into ``results``: :meth:`finished_ids` does not
        list it, so a study that measures every row runs its downstream models. Its disagreement
        is set by :meth:`set_predictions`; a measured row of the same id (:meth:`add_result`)
        removes it. A row already there is replaced (its prediction cleared).

        Parameters
        ----------
        row_id : str
            The row's id.
        row : mapping
            The row as for :meth:`add_result`, its ``disagreement`` and qualities None.
        fingerprint : str
            The fingerprint of the study definition that left the row unmeasured.
        """
        defaults = {name: default for name, _, default in _ADDED_COLUMNS}
        columns = ["row_id", *ROW_COLUMNS, "measures", "nulls", "extra", "finished", "fingerprint"]
        values = [row_id, *[_plain(row.get(c, defaults.get(c))) for c in ROW_COLUMNS],
                  json.dumps({k: _plain(v) for k, v in dict(row.get("measures", {})).items()}, sort_keys=True),
                  _nulls_json(row.get("nulls")), json.dumps(row.get("extra", {}), sort_keys=True, default=str),
                  time.time(), fingerprint]
        values[1 + ROW_COLUMNS.index("disagreement")] = None  # never a measured value
        with self._tx() as cur:
            cur.execute(f"INSERT OR REPLACE INTO predictions ({', '.join(columns)}) "
                        f"VALUES ({', '.join('?' * len(values))})", values)
            cur.execute("DELETE FROM failures WHERE row_id = ?", (row_id,))

    def set_predictions(self, predictions: pd.DataFrame) -> int:
        """Record the predicted disagreement of rows kept by :meth:`add_unmeasured`.

        Parameters
        ----------
        predictions : pandas.DataFrame
            ``row_id``, ``predicted``, ``lower``, ``upper`` (percent; NaN outside the calibration),
            ``in_calibration`` and ``calibration_note``.

        Returns
        -------
        int
            How many stored rows were updated (a row id not kept is skipped).
        """
        updates = [(_real_or_none(r.predicted), _real_or_none(r.lower), _real_or_none(r.upper),
                    int(bool(r.in_calibration)), str(r.calibration_note or ""), r.row_id)
                   for r in predictions.itertuples(index=False)]
        updated = 0
        with self._tx() as cur:
            for update in updates:
                cur.execute("UPDATE predictions SET disagreement = ?, lower = ?, upper = ?, in_calibration = ?, "
                            "note = ? WHERE row_id = ?", update)
                updated += cur.rowcount
        return updated

    def predictions(self, row_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Rows kept by :meth:`add_unmeasured`, in the convention of :meth:`results`.

        Parameters
        ----------
        row_ids : iterable of str, optional
            Restrict to these rows; all kept rows when omitted.

        Returns
        -------
        pandas.DataFrame
            The columns of :meth:`results` (``disagreement`` the predicted value, NaN where none
            was made; qualities and chance NaN) plus ``disagreement_low``, ``disagreement_high``,
            ``in_calibration`` (bool) and ``calibration_note``. Empty for a database without
            predictions.
        """
        have = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        raw = (pd.read_sql_query("SELECT * FROM predictions", self._conn) if "predictions" in have
               else pd.DataFrame(columns=["row_id", *ROW_COLUMNS, "measures", "nulls", "extra", "finished",
                                          *_PREDICTION_COLUMNS]))
        if row_ids is not None:
            raw = raw[raw["row_id"].isin(set(row_ids))]
        df = self._frame(raw)
        for col in ("disagreement", "quality", "quality_old"):  # all NULL until predicted: objects
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
        extra = raw.set_index("row_id").reindex(df["row_id"])
        df["disagreement_low"] = pd.to_numeric(extra["lower"], errors="coerce").astype("float64").to_numpy()
        df["disagreement_high"] = pd.to_numeric(extra["upper"], errors="coerce").astype("float64").to_numpy()
        df["in_calibration"] = extra["in_calibration"].fillna(0).astype(bool).to_numpy()
        df["calibration_note"] = extra["note"].fillna("").astype(str).to_numpy()
        return df

    def missing_nulls(self, row_ids: Iterable[str] | None = None) -> list[str]:
        """Ids of stored rows that carry no nulls (stored before embstab computed them).

        Parameters
        ----------
        row_ids : iterable of str, optional
            Restrict to these rows.

        Returns
        -------
        list of str
        """
        found = [r[0] for r in self._conn.execute("SELECT row_id FROM results WHERE nulls IS NULL")]
        if row_ids is None:
            return found
        wanted = set(row_ids)
        return [r for r in found if r in wanted]

    def set_nulls(self, row_id: str, nulls: Mapping[str, Any]) -> bool:
        """Add the nulls of a stored row that has none; return whether it was updated.

        Parameters
        ----------
        row_id : str
            The row's id.
        nulls : mapping
            Measure name → its null level and ``signal`` (see :meth:`add_result`).

        Returns
        -------
        bool
            False when the row does not exist or already has nulls (they are left unchanged).
        """
        with self._tx() as cur:
            cur.execute("UPDATE results SET nulls = ? WHERE row_id = ? AND nulls IS NULL", (_nulls_json(nulls), row_id))
            return cur.rowcount == 1

    def add_failure(self, row_id: str, stage: str, error: str, traceback: str | None = None) -> None:
        """Record (or update) the failure of a row; ``attempts`` counts how often it failed.

        Parameters
        ----------
        row_id : str
            The row's id.
        stage : str
            The stage that failed (``corpus``, ``train``, ``compress``, ...).
        error : str
            The error message.
        traceback : str, optional
            The formatted traceback.
        """
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO failures VALUES (?, ?, ?, ?, 1, ?) ON CONFLICT(row_id) DO UPDATE SET "
                "stage = excluded.stage, error = excluded.error, traceback = excluded.traceback, "
                "attempts = failures.attempts + 1, failed = excluded.failed",
                (row_id, stage, error, traceback, time.time()))

    def failures(self, row_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Failed rows (row_id, stage, error, traceback, attempts, failed), optionally restricted.

        Parameters
        ----------
        row_ids : iterable of str, optional
            Restrict to these rows; all failures when omitted.

        Returns
        -------
        pandas.DataFrame
            One row per failed row id, oldest failure first.
        """
        df = pd.read_sql_query("SELECT * FROM failures ORDER BY failed", self._conn)
        if row_ids is not None:
            df = df[df["row_id"].isin(set(row_ids))].reset_index(drop=True)
        return df

    def results(self, row_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Result rows as a tidy DataFrame in the shared convention (one column per measure).

        Parameters
        ----------
        row_ids : iterable of str, optional
            Restrict to these rows (a study's plan); all rows when omitted.

        Returns
        -------
        pandas.DataFrame
            Columns ``row_id``, :data:`ROW_COLUMNS`, one column per measure (raw value), then for
            each measure with a null ``<measure>_null`` (its value for an unrelated partner, see
            :mod:`embstab.measures.null`) and ``<measure>_signal`` (whether the row's value is
            clearly apart from it; nullable boolean), then what a kind's downstream task reports
            beside the disagreement (``hits_at_10``, ``quality_metric``...), sorted by algo, task,
            dim, bitrate, seed. ``chance`` is NaN for rows stored before embstab recorded it; rows
            stored before embstab computed nulls have NaN / NA there (a database without any has
            no such columns).
        """
        raw = pd.read_sql_query("SELECT * FROM results", self._conn)
        if row_ids is not None:
            raw = raw[raw["row_id"].isin(set(row_ids))]
        return self._frame(raw)

    @staticmethod
    def _frame(raw: pd.DataFrame) -> pd.DataFrame:
        """Stored rows (``results`` or ``predictions`` table) as the tidy frame :meth:`results` returns."""
        raw = raw.copy()
        for name, _, default in _ADDED_COLUMNS:
            # an older database opened read-only was not migrated: its rows hold the defaults
            if name not in raw.columns:
                raw[name] = default
        # all-NULL columns come back as objects
        raw["chance"] = pd.to_numeric(raw["chance"], errors="coerce").astype("float64")
        measures = pd.DataFrame([json.loads(m) for m in raw["measures"]], index=raw.index)
        nulls = _null_columns(raw["nulls"])
        # what a kind's downstream task reports beside the disagreement (a KG model's Hits@10, the
        # quality metric's name) becomes columns; the bookkeeping counts stay in the database
        details = pd.DataFrame([{k: v for k, v in json.loads(e).items() if k not in _BOOKKEEPING}
                                for e in raw["extra"]], index=raw.index)
        df = pd.concat([raw[["row_id", *ROW_COLUMNS]], measures, nulls, details], axis=1)
        for col in ("seed", "dim", "bitrate"):
            df[col] = df[col].astype("int64")
        df["memory"] = df["memory"].astype("float64")
        if (df["memory"] == df["memory"].round()).all():
            df["memory"] = df["memory"].astype("int64")  # bits per word are whole without transforms
        return df.sort_values(["algo", "task", "dim", "bitrate", "seed"], kind="stable").reset_index(drop=True)

    def export_parquet(self, path: str | os.PathLike, row_ids: Iterable[str] | None = None, *,
                       attrs: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Write :meth:`results` to a Parquet file (atomically) and return the frame.

        Parameters
        ----------
        path : path-like
            The Parquet file to write.
        row_ids : iterable of str, optional
            Restrict to these rows; all rows when omitted.
        attrs : mapping, optional
            Set as the frame's ``attrs`` (pandas stores them in the file), e.g. how the measures
            were taken.

        Returns
        -------
        pandas.DataFrame
            :meth:`results` without the ``row_id`` column, as written.
        """
        df = self.results(row_ids).drop(columns=["row_id"])
        df.attrs.update(attrs or {})
        path = os.fspath(path)
        with atomic_write(path) as fh:
            df.to_parquet(fh, index=False)
        return df

    # --- internals -----------------------------------------------------------------------------

    def _tx(self) -> _Transaction:
        return _Transaction(self._conn)


class _Transaction:
    """BEGIN IMMEDIATE … COMMIT (ROLLBACK on error): takes the write lock up front, so two
    writers queue instead of failing half-way with SQLITE_BUSY."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Cursor:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn.cursor()

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


def _nulls_json(nulls: Mapping[str, Any] | None) -> str | None:
    """A row's nulls as stored (NULL for a row without: an older measure function gave none)."""
    if not nulls:
        return None
    return json.dumps({m: {k: _plain(v) for k, v in dict(level).items()} for m, level in nulls.items()},
                      sort_keys=True)


def _null_columns(stored: pd.Series) -> pd.DataFrame:
    """``<measure>_null`` and ``<measure>_signal`` columns from the stored JSON (NULL: NaN / NA)."""
    parsed = [json.loads(v) if isinstance(v, str) else {} for v in stored]
    seen = set(m for levels in parsed for m in levels)
    names = [m for m in REGISTRY if m in seen] + sorted(seen.difference(REGISTRY))
    columns: dict[str, Any] = {}
    for m in names:
        columns[m + NULL_SUFFIX] = pd.Series([float(p[m]["value"]) if m in p and p[m].get("value") is not None
                                              else float("nan") for p in parsed], index=stored.index, dtype="float64")
        columns[m + SIGNAL_SUFFIX] = pd.Series([p[m].get("signal") if m in p else None for p in parsed],
                                               index=stored.index, dtype="boolean")
    return pd.DataFrame(columns, index=stored.index)


def _plain(value: Any) -> Any:
    """numpy scalars → Python scalars (sqlite3 and json accept only the latter)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _real_or_none(value: Any) -> float | None:
    """A finite number as a Python float; NaN, inf and None as NULL."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None

"""Run a study end to end: plan what is missing, execute it, store every row as it arrives."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from embstab._fs import atomic_write, to_json
from embstab._resources import check_local_workers
from embstab.errors import EmbstabError
from embstab.selection.results import MEASURE_SETTINGS, measure_settings_of
import embstab.study.steps as S
from embstab.study.calibrate import analysable, mark_sources, predict_unmeasured
from embstab.study.executors import TaskTiming, check_scheduler, make_client, run_distributed, run_synchronous
from embstab.study.plan import StudyPlan, measure_inputs, plan_study
from embstab.study.results import ResultDB
from embstab.study.schema import StudySpec, parse_study
from embstab.study.steps import Steps, StudyTaskError, default_steps
from embstab.study.store import ArtifactStore

__all__ = ["StudyRun", "run_study", "default_db_path", "DEFAULT_STORE"]

#: Where artifacts and results go when no ``store`` is given (relative to the working directory).
DEFAULT_STORE = "embstab-study"
#: Temporary files this old are left over from killed writers, not writers still at work.
STALE_TEMP_SECONDS = 600.0
#: Written into ``run.json`` by :meth:`StudyRun.save`; :meth:`StudyRun.load` checks it.
RUN_FORMAT = "embstab-study-run-1"
#: Columns of :attr:`StudyRun.timings`.
TIMING_COLUMNS = ("key", "stage", "start", "wall_s", "cpu_s")
#: The shared stages of the task graph in the order they run, after the kind's source stage (corpus, graph...).
STAGE_ORDER = ("train", "compress", "measures", "downstream", "row")


@dataclass
class StudyRun:
    """What a call to :func:`run_study` did.

    Attributes
    ----------
    spec : the study
    results : every finished row of the study (shared result-table convention)
    failures : rows whose last attempt failed (row_id, stage, error, traceback, attempts, failed)
    n_rows : rows in the study
    n_skipped : rows already stored before this run (resumed)
    n_new : rows computed and stored by this run
    n_failed : rows that failed in this run
    wall_s : seconds this run took
    db_path : the results database
    parquet_path : the Parquet export of ``results`` (None if not written)
    n_nulls_added : int
        Rows stored before embstab computed nulls that this run gave their nulls.
    timings : pandas.DataFrame
        One row per task this run ran (``key``, ``stage``, ``start``, ``wall_s``, ``cpu_s``, measured
        where it ran: see :class:`embstab.study.executors.TaskTiming`); empty for a run that only
        resumed. :meth:`stage_times` sums it per stage.
    phases : dict of str to float
        Seconds of the runner's own phases: ``plan`` (planning, opening the database), ``execute``
        (starting the cluster and running every task, elapsed) and ``export`` (with a calibrated
        study, fitting the predictor too).
    n_predicted : int
        Rows of a calibrated study whose disagreement is predicted (``disagreement_source`` is
        ``predicted`` in ``results``).
    n_uncalibrated : int
        Rows of a calibrated study whose downstream models did not run and that lie outside the
        calibration: in ``results`` without a disagreement (``disagreement_source`` ``uncalibrated``).
    predictor : DisagreementPredictor or None
        What predicted them (fitted on the measured rows); None for a study without ``calibrate``,
        or when no predictor could be fitted (``calibration_note`` says why). Not saved by :meth:`save`.
    calibration_note : str
        Why no predictor could be fitted, else empty.
    """

    spec: StudySpec
    results: pd.DataFrame
    failures: pd.DataFrame
    n_rows: int
    n_skipped: int
    n_new: int
    n_failed: int
    wall_s: float
    db_path: str
    parquet_path: str | None
    n_nulls_added: int = 0
    timings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(TIMING_COLUMNS)))
    phases: dict[str, float] = field(default_factory=dict)
    n_predicted: int = 0
    n_uncalibrated: int = 0
    predictor: Any = field(default=None, repr=False, compare=False)
    calibration_note: str = ""

    @property
    def complete(self) -> bool:
        """Whether every row of the study is stored (measured, or with a calibrated study, predicted
        or outside the calibration)."""
        return len(self.results) == self.n_rows

    def stage_times(self) -> pd.DataFrame:
        """Where this run's time went, per stage of the task graph.

        Returns
        -------
        pandas.DataFrame
            One row per stage in graph order (``corpus``/``graph``, ``train``, ``compress``,
            ``measures``, ``downstream``, ``row``, then any other) with ``tasks``, ``wall_s`` (the
            tasks' seconds added up: with several workers they overlap, so the sum can exceed the
            run's elapsed time), ``cpu_s`` (their CPU seconds added up) and ``span_s`` (from the
            stage's first task start to its last task end).
        """
        t = self.timings
        rows = []
        if len(t):
            order = {s: i for i, s in enumerate(STAGE_ORDER)}
            # a kind's source stage (corpus, graph...) is not in STAGE_ORDER: it comes first
            for stage in sorted(t["stage"].unique(), key=lambda s: (order.get(s, -1), s)):
                part = t[t["stage"] == stage]
                span = float((part["start"] + part["wall_s"]).max() - part["start"].min())
                rows.append({"stage": stage, "tasks": len(part), "wall_s": float(part["wall_s"].sum()),
                             "cpu_s": float(part["cpu_s"].sum()), "span_s": span})
        return pd.DataFrame(rows, columns=["stage", "tasks", "wall_s", "cpu_s", "span_s"])

    def save(self, directory: str | os.PathLike) -> Path:
        """Write the run to ``directory`` so that :meth:`load` can reopen it.

        Writes ``study.json`` (the validated study definition), ``results.parquet``,
        ``failures.parquet``, ``timings.parquet`` and ``run.json`` (counts, times and paths), each
        atomically.

        Parameters
        ----------
        directory : str or os.PathLike
            Created if missing.

        Returns
        -------
        pathlib.Path
            The directory.
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        with atomic_write(out / "study.json", "w") as fh:
            fh.write(to_json(self.spec.to_dict()))
        for name, frame in (("results", self.results), ("failures", self.failures), ("timings", self.timings)):
            with atomic_write(out / f"{name}.parquet") as fh:
                frame.to_parquet(fh, index=False)
        info = {"format": RUN_FORMAT, "n_rows": self.n_rows, "n_skipped": self.n_skipped, "n_new": self.n_new,
                "n_failed": self.n_failed, "wall_s": self.wall_s, "db_path": self.db_path,
                "parquet_path": self.parquet_path, "n_nulls_added": self.n_nulls_added, "phases": self.phases,
                "n_predicted": self.n_predicted, "n_uncalibrated": self.n_uncalibrated,
                "calibration_note": self.calibration_note}
        with atomic_write(out / "run.json", "w") as fh:
            fh.write(to_json(info))
        return out

    @classmethod
    def load(cls, directory: str | os.PathLike) -> StudyRun:
        """Reopen a run written by :meth:`save`.

        Parameters
        ----------
        directory : str or os.PathLike
            A directory written by :meth:`save`.

        Returns
        -------
        StudyRun

        Raises
        ------
        EmbstabError
            If the directory does not hold a saved run, or a file in it is damaged.
        """
        root = Path(directory)
        try:
            info = json.loads((root / "run.json").read_text(encoding="utf-8"))
            spec = parse_study(json.loads((root / "study.json").read_text(encoding="utf-8")), source=str(root))
            results = pd.read_parquet(root / "results.parquet")
            failures = pd.read_parquet(root / "failures.parquet")
            # runs saved before timings were recorded have none
            timings = (pd.read_parquet(root / "timings.parquet") if (root / "timings.parquet").is_file()
                       else pd.DataFrame(columns=list(TIMING_COLUMNS)))
        except FileNotFoundError as exc:
            raise EmbstabError(f"{root}: not a saved study run ({Path(exc.filename).name} is missing)") from None
        except (ValueError, OSError) as exc:  # JSON and Parquet decoding errors
            raise EmbstabError(f"{root}: a saved study run file is damaged: {exc}") from None
        if info.get("format") != RUN_FORMAT:
            raise EmbstabError(f"{root}/run.json: not a saved study run (format {info.get('format')!r})")
        return cls(spec=spec, results=results, failures=failures, n_rows=int(info["n_rows"]),
                   n_skipped=int(info["n_skipped"]), n_new=int(info["n_new"]), n_failed=int(info["n_failed"]),
                   wall_s=float(info["wall_s"]), db_path=str(info["db_path"]), parquet_path=info["parquet_path"],
                   n_nulls_added=int(info.get("n_nulls_added", 0)),
                   n_predicted=int(info.get("n_predicted", 0)), n_uncalibrated=int(info.get("n_uncalibrated", 0)),
                   calibration_note=str(info.get("calibration_note", "")), timings=timings,
                   phases={str(k): float(v) for k, v in (info.get("phases") or {}).items()})

    def report(self, path: str | os.PathLike | None = None, **kwargs: Any) -> str:
        """The self-contained HTML report of this run's results.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Also write the report there (atomically).
        **kwargs
            Passed to :func:`embstab.report.build_report` (``title``, ``measure``, ``budgets`` …).

        Returns
        -------
        str
            The HTML document.
        """
        from embstab.report import build_report  # the report pulls in matplotlib: only when asked

        kwargs.setdefault("title", self.spec.name)
        # rows outside a calibration have no disagreement to report
        document = build_report(analysable(self.results), **kwargs)
        if path is not None:
            with atomic_write(path, "w") as fh:
                fh.write(document)
        return document

    def next_commands(self) -> list[str]:
        """The commands to run next on this run's results, each argument quoted for the shell.

        Returns
        -------
        list of str
            ``embstab study status`` when rows are missing (re-running the study retries them), then
            ``embstab report`` and ``embstab recommend`` for each of the study's budgets (the
            largest stored memory when it names none) on the exported table (the database without one).
        """
        from embstab._shell import command  # noqa: PLC0415

        results = self.parquet_path or self.db_path
        out = []
        if not self.complete:
            out.append(command("embstab", "study", "status", "--db", self.db_path))
        name = f"{self.spec.name}.html"
        out.append(command("embstab", "report", results, "-o", os.path.join(os.path.dirname(results), name)))
        budgets = list(self.spec.budgets)
        if not budgets and "memory" in self.results.columns and len(self.results):
            budgets = [int(self.results["memory"].max())]
        out += [command("embstab", "recommend", results, "--budget", str(b)) for b in budgets]
        return out

    def _repr_html_(self) -> str:
        """The run at a glance in a notebook: its rows, where its time went, where its results are, what next."""
        import html  # noqa: PLC0415

        stored = len(self.results)
        measured = stored - self.n_predicted - self.n_uncalibrated
        rows = [("rows stored", f"<b>{stored} of {self.n_rows}</b>"
                 + ("" if self.complete else f" ({self.n_rows - stored} missing)")),
                ("measured (downstream models ran)", str(measured))]
        if self.spec.calibrate is not None:
            rows += [("predicted from their measures", str(self.n_predicted)),
                     ("outside the calibration (no disagreement)", str(self.n_uncalibrated))]
        rows += [("failed", f"{self.n_failed} in this run; {len(self.failures)} row(s) whose last attempt failed"),
                 ("this run", f"{self.n_new} row(s) computed, {self.n_skipped} resumed, {self.wall_s:.1f} s"),
                 ("phases", " · ".join(f"{html.escape(k)} {v:.1f} s" for k, v in self.phases.items()) or "–"),
                 ("results database", f"<code>{html.escape(self.db_path)}</code>"),
                 ("results table", f"<code>{html.escape(self.parquet_path)}</code>" if self.parquet_path
                  else "not exported")]
        cells = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
        note = f"<p>{html.escape(self.calibration_note)}</p>" if self.calibration_note else ""
        stages = self.stage_times()
        times = ("<p>Time per stage (tasks' seconds added up):</p>"
                 + stages.to_html(index=False, float_format=lambda v: f"{v:.1f}")) if len(stages) else ""
        commands = "\n".join(html.escape(c) for c in self.next_commands())
        return (f"<p><b>StudyRun</b>: study {html.escape(self.spec.name)}</p><table>{cells}</table>{note}{times}"
                f"<p>Next:</p><pre><code>{commands}</code></pre>")


def default_db_path(store: ArtifactStore) -> str:
    """Where a study's results database goes by default.

    Parameters
    ----------
    store : ArtifactStore
        The study's artifact store.

    Returns
    -------
    str
        ``STORE/results.sqlite`` for a local store; ``./embstab-study/results.sqlite`` otherwise
        (SQLite needs a local disk).
    """
    if store.is_local:
        return os.path.join(store.root, "results.sqlite")
    return os.path.join(DEFAULT_STORE, "results.sqlite")


def run_study(
    spec: StudySpec,
    store: str | os.PathLike | ArtifactStore = DEFAULT_STORE,
    db: str | os.PathLike | None = None,
    *,
    scheduler: Any = "synchronous",
    workers: int | None = None,
    steps: Steps | None = None,
    progress: bool = True,
    export: bool = True,
) -> StudyRun:
    """Run (or resume) a study and return its results.

    Rows already in the database are skipped, and so is every task whose artifact is already in
    the store. A calibrated study (``spec.calibrate``) runs the downstream models of a share of the
    rows only and predicts the others' disagreement from their measures, with a predictor fitted on
    the measured rows (:mod:`embstab.study.calibrate`); those rows are marked in ``results`` and kept
    apart from the measured ones in the database. A failing task is recorded (with its error and
    traceback) against every row that needs it; the other rows go on. Re-running retries failed rows. Rows stored before embstab
    computed nulls get them, in this process, from the pairs still in the store (nothing is
    trained again; a row whose pair is gone keeps none).

    Parameters
    ----------
    spec : StudySpec
        The validated study (:func:`embstab.study.load_study`).
    store : str, path-like or ArtifactStore
        Artifact store: a directory or any fsspec URL.
    db : path-like, optional
        The SQLite results database (default :func:`default_db_path`).
    scheduler : str or distributed.Client
        ``"synchronous"`` (in this process, in order), ``"local"`` (a LocalCluster of worker
        processes sized by ``workers``; call from an ``if __name__ == "__main__":`` guarded
        script), ``"threads"`` (a LocalCluster of threads), an address ``"tcp://HOST:PORT"`` of an
        existing Dask scheduler, or a ``distributed.Client``.
    workers : int, optional
        Workers of a local cluster (default: one per core, at most one per 2 GiB of RAM); more than
        :func:`embstab._resources.max_local_workers` is refused.
    steps : Steps, optional
        The computations (default :func:`embstab.study.steps.default_steps`, the real ones).
    progress : bool
        Show a progress bar over the rows.
    export : bool
        Write ``<db dir>/<study name>.parquet`` at the end.

    Returns
    -------
    StudyRun
    """
    start = time.perf_counter()
    check_scheduler(scheduler)
    if workers is not None and isinstance(scheduler, str) and scheduler in ("local", "threads"):
        check_local_workers(workers)  # before the store and database are touched
    store = store if isinstance(store, ArtifactStore) else ArtifactStore(store)
    db_path = os.fspath(db) if db is not None else default_db_path(store)
    _check_store_reachable(store, scheduler)
    steps = steps or default_steps()
    store.clean_temp(older_than=STALE_TEMP_SECONDS)
    timings: list[TaskTiming] = []
    with ResultDB(db_path) as rdb:
        done = rdb.finished_ids()
        plan = plan_study(spec, store, steps, done)
        rdb.register_study(spec.name, spec.fingerprint(), spec.to_dict(), plan.all_rows)
        n_skipped = len(plan.all_rows) - len(plan.rows)
        executing = time.perf_counter()
        n_new, n_failed = _execute(plan, rdb, scheduler, workers, progress, timings, spec.fingerprint())
        n_nulls = _add_missing_nulls(spec, store, steps, rdb, plan.all_rows, progress)
        exporting = time.perf_counter()
        results = rdb.results(plan.all_rows)
        # recorded with the rows (and in the Parquet export), so that a calibration on them can measure a new pair alike
        settings = {MEASURE_SETTINGS: measure_settings_of([spec.to_dict()])}
        results.attrs.update(settings)
        calibration = None
        if spec.calibrate is not None:
            unmeasured = rdb.predictions(plan.unmeasured)
            calibration = predict_unmeasured(results, unmeasured, spec.calibrate)
            rdb.set_predictions(calibration.predictions)
            results = mark_sources(results, unmeasured, calibration.predictions)
            results.attrs.update(settings)
        failures = rdb.failures(set(plan.all_rows) - set(results["row_id"]))
        parquet_path = None
        if export:
            parquet_path = os.path.join(os.path.dirname(os.path.abspath(db_path)), f"{spec.name}.parquet")
            if calibration is None:
                rdb.export_parquet(parquet_path, plan.all_rows, attrs=settings)
            else:  # the measured rows and the predicted ones, marked
                with atomic_write(parquet_path) as fh:
                    results.drop(columns=["row_id"]).to_parquet(fh, index=False)
    end = time.perf_counter()
    phases = {"plan": executing - start, "execute": exporting - executing, "export": end - exporting}
    timing_frame = pd.DataFrame([asdict(t) for t in timings], columns=list(TIMING_COLUMNS))
    return StudyRun(spec=spec, results=results.drop(columns=["row_id"]), failures=failures,
                    n_rows=len(plan.all_rows), n_skipped=n_skipped, n_new=n_new, n_failed=n_failed,
                    wall_s=end - start, db_path=db_path, parquet_path=parquet_path, timings=timing_frame,
                    phases=phases, n_nulls_added=n_nulls,
                    n_predicted=0 if calibration is None else calibration.n_predicted,
                    n_uncalibrated=0 if calibration is None else calibration.n_uncalibrated,
                    predictor=None if calibration is None else calibration.predictor,
                    calibration_note="" if calibration is None else calibration.note)


def _add_missing_nulls(spec: StudySpec, store: ArtifactStore, steps: Steps, rdb: ResultDB, row_ids: Iterable[str],
                       progress: bool) -> int:
    """Give stored rows without nulls their nulls, from the measures and pairs in the store."""
    missing = rdb.missing_nulls(row_ids)
    if not missing:
        return 0
    inputs = measure_inputs(spec)
    by_task: dict[str, list[str]] = {}
    for row_id in missing:
        by_task.setdefault(inputs[row_id].key, []).append(row_id)
    added = 0
    for rows in tqdm(list(by_task.values()), desc="nulls of earlier rows", unit="pair", disable=not progress):
        task = inputs[rows[0]]
        present = store.has_json("measures", task.key) and all(
            store.has_embedding(kind, key) for key in (task.pair_key, task.anchor_key)
            for kind in ("pair_new", "pair_old"))
        if not present:
            continue  # computing them would train the pair again
        try:
            out = S.run_measures(store, spec.study_kind.measure_steps(steps), task.key, task.config, task.pair_key,
                                 task.anchor_key, task.uncompressed_key)
        except StudyTaskError:
            continue  # the row keeps its values; its nulls stay unknown
        if out.get("nulls"):
            added += sum(rdb.set_nulls(row_id, out["nulls"]) for row_id in rows)
    return added


def _check_store_reachable(store: ArtifactStore, scheduler: Any) -> None:
    """Workers in other processes must see the same store: an in-memory one cannot be shared."""
    in_process = isinstance(scheduler, str) and scheduler in ("synchronous", "sync", "threads")
    if store.url.startswith("memory://") and not in_process:
        raise EmbstabError(f"the store {store.url} lives in this process's memory; worker processes cannot "
                           "see it. Use a directory or a shared fsspec URL, or scheduler='threads'")


def _execute(plan: StudyPlan, rdb: ResultDB, scheduler: Any, workers: int | None, progress: bool,
             timings: list[TaskTiming], fingerprint: str) -> tuple[int, int]:
    if not plan.rows:
        return 0, 0
    client = cluster = None
    if isinstance(scheduler, str) and scheduler in ("synchronous", "sync"):
        outcomes = run_synchronous(plan, timings)
    elif isinstance(scheduler, str):
        client, cluster = make_client(scheduler, workers)
        outcomes = run_distributed(plan, client, timings)
    else:  # an existing distributed.Client
        outcomes = run_distributed(plan, scheduler, timings)
    n_new = n_failed = 0
    bar = tqdm(total=len(plan.rows), desc=f"study {plan.spec.name}", unit="row", disable=not progress)
    try:
        for outcome in outcomes:
            if outcome.error is None and outcome.row_id in plan.unmeasured:
                # no downstream model ran: kept apart, so that it never counts as a finished row
                rdb.add_unmeasured(outcome.row_id, outcome.value, fingerprint)
            elif outcome.error is None:
                rdb.add_result(outcome.row_id, outcome.value)
                n_new += 1
            else:
                err = outcome.error
                rdb.add_failure(outcome.row_id, err.stage, err.message, err.traceback)
                n_failed += 1
                bar.set_postfix(failed=n_failed)
            bar.update(1)
    finally:
        bar.close()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return n_new, n_failed

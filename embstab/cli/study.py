"""``embstab study``: run (or resume) a study, write its report, print the recommendation::

    embstab study [STUDY.yaml] [--quick] [--scheduler tcp://HOST:PORT] [--store DIR_OR_URL]
                  [--workers N] [-o report.html] [--timings]
    embstab study status [--store DIR_OR_URL] [--db FILE]

The bundled studies ship inside the package (``embstab.pipelines``), so an installed embstab
finds them without a source checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.resources
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from embstab._shell import command
from embstab.cli.options import add_progress, local_workers, show_progress
from embstab.errors import EmbstabError, did_you_mean

__all__ = ["register", "handle", "find_study_file", "main"]

DEFAULT_STUDY = "default.yaml"
QUICK_STUDY = "quick.yaml"

EPILOG = """\
examples:
  embstab study                         # the default study (word2vec CBOW, 25-200 dims, 1-32 bits)
  embstab study --quick                 # a tiny version (about a minute)
  embstab study kg_quick                # a bundled study by name: kg_quick, kg, contextual_quick, ...
  embstab study pipelines/kg.yaml       # knowledge-graph embeddings (kind: kg) on UMLS, trained to convergence
  embstab study my_study.yaml --scheduler tcp://10.0.0.5:8786 --store s3://bucket/embstab
  embstab study status                  # what is done, pending and failed
  embstab study --recompute             # first delete artifacts that no longer read back

Interrupt it at any time: running the same command again resumes where it stopped, and failed
rows are retried. Results: STORE/results.sqlite and STORE/<study name>.parquet.

A study file's `kind:` says what is trained: `word` (default; corpus pair, word2vec/GloVe/...),
`kg` (graph-version pair, PyKEEN models, link-prediction and triple-classification disagreement
of the quantized models), `contextual` (BERT pretraining pair, word-type features, frozen-feature
disagreement) or `hyperbolic` (graph-version pair, h-MDS/SGD embeddings, fixed-point coordinates,
graph reconstruction and nearest-neighbour disagreement).

`calibrate: {share: 0.34, seed: 0}` in a study file runs the downstream models of that share of the
rows only (seeded, stratified per algorithm and task) and predicts the other rows' disagreement
from their measures, with intervals: the table's `disagreement_source` column says `predicted`,
and the same study without `calibrate` later measures them.

A multi-host Dask cluster exchanges pickled tasks and results: run it only on a trusted network,
or configure TLS for the scheduler and workers (Dask's distributed.comm.tls settings)."""


def register(subparsers: Any) -> None:
    """Add the ``study`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser(
        "study", help="run a stability study (train, compress, measure, downstream) and report it",
        description="Run (or resume) a study: embeddings (word, knowledge-graph or contextual) trained on "
                    "two versions of their data at every dimension, bit width and seed, measured against anchors and used downstream. "
                    "Writes an HTML report and prints the recommended dimension and precision for "
                    "each memory budget of the study. `embstab study status` summarises progress.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", nargs="?", metavar="STUDY.yaml|status",
                   help="study definition, or the name of a bundled one (kg_quick, contextual, ...; "
                        "default: pipelines/default.yaml), or 'status'")
    p.add_argument("--quick", action="store_true", help="run the tiny CI study (pipelines/quick.yaml)")
    p.add_argument("--scheduler", default="local", metavar="ADDR",
                   help="'local' (default: a Dask LocalCluster sized to this machine), 'threads', "
                        "'synchronous', or the address of a running Dask scheduler (tcp://HOST:PORT)")
    p.add_argument("--store", default=None, metavar="DIR_OR_URL",
                   help="artifact store: a directory or any fsspec URL (default: ./embstab-study)")
    p.add_argument("--db", default=None, metavar="FILE",
                   help="results database (default: STORE/results.sqlite for a local store)")
    p.add_argument("--workers", type=local_workers, default=None, metavar="N",
                   help="workers of the local cluster (default: one per core, at most one per 2 GiB)")
    p.add_argument("-o", "--output", default=None, metavar="report.html",
                   help="HTML report (default: STORE/<study name>.html)")
    p.add_argument("--no-report", action="store_true", help="do not write the HTML report")
    add_progress(p, quiet_help="hide the progress bar")
    p.add_argument("--timings", action="store_true",
                   help="print at the end where the time went: wall and CPU seconds of each stage (corpus, "
                        "train, compress, measures, downstream, row), of the runner's planning and export, "
                        "and of the report and summary")
    p.add_argument("--recompute", action="store_true",
                   help="check every artifact of the store first and delete those that no longer read back "
                        "(a corrupt file fails its rows until it is recomputed)")
    p.add_argument("--keep-near-chance", action="store_true",
                   help="keep the rows whose downstream model scores within 5 points of its task's chance level "
                        "in the report, correlations and recommendations (left out by default: their "
                        "disagreement is mostly noise)")
    p.set_defaults(func=handle)


def find_study_file(name: str) -> Path:
    """Locate a bundled study definition (``embstab.pipelines/NAME``).

    Installed packages hold it as package data; a source checkout used without installing (only
    ``PYTHONPATH`` pointing at it) keeps it in the top-level ``pipelines/`` folder.

    Parameters
    ----------
    name : str
        File name of the study, e.g. ``"quick.yaml"``.

    Returns
    -------
    pathlib.Path
        The existing study file (the checkout's copy first when running from a source tree).

    Raises
    ------
    EmbstabError
        If the study is in neither place.
    """
    import embstab  # noqa: PLC0415

    candidates: list[Path] = []
    checkout = Path(embstab.__file__).resolve().parents[1]
    if (checkout / "setup.py").is_file():
        # the package runs from a source tree: its own pipelines/ folder, not another install's
        candidates.append(checkout / "pipelines" / name)
    try:
        candidates.append(Path(str(importlib.resources.files("embstab.pipelines") / name)))
    except ModuleNotFoundError:  # a bare source tree that was never installed
        pass
    for path in candidates:
        if path.is_file():
            return path
    bundled = sorted({p.stem for c in candidates if c.parent.is_dir() for p in c.parent.glob("*.yaml")})
    raise EmbstabError(f"cannot find the bundled study {name}{did_you_mean(Path(name).stem, bundled)}; the bundled "
                       f"ones: {', '.join(bundled) or 'none found'} (looked in "
                       f"{', '.join(dict.fromkeys(str(c.parent) for c in candidates))}); or pass a STUDY.yaml file")


def handle(args: argparse.Namespace) -> int:
    """Run ``embstab study`` (or ``embstab study status``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    int
        The exit code: 0 when every row of the study is done, 1 when some rows failed or are missing.

    Raises
    ------
    EmbstabError
        For a missing study file, both STUDY.yaml and ``--quick``, an unknown scheduler, an
        unwritable report path, a study file or ``--db`` that is a device or pipe, or a ``--db``
        that is the study file or a directory.
    """
    from embstab.study import DEFAULT_STORE, ArtifactStore  # noqa: PLC0415

    started = time.perf_counter()
    store_url = args.store or DEFAULT_STORE
    if args.study == "status":
        return _status(store_url, args.db)
    from embstab.study import load_study, run_study  # noqa: PLC0415
    from embstab.study.executors import check_scheduler  # noqa: PLC0415

    check_scheduler(args.scheduler)
    if args.study and args.quick:
        raise EmbstabError("give either a STUDY.yaml or --quick, not both")
    from embstab._fs import check_inputs, check_outputs, check_writable  # noqa: PLC0415

    path = Path(args.study) if args.study else find_study_file(QUICK_STUDY if args.quick else DEFAULT_STUDY)
    if not path.is_file() and args.study and os.sep not in args.study and "/" not in args.study:
        # a bare name is a bundled study: `embstab study kg_quick` (an unknown one: the bundled names)
        path = find_study_file(args.study if args.study.endswith(".yaml") else f"{args.study}.yaml")
    check_inputs([("STUDY.yaml", path)])
    if not path.is_file():
        raise EmbstabError(f"study file not found: {path}")
    spec = load_study(path)
    root = _local_root(store_url)
    # the same default as default_db_path(store), without creating the store before the checks
    db_path = args.db or os.path.join(root if root is not None else DEFAULT_STORE, "results.sqlite")
    # the database is read and written: a regular file (or a new one), never the study file
    db_label = "--db" if args.db else "the results database"
    check_inputs([(db_label, db_path)])
    check_outputs([(db_label, db_path)], [("STUDY.yaml", path)])
    _check_database(db_path, db_label)  # before any folder is made: a bad one must leave nothing behind
    check_writable(db_path, db_label, create_parents=True)
    report_path = None
    if not args.no_report:
        report_path = args.output or os.path.join(os.path.dirname(os.path.abspath(db_path)), f"{spec.name}.html")
        check_outputs([("-o", report_path)], [("STUDY.yaml", path), ("--db", db_path)])
        check_writable(report_path, "-o", create_parents=True)
    store = ArtifactStore(store_url)
    if args.recompute:
        removed = store.remove_corrupt(progress=show_progress(args))
        print(f"--recompute: {len(removed)} corrupt artifact(s) deleted" + "".join(f"\n  {p}" for p in removed),
              file=sys.stderr)
    host = args.scheduler.partition("://")[2].rpartition(":")[0].strip("[]")
    if args.scheduler.startswith("tcp://") and host not in ("127.0.0.1", "localhost", "::1"):
        print(f"note: {args.scheduler} is unencrypted and unauthenticated, and Dask runs the pickled tasks its "
              "peers send: use it only on a trusted network, or tls:// with Dask's TLS settings", file=sys.stderr)
    if "://" in args.scheduler and store.is_local:
        print(f"note: workers of {args.scheduler} must see the store directory {store.root} at the same path "
              "(a shared filesystem); otherwise pass --store with a shared fsspec URL", file=sys.stderr)
    print(f"study {spec.name!r} from {path}: {spec.n_rows()} rows; store {store.url}; results {db_path}",
          file=sys.stderr)
    run = run_study(spec, store, db_path, scheduler=args.scheduler, workers=args.workers,
                    progress=show_progress(args))
    print(f"{len(run.results)}/{run.n_rows} rows done ({run.n_skipped} resumed, {run.n_new} new, "
          f"{run.n_failed} failed) in {run.wall_s:.1f} s; table: {run.parquet_path}")
    if run.n_nulls_added:
        print(f"{run.n_nulls_added} resumed row(s) stored before nulls existed got their nulls from the stored pairs")
    if spec.calibrate is not None:
        _calibration(run)
    if run.n_failed or not run.complete:
        status = command("embstab", "study", "status", "--store", store_url)  # quoted: the path is the user's
        print(f"{run.n_rows - len(run.results)} row(s) missing; see `{status}` "
              "and re-run this command to retry (with --recompute if an error names a corrupt artifact)",
              file=sys.stderr)
    if run.results.empty:
        if args.timings:
            _timings(run, {}, started)
        return 1
    summary: dict[str, tuple[float, float]] = {}
    from embstab.selection.calibration import measured_rows  # noqa: PLC0415
    from embstab.study.calibrate import analysable  # noqa: PLC0415

    results = analysable(run.results)  # rows outside a calibration have no disagreement to analyse
    if args.keep_near_chance:  # the analyses follow the decision recorded in the table
        from embstab.selection.results import as_results  # noqa: PLC0415

        results = as_results(results, keep_near_chance=True)
    with _clock(summary, "report"):
        if report_path is not None:
            _report(results, report_path)
    measured = results[measured_rows(results)]  # a predicted disagreement is no evidence for the tables that follow
    with _clock(summary, "summary"):
        _qualities(measured)
        _correlations(measured)
        _recommend(measured, spec.budgets)
    if args.timings:
        _timings(run, summary, started)
    return 0 if run.complete else 1


def _calibration(run: Any) -> None:
    """Print where a calibrated study's disagreements come from: measured, predicted or neither."""
    from embstab.study.calibrate import MEASURED, SOURCE_COLUMN  # noqa: PLC0415

    c = run.spec.calibrate
    measured = int((run.results[SOURCE_COLUMN] == MEASURED).sum()) if SOURCE_COLUMN in run.results.columns else 0
    print(f"calibrate (share {c.share:g}, seed {c.seed}): downstream models ran for {measured} of {run.n_rows} rows; "
          f"{run.n_predicted} row(s) predicted from their measures ({c.level:.0%} intervals; '{SOURCE_COLUMN}' is "
          f"'predicted' in the table and the report), {run.n_uncalibrated} outside the calibration (no disagreement)")
    if run.calibration_note:
        print(run.calibration_note, file=sys.stderr)
    if run.predictor is not None:
        print(run.predictor)
    print("The tables and recommendations below read the measured rows only (a recommendation predicts the "
          "configurations they lack); run the study without 'calibrate' to measure the other rows.")


def _check_database(db_path: str, label: str) -> None:
    """Refuse an existing results database that SQLite cannot read (a corrupt or foreign file)."""
    if not (os.path.isfile(db_path) and os.path.getsize(db_path) > 0):
        return  # a new database
    import sqlite3  # noqa: PLC0415

    try:
        with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as con:
            con.execute("PRAGMA schema_version").fetchone()
    except sqlite3.DatabaseError as exc:
        raise EmbstabError(f"{label} {db_path} is not a readable results database ({exc}); move it away or "
                           "give another --db") from None


@contextlib.contextmanager
def _clock(into: dict[str, tuple[float, float]], name: str) -> Iterator[None]:
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        into[name] = (time.perf_counter() - t0, time.process_time() - c0)


def _timings(run: Any, summary: dict[str, tuple[float, float]], started: float) -> None:
    """Print ``--timings``: the run's stages (tasks' wall and CPU seconds, added up), the runner's
    phases, the report and summary, and the whole command."""
    import resource  # noqa: PLC0415

    import pandas as pd  # noqa: PLC0415

    stages = run.stage_times()
    print()
    print("Timings in seconds (a stage's wall and CPU add up its tasks' times, which overlap on several "
          "workers; span: its first task's start to its last task's end; tasks found done in the store "
          "take next to nothing):")
    rows = [{"stage": r.stage, "tasks": str(r.tasks), "wall": f"{r.wall_s:.1f}", "cpu": f"{r.cpu_s:.1f}",
             "span": f"{r.span_s:.1f}"} for r in stages.itertuples()]
    for name in ("plan", "execute", "export"):
        if name in run.phases:
            what = "runner: " + {"plan": "planning", "execute": "cluster start + all tasks (elapsed)",
                                 "export": "results export"}[name]
            rows.append({"stage": what, "tasks": "", "wall": f"{run.phases[name]:.1f}", "cpu": "", "span": ""})
    for name, (wall, cpu) in summary.items():
        rows.append({"stage": {"report": "HTML report", "summary": "printed summary"}[name], "tasks": "",
                     "wall": f"{wall:.1f}", "cpu": f"{cpu:.1f}", "span": ""})
    # children: local worker processes, counted once the cluster has shut them down
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu_all = sum(u.ru_utime + u.ru_stime for u in usage)
    wall = time.perf_counter() - started
    try:  # from the process start, imports included
        import psutil  # noqa: PLC0415

        wall = time.time() - psutil.Process().create_time()
    except (ImportError, OSError):
        pass
    rows.append({"stage": "whole command", "tasks": "", "wall": f"{wall:.1f}", "cpu": f"{cpu_all:.1f}", "span": ""})
    print(pd.DataFrame(rows).to_string(index=False))
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average (1, 5, 15 min): {load}; usable cores: {len(os.sched_getaffinity(0))}")
    except (OSError, AttributeError):  # not on Linux
        pass


def _status(store_url: str, db: str | None) -> int:
    from embstab.study import DEFAULT_STORE, format_status, study_status  # noqa: PLC0415

    given = db is not None
    if db is None:
        # no ArtifactStore here: opening one creates its directory, and a mistyped --store must not
        root = _local_root(store_url)
        if root is not None and not os.path.isdir(root):
            raise EmbstabError(f"no study store at {root} (check --store; `embstab study` creates it)")
        db = os.path.join(root if root is not None else DEFAULT_STORE, "results.sqlite")
    from embstab._fs import check_inputs  # noqa: PLC0415

    # SQLite would leave a journal beside a device (/dev/zero-journal)
    check_inputs([("--db" if given else "the results database", db)])
    summary, failures = study_status(db)  # opens the database read-only: creates nothing
    print(f"results database: {db}")
    print(format_status(summary, failures))
    return 0


def _local_root(store_url: str) -> str | None:
    """The directory of a local store URL (``DIR`` or ``file://DIR``), or None for a remote one."""
    if "://" not in store_url:
        return os.path.abspath(store_url)
    return os.path.abspath(store_url.removeprefix("file://")) if store_url.startswith("file://") else None


def _report(results: Any, path: str) -> None:
    from embstab.report import write_report  # noqa: PLC0415

    write_report(results, path)
    print(f"report: {path}")


def _qualities(results: Any) -> None:
    """Print each task's mean downstream quality beside its chance level, and how many rows have a
    model near chance (left out of the correlations and recommendations that follow)."""
    import math  # noqa: PLC0415

    import pandas as pd  # noqa: PLC0415

    from embstab.selection import NEAR_CHANCE_MARGIN, chance_table  # noqa: PLC0415

    try:
        table = chance_table(results)
    except EmbstabError as exc:
        print(f"no quality table: {exc}", file=sys.stderr)
        return
    top = _top_rows(results)
    label = (f"at {top['dim'].iloc[0]:g} dims, {top['bitrate'].iloc[0]:g} bits" if top is not None and len(top)
             else None)
    print()
    kept = bool(results.attrs.get("keep_near_chance", False))
    print(f"Downstream quality against chance (test quality of both models, %; a row is near chance when a "
          f"model is within {NEAR_CHANCE_MARGIN:g} points of it, and is "
          f"{'kept in what follows (--keep-near-chance)' if kept else 'left out of what follows'}):")
    shown = []
    for r in table.itertuples():
        row = {"task": r.task, "mean quality": f"{r.quality_mean:.1f}",
               "range": f"{r.quality_min:.1f} – {r.quality_max:.1f}"}
        if label is not None:
            # the largest embeddings in full precision: the task's quality without compression
            part = top[top["task"] == r.task]
            both = pd.to_numeric(pd.concat([part[c] for c in ("quality", "quality_old") if c in part.columns]),
                                 errors="coerce")
            row[label] = f"{both.mean():.1f}" if both.notna().any() else "–"
        row["chance"] = f"{r.chance:.1f}" if math.isfinite(r.chance) else "unknown"
        row["near chance"] = f"{r.near_chance}/{r.rows} rows"
        shown.append(row)
    print(pd.DataFrame(shown).to_string(index=False))


def _top_rows(results: Any) -> Any:
    """The rows of the largest dimension at its largest bit width (None without those columns)."""
    import pandas as pd  # noqa: PLC0415

    if not {"dim", "bitrate", "task"} <= set(results.columns) or results.empty:
        return None
    dims = pd.to_numeric(results["dim"], errors="coerce")
    at_dim = results[dims == dims.max()]
    bits = pd.to_numeric(at_dim["bitrate"], errors="coerce")
    return at_dim[bits == bits.max()]


def _correlations(results: Any) -> None:
    """Print Spearman ρ of each measure (as a distance) vs disagreement, with bootstrap intervals:
    pooled, within each dimension and within each bit width, and a best measure only where the
    intervals separate."""
    from embstab.selection import best_measures, spearman_table, with_intervals  # noqa: PLC0415

    try:
        pooled = spearman_table(results, control="memory")
    except EmbstabError as exc:
        print(f"no correlation table: {exc}", file=sys.stderr)
        return
    print()
    print("Spearman ρ of each measure (as a distance) with the disagreement, [95 % bootstrap interval over "
          "pairs] (higher is better); under it the ρ controlling for memory (what the measure adds beyond "
          "memory), and memory's own ρ:")
    print(with_intervals(pooled).to_string())
    for column, label in (("dim", "dimension"), ("bitrate", "bit width")):
        if column in results.columns and results[column].nunique() > 1:
            inside = spearman_table(results, within=column, control="memory")
            print()
            print(f"within each {label} (a pooled ρ can follow the {label} instead of the instability):")
            print(with_intervals(inside).to_string())  # every algorithm with its own rows
    print()
    for row in best_measures(pooled).itertuples():
        where = f"{row.task}" if results["algo"].nunique() == 1 else f"{row.algo} / {row.task}"
        print(f"{where}: {'best measure ' + row.best + ' — ' if row.best else ''}{row.note}")
    _signal(results)


def _signal(results: Any) -> None:
    """Print how many pairs of each measure are clearly apart from their null, and name the measures
    that sit at it on half of the pairs or more (their ρ follows the null's trend, not stability)."""
    from embstab.selection.signal import signal_summary  # noqa: PLC0415

    try:
        summary = signal_summary(results)
    except EmbstabError as exc:
        print(f"no signal table: {exc}", file=sys.stderr)
        return
    if not summary:
        return  # rows stored before nulls existed
    print()
    print("Pairs whose value is clearly apart from its null (the level of unrelated tables): "
          + ", ".join(f"{m} {hits}/{checked}" for m, (hits, checked) in summary.items()))
    silent = [f"{m} on {checked - hits} of {checked}" for m, (hits, checked) in summary.items()
              if checked and 2 * hits <= checked]
    if silent:
        print(f"no signal: at its null (the level of unrelated tables) on half of the pairs or more: {', '.join(silent)};"
              " such a measure's ρ above follows how its null moves with the dimension, not stability, and "
              "recommend does not rank by it where it sits at its null")


def _recommend(results: Any, budgets: tuple[int, ...]) -> None:
    from embstab.selection.oracle import recommendation_gap_of  # noqa: PLC0415
    from embstab.selection.recommend import recommend  # noqa: PLC0415

    if not budgets:
        budgets = (int(results["memory"].median()),)
    for budget in budgets:
        try:
            rec = recommend(results, budget, measure="eis" if "eis" in results.columns else _first_measure(results))
        except EmbstabError as exc:  # e.g. too few rows to fit a trend on a partial study
            print(f"no recommendation for a budget of {budget}: {exc}", file=sys.stderr)
            continue
        print()
        print(rec)
        try:
            gap = recommendation_gap_of(rec, results)
        except EmbstabError as exc:
            print(f"no oracle gap: {exc}", file=sys.stderr)
            continue
        print(f"Against the best of the {int(gap['n_candidates'].max())} configuration(s) under this budget "
              "(measured disagreement, mean over seeds):")
        for row in gap.itertuples():
            print(f"  {row.task:<12} chosen {row.disagreement:6.2f} %, best {row.oracle_disagreement:6.2f} % "
                  f"({row.oracle_algo} dim={row.oracle_dim} {row.oracle_bitrate}-bit): gap {row.gap:.2f} points "
                  f"(a random pick's gap: {row.mean_disagreement - row.oracle_disagreement:.2f} points, on average)")


def _first_measure(results: Any) -> str:
    from embstab.selection import measure_columns  # noqa: PLC0415

    present = measure_columns(results)
    if not present:
        raise EmbstabError("the results hold no measure column")
    return present[0]


def main(argv: list[str] | None = None) -> int:
    """Run ``embstab study`` on its own (used by ``pipelines/run_study.py``).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``study``; default: ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit code of the ``embstab`` command line.
    """
    from embstab.cli import main as cli_main  # noqa: PLC0415 (the CLI root imports this module)

    return cli_main(["study", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover - LocalCluster worker processes need this guard
    sys.exit(main())

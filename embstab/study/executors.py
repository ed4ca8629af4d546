"""Executing a :class:`~embstab.study.plan.StudyPlan`: in-process, or on Dask distributed.

Both executors yield one :class:`Outcome` per result row as soon as it is known, so the runner can
store it at once. A failing task fails only the rows that depend on it (with its error); every
other task still runs.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from embstab._resources import check_local_workers
from embstab.errors import EmbstabError
from embstab.study.plan import Ref, StudyPlan
from embstab.study.steps import StudyTaskError

__all__ = ["Outcome", "TaskTiming", "run_synchronous", "run_distributed", "make_client", "default_workers",
           "check_scheduler"]

#: glibc's mmap threshold in local worker processes (its largest value, 32 MiB): allocations below
#: it reuse heap memory instead of fresh, zero-filled pages.
WORKER_MMAP_THRESHOLD = 32 * 2**20

#: Scheduler names besides addresses: in-process, a LocalCluster of processes, or of threads.
SCHEDULER_NAMES = ("synchronous", "sync", "local", "threads")


def check_scheduler(scheduler: Any) -> None:
    """Reject a scheduler that is neither a known name, an address nor a client (before any work).

    Parameters
    ----------
    scheduler : str or distributed.Client
        ``"synchronous"``, ``"sync"``, ``"local"``, ``"threads"``, an address ``PROTOCOL://HOST:PORT``
        (tcp, tls, ws, wss, ucx; ``inproc://`` needs no port), or an object with a ``submit`` method.

    Raises
    ------
    EmbstabError
        For any other value.
    """
    if not isinstance(scheduler, str):
        if not hasattr(scheduler, "submit"):
            raise EmbstabError(f"scheduler must be a name, an address or a distributed.Client, got {scheduler!r}")
        return
    if scheduler in SCHEDULER_NAMES:
        return
    usage = ("--scheduler must be 'local', 'threads', 'synchronous' or an address like tcp://HOST:8786 "
             f"(tls://HOST:PORT with TLS), got {scheduler!r}")
    protocol, sep, rest = scheduler.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or protocol not in ("tcp", "tls", "ws", "wss", "inproc", "ucx") or not rest:
        raise EmbstabError(usage)
    if protocol != "inproc" and (not colon or not host or not port.isdigit() or not 0 < int(port) < 65536):
        raise EmbstabError(usage)


@dataclass
class Outcome:
    """What became of one result row: its value, or the error of the task that failed."""

    row_id: str
    value: dict[str, Any] | None = None
    error: StudyTaskError | None = None


@dataclass(frozen=True)
class TaskTiming:
    """How long one task of a plan took where it ran.

    Attributes
    ----------
    key : str
        The task's node key.
    stage : str
        Its stage (``corpus``, ``train``, ``compress``, ``measures``, ``downstream``, ``row``...).
    start : float
        Wall-clock start (``time.time()`` of the process that ran it).
    wall_s : float
        Elapsed seconds.
    cpu_s : float
        CPU seconds of the process that ran it over the same span (all its threads, so a library's
        own threads count; where several tasks share a process, as with the ``threads`` scheduler,
        each task's figure also holds the others' CPU time of that span).
    """

    key: str
    stage: str
    start: float
    wall_s: float
    cpu_s: float


def _timed_call(func: Callable[..., Any], args: list[Any]) -> tuple[Any, Exception | None, float, float, float]:
    """``func(*args)`` → ``(value, error, start, wall_s, cpu_s)``; a failed task's time counts too."""
    start, t0, c0 = time.time(), time.perf_counter(), time.process_time()
    try:
        value, error = func(*args), None
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, which records or re-raises it
        value, error = None, exc
    return value, error, start, time.perf_counter() - t0, time.process_time() - c0


def _timed_task(topic: str, key: str, stage: str, func: Callable[..., Any], *args: Any) -> Any:
    """Run one task on a Dask worker and log its times under ``topic`` (read back by the client)."""
    value, error, start, wall, cpu = _timed_call(func, list(args))
    _log_timing(topic, key, stage, start, wall, cpu)
    if error is not None:
        raise error
    return value


def _log_timing(topic: str, key: str, stage: str, start: float, wall: float, cpu: float) -> None:
    try:
        from distributed import get_worker  # noqa: PLC0415

        get_worker().log_event(topic, {"key": key, "stage": stage, "start": start, "wall_s": wall, "cpu_s": cpu})
    except (ImportError, ValueError):  # not on a Dask worker: nothing to report to
        pass


def _as_task_error(exc: BaseException) -> StudyTaskError:
    if isinstance(exc, StudyTaskError):
        return exc
    # errors raised outside a guarded task (e.g. a worker died, or a scheduler-side failure)
    return StudyTaskError("scheduler", f"{type(exc).__name__}: {exc}", "")


def run_synchronous(plan: StudyPlan, timings: list[TaskTiming] | None = None) -> Iterator[Outcome]:
    """Run every task in this process, in plan order (deterministic; used by tests and debugging).

    Parameters
    ----------
    plan : StudyPlan
        The task graph to run.
    timings : list, optional
        Receives one :class:`TaskTiming` per task that ran (not those an upstream failure skipped).

    Yields
    ------
    Outcome
        One per result row, as soon as its task is done (or failed, or an upstream task failed).
    """
    values: dict[str, Any] = {}
    errors: dict[str, StudyTaskError] = {}
    row_of = {node_key: row_id for row_id, node_key in plan.rows.items()}
    remaining_users = _count_users(plan)
    for key, node in plan.nodes.items():
        failed = next((errors[d] for d in node.deps if d in errors), None)
        if failed is None:
            args = [values[a.key] if isinstance(a, Ref) else a for a in node.args]
            # one failing task must not stop the study: its error fails the rows that need it
            value, error, start, wall, cpu = _timed_call(node.func, args)
            if error is None:
                values[key] = value
            else:
                failed = _as_task_error(error)
            if timings is not None:
                timings.append(TaskTiming(key, node.stage, start, wall, cpu))
        if failed is not None:
            errors[key] = failed
        for d in node.deps:  # drop outputs nobody needs any more (row dicts, measure dicts)
            remaining_users[d] -= 1
            if remaining_users[d] == 0:
                values.pop(d, None)
        if key in row_of:
            yield Outcome(row_of[key], values.pop(key, None), errors.get(key))


def _count_users(plan: StudyPlan) -> dict[str, int]:
    users = {k: 0 for k in plan.nodes}
    for node in plan.nodes.values():
        for d in node.deps:
            users[d] += 1
    return users


def run_distributed(plan: StudyPlan, client: Any, timings: list[TaskTiming] | None = None) -> Iterator[Outcome]:
    """Submit the plan to a Dask distributed ``client`` and yield rows as they complete.

    Task keys are the content-hash node keys, so a task already held by the cluster (for
    example submitted by another client running the same study) is shared rather than recomputed.

    Parameters
    ----------
    plan : StudyPlan
        The task graph to run.
    client : distributed.Client
        A connected client.
    timings : list, optional
        Receives one :class:`TaskTiming` per task that ran, once every row is yielded (each worker
        logs its tasks' times as a Dask event; a task another client's submission ran is not
        among them).

    Yields
    ------
    Outcome
        One per result row, in completion order.
    """
    from distributed import as_completed  # noqa: PLC0415

    futures: dict[str, Any] = {}
    # one topic per run: a shared scheduler keeps other runs' events too
    topic = f"embstab-timings-{uuid.uuid4().hex}"
    for key, node in plan.nodes.items():
        args = [futures[a.key] if isinstance(a, Ref) else a for a in node.args]
        call = (_timed_task, topic, key, node.stage, node.func) if timings is not None else (node.func,)
        futures[key] = client.submit(*call, *args, key=key, pure=False, priority=node.priority, retries=0)
    row_of = {node_key: row_id for row_id, node_key in plan.rows.items()}
    leaves = [futures[k] for k in row_of]
    # Only the leaves are kept alive from here on; the cluster frees intermediate results once
    # their dependants are done.
    futures.clear()
    for fut in as_completed(leaves):
        row_id = row_of[fut.key]
        if fut.status == "finished":
            yield Outcome(row_id, fut.result())
        else:
            try:
                exc = fut.exception()
            except Exception as err:  # noqa: BLE001 - e.g. a cancelled future
                exc = err
            yield Outcome(row_id, None, _as_task_error(exc))
        fut.release()
    if timings is not None:
        timings.extend(_collect_timings(client, topic, len(plan.nodes)))


def _collect_timings(client: Any, topic: str, expected: int, wait_s: float = 1.0) -> list[TaskTiming]:
    """The times the workers logged under ``topic``; waits briefly for events still in flight (a
    worker logs before it reports the task done, so they rarely are; fewer than ``expected``
    arrive when an upstream failure kept tasks from running)."""
    deadline = time.monotonic() + wait_s
    while True:
        events = client.get_events(topic)
        if len(events) >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return [TaskTiming(str(m["key"]), str(m["stage"]), float(m["start"]), float(m["wall_s"]), float(m["cpu_s"]))
            for _, m in events]


def default_workers() -> int:
    """Worker processes for a local cluster: one per usable core, at most one per 2 GiB of RAM.

    Returns
    -------
    int
        At least 1.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        mem_gib = 2.0 * cores
    return max(1, min(cores, int(mem_gib // 2)))


def make_client(scheduler: str, workers: int | None = None) -> tuple[Any, Any]:
    """A Dask client for ``scheduler``; returns ``(client, cluster_or_None)``.

    Parameters
    ----------
    scheduler : str
        ``"local"`` (a LocalCluster of worker processes; the calling script must be guarded by
        ``if __name__ == "__main__":``), ``"threads"`` (a LocalCluster of threads in this process)
        or a scheduler address such as ``"tcp://HOST:8786"``.
    workers : int, optional
        Workers of a local cluster (default :func:`default_workers`); ignored for an address.

    Returns
    -------
    tuple
        ``(client, cluster)``; ``cluster`` is the LocalCluster to close afterwards, or None for an
        address.

    Raises
    ------
    EmbstabError
        An invalid scheduler, a scheduler address that cannot be reached within 10 seconds, or more
        local workers than this machine runs (:func:`embstab._resources.max_local_workers`).
    """
    try:
        from distributed import Client, LocalCluster  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - distributed is a hard dependency
        raise EmbstabError("dask.distributed is required for --scheduler; pip install 'dask[distributed]'") from exc
    if scheduler in ("local", "threads"):
        if workers is not None:
            check_local_workers(workers)  # each worker holds the libraries: more than the machine runs thrash it
        n = workers or default_workers()
        # one thread per worker: the trainers and BLAS parallelise internally, and processes
        # sidestep the GIL for the pure-Python parts (tokenised corpora, result assembly)
        in_process = scheduler == "threads"
        # Threads share this process, whose resident memory (the caller's arrays included) Dask
        # would compare against each worker's share of RAM, pausing every worker for good once it
        # passed 80%: a silent hang. The memory is the caller's to manage, so no limit there.
        # Dask starts worker processes with MALLOC_TRIM_THRESHOLD_=65536, which also freezes glibc's
        # mmap threshold at 128 KiB: every large temporary of a trainer is then mapped, faulted in
        # page by page and unmapped again (measured: a third of a training run's time in the
        # kernel). Larger blocks come from the heap instead; Dask's trimming stays.
        # (glibc reads it once, at process start: it goes in the environment the nanny spawns with)
        import dask  # noqa: PLC0415

        spawn_env = {"distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": str(WORKER_MMAP_THRESHOLD)}
        # No dashboard; the scheduler's HTTP server (health and metrics routes) still starts, and on
        # its default port 8787 it met any other cluster there with a four-line UserWarning ("Port
        # 8787 is already in use ..."). Port 0 lets the system pick a free one, so there is nothing
        # to warn about; a warning of the same kind from elsewhere in Dask is silenced too.
        with dask.config.set(spawn_env), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=not in_process,
                                   memory_limit=0 if in_process else "auto", dashboard_address=None,
                                   scheduler_kwargs={"dashboard_address": ":0"}, silence_logs=40)
        return Client(cluster), cluster
    check_scheduler(scheduler)
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise EmbstabError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    if not client.scheduler_info().get("workers"):
        # otherwise the study would just sit there with no sign of why
        warnings.warn(f"the Dask scheduler at {scheduler} has no workers yet; the study's tasks "
                      "wait until one connects (start them with `dask worker " + scheduler + "`)",
                      stacklevel=2)
    return client, None

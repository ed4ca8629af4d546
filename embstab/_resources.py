"""What this machine can hold: usable cores and available memory, and the checks that use them.

A size a user asks for (an embedding dimension, negatives per positive, worker processes) is
checked against the machine before anything is allocated, so that a typo such as ``--dim
1000000000`` is one line naming the setting, not minutes of swapping, an out-of-memory kill or
a traceback from deep inside torch.
"""

from __future__ import annotations

import os
import resource

from embstab.errors import EmbstabError, InsufficientMemoryError

__all__ = ["usable_cores", "idle_cores", "available_memory", "format_bytes", "check_memory", "WORKER_MEMORY",
           "max_local_workers", "check_local_workers"]

#: Memory one local study worker process holds before it computes anything (Python, numpy,
#: torch, gensim and Dask imported: about 250 MB measured), with room for a small row's data.
WORKER_MEMORY = 512 * 2**20


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity; all of the machine's where unknown).

    Returns
    -------
    int
        At least 1.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def idle_cores() -> int:
    """Usable cores that other jobs are not keeping busy: all of them on an idle machine, 1 on a busy one.

    The one-minute load average counts the runnable jobs; what it leaves of :func:`usable_cores`
    (rounded, at least 1) is what torch's OpenMP threads can have to themselves. Threads beyond it
    wait for each other at every barrier while their cores run other jobs: a 2-layer BERT step cost
    4x the CPU on 2 threads as on 1 with the load average at 10 on 2 cores.

    Returns
    -------
    int
        Between 1 and :func:`usable_cores`.
    """
    cores = usable_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not on a Unix
        return cores
    return max(1, min(cores, cores - int(load + 0.5)))


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _cgroup_available() -> int | None:
    """Room left under this process's cgroup memory limit (v2, else v1), or None without a limit."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit = _read_int(limit_file)
        if limit is not None and limit < 2**60:  # v1 reports "no limit" as a huge number
            return max(0, limit - (_read_int(usage_file) or 0))
    return None


def _address_space_available() -> int | None:
    """Room left under ``RLIMIT_AS`` (``ulimit -v``), or None without a limit."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - used)


def available_memory() -> int | None:
    """Bytes this process can still allocate: the least of the system's available memory, the room
    under its cgroup limit and the room under its address-space limit.

    Returns
    -------
    int or None
        Bytes, or None where nothing can be found out (then no check refuses anything).
    """
    known = [m for m in (_meminfo_available(), _cgroup_available(), _address_space_available()) if m is not None]
    return min(known) if known else None


def format_bytes(n: float) -> str:
    """``n`` bytes in words: ``"512 B"``, ``"3.2 GiB"``, ``"7.5 PiB"``.

    Parameters
    ----------
    n : float
        A number of bytes.

    Returns
    -------
    str
        The size with a binary unit.
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_memory(nbytes: float, what: str, advice: str = "") -> None:
    """Refuse a computation whose estimated size exceeds the memory available now.

    Parameters
    ----------
    nbytes : float
        The estimated peak of the computation, in bytes.
    what : str
        What needs it, naming the settings that decide the size (``"TransE with dim=10^9 ..."``).
    advice : str, optional
        Which settings to lower.

    Raises
    ------
    InsufficientMemoryError
        If ``nbytes`` is more than :func:`available_memory`.
    """
    available = available_memory()
    if available is not None and nbytes > available:
        raise InsufficientMemoryError(f"{what} needs about {format_bytes(nbytes)}, more than the "
                                      f"{format_bytes(available)} of memory available"
                                      + (f"; {advice}" if advice else ""))


def max_local_workers() -> int:
    """The most worker processes a local study cluster may start here: one per usable core, and
    no more than the available memory holds at :data:`WORKER_MEMORY` each.

    Returns
    -------
    int
        At least 1.
    """
    available = available_memory()
    by_memory = usable_cores() if available is None else available // WORKER_MEMORY
    return max(1, min(usable_cores(), int(by_memory)))


def check_local_workers(workers: int) -> int:
    """Refuse more local workers than :func:`max_local_workers`.

    Parameters
    ----------
    workers : int
        The number asked for.

    Returns
    -------
    int
        ``workers``, when it fits.

    Raises
    ------
    EmbstabError
        If ``workers`` is more than this machine runs (the message says why and the maximum).
    """
    limit = max_local_workers()
    if workers > limit:
        available = available_memory()
        memory = "" if available is None else f" and {format_bytes(available)} of available memory"
        raise EmbstabError(f"{workers} workers are more than this machine runs: it has {usable_cores()} usable "
                           f"core(s){memory} (a worker takes {format_bytes(WORKER_MEMORY)}); use at most {limit}")
    return workers

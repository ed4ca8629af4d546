"""What this machine can hold: usable cores and available memory, and the checks that use them.

A size a user asks for (an embedding dimension, negatives per positive, worker processes) is
checked against the machine before anything is allocated, so that a typo such as ``--dim
1000000000`` is one line naming the setting, not minutes of swapping, an out-of-memory kill or
a traceback from deep inside torch.

A file a user hands embstab is weighed the same way: :func:`check_read_cost` refuses a file whose
header implies more memory or work than a fixed multiple of the file's own size
(:data:`READ_BYTES_PER_BYTE`, :data:`READ_OPS_PER_BYTE`) plus a constant allowance, so a small
hostile file cannot name a huge matrix; :func:`read_regular_file` reads a file whose size bounds
the read, and refuses devices and pipes (``/dev/zero`` never ends).
"""

from __future__ import annotations

import errno
import os
import resource
import stat

from embstab.errors import DataFormatError, EmbstabError, InsufficientMemoryError

__all__ = ["usable_cores", "idle_cores", "available_memory", "format_bytes", "check_memory", "WORKER_MEMORY",
           "max_local_workers", "check_local_workers", "READ_BYTES_PER_BYTE", "READ_OPS_PER_BYTE",
           "READ_BYTES_ALLOWANCE", "READ_OPS_ALLOWANCE", "read_budget", "check_read_cost", "regular_file_size",
           "read_regular_file"]

#: Memory one local study worker process holds before it computes anything (Python, numpy,
#: torch, gensim and Dask imported: about 250 MB measured), with room for a small row's data.
WORKER_MEMORY = 512 * 2**20

#: Bytes of memory reading a file may take per byte of the file. Decoding expands: a 1-bit code
#: becomes a 4-byte float (32x), and a tensor train's rows are far larger than its cores (a
#: 300-d row is 1,200 bytes against a dozen bytes of vocabulary); 1024 leaves room for every
#: file embstab writes and still bounds what a hostile header can ask for.
READ_BYTES_PER_BYTE = 1024
#: Elementary operations (multiply-adds, butterflies, table lookups) reading may take per byte of
#: the file: rebuilding a random orthogonal rotation and applying it costs ``d^3 + n d^2`` for
#: ``n d`` codes, 8192 per byte for 1-bit 1024-d codes.
READ_OPS_PER_BYTE = 1 << 14
#: What reading any file may take besides its share: 64 MiB and 2**31 operations (a second or two
#: of one core), so small files of every kind read, whatever their proportions.
READ_BYTES_ALLOWANCE = 64 * 2**20
READ_OPS_ALLOWANCE = 1 << 31


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


def read_budget(file_size: int) -> tuple[int, int]:
    """The most memory and work reading a file of ``file_size`` bytes may take.

    Parameters
    ----------
    file_size : int
        Bytes of the file.

    Returns
    -------
    (int, int)
        ``READ_BYTES_PER_BYTE * file_size + READ_BYTES_ALLOWANCE`` bytes and
        ``READ_OPS_PER_BYTE * file_size + READ_OPS_ALLOWANCE`` operations.
    """
    size = max(0, int(file_size))
    return READ_BYTES_PER_BYTE * size + READ_BYTES_ALLOWANCE, READ_OPS_PER_BYTE * size + READ_OPS_ALLOWANCE


def check_read_cost(path: str | os.PathLike, key: str, file_size: int, nbytes: float, ops: float, what: str,
                    *, error: type[DataFormatError] = DataFormatError) -> None:
    """Refuse to read a file whose header implies more than :func:`read_budget` of its size allows.

    A reader estimates, from the sizes its header declares and before it allocates anything, the
    peak memory (its result included) and the operations reading will take. Reading a file
    therefore costs at most ``READ_BYTES_PER_BYTE`` (1024) bytes of memory and
    ``READ_OPS_PER_BYTE`` (16384) operations per byte of the file, plus ``READ_BYTES_ALLOWANCE``
    (64 MiB) and ``READ_OPS_ALLOWANCE`` (2**31); more means the header is corrupt or hostile (a
    512 KB file cannot honestly describe a 16384 x 16384 matrix). Within that bound, the memory is
    also checked against what this machine has (:func:`check_memory`).

    Parameters
    ----------
    path : str or os.PathLike
        The file, named in the message.
    key : str
        The header key (or field) that decides the size, named in the message.
    file_size : int
        Bytes of the file.
    nbytes : float
        Estimated peak memory of reading it, in bytes.
    ops : float
        Estimated operations.
    what : str
        What the header describes, in words (``"a 16384-d orthogonal rotation of 128 rows"``).
    error : type, default DataFormatError
        The :class:`~embstab.errors.DataFormatError` subclass to raise (the file format's own).

    Raises
    ------
    DataFormatError
        (or ``error``) In one line naming the file and the key, if the estimate exceeds the budget.
    InsufficientMemoryError
        If it fits the budget but not the memory available now.
    """
    mem_cap, ops_cap = read_budget(file_size)
    if nbytes > mem_cap or ops > ops_cap:
        raise error(path, f"header key {key!r}: {what} would take about {format_bytes(nbytes)} of memory and "
                          f"{ops:.3g} operations to read, more than reading a {format_bytes(file_size)} file may take "
                          f"({format_bytes(mem_cap)} and {ops_cap:.3g} operations: {READ_BYTES_PER_BYTE} bytes and "
                          f"{READ_OPS_PER_BYTE} operations per byte, plus "
                          f"{format_bytes(READ_BYTES_ALLOWANCE)} and {READ_OPS_ALLOWANCE:.3g}); the header is "
                          "corrupt or was made to exhaust memory")
    check_memory(nbytes, f"reading {os.fspath(path)} ({what})")


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a pipe (FIFO)"),
          (stat.S_ISSOCK, "a socket"))


def _open_regular(path: str | os.PathLike, what: str, error: type[DataFormatError]):
    """Open ``path`` for reading without blocking; refuse what is not a regular file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "a special file")
            raise error(path, f"is {kind}, not a regular {what}: embstab reads only files whose size bounds the read")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb"), st.st_size


def regular_file_size(path: str | os.PathLike, what: str = "file", *,
                      error: type[DataFormatError] = DataFormatError) -> int:
    """The size of a regular file; devices, pipes and sockets are refused without reading a byte.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    what : str, default "file"
        What the file should hold, for the message (``"triples file"``).
    error : type, default DataFormatError
        The :class:`~embstab.errors.DataFormatError` subclass to raise.

    Returns
    -------
    int
        Bytes.

    Raises
    ------
    DataFormatError
        (or ``error``) In one line naming the file, if it is not a regular file.
    IsADirectoryError
        If it is a directory.
    OSError
        If it cannot be opened (``FileNotFoundError`` when it does not exist).
    """
    fh, size = _open_regular(path, what, error)
    fh.close()
    return size


def read_regular_file(path: str | os.PathLike, what: str = "file", *,
                      error: type[DataFormatError] = DataFormatError) -> bytes:
    """The bytes of a regular file, read up to the size it had when opened.

    Devices, pipes and sockets are refused before a byte is read: their size does not bound the
    read (``/dev/zero`` never ends, a FIFO waits for a writer). The file is opened without
    blocking and checked through its open descriptor, so it cannot be swapped in between.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    what : str, default "file"
        What the file should hold, for the message (``"compressed embedding file"``).
    error : type, default DataFormatError
        The :class:`~embstab.errors.DataFormatError` subclass to raise.

    Returns
    -------
    bytes
        At most the file's size when opened.

    Raises
    ------
    DataFormatError
        (or ``error``) In one line naming the file, if it is not a regular file.
    IsADirectoryError
        If it is a directory.
    OSError
        If it cannot be opened (``FileNotFoundError`` when it does not exist).
    """
    fh, size = _open_regular(path, what, error)
    with fh:
        return fh.read(size)

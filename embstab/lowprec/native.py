"""The compiled CPU rounding kernel (``csrc/quantize_cpu.c``), called through :mod:`ctypes`.

Rounding float32 CPU tensors onto a :class:`~embstab.lowprec.FloatFormat` with torch operations
takes about ten passes over memory; the kernel takes one, vectorised for the processor it runs on
(AVX-512, AVX2 or SSE2, chosen at load time). :func:`embstab.lowprec.quantize` uses it by default
wherever it applies (float32 CPU tensors, formats within float32's range, nearest-even or exact
stochastic rounding) and torch everywhere else.

Nearest rounding is bit-identical to the torch path. Stochastic rounding draws its randomness
from a counter-based stream, splitmix64 of a seed and each element's index, the same stream as the
CUDA kernel: a seed gives the same result on CPU and GPU and for any number of threads. The seed
is one draw from the caller's generator, so ``generator=`` keeps results reproducible.

Large tensors are split into blocks that several threads take from a shared counter. The threads
are torch's own OpenMP team where torch runs one (GNU OpenMP on Linux): right after a torch op its
workers keep spinning for work, and a thread of ours would share a core with one of them. Elsewhere,
in a forked child (where OpenMP cannot be used again), or with ``EMBSTAB_NATIVE_THREADS=pool``, a
thread pool of this module does the same. Either way ``torch.get_num_threads()`` threads at most.

The kernel is built when embstab is installed (a C compiler is needed; without one, or with
``EMBSTAB_NATIVE=0`` in the environment, everything runs on torch).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from functools import lru_cache
from types import SimpleNamespace

import torch

from embstab._ckernels import load_kernel
from embstab.lowprec.formats import FloatFormat

__all__ = ["available", "why_unavailable", "applies", "quantize_float32", "disabled"]

_MODE = {"nearest": 0, "stochastic": 1}
_OVERFLOW = {"saturate": 0, "inf": 1, "nan": 2}
#: Below this many elements one thread does the work (a thread hand-off costs more than it saves).
_PARALLEL_MIN = 1 << 16
#: Work is handed out in blocks of at least this many elements (a multiple of the kernel's chunk).
_BLOCK = 1 << 15
_ENABLED: ContextVar[bool] = ContextVar("embstab_native_enabled", default=True)


_FORMAT_ARGS = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.c_int, ctypes.c_uint64]


@lru_cache(maxsize=1)
def _load() -> tuple[SimpleNamespace | None, str | None]:
    return load_kernel("embstab.lowprec._quantize_cpu", {
        "embstab_quantize_float32": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
                                     + _FORMAT_ARGS),
        "embstab_quantize_job": (None, [ctypes.c_void_p]),
    })


def why_unavailable() -> str | None:
    """Why the kernel cannot be used here, or None when it can.

    Returns
    -------
    str or None
        A one-line reason (not built, not loadable, or disabled by ``EMBSTAB_NATIVE=0``).
    """
    return _load()[1]


def available() -> bool:
    """True when the compiled kernel is loaded and enabled.

    Returns
    -------
    bool
        Whether :func:`embstab.lowprec.quantize` may use the compiled CPU kernel here.
    """
    return _load()[0] is not None and _ENABLED.get()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within this block :func:`embstab.lowprec.quantize` rounds with torch operations only.

    Useful to reproduce results made with torch's random stream, or to time the two paths.
    The switch is a context variable: it affects only the current thread or task.

    Yields
    ------
    None
    """
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def applies(x: torch.Tensor, fmt: object, rounding: str) -> bool:
    """Whether :func:`quantize_float32` handles this input, format and rounding.

    Parameters
    ----------
    x : torch.Tensor
        The work tensor.
    fmt : Format
        A resolved format.
    rounding : str
        A canonical rounding name.

    Returns
    -------
    bool
        True for float32 CPU tensors, float formats within float32's range, nearest-even or exact
        stochastic rounding, with the kernel available.
    """
    return (isinstance(fmt, FloatFormat) and rounding in _MODE and x.dtype == torch.float32
            and x.device.type == "cpu" and fmt.within_float32 and available())


class _Job(ctypes.Structure):
    # mirrors embstab_job_t in csrc/quantize_cpu.c
    _fields_ = [("x", ctypes.c_void_p), ("y", ctypes.c_void_p), ("n", ctypes.c_int64), ("block", ctypes.c_int64),
                ("next", ctypes.c_int64), ("man_bits", ctypes.c_int), ("emin", ctypes.c_int),
                ("subnormals", ctypes.c_int), ("vmax", ctypes.c_float), ("overflow", ctypes.c_int),
                ("has_inf", ctypes.c_int), ("fnuz", ctypes.c_int), ("mode", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("status", ctypes.c_int)]


def _openmp_runtime() -> str | None:
    # the GNU OpenMP runtime torch loaded (Linux): its worker threads are the ones that keep
    # spinning after every parallel torch op; other wheels may bundle a copy of their own
    found: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if os.path.basename(path).startswith("libgomp") and ".so" in path and path not in found:
                    found.append(path)
    except OSError:
        return None
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    return next((p for p in found if p.startswith(torch_dir)), found[0] if found else None)


_FORKED_CHILD = False


def _after_fork_in_child() -> None:
    # GNU OpenMP does not survive fork: a child inherits the parent's team bookkeeping without its
    # threads, and a parallel region there waits forever. Children use a thread pool of their own.
    global _FORKED_CHILD
    _FORKED_CHILD = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _gomp_parallel() -> Callable | None:
    if _FORKED_CHILD or os.environ.get("EMBSTAB_NATIVE_THREADS") == "pool":
        return None
    return _load_gomp_parallel()


@lru_cache(maxsize=1)
def _load_gomp_parallel() -> Callable | None:
    path = _openmp_runtime()  # libtorch links it: mapped once torch is imported
    if path is None:
        return None
    try:
        fn = ctypes.CDLL(path).GOMP_parallel  # the ABI of `#pragma omp parallel` (GCC >= 4.9)
    except (OSError, AttributeError):
        return None
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
    return fn


_POOL: dict[int, ThreadPoolExecutor] = {}


def _pool() -> ThreadPoolExecutor:
    # one pool per process: a forked child (a DataLoader worker, say) inherits the parent's pool
    # object but not its threads, and work submitted to it would never run
    pid = os.getpid()
    if pid not in _POOL:
        _POOL.clear()
        _POOL[pid] = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1),
                                        thread_name_prefix="embstab-quantize")
    return _POOL[pid]


def quantize_float32(x: torch.Tensor, fmt: FloatFormat, rounding: str, seed: int = 0) -> torch.Tensor:
    """Round a float32 CPU tensor onto ``fmt`` in one pass (a new tensor of the same shape).

    Parameters
    ----------
    x : torch.Tensor
        float32 values on the CPU (any layout; a non-contiguous tensor is copied first).
    fmt : FloatFormat
        A format within float32's range (:attr:`FloatFormat.within_float32`).
    rounding : {"nearest", "stochastic"}
        Round half to even, or exact stochastic rounding.
    seed : int, default 0
        Seed of the counter-based stream (stochastic rounding only), in ``[0, 2**64)``.

    Returns
    -------
    torch.Tensor
        The rounded values, float32, contiguous.

    Raises
    ------
    ValueError
        For a format, rounding, dtype or device the kernel does not handle.
    """
    lib, why = _load()
    if lib is None:
        raise ValueError(f"the compiled rounding kernel is unavailable: {why}")
    if not (isinstance(fmt, FloatFormat) and fmt.within_float32):
        raise ValueError(f"the compiled rounding kernel handles float formats within float32's range, not {fmt}")
    if rounding not in _MODE:
        raise ValueError(f"the compiled rounding kernel rounds to nearest or stochastically, not {rounding!r}")
    if x.dtype != torch.float32 or x.device.type != "cpu":
        raise ValueError(f"the compiled rounding kernel takes float32 CPU tensors, not {x.dtype} on {x.device}")
    x = x.contiguous()
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    n = x.numel()
    args = (fmt.man_bits, fmt.emin, int(fmt.subnormals), float(fmt.max), _OVERFLOW[fmt.overflow],
            int(fmt.has_inf), int(fmt.specials == "fnuz"), _MODE[rounding], int(seed) % 2**64)
    src, dst = x.data_ptr(), y.data_ptr()

    parts = max(1, min(torch.get_num_threads(), math.ceil(n / _PARALLEL_MIN)))
    if parts == 1:
        if lib.embstab_quantize_float32(src, dst, 0, n, *args) != 0:
            raise ValueError("the compiled rounding kernel rejected its arguments")
        return y
    # the parts take blocks from one shared counter: a thread slowed by a busy core takes fewer
    # blocks instead of holding up the call
    block = max(_BLOCK, -(-n // (8 * parts)) // _BLOCK * _BLOCK)
    job = _Job(src, dst, n, block, 0, *args, 0)
    omp = _gomp_parallel()
    if omp is not None:
        # torch's OpenMP workers spin for a while after each torch op: a thread of our own would
        # share a core with one of them and run at half speed (measured: no overlap at all in
        # most calls right after a torch op), so the job runs on that same team instead
        omp(ctypes.cast(lib.embstab_quantize_job, ctypes.c_void_p), ctypes.byref(job), parts, 0)
    else:
        # ctypes releases the GIL for each call, so the pool's threads and this one run together
        futures = [_pool().submit(lib.embstab_quantize_job, ctypes.byref(job)) for _ in range(parts - 1)]
        lib.embstab_quantize_job(ctypes.byref(job))
        for f in futures:
            f.result()
    if job.status != 0:
        raise ValueError("the compiled rounding kernel rejected its arguments")
    return y

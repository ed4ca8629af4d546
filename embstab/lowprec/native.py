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

The kernel is built when embstab is installed (a C compiler is needed; without one, or with
``EMBSTAB_NATIVE=0`` in the environment, everything runs on torch).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from functools import lru_cache

import torch

from embstab.lowprec.formats import FloatFormat

__all__ = ["available", "why_unavailable", "applies", "quantize_float32", "disabled"]

_MODE = {"nearest": 0, "stochastic": 1}
_OVERFLOW = {"saturate": 0, "inf": 1, "nan": 2}
#: Below this many elements one thread does the work (a thread hand-off costs more than it saves).
_PARALLEL_MIN = 1 << 16
_ENABLED: ContextVar[bool] = ContextVar("embstab_native_enabled", default=True)


@lru_cache(maxsize=1)
def _load() -> tuple[ctypes.CDLL | None, str | None]:
    if os.environ.get("EMBSTAB_NATIVE", "1") == "0":
        return None, "disabled by EMBSTAB_NATIVE=0"
    spec = importlib.util.find_spec("embstab.lowprec._quantize_cpu")
    if spec is None or not spec.origin:
        return None, "the compiled kernel was not built (reinstall embstab with a C compiler available)"
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError as exc:
        return None, f"the compiled kernel at {spec.origin} cannot be loaded: {exc}"
    fn = lib.embstab_quantize_float32
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                   ctypes.c_int, ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                   ctypes.c_uint64]
    return lib, None


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

    def run(lo: int, hi: int) -> None:
        # ctypes releases the GIL for the call, so the parts run in parallel
        if lib.embstab_quantize_float32(src, dst, lo, hi, *args) != 0:
            raise ValueError("the compiled rounding kernel rejected its arguments")

    parts = max(1, min(torch.get_num_threads(), math.ceil(n / _PARALLEL_MIN)))
    if parts == 1:
        run(0, n)
        return y
    step = -(-n // parts)
    step += -step % 4096  # whole kernel chunks per part (results depend on element indices only)
    # the calling thread takes the first part itself: one hand-off fewer per call
    futures = [_pool().submit(run, lo, min(n, lo + step)) for lo in range(step, n, step)]
    run(0, min(n, step))
    for f in futures:
        f.result()
    return y

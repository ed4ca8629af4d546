"""Array-API plumbing shared by every measure: namespace lookup, validation, blocked products, spans.

Each measure is written once against the array API (numpy, torch on CPU or CUDA, cupy). Two
ideas keep them exact, fast and lean at n = 400,000 words:

* every measure needs only small cross products (XᵀY, XᵀE... of size d×k), accumulated over row
  blocks in the working precision (float64 by default), so inputs stay in their own dtype and,
  on the host, no n-sized float64 copy is ever made (on a GPU with room for it, a float32 input
  is cast whole once per suite instead: see :func:`working`);
* a column span is represented implicitly, ``U = X @ W`` with a small d×r matrix ``W``, so
  products such as ``UᵀŨ = Wᵀ (XᵀY) W̃`` need no n×d basis either.

The only backend-specific primitives are :func:`topk` (with a compiled selection for numpy) and
the R-only QR in :func:`span`, because the standard has neither a partial sort nor ``mode="r"``,
the triangular inverse of :func:`basis`, torch's row norms on a GPU (:func:`row_norms`), and,
for numpy only, the row split of :func:`split_rows` (one single-threaded BLAS call per core,
which holds its speed on cores shared with other jobs where a multithreaded call does not).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np

from embstab._numbers import is_real
from embstab.errors import ConfigError, ShapeError
from embstab.measures import _native

__all__ = ["shared_products", "namespace", "as_float", "check_matrix", "checked_sketch", "check_pair", "cross",
           "crosses", "column_mean", "Span", "span", "topk", "sq_norm", "row_blocks", "Basis", "basis",
           "basis_overlap", "split_rows", "split_rows_each", "grams", "one_blas_thread", "rows_matmul", "on_gpu",
           "working", "row_norms", "alongside"]

_DTYPES = ("float64", "float32")

#: Bytes of working-precision data per row block (bounds the transient memory of every measure).
BLOCK_BYTES = 64 * 2**20

#: The same for arrays on a GPU, whose products must be large to run near its rate. XᵀE over
#: 400,000 rows at d = 800 on an H200: 14.0 ms in 64 MB blocks each cast where used, 9.6 ms in
#: 1 GiB blocks of a float64 copy (:func:`working`), 9.5 ms as one product.
DEVICE_BLOCK_BYTES = 2**30

#: On a GPU, an input stored in another precision than the working one is cast whole (see
#: :func:`working`) when the copy takes at most this share of the device's free memory.
DEVICE_COPY_SHARE = 0.25

#: Above this many matrix entries the span always comes from the Gram matrix (no n×d copy).
QR_MAX_ENTRIES = 40_000_000

#: ``auto`` keeps the Gram-matrix span when cond(X) is at most this: its relative error is then
#: about eps·cond² ≲ 1e-10. Worse-conditioned inputs fall back to a Householder QR.
GRAM_MAX_COND = 1e3


#: A float32 span is computed only where float32 resolves singular values down to this fraction
#: of the largest (inputs under 840 rows through the Gram matrix, 84,000 through the QR); elsewhere
#: any X with cond(X) above 1/this would be truncated, so the span is computed in float64 at once.
FLOAT32_SPAN_RESOLUTION = 1e-2

#: Below this ratio of a measure's value to the terms it is the difference of, a float32 result
#: is not trusted to 1e-3 and the pair is measured again in float64 (measured on numpy and torch:
#: float32 relative error ≤ 1e-7 · size/value, so at the threshold it stays under about 1e-4). EIS,
#: PIP loss and the Procrustes distance are such differences.
FLOAT32_TRUST = 1e-3

_MEMO: ContextVar[dict | None] = ContextVar("embstab_measure_memo", default=None)


@contextlib.contextmanager
def shared_products():
    """Within this block, measures share spans and cross products of the same input arrays.

    :func:`embstab.compare` evaluates several measures on one pair: EIS, eigenspace overlap, PIP
    and semantic displacement all need XᵀY or the spans of X and Y, so they are computed once.
    The arrays must not be modified in place inside the block (entries are keyed by identity and
    hold a reference, so an identity is never reused).
    """
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def _memoized(key: tuple, arrays: tuple, compute):
    memo = _MEMO.get()
    if memo is None:
        return compute()
    full_key = (*key, *(id(a) for a in arrays))
    hit = memo.get(full_key)
    if hit is None:
        hit = memo[full_key] = (arrays, compute())
    return hit[1]


def namespace(*arrays: Any):
    """The array-API namespace of the inputs (all must come from the same library)."""
    try:
        return array_api_compat.array_namespace(*arrays)
    except TypeError as exc:
        raise ShapeError(f"inputs must be numpy, torch or cupy arrays of one library: {exc}") from None


def dtype_name(dtype: Any) -> str:
    """The working precision's name, ``"float64"`` (the default) or ``"float32"``; anything else is refused."""
    name = dtype or "float64"
    if not isinstance(name, str) or name not in _DTYPES:
        raise ConfigError(f"dtype must be 'float64' or 'float32' (a string), got {dtype!r}")
    return name


def check_rtol(rtol: Any) -> None:
    """Refuse a rank tolerance that is not None or a number in [0, 1)."""
    if rtol is not None and (not is_real(rtol)
                             or not 0 <= rtol < 1):
        raise ConfigError(f"rtol must be a number in [0, 1) (the share of the largest singular value below "
                          f"which a direction counts as rank deficiency) or None, got {rtol!r}")


def as_float(xp, x: Any, dtype: str | None):
    """``x`` cast to float64 (default) or float32, on its own device (no copy if it already is)."""
    target = getattr(xp, dtype_name(dtype))
    return x if x.dtype == target else xp.astype(x, target)


def on_gpu(x: Any) -> bool:
    """Whether ``x`` lives on a GPU (a CUDA torch tensor or a cupy array)."""
    if array_api_compat.is_torch_array(x):
        return x.device.type != "cpu"
    return bool(array_api_compat.is_cupy_array(x))


def _device_free_bytes(x: Any) -> int:
    """Bytes the device of ``x`` can still allocate: free on the device plus the library's cache."""
    if array_api_compat.is_torch_array(x):
        import torch  # noqa: PLC0415

        free, _ = torch.cuda.mem_get_info(x.device)
        return int(free + torch.cuda.memory_reserved(x.device) - torch.cuda.memory_allocated(x.device))
    import cupy  # noqa: PLC0415

    return int(cupy.cuda.runtime.memGetInfo()[0] + cupy.get_default_memory_pool().free_bytes())


def working(xp, x: Any, dtype: str | None):
    """``x`` cast whole to the working precision if it lives on a GPU with room for it, else ``x``.

    Every product over the rows casts its row blocks to the working precision; on a GPU, where
    memory is plentiful and a cast costs as much as a fast product, a float32 input used by
    several products (X in XᵀX, XᵀY, XᵀE, the k-NN scan...) is cast once instead: inside
    :func:`shared_products` the copy is shared by every measure of the suite. On the host, where
    the inputs can be millions of rows, only blocks are ever cast.
    """
    target = getattr(xp, dtype_name(dtype))
    if x.dtype == target or not on_gpu(x) or int(x.shape[0]) * int(x.shape[1]) < 2**16:
        return x  # (a small array is cheaper to cast where it is used, in one block)
    need = int(x.shape[0]) * int(x.shape[1]) * (8 if target == xp.float64 else 4)
    if need > DEVICE_COPY_SHARE * _device_free_bytes(x):
        return x
    return _memoized(("working", dtype or "float64"), (x,), lambda: xp.astype(x, target))


def check_matrix(xp, x: Any, what: str) -> None:
    """Raise :class:`ShapeError` unless ``x`` is a non-empty 2-D real array of finite values.

    Inside :func:`shared_products` an array that passed is not scanned again by the next measure.
    """
    memo = _MEMO.get()
    if memo is not None and memo.get(("checked", id(x)), (None,))[0] is x:
        return
    _check_matrix(xp, x, what)
    if memo is not None:
        memo[("checked", id(x))] = (x, True)


def checked_sketch(xp, x: Any, what: str, dtype: str | None = None):
    """:func:`check_matrix` and a fingerprint of ``x``'s content in one pass: ``wᵀ x`` (1×d).

    The weights ``wᵢ = frac(i·φ) − ½`` (φ the golden ratio's conjugate, i the row) differ from row
    to row, so an in-place edit of any entries changes the sketch, where a column sum misses
    changes that cancel within a column; a NaN or Inf propagates through any weight. Only when the
    sketch is not finite (or a weighted sum of finite values overflowed) are the entries scanned
    again to say which is wrong. A matrix-vector product, it reads ``x`` faster than a column sum.
    """
    _check_shape(xp, x, what)
    source = working(xp, x, dtype)

    def rows(lo: int, hi: int):
        out, start = None, lo
        for block in row_blocks(source[lo:hi]):
            block = as_float(xp, block, dtype)
            index = xp.arange(start, start + block.shape[0], dtype=xp.float64, device=array_api_compat.device(block))
            weights = xp.reshape(as_float(xp, (index * _WEYL) % 1.0 - 0.5, dtype), (1, -1))
            part = weights @ block
            out = part if out is None else out + part
            start += block.shape[0]
        return out

    with np.errstate(over="ignore", invalid="ignore"):  # (what does not stay finite is checked below)
        total = summed(split_rows(rows, source))  # numpy: a pass over memory on every core
    if not bool(xp.all(xp.isfinite(total))):
        _check_matrix(xp, x, what)
    memo = _MEMO.get()
    if memo is not None:
        memo[("checked", id(x))] = (x, True)
    return total


#: The golden ratio's conjugate, (√5 − 1)/2: ``frac(i·φ)`` spreads the rows' weights over [0, 1).
_WEYL = (math.sqrt(5.0) - 1.0) / 2.0


def _check_matrix(xp, x: Any, what: str) -> None:
    _check_shape(xp, x, what)
    for block in row_blocks(x):
        # a sum reads the block once and is finite when every entry is (a NaN or Inf propagates);
        # only when it is not (or a sum of finite values overflowed) are the entries tested
        with np.errstate(over="ignore", invalid="ignore"):  # numpy warns of what is then tested
            total = float(xp.sum(block))
        if not math.isfinite(total) and not bool(xp.all(xp.isfinite(block))):
            raise ShapeError(f"{what} contains NaN or Inf")


def _check_shape(xp, x: Any, what: str) -> None:
    if x.ndim != 2:
        raise ShapeError(f"{what} must be a 2-D (n_words, dim) array, got shape {tuple(x.shape)}")
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ShapeError(f"{what} is empty (shape {tuple(x.shape)})")
    if not xp.isdtype(x.dtype, "real floating"):
        raise ShapeError(f"{what} must hold real floating-point numbers, got {x.dtype}")


def check_pair(x: Any, y: Any, names: tuple[str, str] = ("X", "Y"), same_dim: bool = False):
    """Validate two row-aligned matrices; returns their namespace."""
    xp = namespace(x, y)
    check_matrix(xp, x, names[0])
    check_matrix(xp, y, names[1])
    if x.shape[0] != y.shape[0]:
        raise ShapeError(f"{names[0]} and {names[1]} must be row-aligned: {x.shape[0]} vs {y.shape[0]} rows")
    if same_dim and x.shape[1] != y.shape[1]:
        raise ShapeError(f"this measure needs equal dimensions: {names[0]} is {x.shape[1]}-d, "
                         f"{names[1]} is {y.shape[1]}-d")
    if array_api_compat.device(x) != array_api_compat.device(y):
        raise ShapeError(f"{names[0]} and {names[1]} are on different devices")
    return xp


def row_blocks(*arrays: Any):
    """Row slices of the arrays (same rows) small enough for :data:`BLOCK_BYTES` in float64.

    Yields one slice, or a tuple of slices when several arrays are given.
    """
    n = arrays[0].shape[0]
    width = sum(a.shape[1] for a in arrays)
    rows = max(1, (DEVICE_BLOCK_BYTES if on_gpu(arrays[0]) else BLOCK_BYTES) // (8 * max(width, 1)))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        parts = tuple(a[start:stop] for a in arrays)
        yield parts if len(parts) > 1 else parts[0]


def cross(xp, a: Any, b: Any, dtype: str | None):
    """``aᵀ b`` in the working precision, accumulated over row blocks."""
    return _memoized(("cross", dtype or "float64"), (a, b), lambda: _cross(xp, a, b, dtype))


#: :func:`crosses` stacks its left operands into one product when they have at most this many
#: columns together: a product with few output rows runs well below the GEMM rate (on 2 cores,
#: Xᵀ E with a 100-d X at 61 GFLOP/s, [X Y]ᵀ E at 82), while wide ones gain nothing from the copy.
STACK_MAX_COLUMNS = 256


def crosses(xp, lefts: list, right: Any, dtype: str | None) -> list:
    """``[aᵀ right for a in lefts]``, as :func:`cross` gives them, in one product when narrow.

    Inside :func:`shared_products` each result is remembered as :func:`cross` remembers it.
    """
    memo = _MEMO.get()
    key = ("cross", dtype or "float64")
    missing = [a for a in lefts if memo is None or (*key, id(a), id(right)) not in memo]
    if len(missing) < 2 or sum(int(a.shape[1]) for a in missing) > STACK_MAX_COLUMNS:
        return [cross(xp, a, right, dtype) for a in lefts]

    cast = [working(xp, a, dtype) for a in missing]
    right_cast = working(xp, right, dtype)

    def rows(lo: int, hi: int):
        out = None
        for blocks in row_blocks(*(a[lo:hi] for a in cast), right_cast[lo:hi]):
            stacked = xp.concat([as_float(xp, part, dtype) for part in blocks[:-1]], axis=1)
            part = as_float(xp, blocks[-1], dtype).T @ stacked  # the wide operand on the left
            out = part if out is None else out + part
        return out

    total = summed(split_rows(rows, right))
    found, start = {}, 0
    for a in missing:
        found[id(a)] = total[:, start:start + int(a.shape[1])].T
        start += int(a.shape[1])
        if memo is not None:
            memo[(*key, id(a), id(right))] = ((a, right), found[id(a)])
    return [found[id(a)] if id(a) in found else cross(xp, a, right, dtype) for a in lefts]


def _cross(xp, a: Any, b: Any, dtype: str | None):
    if a is not b and a.shape[1] < b.shape[1]:
        # the wider operand on the left: with a multithreaded BLAS, aᵀb with few output rows ran
        # 3-6x slower than (bᵀa)ᵀ on 2 shared cores (on one thread per row range it matters little)
        return _cross(xp, b, a, dtype).T
    a, b = working(xp, a, dtype), (None if b is a else working(xp, b, dtype))
    b = a if b is None else b
    return summed(split_rows(lambda lo, hi: _cross_rows(xp, a, b, dtype, lo, hi), a))


def _cross_rows(xp, a: Any, b: Any, dtype: str | None, lo: int, hi: int):
    """``a[lo:hi]ᵀ b[lo:hi]`` in the working precision, over row blocks."""
    out = None
    if a is b:
        for block in row_blocks(a[lo:hi]):
            part = _gram(xp, as_float(xp, block, dtype))
            out = part if out is None else out + part
        return out
    for ablock, bblock in row_blocks(a[lo:hi], b[lo:hi]):
        part = as_float(xp, ablock, dtype).T @ as_float(xp, bblock, dtype)
        out = part if out is None else out + part
    return out


def grams(xp, arrays: list, dtype: str | None) -> list:
    """``[cross(xp, a, a, dtype) for a in arrays]``, the matrices not yet known made side by side.

    Each Gram matrix gets its share of the cores (see :func:`split_rows_each`); inside
    :func:`shared_products` the results are remembered as :func:`cross` remembers them.
    """
    memo = _MEMO.get()
    key = ("cross", dtype or "float64")
    found: dict[int, Any] = {}
    todo = []
    for a in arrays:
        if id(a) in found or any(b is a for b in todo):
            continue
        hit = None if memo is None else memo.get((*key, id(a), id(a)))
        if hit is not None:
            found[id(a)] = hit[1]
        else:
            todo.append(a)
    if len(todo) == 1:
        found[id(todo[0])] = cross(xp, todo[0], todo[0], dtype)
    elif todo:
        cast = [working(xp, a, dtype) for a in todo]
        jobs = [((lambda lo, hi, w=w: _cross_rows(xp, w, w, dtype, lo, hi)), w) for w in cast]
        for a, parts in zip(todo, split_rows_each(jobs)):
            found[id(a)] = out = summed(parts)
            if memo is not None:
                memo[(*key, id(a), id(a))] = ((a, a), out)
    return [found[id(a)] for a in arrays]


#: On a GPU, Gram matrices at least this wide are made from their column halves (see :func:`_gram`).
GRAM_SPLIT_MIN = 512


def _gram(xp, a: Any):
    """``aᵀa``. On the host numpy and torch recognise the form and do half the flops (syrk).

    A GPU's matrix product does all of them, and its syrk ran at half the product's rate (an
    800-wide Gram over 400,000 rows: 16.6 ms against 9.4 ms on an H200); the Gram is made of its
    column halves instead, two half-width Grams and one cross product, 3/4 of the flops (8.1 ms).
    """
    d = int(a.shape[1])
    if d < GRAM_SPLIT_MIN or not on_gpu(a):
        return a.T @ a
    h = d // 2
    left, right = a[:, :h], a[:, h:]
    off = left.T @ right
    return xp.concat([xp.concat([left.T @ left, off], axis=1), xp.concat([off.T, right.T @ right], axis=1)], axis=0)


#: Fewest rows per worker of :func:`split_rows` (below this the threads cost more than they save).
SPLIT_MIN_ROWS = 256

_POOL: ThreadPoolExecutor | None = None
_SIDE: ThreadPoolExecutor | None = None  # the one thread of :func:`alongside`
_POOL_LOCK = threading.Lock()
_BLAS: Any = None


def _forget_threads_in_child() -> None:
    # A forked child (a multiprocessing or Dask worker) inherits the pools without their threads:
    # work handed to them would never run, and the child would wait forever. It starts its own.
    global _POOL, _SIDE, _POOL_LOCK
    _POOL = _SIDE = None
    _POOL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads_in_child)


def _blas_workers() -> int:
    """How many threads numpy's BLAS uses (1 when that cannot be found out)."""
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController  # noqa: PLC0415

            controller = ThreadpoolController().select(user_api="blas")
            threads = max((lib.num_threads for lib in controller.lib_controllers), default=1)
            _BLAS = (controller, max(1, min(int(threads), os.cpu_count() or 1)))
        except Exception:  # noqa: BLE001  (no threadpoolctl, or a BLAS it cannot drive)
            _BLAS = (None, 1)
    return _BLAS[1]


def rows_matmul(xp, a: Any, b: Any):
    """``a @ b`` with the rows of ``a`` split over threads (see :func:`split_rows`)."""
    parts = split_rows(lambda lo, hi: a[lo:hi] @ b, a)
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


def one_blas_thread(fn):
    """Run ``fn`` with numpy's BLAS on one thread; its n-row products still use every core.

    The d×d and d×k linear algebra of the measures (factorisations, small products) stalls at
    the internal barriers of a multithreaded BLAS when the cores are shared with other jobs: an
    800×800 SVD took 0.8 s on one thread against 3.8-5.2 s on two, on 2 busy cores. The products
    over the n rows go through :func:`split_rows`, which keeps one thread per core. Called from a
    thread other than the main one, the global BLAS setting is left alone.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _blas_workers() <= 1 or threading.current_thread() is not threading.main_thread():
            return fn(*args, **kwargs)
        with _BLAS[0].limit(limits=1):
            return fn(*args, **kwargs)

    return wrapper


def split_rows(fn, x: Any) -> list:
    """``[fn(lo, hi), ...]`` over contiguous row ranges of ``x``, run in parallel for numpy inputs.

    A multithreaded BLAS call stalls at every internal barrier when a core is busy with another
    job; instead, each of the BLAS's threads gets its own rows and runs single-threaded products
    (numpy releases the GIL in them), so the threads meet once, at the end. Torch and cupy
    arrays, small inputs and a single-threaded BLAS get one call, ``[fn(0, n)]``.
    """
    return split_rows_each([(fn, x)])[0]


def split_rows_each(jobs: list) -> list[list]:
    """:func:`split_rows` for several independent ``(fn, x)`` jobs at once: one list of parts per job.

    The workers are shared out among the jobs, and all their row ranges run in one round, so the
    threads meet once for all of them. Two 10,000 × 800 Gram matrices on 2 cores: 177 ms one per
    core against 188 ms one after the other, each split over both cores (best of 16), a
    whole-height product per core and one wait instead of two for the slower half; EIS's two
    anchors factored, 236 ms against 246 ms (median of 40 paired alternations).
    """
    if not jobs:
        return []
    workers = _blas_workers() if all(array_api_compat.is_numpy_array(x) for _, x in jobs) else 1
    if workers <= 1 or threading.current_thread() is not threading.main_thread():
        # from a worker thread (or any other thread) the global BLAS setting is left alone
        return [[fn(0, int(x.shape[0]))] for fn, x in jobs]
    share = max(1, workers // len(jobs))
    plans = []
    for fn, x in jobs:
        n = int(x.shape[0])
        parts = max(1, min(share, n // SPLIT_MIN_ROWS))
        plans.append((fn, [n * i // parts for i in range(parts + 1)]))
    if len(plans) == 1 and len(plans[0][1]) == 2:
        fn, (lo, hi) = plans[0]
        return [[fn(lo, hi)]]
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embstab-rows")
    with _BLAS[0].limit(limits=1):
        futures = [[_POOL.submit(fn, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])] for fn, bounds in plans]
        return [[f.result() for f in job] for job in futures]


def summed(parts: list):
    """The sum of :func:`split_rows`' partial results, added in row order (so the result is deterministic)."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def alongside(fn, *args, side: bool = True):
    """``fn(*args)`` started in a side thread while the caller goes on; returns a zero-argument result getter.

    A d×d eigendecomposition runs on one core (see :func:`one_blas_thread`) and the row products
    on every core: run one alongside the other, the cores share out the work instead of one of
    them idling while the factorisation runs (semantic displacement at d = 800 on 2 cores: 327 ms
    in sequence, 268 ms side by side). With ``side=False`` (arrays that are not numpy's, or a
    caller outside the main thread) ``fn`` runs at once, here.
    """
    if not side or threading.current_thread() is not threading.main_thread():
        value = fn(*args)
        return lambda: value
    global _SIDE
    with _POOL_LOCK:
        if _SIDE is None:
            _SIDE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embstab-side")
    # in the caller's context, so that fn shares the products of an enclosing shared_products()
    return _SIDE.submit(contextvars.copy_context().run, fn, *args).result


def column_mean(xp, a: Any, dtype: str | None):
    """Mean row of ``a`` (1×d) in the working precision, accumulated over row blocks."""
    total = None
    for block in row_blocks(working(xp, a, dtype)):
        part = xp.sum(as_float(xp, block, dtype), axis=0, keepdims=True)
        total = part if total is None else total + part
    return total / a.shape[0]


def row_norms(xp, a: Any):
    """Euclidean norm of each row of ``a``, right at any magnitude.

    On a GPU through torch's norm reduction: its ``vecdot`` of a tall matrix runs as batched
    matrix-vector products, at a fraction of the memory's speed. A sum of squares underflows for
    rows of tiny entries (below 1e-154 in float64: the row would count as zero) and overflows for
    huge ones; those rows, and only they, are measured again scaled by their largest entry.
    """
    if array_api_compat.is_torch_array(a) and on_gpu(a):
        import torch  # noqa: PLC0415

        norms = torch.linalg.vector_norm(a, dim=1)
    else:
        with np.errstate(over="ignore", under="ignore"):  # (the rows this concerns are measured again)
            norms = xp.sqrt(xp.vecdot(a, a, axis=1))
    # squares are exact enough from the square root of the smallest normal number to that of the largest
    info = np.finfo(np.float64 if a.dtype == xp.float64 else np.float32)
    lo, hi = math.sqrt(float(info.tiny)) / float(info.eps), math.sqrt(float(info.max)) / 2.0
    outside = xp.logical_or(norms < lo, norms > hi)
    if not bool(xp.any(outside)):
        return norms
    rows = xp.nonzero(outside)[0]
    sub = xp.take(a, rows, axis=0)
    scale = xp.max(xp.abs(sub), axis=1)
    scale = xp.where(scale > 0, scale, xp.ones_like(scale))  # (a zero row keeps its norm 0)
    unit = sub / xp.reshape(scale, (-1, 1))
    norms = xp.asarray(norms, copy=True)
    norms[rows] = scale * xp.sqrt(xp.vecdot(unit, unit, axis=1))
    return norms


def sq_norm(xp, a: Any):
    """Squared Frobenius norm as a 0-d array."""
    return xp.sum(a * a)


@dataclass(frozen=True)
class Span:
    """The column span of an n×d matrix X as ``U = X @ w`` (U orthonormal, n×r, never formed).

    ``s`` holds the r kept singular values of X (descending); ``method`` says how they were found.
    """

    w: Any
    s: Any
    method: str

    @property
    def rank(self) -> int:
        return int(self.s.shape[0])


def _r_factor(x: Any):
    # the array API's qr has no mode="r"; forming Q would cost another n×d array
    if array_api_compat.is_torch_array(x):
        import torch

        return torch.linalg.qr(x, mode="r")[1]
    lib = np if array_api_compat.is_numpy_array(x) else __import__("cupy")
    return lib.linalg.qr(x, mode="r")


def span(xp, x: Any, dtype: str | None = None, rtol: float | None = None, method: str = "auto") -> Span:
    """Orthonormal basis of col(X), implicitly, with the numerical rank.

    Parameters
    ----------
    method : {"auto", "qr", "gram"}
        ``qr``: Householder R factor then an SVD of R (backward stable; one n×d working copy).
        ``gram``: eigen-decomposition of XᵀX accumulated over row blocks (no n×d copy, half the
        flops, and shared with PIP; directions with s < sqrt(rtol)·s_max cannot be resolved).
        ``auto``: the Gram span when X is full-rank with cond(X) ≤ :data:`GRAM_MAX_COND` or too
        large for a QR copy (:data:`QR_MAX_ENTRIES`), else QR.
    rtol : float, optional
        Singular values below ``rtol · s_max`` count as rank deficiency (default ``max(n, d)·eps``).

    Directions below the tolerance are dropped rather than kept as arbitrary columns (the
    reference keeps them, which gives garbage for rank-deficient inputs).
    """
    check_rtol(rtol)
    return _memoized(("span", dtype_name(dtype), rtol, method), (x,), lambda: _span(xp, x, dtype, rtol, method))


def _span(xp, x: Any, dtype: str | None, rtol: float | None, method: str) -> Span:
    n, d = x.shape
    if method not in ("auto", "qr", "gram"):
        raise ConfigError(f"method must be 'auto', 'qr' or 'gram', got {method!r}")
    if method == "auto":
        # The Gram matrix is usually computed anyway (PIP, CKA) and costs half a QR; use it when
        # it is accurate enough, i.e. for well-conditioned X, or when a QR copy would be too big.
        if n < d and n * d <= QR_MAX_ENTRIES:
            # fewer rows than columns: the rank is at most n, which the d×d Gram matrix cannot
            # resolve (its null directions carry eigenvalues ~eps·λ_max); the QR's n×d R factor can
            method = "qr"
        else:
            sp = _span(xp, x, dtype, rtol, "gram")
            if n * d > QR_MAX_ENTRIES or (sp.rank == d and float(sp.s[0]) <= GRAM_MAX_COND * float(sp.s[-1])):
                return sp
            method = "qr"
    eps = float(np.finfo(np.float64 if (dtype or "float64") == "float64" else np.float32).eps)
    tol = rtol if rtol is not None else max(n, d) * eps
    if (dtype or "float64") != "float64":
        resolution = (max(n, d) * eps) ** 0.5 if method == "gram" else max(n, d) * eps
        if resolution > FLOAT32_SPAN_RESOLUTION:
            return _float64_span(xp, x, rtol, method, dtype)
    if method == "gram":
        lam, v = xp.linalg.eigh(cross(xp, x, x, dtype))
        lam = xp.flip(lam, axis=0)
        v = xp.flip(v, axis=1)
        lam = xp.where(lam > 0, lam, xp.zeros_like(lam))
        s = xp.sqrt(lam)
        # eigenvalues carry absolute error ~eps·λ_max, so singular values resolve only to sqrt(tol)
        floor = max(tol, (max(n, d) * eps) ** 0.5)
        if n < d:  # col(X) lies in n dimensions: the d − n smallest eigenvalues are round-off
            s = s[:n]
    else:
        r = _r_factor(as_float(xp, x, dtype))
        _, s, vt = xp.linalg.svd(r, full_matrices=False)
        v = vt.T
        floor = tol
    if float(s[0]) == 0.0:
        return Span(w=v[:, :0], s=s[:0], method=method)
    keep = int(xp.sum(xp.astype(s > floor * float(s[0]), xp.int64)))
    if keep < min(n, d) and (dtype or "float64") != "float64":
        return _float64_span(xp, x, rtol, method, dtype)
    s = s[:keep]
    return Span(w=v[:, :keep] / s, s=s, method=method)


def _float64_span(xp, x: Any, rtol: float | None, method: str, dtype: str | None) -> Span:
    """The float64 span of ``x``, in the working precision ``dtype``.

    float32 resolves singular values only down to sqrt(n·eps32)·s_max through the Gram matrix
    (0.2 at n = 400,000) and n·eps32·s_max through the QR: directions that float64 resolves
    would be dropped and the span would not be X's. Where float32 drops any, or cannot resolve
    :data:`FLOAT32_SPAN_RESOLUTION`, the rank is decided in float64 and the basis is used in float32.
    """
    sp = span(xp, x, "float64", rtol, method)
    return Span(w=as_float(xp, sp.w, dtype), s=as_float(xp, sp.s, dtype), method=sp.method)


@dataclass(frozen=True)
class Basis:
    """Some orthonormal basis of col(X) as ``U = X @ w`` (U n×r, never formed), with the rank r.

    Unlike :class:`Span` the columns need not be the singular vectors: enough for the measures
    that depend on X only through the projector U Uᵀ (EIS, eigenspace overlap).
    """

    w: Any
    rank: int
    method: str


def basis(xp, x: Any, dtype: str | None = None, rtol: float | None = None, method: str = "auto",
          gram: Any = None) -> Basis:
    """An orthonormal basis of col(X), implicitly, with the numerical rank.

    With ``method="auto"`` in float64, a full-rank X whose condition number is certified to be
    at most :data:`GRAM_MAX_COND` gets ``w = L⁻ᵀ`` from the Cholesky factor L of XᵀX: a
    d³/3-flop factorisation instead of an eigendecomposition. The certificate is an upper bound,
    cond(X)² ≤ ‖XᵀX‖_F · tr((XᵀX)⁻¹) = ‖XᵀX‖_F · ‖L⁻¹‖²_F, so the basis is used only where
    :func:`span` would also have used the Gram matrix, and spans the same space. Otherwise (or
    when the factorisation fails) the basis is :func:`span`'s. ``gram``: XᵀX, where the caller
    has it.
    """
    check_rtol(rtol)
    return _memoized(("basis", dtype_name(dtype), rtol, method), (x,),
                     lambda: _basis(xp, x, dtype, rtol, method, gram))


def basis_overlap(xp, x: Any, y: Any, dtype: str | None = None, rtol: float | None = None,
                  method: str = "auto") -> tuple[Basis, Basis, Any]:
    """The :func:`basis` of X and of Y and their overlap ``C = UᵀŨ = Wᵀ (XᵀY) W̃`` (r×r̃).

    EIS and the eigenspace overlap both need C; inside :func:`shared_products` it is made once.
    """
    def compute():
        if _cholesky_route(x, dtype, method) and _cholesky_route(y, dtype, method) and x is not y:
            # both Gram matrices side by side, then both (single-threaded) factorisations: one per core
            gx, gy = grams(xp, [x, y], dtype)
            later = alongside(basis, xp, y, dtype, rtol, method, gy, side=array_api_compat.is_numpy_array(y))
            su = basis(xp, x, dtype, rtol, method, gx)
            sv = later()
        else:
            su, sv = basis(xp, x, dtype, rtol, method), basis(xp, y, dtype, rtol, method)
        return su, sv, rows_matmul(xp, rows_matmul(xp, su.w.T, cross(xp, x, y, dtype)), sv.w)

    return _memoized(("overlap", dtype or "float64", rtol, method), (x, y), compute)


def _cholesky_route(x: Any, dtype: str | None, method: str) -> bool:
    """Whether :func:`basis` tries the Cholesky factor of XᵀX first."""
    return method == "auto" and (dtype or "float64") == "float64" and x.shape[0] >= x.shape[1]


def _basis(xp, x: Any, dtype: str | None, rtol: float | None, method: str, gram: Any = None) -> Basis:
    n, d = x.shape
    if _cholesky_route(x, dtype, method):
        w = _cholesky_basis(xp, cross(xp, x, x, dtype) if gram is None else gram, n, rtol)
        if w is not None:
            return Basis(w=w, rank=int(d), method="cholesky")
    sp = span(xp, x, dtype, rtol, method)
    return Basis(w=sp.w, rank=sp.rank, method=sp.method)


def _cholesky_basis(xp, gram: Any, n: int, rtol: float | None):
    """``L⁻ᵀ`` for the Gram matrix ``L Lᵀ`` of a certified well-conditioned X, else None."""
    d = int(gram.shape[0])
    try:
        low = xp.linalg.cholesky(gram)
        inv = _lower_inverse(xp, low)
    except Exception:  # noqa: BLE001  (not positive definite: numpy, torch and cupy raise differently)
        return None
    scale = float(xp.max(xp.abs(gram)))
    inv_sq = float(sq_norm(xp, inv))
    if not (scale > 0 and math.isfinite(inv_sq)):
        return None
    gram_norm = scale * math.sqrt(float(sq_norm(xp, gram / scale)))
    cond_sq = gram_norm * inv_sq  # ≥ λ_max/λ_min = cond(X)²
    eps = float(np.finfo(np.float64).eps)
    smallest = max(rtol if rtol is not None else 0.0, (max(n, d) * eps) ** 0.5)  # span()'s rank floor
    if not (cond_sq <= GRAM_MAX_COND**2 and cond_sq * smallest**2 < 1.0):
        return None
    return inv.T


def _lower_inverse(xp, low: Any):
    """Inverse of a lower-triangular matrix (d³/3 flops where the backend has a triangular solver)."""
    if array_api_compat.is_numpy_array(low):
        from scipy.linalg import lapack  # noqa: PLC0415

        inv, info = lapack.dtrtri(low, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError("singular triangular factor")
        return np.tril(inv)
    if array_api_compat.is_torch_array(low):
        import torch  # noqa: PLC0415

        eye = torch.eye(low.shape[0], dtype=low.dtype, device=low.device)
        return torch.linalg.solve_triangular(low, eye, upper=False)
    return xp.linalg.inv(low)


#: On a GPU, :func:`topk` first picks the best groups of this many consecutive columns.
TOPK_GROUP = 64


def _raw_topk(xp, scores: Any, k: int):
    """The backend's own selection: values and indices of ``k`` largest entries per row, unordered."""
    if array_api_compat.is_torch_array(scores):
        import torch  # noqa: PLC0415

        return torch.topk(scores, k, dim=1, largest=True, sorted=False)
    # cupy (numpy has the same functions, so the host tests run this branch too)
    lib = np if array_api_compat.is_numpy_array(scores) else __import__("cupy")
    idx = lib.argpartition(-scores, k - 1, axis=1)[:, :k] if k < scores.shape[1] else \
        lib.broadcast_to(lib.arange(scores.shape[1]), scores.shape).copy()
    return lib.take_along_axis(scores, idx, axis=1), idx


def _grouped_topk(xp, scores: Any, k: int):
    """The ``k`` largest entries of each row through the ``k`` groups of columns with the largest maxima.

    A GPU's selection over a wide row makes several passes over it (a radix select: 1.7 ms for
    1000 × 75,000 float64 scores on an H200); the maxima of groups of :data:`TOPK_GROUP` columns
    take one, and the selection then runs over 1/TOPK_GROUP of the row and k groups. Exact: an
    entry above the k-th largest value v lies in a chosen group (else the k chosen groups would
    hold k larger entries besides it), and the chosen groups hold at least k entries ≥ v; which of
    several entries tied at v is kept is backend-defined, as with the selection itself.
    """
    m, c = int(scores.shape[0]), int(scores.shape[1])
    full = c // TOPK_GROUP * TOPK_GROUP
    if array_api_compat.is_torch_array(scores):
        maxima = scores.unfold(1, TOPK_GROUP, TOPK_GROUP).amax(dim=2)  # a view: the tail is left out, not copied
    else:
        maxima = xp.max(xp.reshape(scores[:, :full], (m, full // TOPK_GROUP, TOPK_GROUP)), axis=2)
    groups = _raw_topk(xp, maxima, k)[1]
    device = array_api_compat.device(scores)
    offsets = xp.reshape(xp.arange(TOPK_GROUP, dtype=xp.int64, device=device), (1, 1, -1))
    columns = xp.reshape(xp.reshape(xp.astype(groups, xp.int64) * TOPK_GROUP, (m, k, 1)) + offsets, (m, k * TOPK_GROUP))
    if full < c:
        tail = xp.broadcast_to(xp.reshape(xp.arange(full, c, dtype=xp.int64, device=device), (1, -1)), (m, c - full))
        columns = xp.concat([columns, tail], axis=1)
    vals, pick = _raw_topk(xp, xp.take_along_axis(scores, columns, axis=1), k)
    return vals, xp.take_along_axis(columns, xp.astype(pick, xp.int64), axis=1)


def topk(xp, scores: Any, k: int):
    """Values and column indices of the ``k`` largest entries of each row, sorted descending.

    The array API has no partial sort, so this dispatches to the compiled selection (numpy, where
    it is built: see :mod:`embstab.measures._native`), ``torch.topk`` or ``argpartition`` (cupy).
    Among equal values the lower column index comes first, and of several values tied at the k-th
    place the lowest columns are kept, on every backend: a 1-bit table's scores tie often, and the
    neighbours must not depend on the library that selected them.
    """
    k = min(k, scores.shape[1])
    if array_api_compat.is_numpy_array(scores):
        found = _native.topk_rows(scores, k)
        if found is not None:  # the compiled selection, already in the final order
            return found
    # one more than asked: a tie at the k-th place shows as an equal (k+1)-th value
    wide = k + 1 if k < scores.shape[1] else k
    if on_gpu(scores) and scores.shape[1] >= 16 * TOPK_GROUP * wide:
        vals, idx = _grouped_topk(xp, scores, wide)
    elif array_api_compat.is_torch_array(scores):
        import torch

        vals, idx = torch.topk(scores, wide, dim=1, largest=True, sorted=False)
    elif array_api_compat.is_numpy_array(scores):
        import torch

        # torch.topk on a zero-copy view is ~15x faster than numpy's argpartition for small k
        # (a threaded selection instead of a full partition of every row)
        v, i = torch.topk(torch.from_numpy(np.ascontiguousarray(scores)), wide, dim=1, largest=True, sorted=False)
        vals, idx = v.numpy(), i.numpy()
    else:
        import cupy

        if wide < scores.shape[1]:
            idx = cupy.argpartition(-scores, wide - 1, axis=1)[:, :wide]
        else:
            idx = cupy.broadcast_to(cupy.arange(scores.shape[1]), scores.shape).copy()
        vals = cupy.take_along_axis(scores, idx, axis=1)
    vals, idx = _in_order(xp, vals, xp.astype(idx, xp.int64))
    if wide == k:
        return vals, idx
    return _lowest_columns_at_ties(xp, scores, vals, idx, k)


def _in_order(xp, vals: Any, idx: Any):
    """The entries of each row sorted by value descending, then column ascending."""
    order = xp.argsort(idx, axis=1, stable=True)
    vals = xp.take_along_axis(vals, order, axis=1)
    idx = xp.take_along_axis(idx, order, axis=1)
    order = xp.argsort(vals, axis=1, descending=True, stable=True)
    return xp.take_along_axis(vals, order, axis=1), xp.take_along_axis(idx, order, axis=1)


def _lowest_columns_at_ties(xp, scores: Any, vals: Any, idx: Any, k: int):
    """The first ``k`` of the ``k + 1`` ordered best entries, with the lowest columns among ties at the k-th place.

    Where the (k+1)-th value equals the k-th, the backend's selection may have kept any of the
    tied columns. Every entry above the tied value is among the selected; the rest of the row's
    k are then its lowest columns holding the tied value, found in that row of ``scores``.
    """
    tied = vals[:, k] == vals[:, k - 1]
    vals, idx = vals[:, :k], idx[:, :k]
    if not bool(xp.any(tied)):
        return vals, idx
    rows = xp.nonzero(tied)[0]
    sub = xp.take(scores, rows, axis=0)
    edge = xp.reshape(xp.take(vals, rows, axis=0)[:, k - 1], (-1, 1))
    above = sub > edge
    at = sub == edge
    need = k - xp.sum(xp.astype(above, xp.int64), axis=1, keepdims=True)
    keep = xp.logical_or(above, xp.logical_and(at, xp.cumulative_sum(xp.astype(at, xp.int64), axis=1) <= need))
    columns = xp.reshape(xp.nonzero(keep)[1], (-1, k))  # k per row, in row order, columns ascending
    fixed_vals, fixed_idx = _in_order(xp, xp.take_along_axis(sub, columns, axis=1), xp.astype(columns, xp.int64))
    vals, idx = xp.asarray(vals, copy=True), xp.asarray(idx, copy=True)
    vals[rows, :] = fixed_vals
    idx[rows, :] = fixed_idx
    return vals, idx

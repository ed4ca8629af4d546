"""The compiled CPU top-k selection (``csrc/topk_cpu.c``), called through :mod:`ctypes`.

k-NN overlap keeps a few neighbours out of every row of the vocabulary for each query. A general
selection (``torch.topk``) copies each row into (value, index) pairs and partitions them; the
kernel reads each row once in vector registers for the maximum of each block of scores, then
reads again only the few blocks whose maximum reaches the k-th largest of them (a floor under the
row's best k), so its cost is little more than reading the scores. It returns each row's best in
(value descending, column ascending) order and keeps the lowest columns among entries tied at the
k-th place. It is called from the threads that computed the scores (ctypes releases the GIL), so
the selection runs on every core, each thread over its own block of candidates.

The kernel is built when embstab is installed (a C compiler is needed; without one, or with
``EMBSTAB_NATIVE=0`` in the environment, the selection runs on torch). It has no Python
dependencies: importing this module imports neither torch nor anything heavy.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

from embstab._ckernels import load_kernel

__all__ = ["available", "why_unavailable", "topk_rows"]

_FUNCTIONS = {np.dtype(np.float32): "embstab_topk_float32", np.dtype(np.float64): "embstab_topk_float64"}
#: scores, rows, columns, row stride, k, values out, columns out
_ARGS = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p,
         ctypes.c_void_p]


@lru_cache(maxsize=1)
def _load() -> tuple[dict | None, str | None]:
    signatures = {name: (ctypes.c_int, _ARGS) for name in _FUNCTIONS.values()}
    found, why = load_kernel("embstab.measures._topk_cpu", signatures)
    if found is None:
        return None, why
    return {dtype: getattr(found, name) for dtype, name in _FUNCTIONS.items()}, None


def why_unavailable() -> str | None:
    """Why the kernel cannot be used here, or None when it can.

    Returns
    -------
    str or None
        A one-line reason (not built, not loadable, or disabled by ``EMBSTAB_NATIVE=0``).
    """
    return _load()[1]


def available() -> bool:
    """True when the compiled kernel is loaded.

    Returns
    -------
    bool
        Whether :func:`topk_rows` selects with the kernel here.
    """
    return _load()[0] is not None


def topk_rows(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``k`` largest entries of each row, sorted, or None where the kernel does not apply.

    Parameters
    ----------
    scores : numpy.ndarray of shape (m, c)
        float32 or float64, rows contiguous (any row stride).
    k : int
        Entries kept per row, 1 ≤ k ≤ c.

    Returns
    -------
    (values, columns) or None
        ``(m, k)`` values in the dtype of ``scores`` and int64 columns, each row by value
        descending then column ascending; None when the kernel is unavailable, the array does not
        fit its layout, or a row holds NaN (the caller then selects another way).
    """
    functions = _load()[0]
    if functions is None or scores.ndim != 2:
        return None
    fn = functions.get(scores.dtype)
    m, c = scores.shape
    if fn is None or not 1 <= k <= c or (m > 1 and scores.strides[0] % scores.itemsize) \
            or (c > 1 and scores.strides[1] != scores.itemsize) or scores.strides[0] < 0:
        return None
    ld = scores.strides[0] // scores.itemsize if m > 1 else c
    if ld < c:
        return None
    values = np.empty((m, k), dtype=scores.dtype)
    columns = np.empty((m, k), dtype=np.int64)
    if m and fn(scores.ctypes.data, m, c, ld, k, values.ctypes.data, columns.ctypes.data) != 0:
        return None
    return values, columns

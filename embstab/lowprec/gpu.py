"""Optional CUDA kernels (``kernels/quantize.cu``) loaded through ``cupy.RawModule``.

Everything here imports without cupy or a GPU; :func:`available` says whether the kernels can
run, and the functions raise :class:`GPUUnavailableError` (an :class:`~embstab.errors.EmbstabError`)
with the reason otherwise. :func:`embstab.lowprec.quantize` itself runs on CUDA tensors through
torch without these kernels; they fuse a whole quantization into one pass over memory.

Status: the kernel source is compile-checked with ``nvcc -ptx`` but has not been run on a GPU in
embstab's CI (no GPU there); the ``gpu``-marked tests run it against the CPU path where one exists.
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from embstab.errors import EmbstabError
from embstab.lowprec._core import check_rounding
from embstab.lowprec.formats import FloatFormat, MXFormat, get_format

__all__ = ["GPUUnavailableError", "available", "kernel_source_path", "quantize_float_cuda", "quantize_mx_cuda"]

_OVERFLOW = {"saturate": 0, "inf": 1, "nan": 2}
_MODE = {"nearest": 0, "stochastic": 1}
_THREADS = 256


class GPUUnavailableError(EmbstabError, RuntimeError):
    """The CUDA kernels cannot run here (no cupy, no GPU, or the kernel source is missing)."""


def kernel_source_path() -> Path:
    """Where ``quantize.cu`` is read from: ``$EMBSTAB_KERNELS_DIR`` or the repository's ``kernels/``."""
    env = os.environ.get("EMBSTAB_KERNELS_DIR")
    base = Path(env) if env else Path(__file__).resolve().parents[2] / "kernels"
    return base / "quantize.cu"


def _why_unavailable() -> str | None:
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a CUDA library error raised while importing
        return f"cupy is not importable ({type(exc).__name__}: {exc}); install embstab[gpu]"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device is visible"
    except Exception as exc:
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    if not kernel_source_path().is_file():
        return f"kernel source {kernel_source_path()} not found (set EMBSTAB_KERNELS_DIR)"
    return None


def available() -> bool:
    """True when cupy, a CUDA device and the kernel source are all present."""
    return _why_unavailable() is None


@lru_cache(maxsize=1)
def _module():
    why = _why_unavailable()
    if why:
        raise GPUUnavailableError(f"GPU kernels unavailable: {why}")
    import cupy

    return cupy.RawModule(code=kernel_source_path().read_text(), options=("--std=c++14",))


def _as_cupy(x: torch.Tensor):
    import cupy

    return cupy.from_dlpack(x)


def _prepare(x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.device.type != "cuda" or x.dtype != torch.float32:
        raise TypeError("the CUDA kernels take float32 CUDA tensors")
    return x.contiguous()


def _grid(n: int) -> tuple[int]:
    return (max(1, min(65535 * 8, math.ceil(n / _THREADS))),)


def quantize_float_cuda(x: torch.Tensor, fmt: FloatFormat | str, rounding: str = "nearest", seed: int = 0) -> torch.Tensor:
    """Round a float32 CUDA tensor onto ``fmt`` in one kernel (nearest-even or exact stochastic).

    Stochastic draws come from splitmix64(seed, element index): reproducible for a seed whatever
    the launch configuration, but a different stream than the CPU path's torch generator.
    """
    fmt = get_format(fmt)
    rounding = check_rounding(rounding)
    if not isinstance(fmt, FloatFormat) or rounding not in _MODE:
        raise ValueError("quantize_float_cuda handles FloatFormat with nearest or stochastic rounding")
    if fmt.emin < -126 or fmt.man_bits > 23 or fmt.max > 3.4028234663852886e38:
        raise ValueError(f"{fmt} reaches beyond fp32's range; use embstab.lowprec.quantize")
    x = _prepare(x)
    kern = _module().get_function("quantize_float_kernel")
    import cupy

    y = torch.empty_like(x)
    n = x.numel()
    if n:
        kern(_grid(n), (_THREADS,), (_as_cupy(x), _as_cupy(y), cupy.int64(n), cupy.int32(fmt.man_bits),
                                      cupy.int32(fmt.emin), cupy.int32(int(fmt.subnormals)), cupy.float32(fmt.max),
                                      cupy.int32(_OVERFLOW[fmt.overflow]), cupy.int32(int(fmt.has_inf)),
                                      cupy.int32(int(fmt.specials == "fnuz")), cupy.int32(_MODE[rounding]),
                                      cupy.uint64(seed)))
    return y


def quantize_mx_cuda(x: torch.Tensor, fmt: MXFormat | str, rounding: str = "nearest", seed: int = 0) -> torch.Tensor:
    """MX quantization of a 2-D float32 CUDA tensor along its rows (blocks of 32), one warp per block."""
    fmt = get_format(fmt)
    rounding = check_rounding(rounding)
    if not isinstance(fmt, MXFormat) or fmt.block_size != 32 or fmt.axis not in (-1, 1) or rounding not in _MODE:
        raise ValueError("quantize_mx_cuda handles MX formats with 32-element blocks along rows")
    x = _prepare(x)
    if x.dim() != 2:
        raise ValueError("quantize_mx_cuda expects a 2-D tensor")
    kern = _module().get_function("quantize_mx_kernel")
    import cupy

    y = torch.empty_like(x)
    rows, cols = x.shape
    blocks = rows * ((cols + 31) // 32)
    if blocks:
        elem = fmt.element
        is_int8 = elem == "int8"
        args = (_as_cupy(x), _as_cupy(y), cupy.int64(rows), cupy.int32(cols), cupy.int32(fmt.emax_elem),
                cupy.int32(int(is_int8)), cupy.int32(0 if is_int8 else elem.man_bits),
                cupy.int32(0 if is_int8 else elem.emin), cupy.float32(0.0 if is_int8 else elem.max),
                cupy.int32(_MODE[rounding]), cupy.uint64(seed))
        kern((max(1, min(65535 * 8, math.ceil(blocks * 32 / _THREADS))),), (_THREADS,), args)
    return y

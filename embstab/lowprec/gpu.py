"""Optional CUDA kernels (``quantize.cu``, shipped as ``embstab.kernels``) loaded through ``cupy.RawModule``.

Everything here imports without cupy or a GPU; :func:`available` says whether the kernels can
run, and the functions raise :class:`GPUUnavailableError` (an :class:`~embstab.errors.EmbstabError`)
with the reason otherwise. :func:`embstab.lowprec.quantize` calls :func:`try_kernel` first, so
float32 CUDA tensors take the fused one-pass kernel wherever it applies and torch otherwise.

Status: every kernel source compiles under NVRTC (what cupy uses) for compute_80 and compute_90 in
the default test suite, which needs no GPU; the ``gpu``-marked tests compare the kernels with the
CPU path bit for bit where a GPU is present.
"""

from __future__ import annotations

import importlib.resources
import math
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from embstab.errors import EmbstabError, ResourceError
from embstab.lowprec.rounding import check_rounding, kernel_seed
from embstab.lowprec.formats import FloatFormat, MXFormat, get_format

__all__ = ["GPUUnavailableError", "available", "kernels_dir", "kernel_sources", "kernel_source_path",
           "quantize_float_cuda", "quantize_mx_cuda", "kernel_for", "try_kernel"]

_OVERFLOW = {"saturate": 0, "inf": 1, "nan": 2}
_MODE = {"nearest": 0, "stochastic": 1}
_THREADS = 256

#: Round eight elements per thread through 16-byte loads where the tensors are 16-byte aligned
#: (results are the same; off only to compare the two kernels).
VECTOR_LOADS = True


class GPUUnavailableError(ResourceError):
    """The CUDA kernels cannot run here (no cupy, no GPU, or the kernel source is missing)."""


def kernels_dir() -> Any:
    """Folder the CUDA sources are read from.

    Returns
    -------
    pathlib.Path or importlib.resources.abc.Traversable
        ``$EMBSTAB_KERNELS_DIR`` when set (to try edited kernels without reinstalling), else the
        ``embstab.kernels`` package data, which a wheel or a non-editable install ships.
    """
    env = os.environ.get("EMBSTAB_KERNELS_DIR")
    return Path(env) if env else importlib.resources.files("embstab.kernels")


def kernel_sources() -> dict[str, str]:
    """Every CUDA source (``*.cu``) in :func:`kernels_dir`, by file name.

    Returns
    -------
    dict of str to str
        File name to source text, sorted by name.
    """
    base = kernels_dir()
    return {f.name: f.read_text() for f in sorted(base.iterdir(), key=lambda f: f.name) if f.name.endswith(".cu")}


def kernel_source_path() -> Any:
    """The ``quantize.cu`` source inside :func:`kernels_dir`.

    Returns
    -------
    pathlib.Path or importlib.resources.abc.Traversable
        Readable with ``read_text()``; a real file path in a source checkout or unpacked wheel.
    """
    return kernels_dir() / "quantize.cu"


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
    """True when cupy, a CUDA device and the kernel source are all present.

    Returns
    -------
    bool
        Whether the CUDA kernels can run.
    """
    return _why_unavailable() is None


@lru_cache(maxsize=1)
def _module():
    why = _why_unavailable()
    if why:
        raise GPUUnavailableError(f"GPU kernels unavailable: {why}")
    import cupy

    # NVRTC flags: the same ones embstab.lowprec.nvrtc.compile_ptx checks the sources with
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


def _mx_fits(fmt: MXFormat) -> bool:
    return fmt.block_size == 32 and fmt.axis in (-1, 1)


def quantize_float_cuda(x: torch.Tensor, fmt: FloatFormat | str, rounding: str = "nearest", seed: int = 0) -> torch.Tensor:
    """Round a float32 CUDA tensor onto ``fmt`` in one kernel (nearest-even or exact stochastic).

    Stochastic draws come from splitmix64(seed, element index): reproducible for a seed whatever
    the launch configuration.

    Parameters
    ----------
    x : torch.Tensor
        float32 tensor on a CUDA device.
    fmt : FloatFormat or str
        A float format within fp32's range (or its preset name).
    rounding : {"nearest", "stochastic"}, default "nearest"
        Rounding mode (aliases accepted).
    seed : int, default 0
        Seed of the stochastic stream.

    Returns
    -------
    torch.Tensor
        The rounded values, a new tensor like ``x``.

    Raises
    ------
    ValueError
        For another kind of format, another rounding mode, or a format beyond fp32's range.
    TypeError
        If ``x`` is not a float32 CUDA tensor.
    GPUUnavailableError
        If cupy, a CUDA device or the kernel source is missing.
    """
    fmt = get_format(fmt)
    rounding = check_rounding(rounding)
    if not isinstance(fmt, FloatFormat) or rounding not in _MODE:
        raise ValueError("quantize_float_cuda handles FloatFormat with nearest or stochastic rounding")
    if not fmt.within_float32:
        raise ValueError(f"{fmt} reaches beyond fp32's range; use embstab.lowprec.quantize")
    x = _prepare(x)
    y = torch.empty_like(x)
    vector = VECTOR_LOADS and x.data_ptr() % 16 == 0 and y.data_ptr() % 16 == 0
    kern = _module().get_function("quantize_float4x2_kernel" if vector else "quantize_float_kernel")
    import cupy

    n = x.numel()
    if n:
        threads = n // 8 + 1 if vector else n  # the eight-wide kernel: one thread per 8 elements, + the tail
        kern(_grid(threads), (_THREADS,), (_as_cupy(x), _as_cupy(y), cupy.int64(n), cupy.int32(fmt.man_bits),
                                           cupy.int32(fmt.emin), cupy.int32(int(fmt.subnormals)), cupy.float32(fmt.max),
                                           cupy.int32(_OVERFLOW[fmt.overflow]), cupy.int32(int(fmt.has_inf)),
                                           cupy.int32(int(fmt.specials == "fnuz")), cupy.int32(_MODE[rounding]),
                                           cupy.uint64(seed)))
    return y


def quantize_mx_cuda(x: torch.Tensor, fmt: MXFormat | str, rounding: str = "nearest", seed: int = 0) -> torch.Tensor:
    """MX quantization of a 2-D float32 CUDA tensor along its rows (blocks of 32), one warp per block.

    Parameters
    ----------
    x : torch.Tensor
        2-D float32 tensor on a CUDA device.
    fmt : MXFormat or str
        An MX format with 32-element blocks along rows (or its preset name).
    rounding : {"nearest", "stochastic"}, default "nearest"
        Rounding mode (aliases accepted).
    seed : int, default 0
        Seed of the stochastic stream.

    Returns
    -------
    torch.Tensor
        The rounded values, a new tensor like ``x``.

    Raises
    ------
    ValueError
        For another format or rounding mode, or a tensor that is not 2-D.
    TypeError
        If ``x`` is not a float32 CUDA tensor.
    GPUUnavailableError
        If cupy, a CUDA device or the kernel source is missing.
    """
    fmt = get_format(fmt)
    rounding = check_rounding(rounding)
    if not (isinstance(fmt, MXFormat) and _mx_fits(fmt)) or rounding not in _MODE:
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


#: Format class -> (does the kernel implement this format for this tensor?, launcher name).
_KERNELS: dict[type, tuple[Callable[[Any, torch.Tensor], bool], str]] = {
    FloatFormat: (lambda fmt, t: fmt.within_float32, "quantize_float_cuda"),
    MXFormat: (lambda fmt, t: _mx_fits(fmt) and t.dim() == 2, "quantize_mx_cuda"),
}


def _on_cuda(t: torch.Tensor) -> bool:
    return t.device.type == "cuda"


def kernel_for(t: torch.Tensor, fmt: Any, rounding: str) -> Callable[[torch.Tensor, int], torch.Tensor] | None:
    """The fused kernel that can quantize ``t`` onto ``fmt``, or None where torch must do it.

    Parameters
    ----------
    t : torch.Tensor
        The work tensor.
    fmt : Format
        A resolved format.
    rounding : str
        A canonical rounding name.

    Returns
    -------
    callable or None
        ``f(t, seed) -> tensor`` when ``t`` is a float32 CUDA tensor, the kernels are available and
        they implement ``fmt`` and ``rounding`` (float formats within fp32's range; MX formats with
        32-element row blocks of 2-D tensors; nearest-even or stochastic rounding); else None.
    """
    if not _on_cuda(t) or t.dtype != torch.float32 or rounding not in _MODE:
        return None
    entry = _KERNELS.get(type(fmt))
    if entry is None or not entry[0](fmt, t):
        return None
    if not available():
        return None
    launch = globals()[entry[1]]  # looked up at call time, so tests can stand in for cupy
    return lambda x, seed: launch(x, fmt, rounding, seed)


def try_kernel(t: torch.Tensor, fmt: Any, rounding: str, generator: torch.Generator | None) -> torch.Tensor | None:
    """Quantize ``t`` with a fused CUDA kernel if one applies (see :func:`kernel_for`), else None.

    Parameters
    ----------
    t : torch.Tensor
        The work tensor.
    fmt : Format
        A resolved format.
    rounding : str
        A canonical rounding name.
    generator : torch.Generator or None
        For stochastic rounding the kernel's counter-based stream is seeded with one draw from
        this generator, so results stay reproducible under a seed.

    Returns
    -------
    torch.Tensor or None
        The quantized tensor, or None when the caller should use the torch path.
    """
    kernel = kernel_for(t, fmt, rounding)
    if kernel is None:
        return None
    return kernel(t, kernel_seed(generator, t.device) if rounding == "stochastic" else 0)

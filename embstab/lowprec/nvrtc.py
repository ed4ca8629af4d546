"""Compile CUDA C with NVRTC, the runtime compiler cupy uses, without a GPU.

cupy builds :class:`cupy.RawModule` sources with NVRTC, which has no C library headers and a
stricter front end than nvcc; a kernel that passes ``nvcc -ptx`` can still fail there. NVRTC
needs no device, so this module lets the kernels be compile-checked on any machine that has the
library (the ``nvidia-cuda-nvrtc`` wheel for CUDA 13, ``nvidia-cuda-nvrtc-cu12`` for CUDA 12, or
a CUDA toolkit). It talks to ``libnvrtc`` through :mod:`ctypes`, so no Python binding is needed.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from dataclasses import dataclass
from functools import lru_cache

from embstab.errors import OptionalDependencyError, ResourceError

__all__ = ["NVRTCError", "CompiledPTX", "find_library", "version", "compile_ptx"]


class NVRTCError(ResourceError):
    """NVRTC rejected a source; the message holds its compile log."""


@dataclass(frozen=True)
class CompiledPTX:
    """Result of one NVRTC compilation.

    Attributes
    ----------
    ptx : str
        The generated PTX.
    log : str
        NVRTC's compile log (warnings; empty when clean).
    arch : str
        The virtual architecture compiled for, e.g. ``"compute_90"``.
    """

    ptx: str
    log: str
    arch: str


def _candidates() -> list[str]:
    found: list[str] = []
    env = os.environ.get("EMBSTAB_NVRTC")
    if env:
        found.append(env)
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        # pip wheels: nvidia/cu13/lib (CUDA 13), nvidia/cuda_nvrtc/lib (CUDA 12)
        for pattern in ("cu*/lib/libnvrtc.so*", "cuda_nvrtc/lib/libnvrtc.so*"):
            found.extend(p for p in sorted(glob.glob(os.path.join(root, pattern)), reverse=True)
                         if "builtins" not in p and "alt" not in os.path.basename(p))
    found.extend(["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"])
    return found


@lru_cache(maxsize=1)
def find_library() -> str:
    """Path (or soname) of a loadable ``libnvrtc``.

    Returns
    -------
    str
        The first candidate that loads: ``$EMBSTAB_NVRTC``, the pip wheels, then the system.

    Raises
    ------
    OptionalDependencyError
        When no NVRTC library can be loaded.
    """
    for cand in _candidates():
        try:
            ctypes.CDLL(cand)
        except OSError:
            continue
        return cand
    raise OptionalDependencyError("nvidia-cuda-nvrtc", "compiling the CUDA kernels with NVRTC", "test")


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL:
    lib = ctypes.CDLL(find_library())
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def version() -> tuple[int, int]:
    """NVRTC's (major, minor) version.

    Returns
    -------
    tuple of int
        For example ``(13, 0)``.

    Raises
    ------
    OptionalDependencyError
        When NVRTC is not installed.
    """
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_lib().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _check(status: int, what: str) -> None:
    if status != 0:
        msg = _lib().nvrtcGetErrorString(status).decode()
        raise NVRTCError(f"{what} failed: {msg}")


def compile_ptx(source: str, arch: str = "compute_80", name: str = "kernel.cu",
                options: tuple[str, ...] = ("--std=c++14",)) -> CompiledPTX:
    """Compile CUDA C source to PTX with NVRTC, exactly as cupy's ``RawModule`` would.

    Parameters
    ----------
    source : str
        The CUDA C source.
    arch : str, default "compute_80"
        Virtual architecture passed as ``--gpu-architecture``.
    name : str, default "kernel.cu"
        File name NVRTC uses in its messages.
    options : tuple of str, default ("--std=c++14",)
        Further NVRTC options (cupy passes ``--std=c++14`` for embstab's kernels).

    Returns
    -------
    CompiledPTX
        The PTX and the compile log.

    Raises
    ------
    OptionalDependencyError
        When NVRTC is not installed.
    NVRTCError
        When the source does not compile; the message holds NVRTC's log.
    """
    lib = _lib()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
        argv = (ctypes.c_char_p * len(opts))(*opts)
        status = lib.nvrtcCompileProgram(prog, len(opts), argv)
        size = ctypes.c_size_t()
        _check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.value.decode(errors="replace").strip()
        if status != 0:
            raise NVRTCError(f"NVRTC could not compile {name} for {arch}:\n{log}")
        _check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
        return CompiledPTX(ptx=buf.value.decode(), log=log, arch=arch)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))

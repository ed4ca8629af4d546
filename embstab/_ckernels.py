"""embstab's optional compiled CPU kernels, loaded through :mod:`ctypes`.

Each kernel is a small C extension built by ``pip install`` (``setup.py``). It is optional: without
a C compiler the install still succeeds and the torch or numpy path runs instead, as it does
everywhere with ``EMBSTAB_NATIVE=0`` in the environment. The kernels hold no Python objects; the
extension-module wrapper exists only so the build tools compile them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from types import SimpleNamespace
from typing import Any

__all__ = ["load_kernel"]


def load_kernel(module: str, signatures: dict[str, tuple[Any, list]]) -> tuple[SimpleNamespace | None, str | None]:
    """The functions of a compiled kernel, typed for ctypes, or why they cannot be had.

    Parameters
    ----------
    module : str
        The extension's import name, e.g. ``"embstab.measures._topk_cpu"``.
    signatures : dict
        ``{function name: (restype, argtypes)}`` of the C functions used.

    Returns
    -------
    (functions, reason)
        A namespace of the typed functions and None; or None and a one-line reason (disabled by
        ``EMBSTAB_NATIVE=0``, not built, not loadable, or built from older sources).
    """
    if os.environ.get("EMBSTAB_NATIVE", "1") == "0":
        return None, "disabled by EMBSTAB_NATIVE=0"
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return None, "the compiled kernel was not built (reinstall embstab with a C compiler available)"
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError as exc:
        return None, f"the compiled kernel at {spec.origin} cannot be loaded: {exc}"
    functions = SimpleNamespace()
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:  # a kernel built from older sources
            return None, f"the compiled kernel at {spec.origin} is out of date (reinstall embstab)"
        fn.restype, fn.argtypes = restype, argtypes
        setattr(functions, name, fn)
    return functions, None

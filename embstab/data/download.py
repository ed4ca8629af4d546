"""HTTP(S) download into the cache with a progress bar, atomic rename and SHA-256 verification."""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from tqdm.auto import tqdm

from embstab.data.errors import ChecksumError, DownloadError

__all__ = ["download", "sha256_of", "verify"]

_CHUNK = 1 << 20


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    str
        Lower-case hexadecimal digest.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, sha256: str | None, manifest: Path | None = None) -> str:
    """Check ``path`` against ``sha256``, or against the digest recorded in ``manifest``.

    With neither, the digest is recorded in ``manifest`` (trust on first use), so a later change of
    the cached file or of the upstream file is detected.

    Parameters
    ----------
    path : pathlib.Path
        The file to check.
    sha256 : str or None
        Expected hex digest (takes precedence over the manifest).
    manifest : pathlib.Path, optional
        JSON file mapping file names to digests; updated with this file's digest.

    Returns
    -------
    str
        The file's digest.

    Raises
    ------
    ChecksumError
        If the digest differs from the expected one.
    """
    actual = sha256_of(path)
    recorded = None
    entries: dict[str, str] = {}
    if manifest is not None and manifest.exists():
        entries = json.loads(manifest.read_text())
        recorded = entries.get(path.name)
    expected = sha256 or recorded
    if expected is not None and actual != expected.lower():
        raise ChecksumError(f"{path} has SHA-256 {actual}, expected {expected}; the download is corrupt or "
                            f"the source changed (delete the file and fetch again with --force)")
    if manifest is not None and recorded != actual:
        entries[path.name] = actual
        manifest.write_text(json.dumps(entries, indent=1, sort_keys=True))
    return actual


def download(url: str, dest: Path, sha256: str | None = None, progress: bool = True, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` (written as ``dest.part`` and renamed when complete).

    Parameters
    ----------
    url : str
        The address.
    dest : pathlib.Path
        Destination file (its folder is created).
    sha256 : str, optional
        Expected hex digest of the file.
    progress : bool, default True
        Show a tqdm bar.
    timeout : float, default 60.0
        Socket timeout in seconds.

    Returns
    -------
    pathlib.Path
        ``dest``.

    Raises
    ------
    DownloadError
        On any network or HTTP error; the message names the URL.
    ChecksumError
        If ``sha256`` is given and the file does not match (the partial file is removed).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with open(part, "wb") as out, tqdm(total=total, unit="B", unit_scale=True, desc=dest.name,
                                               disable=not progress) as bar:
                for block in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        part.unlink(missing_ok=True)
        reason = f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError) \
            else getattr(exc, "reason", exc)
        raise DownloadError(f"download of {url} failed: {reason}") from exc
    if sha256 is not None:
        actual = sha256_of(part)
        if actual != sha256.lower():
            part.unlink(missing_ok=True)
            raise ChecksumError(f"{url}: SHA-256 {actual} does not match the expected {sha256}")
    part.replace(dest)
    return dest

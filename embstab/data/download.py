"""HTTP(S) download into the cache with a progress bar, atomic rename and SHA-256 verification.

A fetch trusts only what embstab documents: the address of each source (its host, over HTTPS where
the source offers it) and the SHA-256 digest that ships with its entry. :func:`fetch_verified` is
the one way a named source is fetched: another address is accepted only on the documented host or
on this machine's loopback (a local mirror), a local file or any other scheme is refused, and a
file whose digest embstab does not ship is fetched only with a digest the user gives. Nothing is
ever trusted on first use.
"""

from __future__ import annotations

import hashlib
import json
import os
import ipaddress
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tqdm.auto import tqdm

from embstab.data.errors import ChecksumError, DownloadError, UntrustedSourceError

__all__ = ["check_source_url", "download", "fetch_verified", "sha256_of", "verify"]

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


def _recorded(manifest: Path | None, name: str) -> str | None:
    if manifest is None or not manifest.is_file():
        return None
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ChecksumError(f"{manifest} is not a digest record; delete it and fetch again") from None
    value = entries.get(name) if isinstance(entries, dict) else None
    return value if isinstance(value, str) else None


def record_digest(manifest: Path, name: str, sha256: str) -> None:
    """Remember a digest the user gave for a cached file, so later loads check the file against it.

    Parameters
    ----------
    manifest : pathlib.Path
        JSON file mapping file names to digests.
    name : str
        The cached file's name.
    sha256 : str
        Its hex digest.
    """
    entries: dict[str, str] = {}
    if manifest.is_file():
        try:
            entries = dict(json.loads(manifest.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            entries = {}
    entries[name] = sha256.lower()
    tmp = manifest.with_name(manifest.name + ".part")
    tmp.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(manifest)


def verify(path: Path, sha256: str | None, manifest: Path | None = None) -> str:
    """Check ``path`` against ``sha256``, or against the digest the user gave when it was fetched.

    Parameters
    ----------
    path : pathlib.Path
        The file to check.
    sha256 : str or None
        The digest embstab ships for the file (takes precedence over the record).
    manifest : pathlib.Path, optional
        JSON file mapping file names to digests the user gave (:func:`record_digest`).

    Returns
    -------
    str
        The file's digest.

    Raises
    ------
    ChecksumError
        If the digest differs from the expected one.
    UntrustedSourceError
        If no digest is known for the file (none ships, and none was given when it was fetched).
    """
    expected = sha256 or _recorded(manifest, path.name)
    if expected is None:
        raise UntrustedSourceError(f"{path}: no digest is known for this file (embstab ships none and none was "
                                   "given with --sha256 when it was fetched); delete it and fetch again with --sha256")
    actual = sha256_of(path)
    if actual != expected.lower():
        raise ChecksumError(f"{path} has SHA-256 {actual}, expected {expected}; the download is corrupt or "
                            f"the source changed (delete the file and fetch again with --force)")
    return actual


_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_source_url(url: str, documented: str | None, flag: str = "--url") -> str:
    """Accept ``url`` only if it is the documented address's host and scheme, or a loopback mirror.

    Parameters
    ----------
    url : str
        The address asked for.
    documented : str or None
        The address embstab documents for the source. ``None`` for a service whose mirrors are
        the user's choice (a model hub): then any host over https, or a loopback one.
    flag : str, default "--url"
        The option the address was given with, for the message.

    Returns
    -------
    str
        ``url``.

    Raises
    ------
    UntrustedSourceError
        For a local file, any scheme but http(s), another host, or plain http where the documented
        address is https.
    """
    if not isinstance(url, str) or any(ord(c) < 32 for c in url):
        raise UntrustedSourceError(f"{flag} {url!r} is not an address")
    asked = urllib.parse.urlsplit(url)
    home = urllib.parse.urlsplit(documented or "https://")
    host = asked.hostname or ""
    if asked.scheme not in ("http", "https") or not host:
        source = f"; the documented source is {documented}" if documented else ""
        raise UntrustedSourceError(f"{flag} {url}: only http(s) addresses are fetched (not "
                                   f"{asked.scheme or 'a path'}:){source}")
    if _is_loopback(host):
        return url  # a mirror on this machine: the digest, not the address, vouches for the file
    if documented is not None and host.lower() != (home.hostname or "").lower():
        raise UntrustedSourceError(f"{flag} {url}: host {host} is not the documented source's ({home.hostname}); "
                                   f"fetch from {documented} or from a mirror on this machine (localhost)")
    if asked.scheme == "http" and home.scheme == "https":
        raise UntrustedSourceError(f"{flag} {url}: plain http is refused for a host other than this machine's; "
                                   "use https")
    return url


class _DocumentedRedirects(urllib.request.HTTPRedirectHandler):
    # a redirect may change host (GitHub sends raw files to its content host) but never leave http(s),
    # and never step down from https to http: the digest check then still sees the file it asked for
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if new.scheme not in ("http", "https") or (old.scheme == "https" and new.scheme == "http"):
            raise urllib.error.HTTPError(newurl, code, f"redirect to {new.scheme}: refused", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener() -> urllib.request.OpenerDirector:
    # only the HTTP(S) handlers: no file:, ftp: or data: handler is ever installed
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.HTTPHandler(), urllib.request.HTTPSHandler(),
                    urllib.request.HTTPDefaultErrorHandler(), _DocumentedRedirects(),
                    urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


def download(url: str, dest: Path, sha256: str | None = None, progress: bool = True, timeout: float = 60.0,
             max_bytes: int | None = None) -> Path:
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
    max_bytes : int, optional
        Stop (and fail) once the file grows past this size.

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
        with _opener().open(url, timeout=timeout) as resp:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with open(part, "wb") as out, tqdm(total=total, unit="B", unit_scale=True, desc=dest.name,
                                               disable=not progress) as bar:
                for block in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(block)
                    bar.update(len(block))
                    if max_bytes is not None and out.tell() > max_bytes:
                        raise DownloadError(f"download of {url} failed: larger than the {max_bytes:,} bytes "
                                            "the source has")
    except DownloadError:
        part.unlink(missing_ok=True)
        raise
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


def fetch_verified(documented: str, dest: Path, *, pinned: str | None = None, size: int | None = None,
                   url: str | None = None, sha256: str | None = None, force: bool = False,
                   progress: bool = True) -> Path:
    """Fetch a named source into the cache, trusting only its documented address and a known digest.

    The digest is the one embstab ships (``pinned``); where none ships, the user must give one
    (``sha256``), which is then recorded beside the file so later loads check it. A given digest that
    disagrees with the shipped one is refused.

    Parameters
    ----------
    documented : str
        The source's documented address.
    dest : pathlib.Path
        The cached file (its folder holds ``SHA256SUMS.json``, the digests users gave).
    pinned : str, optional
        The digest embstab ships for the file.
    size : int, optional
        Its size in bytes, where known: a download that grows past it stops.
    url : str, optional
        A mirror: the documented host, or this machine's loopback.
    sha256 : str, optional
        A digest the user vouches for.
    force : bool, default False
        Fetch again even if the file is cached.
    progress : bool, default True
        Show a progress bar.

    Returns
    -------
    pathlib.Path
        ``dest``, verified.

    Raises
    ------
    UntrustedSourceError
        For an address that is not documented, or when no digest is known.
    DownloadError
        On a network or HTTP error; :class:`ChecksumError` when the file does not match.
    """
    if sha256 is not None:
        sha256 = sha256.strip().lower()
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise UntrustedSourceError(f"--sha256 {sha256!r} is not a SHA-256 digest (64 hexadecimal digits)")
        if pinned is not None and sha256 != pinned:
            raise UntrustedSourceError(f"--sha256 {sha256} differs from the digest embstab ships for {dest.name} "
                                       f"({pinned}); refusing a file other than the documented one")
    address = check_source_url(url, documented) if url is not None else documented
    expected = pinned or sha256
    manifest = dest.parent / "SHA256SUMS.json"
    if expected is None and (force or not dest.exists()):
        raise UntrustedSourceError(f"embstab ships no digest for {dest.name} ({documented}); check the file's "
                                   "SHA-256 from a source you trust and pass it with --sha256")
    if force or not dest.exists():
        download(address, dest, sha256=expected, progress=progress, max_bytes=size)
        if pinned is None:
            record_digest(manifest, dest.name, expected)
    verify(dest, pinned or sha256, manifest)
    return dest

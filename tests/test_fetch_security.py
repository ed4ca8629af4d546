"""Fetches trust only documented sources: the documented host (or a mirror on this machine) and the
digest that ships with the source, or one the user gives. Local files, other schemes and hosts, and
redirects that leave HTTP(S) are refused before anything reaches the cache."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tarfile
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from embstab.cli import main
from embstab.data import ChecksumError, DownloadError, UntrustedSourceError
from embstab.data.download import check_source_url, fetch_verified
from embstab.data.standard import STANDARD, download_standard, load_standard
from embstab.kg.datasets import STANDARD_GRAPHS, download_graph, load_graph

WN = STANDARD_GRAPHS["wn18rr"]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(handler):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def www(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    httpd, base = _serve(partial(_Quiet, directory=str(root)))
    yield root, base
    httpd.shutdown()
    httpd.server_close()


def _archive(path) -> str:
    with tarfile.open(path, "w:gz") as tf:
        for split, text in (("train", "a\tr\tb\nb\tr\tc\n"), ("valid", "a\tr\tc\n"), ("test", "c\tr\ta\n")):
            info = tarfile.TarInfo(f"WN18RR/text/{split}.txt")
            info.size = len(text)
            tf.addfile(info, io.BytesIO(text.encode()))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cached_files(cache):
    return sorted(p.name for p in cache.rglob("*") if p.is_file()) if cache.exists() else []


@pytest.fixture
def secret(tmp_path):
    """A private local file (mode 0640) that a fetch must never copy into the cache."""
    path = tmp_path / "shadow"
    path.write_bytes(b"root:$6$secret\n")
    path.chmod(0o640)
    return path


# ---------------------------------------------------------------------------------- the address
@pytest.mark.parametrize("url", [
    "file:///etc/shadow", "FILE:///etc/passwd", "file://localhost/etc/passwd", "/etc/passwd", "etc/passwd",
    "ftp://github.com/WN18RR.tar.gz", "data:,hello", "gopher://github.com/x", "jar:file:///x!/y",
    "https://evil.example/WN18RR.tar.gz", "https://github.com.evil.example/WN18RR.tar.gz",
    "https://evilgithub.com/WN18RR.tar.gz", "https://github.com@evil.example/WN18RR.tar.gz",
    "http://github.com/TimDettmers/ConvE/raw/master/WN18RR.tar.gz",  # https documented: no step down
    "https://10.0.0.1/WN18RR.tar.gz", "http://169.254.169.254/latest/meta-data", "http://0.0.0.0:8000/x",
    "https://github.com\n.evil.example/x", "", "https://", "http:///x",
])
def test_undocumented_addresses_are_refused(url):
    with pytest.raises(UntrustedSourceError):
        check_source_url(url, WN.url)


@pytest.mark.parametrize("url", [
    WN.url, "https://github.com/some/mirror/WN18RR.tar.gz", "https://GITHUB.com/x.tar.gz",
    "http://127.0.0.1:8000/WN18RR.tar.gz", "http://localhost/WN18RR.tar.gz", "https://[::1]:9/x",
    "http://127.3.4.5/x",
])
def test_documented_host_and_loopback_mirrors_are_accepted(url):
    assert check_source_url(url, WN.url) == url


def test_http_documented_source_accepts_http_on_its_host():
    text8 = STANDARD["text8"]
    assert check_source_url("http://mattmahoney.net/dc/text8.zip", text8.url)
    with pytest.raises(UntrustedSourceError):
        check_source_url("http://mattmahoney.net.evil.example/dc/text8.zip", text8.url)


@pytest.mark.parametrize("argv", [
    ["kg", "fetch", "wn18rr", "--url", "file://{secret}"],
    ["kg", "fetch", "wn18rr", "--url", "{secret}"],
    ["kg", "fetch", "fb15k237", "--url", "file://{secret}", "--sha256", "0" * 64],
    ["data", "fetch", "mpqa", "--url", "file://{secret}", "--sha256", "0" * 64],
    ["data", "fetch", "sst2", "--url", "file://{secret}"],
    ["data", "fetch", "text8", "--url", "ftp://mattmahoney.net/dc/text8.zip"],
    ["data", "fetch", "conll2003", "--url", "https://evil.example/conll2003.zip"],
])
def test_cli_refuses_local_files_and_foreign_hosts_and_copies_nothing(argv, secret, cache, capsys):
    argv = [a.replace("{secret}", str(secret)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--url" in err
    assert _cached_files(cache) == []  # neither the file nor a digest record reached the cache
    assert secret.read_bytes() == b"root:$6$secret\n" and (secret.stat().st_mode & 0o777) == 0o640


# ---------------------------------------------------------------------------------- the digest
def test_shipped_digests_are_sha256_and_every_entry_has_size_with_digest():
    for src in [*STANDARD.values(), *STANDARD_GRAPHS.values()]:
        if src.sha256 is not None:
            assert len(src.sha256) == 64 and int(src.sha256, 16) >= 0 and src.size and src.size > 0
    assert STANDARD_GRAPHS["wn18rr"].sha256 and STANDARD["sst2"].sha256 and STANDARD["text8"].sha256


def test_the_shipped_digest_is_enforced_for_a_mirror(www, cache):
    """A loopback mirror serving another file than the documented one is caught by the shipped digest."""
    root, base = www
    _archive(root / "WN18RR.tar.gz")
    with pytest.raises(ChecksumError, match="does not match"):
        download_graph("wn18rr", url=f"{base}/WN18RR.tar.gz", progress=False)
    assert _cached_files(cache) == []


def test_a_given_digest_must_equal_the_shipped_one(www, cache):
    root, base = www
    digest = _archive(root / "WN18RR.tar.gz")
    with pytest.raises(UntrustedSourceError, match="differs from the digest embstab ships"):
        download_graph("wn18rr", url=f"{base}/WN18RR.tar.gz", sha256=digest, progress=False)
    assert _cached_files(cache) == []


def test_no_digest_no_fetch(www, cache):
    """A source with no shipped digest is fetched only with one the user gives; never trust on first use."""
    root, base = www
    digest = _archive(root / "FB.zip")
    with pytest.raises(UntrustedSourceError, match="ships no digest"):
        download_graph("fb15k237", url=f"{base}/FB.zip", progress=False)
    assert _cached_files(cache) == []
    with pytest.raises(UntrustedSourceError, match="not a SHA-256"):
        download_graph("fb15k237", url=f"{base}/FB.zip", sha256="abc", progress=False)


def test_a_given_digest_is_recorded_and_guards_later_loads(www, cache, monkeypatch):
    root, base = www
    (root / "mpqa.all").write_text("1 good film\n0 bad film\n" * 10)
    digest = hashlib.sha256((root / "mpqa.all").read_bytes()).hexdigest()
    path = download_standard("mpqa", url=f"{base}/mpqa.all", sha256=digest.upper(), progress=False)
    assert json.loads((path.parent / "SHA256SUMS.json").read_text()) == {"mpqa.all": digest}
    assert len(load_standard("mpqa").train_y) > 0
    path.write_text("1 swapped\n")
    with pytest.raises(ChecksumError):
        load_standard("mpqa")


def test_a_record_in_the_cache_cannot_replace_a_shipped_digest(www, cache, monkeypatch):
    """Editing SHA256SUMS.json does not make a different wn18rr archive load: the shipped digest wins."""
    root, base = www
    digest = _archive(root / "WN18RR.tar.gz")
    monkeypatch.setitem(STANDARD_GRAPHS, "wn18rr", dataclasses.replace(WN, sha256=digest, size=None))
    path = download_graph("wn18rr", url=f"{base}/WN18RR.tar.gz", progress=False)
    assert load_graph("wn18rr").summary()["train"] == 2
    assert not (path.parent / "SHA256SUMS.json").exists()  # nothing recorded for a shipped digest
    monkeypatch.setitem(STANDARD_GRAPHS, "wn18rr", WN)  # the real digest again
    tampered = path.read_bytes()
    (path.parent / "SHA256SUMS.json").write_text(json.dumps({path.name: hashlib.sha256(tampered).hexdigest()}))
    with pytest.raises(ChecksumError):
        load_graph("wn18rr")


def test_a_cached_file_without_any_known_digest_is_not_loaded(cache):
    (cache / "standard").mkdir(parents=True)
    (cache / "standard" / "mpqa.all").write_text("1 planted\n0 file\n")
    with pytest.raises(UntrustedSourceError, match="no digest is known"):
        load_standard("mpqa")


# ---------------------------------------------------------------------------------- the transfer
class _Redirect(BaseHTTPRequestHandler):
    target = ""

    def do_GET(self):  # noqa: N802 (the http.server API)
        self.send_response(302)
        self.send_header("Location", self.target)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x", "data:,planted"])
def test_redirects_out_of_http_are_refused(target, cache):
    handler = type("Handler", (_Redirect,), {"target": target})
    httpd, base = _serve(handler)
    try:
        with pytest.raises(DownloadError, match="refused|failed"):
            download_standard("mpqa", url=f"{base}/mpqa.all", sha256="0" * 64, progress=False)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert _cached_files(cache) == []


def test_a_download_larger_than_the_source_stops(www, cache, tmp_path):
    root, base = www
    (root / "big.zip").write_bytes(b"\0" * (3 << 20))
    with pytest.raises(DownloadError, match="larger than the 1,048,576 bytes"):
        fetch_verified("https://example.org/big.zip", tmp_path / "cache" / "x" / "big.zip", pinned="0" * 64,
                       size=1 << 20, url=f"{base}/big.zip", progress=False)
    assert _cached_files(cache) == []


def test_cached_files_get_the_cache_s_own_permissions(www, cache):
    root, base = www
    (root / "mpqa.all").write_text("1 good\n0 bad\n")
    (root / "mpqa.all").chmod(0o600)  # what the server's file mode is must not matter
    digest = hashlib.sha256((root / "mpqa.all").read_bytes()).hexdigest()
    path = download_standard("mpqa", url=f"{base}/mpqa.all", sha256=digest, progress=False)
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_missing_standard_graph_names_the_command_that_fetches_it(cache, capsys):
    assert main(["kg", "graphs"]) == 0
    capsys.readouterr()
    with pytest.raises(FileNotFoundError, match=r"run `embstab data fetch wn18rr` first"):
        load_graph("wn18rr")


@pytest.mark.parametrize("endpoint", ["file:///etc", "ftp://hub.example", "http://hub.example", "/srv/hub",
                                      "https://"])
def test_a_hub_endpoint_must_be_https_or_this_machine(endpoint, cache, capsys):
    assert main(["contextual", "download", "org/name", "--endpoint", endpoint, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--endpoint" in err
    assert _cached_files(cache) == []


def test_hub_endpoints_over_https_or_loopback_are_accepted():
    for endpoint in ("https://hf-mirror.example.org", "http://127.0.0.1:8080", "http://localhost:9"):
        assert check_source_url(endpoint, None, "--endpoint") == endpoint

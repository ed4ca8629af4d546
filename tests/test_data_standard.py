"""Standard research sources: downloaded from a local HTTP server (127.0.0.1), verified and parsed."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import io
import tarfile
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from embstab.data import ChecksumError, DataFormatError, DataNotFoundError, DownloadError, UntrustedSourceError
from embstab.data.standard import STANDARD, download_standard, list_standard, load_standard


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pin(monkeypatch):
    """Ship the served test file's digest in place of the real one (the real file is not served here)."""
    def pin(name: str, path: Path) -> None:
        monkeypatch.setitem(STANDARD, name, dataclasses.replace(STANDARD[name], sha256=_sha(path), size=None))
    return pin


def _tar_gz(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


POS = [f"a wonderful , moving film number {i} ." for i in range(20)]
NEG = [f"a dull and tedious mess , take {i} ." for i in range(20)]


def test_text8(server, pin):
    root, base = server
    words = " ".join(f"w{i % 50}" for i in range(25_000))
    with zipfile.ZipFile(root / "text8.zip", "w") as zf:
        zf.writestr("text8", " " + words)
    pin("text8", root / "text8.zip")
    path = download_standard("text8", url=f"{base}/text8.zip", progress=False)
    assert path.exists()
    docs = load_standard("text8")
    assert [len(d) for d in docs] == [10_000, 10_000, 5_000]
    assert docs[0][:3] == ["w0", "w1", "w2"]


def test_sst2_glue_layout(server, pin):
    root, base = server
    head = "sentence\tlabel\n"
    train = head + "".join(f"{s}\t1\n" for s in POS) + "".join(f"{s}\t0\n" for s in NEG)
    dev = head + "it 's a charming and often affecting journey . \t1\nunflinchingly bleak and desperate \t0\n"
    with zipfile.ZipFile(root / "SST-2.zip", "w") as zf:
        zf.writestr("SST-2/train.tsv", train)
        zf.writestr("SST-2/dev.tsv", dev)
        zf.writestr("SST-2/test.tsv", "index\tsentence\n0\tunlabelled\n")
    pin("sst2", root / "SST-2.zip")
    download_standard("sst2", url=f"{base}/SST-2.zip", progress=False)
    d = load_standard("sst2")
    assert len(d.train_x) == 36 and len(d.dev_x) == 4
    assert d.test_y.tolist() == [1, 0] and d.test_x[0][:3] == ["it", "'s", "a"] or d.test_x[0][:2] == ["it", "s"]


def test_mr_and_subj_tarballs(server):
    root, base = server
    _tar_gz(root / "rt-polaritydata.tar.gz", {
        "rt-polaritydata/rt-polarity.pos": "\n".join(POS).encode("latin-1"),
        "rt-polaritydata/rt-polarity.neg":
            ("\n".join(NEG) + "\nun film trop long , d\xe9j\xe0 vu .").encode("latin-1")})
    _tar_gz(root / "rotten_imdb.tar.gz", {"plot.tok.gt9.5000": "\n".join(NEG).encode(),
                                          "quote.tok.gt9.5000": "\n".join(POS).encode()})
    download_standard("mr", url=f"{base}/rt-polaritydata.tar.gz", progress=False,
                      sha256=_sha(root / "rt-polaritydata.tar.gz"))
    download_standard("subj", url=f"{base}/rotten_imdb.tar.gz", progress=False, sha256=_sha(root / "rotten_imdb.tar.gz"))
    mr = load_standard("mr")
    assert len(mr.train_x) + len(mr.dev_x) + len(mr.test_x) == 41
    assert any("déjà" in x for x in mr.train_x + mr.dev_x + mr.test_x)
    subj = load_standard("subj")
    assert subj.labels == ["objective", "subjective"]
    y = np.concatenate([subj.train_y, subj.dev_y, subj.test_y])
    assert y.sum() == 20 and len(y) == 40


def test_mpqa_lines_and_bad_label(server):
    root, base = server
    (root / "mpqa.all").write_text("".join(f"1 {s}\n" for s in POS) + "".join(f"0 {s}\n" for s in NEG))
    download_standard("mpqa", url=f"{base}/mpqa.all", progress=False, sha256=_sha(root / "mpqa.all"))
    d = load_standard("mpqa")
    assert len(np.concatenate([d.train_y, d.dev_y, d.test_y])) == 40
    (root / "mpqa.all").write_text("positive great\n")
    download_standard("mpqa", url=f"{base}/mpqa.all", progress=False, force=True,
                      sha256=hashlib.sha256(b"positive great\n").hexdigest())
    with pytest.raises(DataFormatError, match=r"mpqa.all, line 1: label 'positive' is not 0 or 1"):
        load_standard("mpqa")


def test_conll_2003_columns(server, pin):
    root, base = server
    text = ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n"
            "call NN I-NP O\n. . O O\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
    with zipfile.ZipFile(root / "conll2003.zip", "w") as zf:
        for split in ("train", "valid", "test"):
            zf.writestr(f"{split}.txt", text)
    pin("conll2003", root / "conll2003.zip")
    download_standard("conll2003", url=f"{base}/conll2003.zip", progress=False)
    d = load_standard("conll2003")
    assert d.outside_tag == "O"
    assert d.train_x[0] == ["eu", "rejects", "german", "call", "."]
    assert [d.tags[i] for i in d.test_y[1]] == ["B-PER", "I-PER"]


def test_checksum_is_enforced_and_recorded(server, cache):
    root, base = server
    (root / "mpqa.all").write_text("1 good\n0 bad\n")
    with pytest.raises(ChecksumError, match="does not match"):
        download_standard("mpqa", url=f"{base}/mpqa.all", sha256="0" * 64, progress=False)
    assert not (cache / "standard" / "mpqa.all").exists()  # nothing half-verified stays behind
    path = download_standard("mpqa", url=f"{base}/mpqa.all", progress=False, sha256=_sha(root / "mpqa.all"))
    path.write_text("1 tampered\n")  # a cached file that changed is caught on the next use
    with pytest.raises(ChecksumError, match="expected"):
        load_standard("mpqa")


def test_http_errors_name_the_url(server, pin):
    root, base = server
    (root / "dummy").write_bytes(b"x")
    pin("text8", root / "dummy")
    with pytest.raises(DownloadError, match="404"):
        download_standard("text8", url=f"{base}/missing.zip", progress=False)


def test_not_downloaded_names_the_command():
    with pytest.raises(DataNotFoundError, match="embstab data fetch sst2"):
        load_standard("sst2")
    assert set(list_standard()["name"]) == set(STANDARD) == {"text8", "sst2", "mr", "subj", "mpqa", "conll2003",
                                                             "wn18rr", "fb15k237"}

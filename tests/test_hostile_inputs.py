"""Hostile and malformed inputs, one case per row: every one exits 2 with exactly one stderr line
naming the problem, runs nothing from the file, and leaves every input and special file as it was.

Categories: files that would run code, outputs that would destroy inputs or special files,
plausible wrong answers, option values and other mistakes that used to give tracebacks, and tiny
files that declare huge sizes. A few behaviours that are not errors (streaming into a FIFO or
``/dev/stdout``, a closed pipe, a byte-order mark) have their own tests at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat
import subprocess
import sys
import threading
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import embstab
import embstab.cli as cli
from embstab.io.compressed import MAGIC

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


class Payload:
    """Unpickling this creates the file ``MARKER``: proof that a data file ran code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# --------------------------------------------------------------------------------- the workspace
@pytest.fixture
def ws(tmp_path):
    """A directory of good and hostile files, and the marker path a payload would create."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    good = embstab.Embedding(words, rng.normal(size=(40, 6)), name="good")
    good.save(tmp_path / "good.txt")
    embstab.Embedding(words, rng.normal(size=(40, 6)), name="old").save(tmp_path / "old.txt")
    marker = tmp_path / "PWNED"
    evil = pickle.dumps(Payload(str(marker)), protocol=4)
    for name in ("evil.txt", "evil.bin", "evil.kv"):
        (tmp_path / name).write_bytes(evil)
    # an .npy whose array is a pickled object, and an .npz holding it
    with open(tmp_path / "objects.npy", "wb") as fh:
        np.lib.format.write_array(fh, np.array([Payload(str(marker))], dtype=object), allow_pickle=True)
    (tmp_path / "objects.vocab").write_text("a\n")
    with zipfile.ZipFile(tmp_path / "objects.npz", "w") as zf:
        zf.writestr("words.npy", (tmp_path / "objects.npy").read_bytes())
        zf.writestr("vectors.npy", (tmp_path / "objects.npy").read_bytes())
    # foreign words
    embstab.Embedding(["zzqx", "qqzv", "xxvq"], rng.normal(size=(3, 6)), name="foreign").save(tmp_path / "foreign.txt")
    (tmp_path / "corpus.txt").write_text("the cat sat on the mat\n" * 50)
    (tmp_path / "dup.txt").write_text("a 1 2\nb 2 1\na 3 3\n")
    (tmp_path / "good.vocab").write_text("w0\n")  # a plain text file that a .npy output's vocabulary would hit
    # undecodable vocabulary of a .npy matrix
    np.save(tmp_path / "latin1.npy", np.ones((2, 3)))
    (tmp_path / "latin1.vocab").write_bytes(b"caf\xe9\nna\xefve\n")
    np.save(tmp_path / "bigcount.npy", np.ones((1, 3)))
    (tmp_path / "bigcount.vocab").write_text("a\t99999999999999999999999\n")
    # results DB that is not SQLite, and a results table
    (tmp_path / "garbage.sqlite").write_bytes(b"this is not a database" * 100)
    (tmp_path / "results.csv").write_text("algo,dim\nw2v,10\n")
    os.link(tmp_path / "old.txt", tmp_path / "old_hardlink.txt")
    os.symlink(tmp_path / "old.txt", tmp_path / "old_symlink.txt")
    (tmp_path / "outdir").mkdir()
    os.mkfifo(tmp_path / "infifo")  # no writer: opening it to sniff the format would block forever
    _resource_files(tmp_path)
    _study_files(tmp_path)
    return tmp_path


def _resource_files(d: Path) -> None:
    # word2vec .bin: a 17-byte header declaring 10^8 words x 10^5 dims (40 PB), then one record
    (d / "huge.bin").write_bytes(b"100000000 100000\n" + b"w " + np.ones(8, "<f4").tobytes() + b"\n")
    # .npy: a header declaring (10^9, 10^5) float64 (800 TB) and 16 bytes of data
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**9, 10**5)}
    with open(d / "huge.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(b"\x00" * 16)
    (d / "huge.vocab").write_text("a\n")
    # .npz whose vectors member declares a huge shape
    buf = d / "member.npy"
    buf.write_bytes((d / "huge.npy").read_bytes())
    with zipfile.ZipFile(d / "huge.npz", "w") as zf:
        zf.writestr("words.npy", _npy_bytes(np.array(["a"])))
        zf.writestr("vectors.npy", buf.read_bytes())
    # text: a header declaring 2 x 200000, 200000 blank lines, one real row
    (d / "blank.txt").write_text("2 200000\n" + "\n" * 200_000 + "w " + " ".join(["0"] * 200_000) + "\n")
    # compressed files with edited headers
    emb = embstab.Embedding(["a", "b", "c"], np.eye(3), name="c")
    embstab.save(emb, d / "ok.esq")
    blob = (d / "ok.esq").read_bytes()
    pos = len(MAGIC)
    hlen = int.from_bytes(blob[pos:pos + 4], "little")
    head = json.loads(blob[pos + 4:pos + 4 + hlen])
    body = blob[pos + 4 + hlen + 4:]
    edited = dict(head, n_words=10**12)
    (d / "edited.esq").write_bytes(_esq(edited, body, head_crc=zlib.crc32(json.dumps(head).encode())))
    (d / "resealed.esq").write_bytes(_esq(edited, body))  # header checksum recomputed: the sizes still fail


def _npy_bytes(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _esq(header: dict, body: bytes, head_crc: int | None = None) -> bytes:
    head = json.dumps(header).encode()
    crc = zlib.crc32(head) if head_crc is None else head_crc
    return MAGIC + len(head).to_bytes(4, "little") + head + crc.to_bytes(4, "little") + body


def _study_files(d: Path) -> None:
    base = ("name: typo\ncorpus: {name: gensim_lee}\ntraining: {algorithms: [w2v_cbow], dimensions: [10], "
            "seeds: [1]}\ncompression: {bit_widths: [1]}\nmeasures: {names: [knn]}\n")
    (d / "typo.yaml").write_text(base + "downstream:\n  - {task: rt_sentiment, model: linear, options: {limt: 20}}\n")
    (d / "badlr.yaml").write_text(base + "downstream:\n  - {task: rt_sentiment, options: {lr: fast, limit: 5}}\n")
    (d / "hidden.yaml").write_text(base + "downstream:\n  - {task: rt_sentiment, model: lstm, options: {hiden: 8}}\n")


# ------------------------------------------------------------------------------------ the cases
# (id, argv with {d} for the workspace, words the one stderr line must contain)
CASES = [
    # a data file can run code
    ("pickle-as-text", ["compare", "{d}/evil.txt", "{d}/good.txt"], ["pickle", "--trust-pickle"]),
    ("pickle-as-bin", ["compress", "{d}/evil.bin", "{d}/out.esq", "--bits", "4"], ["pickle", "--trust-pickle"]),
    ("pickle-as-kv-anchor", ["compare", "{d}/good.txt", "{d}/old.txt", "--anchor-old", "{d}/evil.kv",
                             "--anchor-new", "{d}/old.txt"], ["pickle", "--trust-pickle"]),
    ("pickle-downstream", ["downstream", "{d}/evil.kv", "{d}/good.txt"], ["pickle", "--trust-pickle"]),
    ("pickled-objects-npy", ["compare", "{d}/objects.npy", "{d}/good.txt"], ["objects.npy", "pickle"]),
    ("pickled-objects-npz", ["compare", "{d}/objects.npz", "{d}/good.txt"], ["objects.npz", "pickle"]),
    # outputs that would destroy an input or a special file
    ("out-is-like", ["compress", "{d}/good.txt", "{d}/old.txt", "--bits", "4", "--like", "{d}/old.txt"],
     ["--like", "old.txt", "same file"]),
    ("out-is-in", ["compress", "{d}/good.txt", "{d}/good.txt", "--bits", "4"], ["IN", "same file"]),
    ("out-is-hardlink", ["compress", "{d}/old.txt", "{d}/old_hardlink.txt", "--bits", "4"], ["same file"]),
    ("out-is-symlink", ["compress", "{d}/old.txt", "{d}/old_symlink.txt", "--bits", "4"], ["same file"]),
    ("out-like-hardlink", ["compress", "{d}/good.txt", "{d}/old_hardlink.txt", "--bits", "4", "--like",
                           "{d}/old.txt"], ["--like", "same file"]),
    ("out-is-npy-vocab", ["compress", "{d}/latin1.npy", "{d}/latin1.vocab", "--bits", "4"],
     ["latin1.vocab", "vocabulary", "same file"]),
    ("npy-out-vocab-is-in", ["compress", "{d}/good.txt", "{d}/good.npy", "--bits", "4", "--output-format", "npy",
                             "--like", "{d}/good.vocab"], ["good.vocab", "same file"]),
    ("no-clobber", ["compress", "{d}/good.txt", "{d}/old.txt", "--bits", "4", "--no-clobber"],
     ["old.txt", "--no-clobber"]),
    ("train-no-clobber", ["train", "--corpus", "{d}/corpus.txt", "-o", "{d}/good.txt", "--no-clobber"],
     ["good.txt", "--no-clobber"]),
    ("report-no-clobber", ["report", "{d}/results.csv", "-o", "{d}/good.txt", "--no-clobber"], ["--no-clobber"]),
    ("train-out-is-corpus", ["train", "--corpus", "{d}/corpus.txt", "-o", "{d}/corpus.txt", "--dim", "4"],
     ["--corpus", "same file"]),
    ("train-pair-same-out", ["train", "--corpus", "{d}/corpus.txt", "--pair", "leave_out", "-o", "{d}/x.txt",
                             "{d}/x.txt"], ["same file", "distinct"]),
    ("report-over-results", ["report", "{d}/results.csv", "-o", "{d}/results.csv"], ["RESULTS", "same file"]),
    ("out-is-directory", ["compress", "{d}/good.txt", "{d}/outdir", "--bits", "4", "--quiet"], ["directory", "outdir"]),
    ("out-in-missing-dir", ["compress", "{d}/good.txt", "{d}/nodir/x.esq", "--bits", "4", "--quiet"],
     ["does not exist", "nodir"]),
    ("train-out-is-directory", ["train", "--corpus", "{d}/corpus.txt", "-o", "{d}/outdir"], ["-o", "directory"]),
    ("report-under-a-file", ["report", "{d}/results.csv", "-o", "{d}/good.txt/r.html"], ["-o", "not a directory"]),
    ("out-dev-full", ["compress", "{d}/good.txt", "/dev/full", "--bits", "4", "--quiet"], ["No space", "/dev/full"]),
    # plausible wrong answers
    ("downstream-zero-coverage", ["downstream", "{d}/foreign.txt", "{d}/foreign.txt", "--limit", "300"],
     ["0.0%", "--min-coverage"]),
    ("bits-17", ["compress", "{d}/good.txt", "{d}/o.esq", "--bits", "17"], ["--bits", "1-16 (2**bits levels) or 32"]),
    ("bits-33", ["compress", "{d}/good.txt", "{d}/o.esq", "--bits", "33"], ["--bits", "1-16 (2**bits levels) or 32"]),
    ("bits-0", ["compress", "{d}/good.txt", "{d}/o.esq", "--bits", "0"], ["--bits", "1-16 (2**bits levels) or 32"]),
    # option values and other mistakes that printed tracebacks or exited 1
    ("top-n-negative", ["compare", "{d}/good.txt", "{d}/old.txt", "--top-n", "-1"], ["--top-n", "0 or more"]),
    ("top-n-text", ["compare", "{d}/good.txt", "{d}/old.txt", "--top-n", "all"], ["--top-n", "integer"]),
    ("one-anchor", ["compare", "{d}/good.txt", "{d}/old.txt", "--anchor-old", "{d}/good.txt"], ["--anchor-new"]),
    ("duplicates", ["compare", "{d}/dup.txt", "{d}/good.txt"], ["duplicate word 'a'", "--duplicates first"]),
    ("downstream-limit-0", ["downstream", "{d}/good.txt", "{d}/old.txt", "--limit", "0"], ["--limit"]),
    ("downstream-lr-nan", ["downstream", "{d}/good.txt", "{d}/old.txt", "--lr", "nan"], ["--lr", "finite"]),
    ("downstream-coverage-2", ["downstream", "{d}/good.txt", "{d}/old.txt", "--min-coverage", "2"],
     ["--min-coverage", "between 0 and 1"]),
    ("downstream-seed-overflow", ["downstream", "{d}/good.txt", "{d}/old.txt", "--seed", "99999999999999999999"],
     ["--seed"]),
    ("compress-seed-negative", ["compress", "{d}/good.txt", "{d}/o.esq", "--bits", "4", "--seed", "-1"], ["--seed"]),
    ("downstream-one-embedding", ["downstream", "{d}/good.txt"], ["--seed-baseline"]),
    ("train-fraction", ["train", "--corpus", "{d}/corpus.txt", "-o", "{d}/t.txt", "--fraction", "2"],
     ["--fraction"]),
    ("train-leave-out-half", ["train", "--corpus", "{d}/corpus.txt", "--pair", "leave_out", "--fraction", "0.6",
                              "-o", "{d}/p.txt", "{d}/q.txt"], ["--fraction", "below 0.5"]),
    ("train-dim-0", ["train", "--corpus", "{d}/corpus.txt", "-o", "{d}/t.txt", "--dim", "0"], ["--dim"]),
    ("train-corpus-dir", ["train", "--corpus", "{d}/outdir", "-o", "{d}/t.txt"], ["--corpus", "directory"]),
    ("recommend-budget-negative", ["recommend", "{d}/results.csv", "--budget", "-5"], ["--budget"]),
    ("unknown-option", ["compare", "{d}/good.txt", "{d}/old.txt", "--frobnicate"], ["--frobnicate"]),
    ("unknown-measure", ["compare", "{d}/good.txt", "{d}/old.txt", "--measures", "eiss"], ["eiss"]),
    ("vocab-count-overflow", ["compare", "{d}/bigcount.npy", "{d}/good.txt"], ["bigcount.vocab", "64-bit"]),
    ("undecodable-vocab", ["compare", "{d}/latin1.npy", "{d}/good.txt"], ["latin1.vocab", "UTF-8"]),
    ("missing-input", ["compare", "{d}/nope.txt", "{d}/good.txt"], ["nope.txt"]),
    ("input-is-device", ["compare", "/dev/zero", "{d}/good.txt"], ["/dev/zero", "not a regular file"]),
    ("input-is-fifo", ["compare", "{d}/infifo", "{d}/good.txt"], ["infifo", "not a regular file"]),
    ("input-is-directory", ["compare", "{d}/outdir", "{d}/good.txt"], ["outdir", "directory"]),
    ("corrupt-results-db", ["study", "status", "--db", "{d}/garbage.sqlite"], ["garbage.sqlite"]),
    ("study-scheduler-no-port", ["study", "--quick", "--scheduler", "tcp://", "--store", "{d}/store"],
     ["--scheduler", "tcp://HOST"]),
    ("study-report-is-directory", ["study", "--quick", "--store", "{d}/store2", "-o", "{d}/outdir"],
     ["-o", "directory"]),
    ("study-workers-0", ["study", "--quick", "--workers", "0"], ["--workers"]),
    # tiny files declaring huge sizes
    ("bin-huge-header", ["compare", "{d}/huge.bin", "{d}/good.txt"], ["huge.bin", "truncated"]),
    ("npy-huge-header", ["compare", "{d}/huge.npy", "{d}/good.txt"], ["huge.npy", "declares shape"]),
    ("npz-huge-member", ["compare", "{d}/huge.npz", "{d}/good.txt"], ["huge.npz", "vectors"]),
    ("text-blank-lines", ["compare", "{d}/blank.txt", "{d}/good.txt"], ["blank.txt", "declares 2 words"]),
    ("esq-edited-header", ["compare", "{d}/edited.esq", "{d}/good.txt"], ["edited.esq", "header checksum"]),
    ("esq-resealed-header", ["compare", "{d}/resealed.esq", "{d}/good.txt"], ["resealed.esq", "add up"]),
    # study files and stores
    ("study-option-typo", ["study", "{d}/typo.yaml", "--store", "{d}/store"], ["limt", "did you mean 'limit'"]),
    ("study-model-option-typo", ["study", "{d}/hidden.yaml", "--store", "{d}/store"],
     ["hiden", "did you mean 'hidden'"]),
    ("study-option-value", ["study", "{d}/badlr.yaml", "--store", "{d}/store"], ["options.lr", "must be a number"]),
    ("store-missing-fs-package", ["study", "--quick", "--store", "s3://bucket/embstab", "--no-report"],
     ["s3fs", "pip install"]),
    ("store-unknown-protocol", ["study", "--quick", "--store", "nosuchfs://x"], ["nosuchfs", "Protocol"]),
    ("status-mistyped-store", ["study", "status", "--store", "{d}/stroe"], ["stroe", "--store"]),
]


def _snapshot(d: Path) -> dict[str, tuple]:
    """Type, target and content hash of every entry of the workspace (and the special files)."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            out[str(p)] = ("link", os.readlink(p))
        elif stat.S_ISREG(st.st_mode):
            out[str(p)] = ("file", st.st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        else:
            out[str(p)] = ("other", stat.S_IFMT(st.st_mode))
    for special in ("/dev/full", "/dev/null"):
        out[special] = ("special", stat.S_IFMT(os.lstat(special).st_mode))
    return out


@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_exits_2_with_one_line(ws, capsys, case, argv, words):
    before = _snapshot(ws)
    start = time.perf_counter()
    code = cli.main([a.replace("{d}", str(ws)) for a in argv])
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("embstab"), lines[0]
    assert "Traceback" not in captured.err
    for word in words:
        assert word in lines[0], lines[0]
    assert not (ws / "PWNED").exists(), "a data file ran code"
    assert _snapshot(ws) == before, "an input, a special file or the workspace changed"
    assert elapsed < 30, f"{case} took {elapsed:.1f} s (it should be refused before any real work)"


def test_the_suite_covers_every_category():
    assert len(CASES) >= 45
    assert len({c[0] for c in CASES}) == len(CASES)


# ---------------------------------------------------------------- not errors, but hostile setups
def test_pickle_runs_only_when_trusted(ws):
    """The opt-in really loads gensim files; the marker proves what --trust-pickle risks."""
    good = embstab.load(ws / "good.txt")
    embstab.save(good, ws / "good.kv")
    with pytest.raises(embstab.EmbeddingFormatError, match="--trust-pickle"):
        embstab.load(ws / "good.kv")
    assert embstab.load(ws / "good.kv", format="gensim").words == good.words
    assert cli.main(["compare", str(ws / "good.kv"), str(ws / "good.txt"), "--trust-pickle", "--measures", "knn"]) == 0
    assert not (ws / "PWNED").exists()


def test_missing_optional_package_is_one_line(ws, capsys, monkeypatch):
    embstab.save(embstab.load(ws / "good.txt"), ws / "good.kv")
    monkeypatch.setitem(sys.modules, "gensim", None)
    monkeypatch.setitem(sys.modules, "gensim.models", None)
    assert cli.main(["compare", str(ws / "good.kv"), str(ws / "good.txt"), "--trust-pickle"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "gensim" in err[0] and "pip install" in err[0]


def test_memory_error_is_one_line(ws, capsys, monkeypatch):
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(sys.modules["embstab.measures.compare"], "compare", exhausted)
    assert cli.main(["compare", str(ws / "good.txt"), str(ws / "old.txt")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "out of memory" in err[0]


def test_output_into_a_fifo_streams_and_keeps_the_fifo(ws):
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    got = bytearray()

    def reader():
        with open(fifo, "rb") as fh:
            got.extend(fh.read())

    t = threading.Thread(target=reader)
    t.start()
    assert cli.main(["compress", str(ws / "good.txt"), str(fifo), "--bits", "4", "--quiet"]) == 0
    t.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert bytes(got).startswith(MAGIC)


def test_output_through_a_symlink_to_stdout_is_written_into(ws):
    link = ws / "stdout_link"
    os.symlink("/proc/self/fd/1", link)
    proc = subprocess.run([sys.executable, "-m", "embstab", "compress", str(ws / "good.txt"), str(link), "--bits",
                           "4", "--quiet"], capture_output=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(MAGIC)
    assert os.readlink(link) == "/proc/self/fd/1"


def test_a_closed_pipe_ends_quietly(ws):
    # `embstab data list | head -0`: the reader is gone before the first write
    proc = subprocess.Popen([sys.executable, "-m", "embstab", "data", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_a_byte_order_mark_is_not_part_of_a_word(tmp_path):
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf2 2\nfirst 1 2\nsecond 2 1\n")
    (tmp_path / "bom_glove.txt").write_bytes(b"\xef\xbb\xbffirst 1 2\nsecond 2 1\n")
    for name in ("bom.txt", "bom_glove.txt"):
        assert embstab.load(tmp_path / name).words == ["first", "second"]
    np.save(tmp_path / "m.npy", np.eye(2))
    (tmp_path / "m.vocab").write_bytes(b"\xef\xbb\xbffirst\nsecond\n")
    assert embstab.load(tmp_path / "m.npy").words == ["first", "second"]


def test_status_on_a_mistyped_store_creates_nothing(tmp_path, capsys):
    assert cli.main(["study", "status", "--store", str(tmp_path / "typo")]) == 2
    assert not (tmp_path / "typo").exists()


def test_dev_stdout_redirected_to_a_file_is_written_into(ws):
    out = ws / "redirected.esq"
    with open(out, "wb") as fh:
        inode = os.fstat(fh.fileno()).st_ino
        proc = subprocess.run([sys.executable, "-m", "embstab", "compress", str(ws / "good.txt"), "/dev/stdout",
                               "--bits", "4", "--quiet"], stdout=fh, stderr=subprocess.PIPE, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert os.stat(out).st_ino == inode  # the shell's file, not a new one renamed over it
    assert embstab.load(out).words == embstab.load(ws / "good.txt").words

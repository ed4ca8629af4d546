"""Reading a ``.esq`` file costs memory and time bounded by the file's size.

Hostile files are written header by header: a small file whose header names a huge transform
either reads within the budget of :func:`embstab._resources.read_budget` (fast transforms, only the
rows that exist) or is refused in one line naming the file and the header key, before anything is
allocated. The bound is proved twice: by tracemalloc (numpy reports its buffers to it) in this
process, and in a child process whose address space and CPU time are capped by ``setrlimit``.
Legitimate files of every transform still decode to what the dense, pre-streaming algorithm gives.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import tracemalloc
import zlib

import numpy as np
import pytest

import embstab
import embstab.io.compressed as compressed
from embstab._resources import (READ_BYTES_ALLOWANCE, READ_BYTES_PER_BYTE, READ_OPS_ALLOWANCE, READ_OPS_PER_BYTE,
                                check_read_cost, read_budget)
from embstab.compress import save_compressed
from embstab.compress.transforms import transform_quantize_pair
from embstab.errors import DataFormatError, EmbeddingFormatError
from embstab.io import regenerate
from embstab.io.compressed import MAGIC, read_compressed, read_compressed_data, uniform_table, write_compressed
from embstab.recipes.ocs import OCSSplit, ocs_merge
from embstab.recipes.rotation import random_hadamard, random_orthogonal

MiB = 2**20


# --------------------------------------------------------------------------- crafting files
def _esq(path, n, dim, bits, transform=None, *, block_size=None, n_blocks=0):
    """A well-formed ``.esq`` (sizes and checksums right) whose header says what the test wants.

    Every code is 0; the words are ``w0, w1, ...``; a tensor train's cores follow the row codes.
    """
    words = [f"w{i}".encode() for i in range(n)]
    parts = [np.asarray([len(w) for w in words], "<u4").tobytes(), b"".join(words)]
    tt = (transform or {}).get("tt")
    table_len = 0
    if bits != 32 and tt is None:
        table_len = 2 ** bits
        parts.append(np.linspace(-1, 1, table_len).astype("<f8").tobytes())
    if n_blocks:
        parts.append(np.zeros((n, n_blocks), "<i2").tobytes())
    count = n * dim + (sum(math.prod(sh) for sh in tt["core_shapes"]) if tt else 0)
    parts.append(bytes(4 * count if bits == 32 else (count * bits + 7) // 8))
    crc = 0
    for p in parts:
        crc = zlib.crc32(p, crc)
    header = {"version": 3, "n_words": n, "dim": dim, "bits": bits, "words_bytes": len(parts[1]),
              "table_len": table_len, "n_blocks": n_blocks, "block_size": block_size, "has_counts": False,
              "crc32": crc, "body_bytes": sum(map(len, parts)), "name": None, "metadata": {}, "transform": transform}
    head = json.dumps(header).encode("ascii")
    path.write_bytes(MAGIC + len(head).to_bytes(4, "little") + head + zlib.crc32(head).to_bytes(4, "little")
                     + b"".join(parts))
    return path


def _rotation(dim, kind):
    return {"dim": dim, "rotation": kind, "seed": 0, "splits": [], "tt": None}


def _tt(shapes):
    return {"dim": math.prod(s[2] for s in shapes), "rotation": None, "seed": None, "splits": [],
            "tt": {"core_shapes": shapes, "clips": [1.0, 1.0, 1.0]}}


# name: (writer, expected shape when read, or the header key named when refused)
HOSTILE = {
    # 512 KB of 1-bit codes naming a 16384-d Hadamard rotation (was a 4.4 GB matrix, 88 s)
    "hadamard-16384": (lambda p: _esq(p, 256, 16384, 1, _rotation(16384, "hadamard")), (256, 16384)),
    # 128 KB naming an 8192-d random orthogonal rotation: a QR of 8192 x 8192 on every read
    "orthogonal-8192": (lambda p: _esq(p, 128, 8192, 1, _rotation(8192, "orthogonal")), "transform.rotation"),
    # 10 words of a tensor train whose 65536-d row grid has 1044 rows (was a 547 MB padded table)
    "tt-padded-grid": (lambda p: _esq(p, 10, 0, 1, _tt([[1, 1, 64, 1], [1, 1, 32, 1], [1, 1044, 32, 1]])),
                       (10, 65536)),
    # 36 KB of vocabulary naming a 3000 x 65536 table (was a 4.3 GB padded float64 table)
    "tt-huge-table": (lambda p: _esq(p, 3000, 0, 1, _tt([[1, 1, 64, 1], [1, 1, 32, 1], [1, 3000, 32, 1]])),
                      "transform.dim"),
    # no words at all, a tensor train of 1024 x 65536 (was 1.3 GB)
    "tt-zero-words": (lambda p: _esq(p, 0, 0, 1, _tt([[1, 1, 64, 1], [1, 1, 32, 1], [1, 1024, 32, 1]])),
                      (0, 65536)),
    # no words and 10^12 columns
    "zero-words-huge-dim": (lambda p: _esq(p, 0, 10**12, 4), "dim"),
    # one block of scales a billion columns wide for 8 columns (was a repeat to n x 10^9)
    "block-size-1e9": (lambda p: _esq(p, 1000, 8, 4, block_size=10**9, n_blocks=1), (1000, 8)),
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    return {name: make(folder / f"{name}.esq") for name, (make, _) in HOSTILE.items()}


def _traced(fn, *args):
    """``fn(*args)`` (or the exception it raised) and the peak of traced memory meanwhile."""
    tracemalloc.start()
    try:
        try:
            result = fn(*args)
        except Exception as exc:  # noqa: BLE001 - the caller checks which
            result = exc
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture
def estimates(monkeypatch):
    """The (bytes, operations) each read asked check_read_cost to allow."""
    seen = []

    def spy(path, key, size, nbytes, ops, what, **kw):
        seen.append((nbytes, ops))
        return check_read_cost(path, key, size, nbytes, ops, what, **kw)

    monkeypatch.setattr(compressed, "check_read_cost", spy)
    return seen


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_header_reads_within_the_budget_or_is_refused_in_one_line(hostile, estimates, name):
    path, expected = hostile[name], HOSTILE[name][1]
    size = path.stat().st_size
    result, peak = _traced(read_compressed, path)
    if isinstance(expected, tuple):
        assert not isinstance(result, Exception), result
        assert result.shape == expected
        assert peak <= read_budget(size)[0], f"{peak / MiB:.0f} MiB for a {size} byte file"
        assert peak <= estimates[-1][0], "the estimate that was checked must cover what was used"
        assert estimates[-1][1] <= read_budget(size)[1]
    else:
        assert isinstance(result, EmbeddingFormatError), result
        message = str(result)
        assert "\n" not in message and str(path) in message and f"header key {expected!r}" in message
        # refused from the header alone: nothing beyond the file itself was allocated
        assert peak <= 2 * size + MiB, f"{peak / MiB:.1f} MiB allocated before refusing"


def test_decoded_values_of_a_hostile_hadamard_file_are_its_rotated_codes(hostile):
    data = read_compressed_data(hostile["hadamard-16384"])
    # every code is 0, the table's first value -1: each row is -1 * ones(16384) @ R.T
    row = data.decode()[:2]
    expected = regenerate.hadamard_rotate(-np.ones((1, 16384)), 0, transpose=True)[0]
    np.testing.assert_array_equal(row, np.tile(expected.astype(np.float32), (2, 1)))


_CHILD = textwrap.dedent("""
    import os, resource, sys
    import numpy as np
    from embstab.io.compressed import read_compressed
    from embstab._resources import read_budget
    from embstab.errors import EmbeddingFormatError
    path, control = sys.argv[1], sys.argv[2] == "control"
    with open("/proc/self/status") as fh:
        vm = next(int(l.split()[1]) * 1024 for l in fh if l.startswith("VmSize:"))
    limit = vm + read_budget(os.path.getsize(path))[0] + 256 * 2**20  # the budget, and room for thread arenas
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
    if control:  # what the reader used to build for this file: the limit must stop it
        try:
            np.ones((16384, 16384))
        except MemoryError:
            print("STOPPED")
        sys.exit(0)
    try:
        emb = read_compressed(path)
    except EmbeddingFormatError as exc:
        print("REFUSED", exc)
    else:
        print("READ", emb.shape)
""")


def _child(path, control=False):
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), "control" if control else "read"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_file_reads_under_an_address_space_limit_of_its_budget(hostile, name):
    out = _child(hostile[name])
    expected = HOSTILE[name][1]
    if isinstance(expected, tuple):
        assert out == f"READ {expected}", out
    else:
        assert out.startswith("REFUSED") and f"header key {expected!r}" in out, out


def test_the_child_limit_stops_the_matrix_the_old_reader_built(hostile):
    # the limit of the test above is tight enough to refuse a 16384 x 16384 float64 matrix
    assert _child(hostile["hadamard-16384"], control=True) == "STOPPED"


def test_devices_and_pipes_are_refused_without_reading(tmp_path):
    fifo = tmp_path / "pipe.esq"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(EmbeddingFormatError, match="not a regular compressed embedding file") as err:
            read_compressed(path)  # a FIFO without a writer would block an ordinary open
        assert path in str(err.value) and "\n" not in str(err.value)


def test_the_budget_is_the_documented_factor_times_the_size_plus_the_allowance():
    assert read_budget(0) == (READ_BYTES_ALLOWANCE, READ_OPS_ALLOWANCE)
    assert read_budget(1000) == (1000 * READ_BYTES_PER_BYTE + READ_BYTES_ALLOWANCE,
                                 1000 * READ_OPS_PER_BYTE + READ_OPS_ALLOWANCE)
    check_read_cost("f.esq", "dim", 1000, *read_budget(1000), "just within")
    for nbytes, ops in ((read_budget(1000)[0] + 1, 0), (0, read_budget(1000)[1] + 1)):
        with pytest.raises(EmbeddingFormatError, match=r"^f\.esq: header key 'dim': too much") as err:
            check_read_cost("f.esq", "dim", 1000, nbytes, ops, "too much", error=EmbeddingFormatError)
        assert "\n" not in str(err.value)
    with pytest.raises(DataFormatError):
        check_read_cost("t.txt", "line 3", 10, 10**12, 0, "a table")


# --------------------------------------------------------------------------- legitimate files
def _dense_reference(data):
    """The decoding as it was before it streamed: dense matrices, ocs_merge, the padded TT grid."""
    t = data.transform
    if t is not None and t.is_tt:
        cores = ([np.asarray(c, np.float64) for c in t.tt_cores] if data.bits == 32 else
                 [uniform_table(data.bits, clip)[c.astype(np.int64)] for c, clip in zip(t.tt_cores, t.tt_clips)])
        full = np.einsum("aikb,bjlc,cmoe->ijmklo", *cores, optimize=True)
        return full.reshape(math.prod(c.shape[1] for c in cores), -1)[:len(data.words)].astype(np.float32)
    vals = (data.codes.astype(np.float64) if data.bits == 32
            else np.asarray(data.table, np.float64)[data.codes.astype(np.int64)])
    if data.scale_exponents is not None:
        bs = data.block_size or data.dim
        vals = vals * np.repeat(np.ldexp(1.0, data.scale_exponents.astype(np.int64)), bs, axis=1)[:, :data.dim]
    if t is not None:
        if t.splits:
            vals = ocs_merge(OCSSplit(vals, t.splits, rule="half", axis=1))
        if t.rotation is not None:
            make = random_hadamard if t.rotation == "hadamard" else random_orthogonal
            vals = vals @ make(t.dim, t.seed).T
    return vals.astype(np.float32)


def _assert_same_decoding(got, ref):
    """Bit for bit, except where the exact value is 0 and the dense sum leaves float64 round-off."""
    scale = float(np.abs(ref).max()) or 1.0
    large = np.abs(ref) > 1e-9 * scale
    np.testing.assert_array_equal(got[large], ref[large])
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14 * scale)


@pytest.mark.parametrize("transform", ["none", "hadamard", "orthogonal", "ocs:0.05", "hadamard+ocs:0.05",
                                       "orthogonal+ocs:0.1", "tt:4"])
@pytest.mark.parametrize("bits", [1, 4, 8, 32])
def test_legitimate_files_decode_as_the_dense_algorithm_did(tmp_path, estimates, transform, bits):
    rng = np.random.default_rng(bits)
    n, d = 300, 40  # 40 = 32 + 8: two Hadamard blocks
    A = rng.standard_normal((n, d))
    A[:, 3] *= 9
    B = A + 0.05 * rng.standard_normal((n, d))
    words = [f"w{i}" for i in range(n)]
    res = transform_quantize_pair(A, B, bits, transform, seed=5)
    for k, stored in enumerate(res.stored):
        path = tmp_path / f"m{k}.esq"
        write_compressed(stored.to_data(words), path)
        back, peak = _traced(read_compressed, path)
        assert not isinstance(back, Exception), back
        assert peak <= estimates[-1][0] <= read_budget(path.stat().st_size)[0]
        np.testing.assert_array_equal(back.vectors, (res.old, res.new)[k])  # the file reads what was compressed
        _assert_same_decoding(back.vectors, _dense_reference(read_compressed_data(path)))


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4", "mxint8"])
def test_block_scaled_and_float_formats_decode_bit_for_bit(tmp_path, fmt):
    rng = np.random.default_rng(1)
    emb = embstab.Embedding([f"w{i}" for i in range(200)], rng.standard_normal((200, 70)).astype(np.float32))
    save_compressed(emb, tmp_path / "f.esq", format=fmt)
    data = read_compressed_data(tmp_path / "f.esq")
    np.testing.assert_array_equal(data.decode(), _dense_reference(data))


# --------------------------------------------------------------------------- the regenerating transforms
@pytest.mark.parametrize("d", [1, 5, 64, 100])
def test_fast_hadamard_rotation_is_the_dense_product(d):
    x = np.random.default_rng(d).standard_normal((7, d))
    R = random_hadamard(d, 9)
    np.testing.assert_allclose(regenerate.hadamard_rotate(x, 9), x @ R, rtol=0, atol=1e-13)
    np.testing.assert_allclose(regenerate.hadamard_rotate(x, 9, transpose=True), x @ R.T, rtol=0, atol=1e-13)
    m = 1 << (d.bit_length() - 1)
    np.testing.assert_allclose(regenerate.fwht(x[:, :m]), x[:, :m] @ regenerate.hadamard(m), rtol=0, atol=1e-12)


def test_tensor_train_rows_are_rows_of_the_padded_table():
    rng = np.random.default_rng(0)
    cores = [rng.standard_normal(s) for s in ((1, 3, 2, 4), (4, 5, 3, 2), (2, 7, 2, 1))]
    full = np.einsum("aikb,bjlc,cmoe->ijmklo", *cores).reshape(105, 12)
    for start, stop in ((0, 105), (0, 1), (6, 40), (104, 105), (50, 50)):
        np.testing.assert_allclose(regenerate.tt_rows(cores, start, stop), full[start:stop], rtol=1e-12, atol=1e-12)
    nbytes, ops = regenerate.tt_rows_cost([c.shape for c in cores], 34)
    assert 0 < nbytes and 34 * 12 <= ops


def test_merging_half_splits_is_ocs_merge():
    rng = np.random.default_rng(2)
    splits = [(1, 5), (5, 6), (0, 7)]
    x = rng.standard_normal((9, 8))
    np.testing.assert_array_equal(regenerate.merge_half_splits(x, splits),
                                  ocs_merge(OCSSplit(x, splits, rule="half", axis=1)))

"""Transformed compression stores what it reports: rotated/split codes or TT cores in the ``.esq``."""

from __future__ import annotations

import json
import math
import zlib

import numpy as np
import pytest
import torch

import embstab
from embstab import cli
from embstab.compress import compress_pair, read_compressed, read_compressed_data, transform_quantize_pair
from embstab.errors import EmbeddingFormatError
from embstab.lowprec import as_generator
from embstab.io.compressed import MAGIC, VERSION, CompressedData, StoredTransform, write_compressed
from embstab.recipes.rotation import random_hadamard, random_orthogonal

TRANSFORMS = ("none", "hadamard", "orthogonal", "ocs:0.03", "hadamard+ocs:0.03", "tt:8")
# magic, header length, header JSON (with the metadata of these tests) and its checksum stay under
# 2 KiB; the code table of a b-bit grid adds 8 * 2**b bytes
HEADER_ALLOWANCE = 2048


def _pair(n=3000, d=64, seed=7401):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    A[:, [3, d - 5]] *= 8  # outlier dimensions, where rotation and splitting matter
    B = A + 0.05 * rng.standard_normal((n, d))
    words = [f"w{i}" for i in range(n)]
    return embstab.Embedding(words, A.astype(np.float32), name="old"), embstab.Embedding(words, B.astype(np.float32),
                                                                                          name="new")


@pytest.fixture(scope="module")
def pair():
    return _pair()


def _vocab_bytes(words):
    return 4 * len(words) + sum(len(w.encode("utf-8")) for w in words)


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_file_size_is_the_reported_bits_and_reads_back_the_same(tmp_path, pair, transform):
    old, new = pair
    bits = 4
    old_c, new_c = compress_pair(old, new, bits, seed=11, transform=transform)
    for member, emb in (("old", old_c), ("new", new_c)):
        path = tmp_path / f"{member}.esq"
        emb.save(path)
        bpw = emb.metadata["compression"]["memory_bits_per_word"]
        bound = math.ceil(bpw * len(emb) / 8) + _vocab_bytes(emb.words) + 8 * 2 ** bits + HEADER_ALLOWANCE
        assert path.stat().st_size <= bound
        back = read_compressed(path)
        assert back.words == emb.words and back.shape == emb.shape
        np.testing.assert_array_equal(back.vectors, emb.vectors)
        assert back.metadata["compression"]["memory_bits_per_word"] == bpw
    if transform != "none":
        # the in-memory result is what transform_quantize_pair gives for the same seed
        ref = transform_quantize_pair(old.vectors, new.align_to(old).vectors, bits, transform,
                                      seed=as_generator(11, torch.device("cpu")))
        scale = float(np.abs(ref.old).max())
        np.testing.assert_allclose(read_compressed(tmp_path / "old.esq").vectors, ref.old, rtol=0, atol=1e-6 * scale)
        np.testing.assert_allclose(read_compressed(tmp_path / "new.esq").vectors, ref.new, rtol=0, atol=1e-6 * scale)


def test_transformed_file_is_far_smaller_than_dequantized_floats(tmp_path, pair):
    old, new = pair
    _, new_c = compress_pair(old, new, 4, seed=0, transform="hadamard+ocs:0.03")
    new_c.save(tmp_path / "codes.esq")
    write_compressed(embstab.Embedding(new_c.words, new_c.vectors), tmp_path / "floats.esq")
    codes, floats = (tmp_path / "codes.esq").stat().st_size, (tmp_path / "floats.esq").stat().st_size
    assert codes < floats / 3  # 66 four-bit codes per word instead of 64 float32 values


@pytest.mark.parametrize("transform", ["hadamard+ocs:0.05", "orthogonal", "tt:3"])
@pytest.mark.parametrize("bits", [1, 8, 32])
def test_round_trip_at_other_widths(tmp_path, transform, bits):
    old, new = _pair(n=400, d=16, seed=7402)
    res = transform_quantize_pair(old.vectors, new.vectors, bits, transform, rounding="stochastic", seed=3)
    for got, stored in zip((res.old, res.new), res.stored):
        data = stored.to_data(old.words)
        write_compressed(data, tmp_path / "x.esq")
        back = read_compressed_data(tmp_path / "x.esq")
        assert back.bits == bits and back.dim == 16
        np.testing.assert_array_equal(back.decode(), got)
        assert back.transform.header() == stored.transform.header()


def test_stored_rotation_is_regenerated_from_kind_seed_and_dimension(pair):
    old, new = pair
    for kind, make in (("hadamard", random_hadamard), ("orthogonal", random_orthogonal)):
        assert np.array_equal(make(64, 5), make(64, 5)) and not np.array_equal(make(64, 5), make(64, 6))
        gen = torch.Generator().manual_seed(2)
        res = transform_quantize_pair(old.vectors, new.vectors, 4, kind, seed=gen)
        drawn = int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(2)))
        assert res.stored[0].transform.seed == drawn == res.details["rotation_seed"]
        # the codes live in the rotated coordinates: rotating the decoded table reproduces them
        codes = res.stored[0]
        rotated = np.asarray(codes.table)[codes.codes.astype(np.int64)]
        np.testing.assert_allclose(res.old.astype(np.float64) @ make(64, drawn), rotated, atol=1e-5 * np.abs(rotated).max())


def test_version_is_bumped_and_transform_needs_the_new_reader(tmp_path, pair):
    old, new = pair
    _, new_c = compress_pair(old, new, 4, seed=0, transform="hadamard")
    new_c.save(tmp_path / "h.esq")
    header = _header(tmp_path / "h.esq")
    assert VERSION == 3 and header["version"] == 3
    assert header["transform"]["rotation"] == "hadamard" and header["dim"] == 64


def _header(path):
    blob = path.read_bytes()
    hlen = int.from_bytes(blob[len(MAGIC):len(MAGIC) + 4], "little")
    return json.loads(blob[len(MAGIC) + 4:len(MAGIC) + 4 + hlen])


def _rewrite_header(src, dst, edit):
    """Edit a file's header JSON and re-sign it, so only the reader's own checks can object."""
    blob = src.read_bytes()
    pos = len(MAGIC)
    hlen = int.from_bytes(blob[pos:pos + 4], "little")
    header = json.loads(blob[pos + 4:pos + 4 + hlen])
    edit(header)
    head = json.dumps(header).encode("ascii")
    body = blob[pos + 4 + hlen + 4:]
    dst.write_bytes(MAGIC + len(head).to_bytes(4, "little") + head + zlib.crc32(head).to_bytes(4, "little") + body)


def test_corrupt_transform_headers_are_refused(tmp_path):
    old, new = _pair(n=300, d=16, seed=7403)
    res_rot = transform_quantize_pair(old.vectors, new.vectors, 4, "hadamard+ocs:0.1", seed=0)
    write_compressed(res_rot.stored[0].to_data(old.words), tmp_path / "r.esq")
    res_tt = transform_quantize_pair(old.vectors, new.vectors, 4, "tt:2", seed=0)
    write_compressed(res_tt.stored[0].to_data(old.words), tmp_path / "t.esq")
    cases = {
        "r": [(lambda h: h["transform"].update(dim=1_000_000), "cannot have"),
              (lambda h: h["transform"].update(seed=-1), "inconsistent contents"),
              (lambda h: h["transform"].update(rotation="fourier"), "inconsistent contents"),
              (lambda h: h["transform"].update(splits=[[0, 3], [1, 17]]), "inconsistent contents"),
              (lambda h: h["transform"].update(splits="x"), "cannot have"),
              (lambda h: (h.update(n_words=1, dim=10 ** 6 + 2), h["transform"].update(dim=10 ** 6)),
               "rotation for only 1 words")],
        "t": [(lambda h: h["transform"]["tt"]["core_shapes"][0].__setitem__(1, 10 ** 9), "tensor train of"),
              (lambda h: h["transform"]["tt"].update(core_shapes=[[1, 2, 2, 2]]), "three 4-d cores"),
              (lambda h: (h["transform"]["tt"]["core_shapes"][0].__setitem__(2, 10 ** 6),
                          h["transform"].update(dim=10 ** 6 * 16)), "tensor train of"),
              (lambda h: h["transform"].update(dim=1e400), "corrupt header"),
              (lambda h: h["transform"]["tt"].update(clips=[1.0, -1.0, 2.0]), "inconsistent contents")],
    }
    for name, edits in cases.items():
        for i, (edit, message) in enumerate(edits):
            bad = tmp_path / f"{name}{i}.esq"
            _rewrite_header(tmp_path / f"{name}.esq", bad, edit)
            with pytest.raises(EmbeddingFormatError, match=message):
                read_compressed(bad)


def test_an_empty_transformed_table_builds_no_rotation(tmp_path):
    data = CompressedData([], np.zeros((0, 10 ** 7 + 1), np.uint8), 4, np.zeros(16),
                          transform=StoredTransform(10 ** 7, "orthogonal", 0, [(0, 10 ** 7)]))
    assert data.decode().shape == (0, 10 ** 7)  # no 10^7 x 10^7 matrix is built for no rows
    write_compressed(data, tmp_path / "empty.esq")
    with pytest.raises(EmbeddingFormatError, match="rotation for only 0 words"):
        read_compressed_data(tmp_path / "empty.esq")  # a reader does not trust such a header at all


def test_stored_transform_checks_its_parts():
    with pytest.raises(ValueError, match="seed"):
        StoredTransform(8, "hadamard", None)
    with pytest.raises(ValueError, match="append column 8"):
        StoredTransform(8, None, None, [(0, 9)])
    with pytest.raises(ValueError, match="stands alone"):
        StoredTransform(8, "hadamard", 0, tt_cores=[np.zeros((1, 2, 2, 1))] * 3)
    with pytest.raises(ValueError, match="must have 5 columns"):
        CompressedData(["a"], np.zeros((1, 4), np.uint8), 4, np.zeros(16), transform=StoredTransform(3, None, None, [(0, 3), (1, 4)]))


def test_study_members_keep_their_bits_after_saving(tmp_path, pair):
    old, new = pair
    old_c, new_c = compress_pair(old, new, 2, seed=4, transform="orthogonal+ocs:0.05")
    assert old_c.metadata["compression"]["memory_bits_per_word"] == (64 + 4) * 2
    new_c.save(tmp_path / "n.esq")
    back = read_compressed_data(tmp_path / "n.esq")
    assert back.metadata["compression"]["memory_bits_per_word"] == (64 + 4) * 2
    assert back.codes.shape == (3000, 68) and back.nbytes() == 3000 * 68 * 2 // 8
    assert back.metadata["compression"]["aligned_to"] == "old"


# --- command line --------------------------------------------------------------------------------


def test_cli_reports_knn_overlap_and_warns_when_low(tmp_path, capsys):
    old, _ = _pair(n=1500, d=64, seed=7404)
    src = tmp_path / "in.npz"
    old.save(src)
    out = tmp_path / "tt.esq"
    assert cli.main(["compress", str(src), str(out), "--bits", "4", "--tt-ranks", "2"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "k-NN overlap" in err[0] and f"{out.stat().st_size} bytes" in err[0]
    assert err[1].startswith("warning: tt:2 keeps only ") and "k-NN neighbourhoods" in err[1]
    overlap = float(err[0].split("k-NN overlap ")[1].split(":")[0])
    assert overlap < 0.5
    back = embstab.load(out)
    assert back.shape == old.shape and back.metadata["compression"]["transform"] == "tt:2"
    # a gentle compression keeps the neighbourhoods: no warning, and --quiet silences the summary
    assert cli.main(["compress", str(src), str(tmp_path / "h.esq"), "--bits", "8", "--rotate", "hadamard",
                     ]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "(hadamard)" in err[0] and "warning" not in err[0]
    assert float(err[0].split("k-NN overlap ")[1].split(":")[0]) > 0.8
    # the low-overlap warning is printed even with --quiet
    assert cli.main(["compress", str(src), str(tmp_path / "q.esq"), "--bits", "4", "--tt-ranks", "2",
                     "--quiet"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: tt:2 keeps only ")


def test_cli_transformed_esq_holds_codes(tmp_path, capsys):
    old, _ = _pair(n=1200, d=32, seed=7405)
    src = tmp_path / "in.npz"
    old.save(src)
    out = tmp_path / "o.esq"
    assert cli.main(["compress", str(src), str(out), "--bits", "4", "--rotate", "orthogonal", "--ocs", "0.05",
                     "--seed", "9"]) == 0
    capsys.readouterr()
    data = read_compressed_data(out)
    assert data.bits == 4 and data.codes.shape == (1200, 34)
    assert data.transform.rotation == "orthogonal" and data.transform.seed == 9
    assert out.stat().st_size <= 1200 * 34 * 4 // 8 + _vocab_bytes(old.words) + 8 * 16 + HEADER_ALLOWANCE
    ref = transform_quantize_pair(old.vectors, old.vectors, 4, "orthogonal+ocs:0.05", seed=9)
    np.testing.assert_array_equal(data.decode(), ref.new)
    from embstab.cli.compress import DESCRIPTION

    assert "written dequantized" not in DESCRIPTION

"""Embedding-level compression: per-row formats, the pair protocol, PCA truncation, files and the CLI."""

from __future__ import annotations

import argparse
import os

import numpy as np
import pytest

import embstab
from embstab import Embedding
from embstab.compress import (compress_embedding, compress_pair, optimal_clip, quantize_embedding, read_compressed_data,
                              save_compressed, truncate_dimension, uniform_quantize)
from embstab.embedding import procrustes_rotation
from embstab.errors import EmbeddingFormatError, EmbstabError, ShapeError
from embstab.io.compressed import MAGIC, read_compressed, write_compressed
from embstab.lowprec import quantize


def _emb(n=300, d=24, seed=0, name="e"):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n)]
    return Embedding(words, rng.standard_normal((n, d)).astype(np.float32), counts=np.arange(n, 0, -1), name=name)


def test_pair_protocol_aligns_and_uses_old_clip():
    old = _emb(seed=1, name="old")
    rng = np.random.default_rng(9)
    q, _ = np.linalg.qr(rng.standard_normal((24, 24)))
    new = Embedding(old.words[::-1], (old.vectors @ q.T + 0.01 * rng.standard_normal((300, 24)))[::-1].astype(np.float32),
                    name="new")
    old_c, new_c = compress_pair(old, new, 4)
    r = optimal_clip(old.vectors, 4)
    assert old_c.metadata["compression"]["clip"] == r == new_c.metadata["compression"]["clip"]
    assert np.array_equal(old_c.vectors, uniform_quantize(old.vectors, 4, clip=r))
    shared = old.words
    omega = procrustes_rotation(new.subset(shared).vectors.astype(np.float64), old.vectors.astype(np.float64))
    expected = uniform_quantize((new.vectors.astype(np.float64) @ omega).astype(np.float32), 4, clip=r)
    assert np.array_equal(new_c.vectors, expected)
    assert np.mean(new_c.subset(shared).vectors != old_c.vectors) < 0.2  # aligned: mostly the same grid points


def test_pair_at_32_bits_only_clips_to_old_max():
    old, new = _emb(seed=1), _emb(seed=2)
    new = Embedding(new.words, new.vectors * 3)
    old_c, new_c = compress_pair(old, new, 32)
    top = np.abs(old.vectors).max()
    assert np.array_equal(old_c.vectors, old.vectors)
    assert np.abs(new_c.vectors).max() <= top and np.abs(new_c.vectors).max() == pytest.approx(top)


def test_pair_stochastic_is_seeded():
    old, new = _emb(seed=1), _emb(seed=2)
    a = compress_pair(old, new, 2, rounding="stochastic", seed=3)
    b = compress_pair(old, new, 2, rounding="stochastic", seed=3)
    assert all(np.array_equal(x.vectors, y.vectors) for x, y in zip(a, b))


@pytest.mark.parametrize("fmt", ["fp8", "fp8_e5m2", "fp6", "fp4", "bf16", "bfp8", "mxfp4", "mxint8", "mxfp8_e4m3"])
def test_per_row_formats_round_trip_through_files(tmp_path, fmt):
    emb = _emb(40, 70)
    emb = emb.with_vectors(emb.vectors * np.exp2(np.arange(40) % 7 - 3)[:, None].astype(np.float32))
    c = compress_embedding(emb, format=fmt)
    ref = np.asarray(quantize(emb.vectors, fmt if fmt not in ("fp8", "fp8_e5m2") else
                              embstab.lowprec.get_format(fmt).replace(overflow="saturate")), np.float32)
    assert np.array_equal(c.vectors, ref)
    path = tmp_path / "x.esq"
    c.save(path)
    back = embstab.load(path)
    assert back.words == emb.words and np.array_equal(back.vectors, c.vectors)
    assert np.array_equal(back.counts, emb.counts)


@pytest.mark.parametrize("bits", [1, 3, 4, 8, 16, 32])
def test_uniform_files_round_trip_bit_exactly(tmp_path, bits):
    emb = _emb(200, 30)
    data = quantize_embedding(emb, bits)
    path = tmp_path / "u.esq"
    write_compressed(data, path)
    back = read_compressed_data(path)
    assert back.bits == data.bits and np.array_equal(back.codes, data.codes)
    assert np.array_equal(read_compressed(path).vectors, compress_embedding(emb, bits).vectors)
    assert back.metadata["compression"]["bits"] == bits


def test_four_bit_300d_takes_150_bytes_per_word(tmp_path):
    emb = Embedding([f"w{i}" for i in range(1000)], np.random.default_rng(0).standard_normal((1000, 300)))
    path = tmp_path / "big.esq"
    save_compressed(emb, path, bits=4)
    vocab = sum(len(w) + 4 for w in emb.words)
    assert os.path.getsize(path) - vocab == pytest.approx(150 * 1000, abs=2000)


def test_truncated_and_corrupt_files_raise_clear_errors(tmp_path):
    path = tmp_path / "c.esq"
    save_compressed(_emb(50, 10), path, bits=4)
    blob = path.read_bytes()
    assert blob.startswith(MAGIC)
    (tmp_path / "t.esq").write_bytes(blob[:-7])
    with pytest.raises(EmbeddingFormatError, match="truncated"):
        embstab.load(tmp_path / "t.esq")
    bad = bytearray(blob)
    bad[-3] ^= 0xFF
    (tmp_path / "b.esq").write_bytes(bytes(bad))
    with pytest.raises(EmbeddingFormatError, match="checksum"):
        read_compressed(tmp_path / "b.esq")
    (tmp_path / "h.esq").write_bytes(blob[: len(MAGIC) + 10])
    with pytest.raises(EmbeddingFormatError, match="truncated"):
        read_compressed(tmp_path / "h.esq")
    with pytest.raises(EmbeddingFormatError, match="magic"):
        read_compressed(_write(tmp_path / "n.esq", b"hello"))


def _write(path, data):
    path.write_bytes(data)
    return path


def test_plain_embedding_saved_as_esq_is_lossless(tmp_path):
    emb = _emb(30, 5)
    emb.save(tmp_path / "p.esq")
    back = embstab.load(tmp_path / "p.esq")
    assert np.array_equal(back.vectors, emb.vectors) and read_compressed_data(tmp_path / "p.esq").bits == 32
    with pytest.raises(TypeError, match="save_compressed"):
        emb.save(tmp_path / "q.esq", bits=4)
    assert not (tmp_path / "q.esq").exists()


def test_argument_errors():
    emb = _emb(10, 4)
    with pytest.raises(ValueError, match="contradicts"):
        compress_embedding(emb, 4, format="fp8")
    with pytest.raises(ValueError, match="give bits"):
        compress_embedding(emb)
    with pytest.raises(ShapeError, match="align"):
        compress_pair(emb, _emb(10, 5), 4)


def test_truncate_dimension_keeps_leading_components():
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.standard_normal((10, 10)))
    X = (rng.standard_normal((500, 10)) * np.array([10, 5, 2, 1, .5, .1, .1, .1, .1, .1])) @ basis.T + 3
    emb = Embedding([f"w{i}" for i in range(500)], X)
    t = truncate_dimension(emb, 3)
    assert t.dim == 3 and t.words == emb.words
    assert t.metadata["explained_variance_ratio"] > 0.98
    Xc = X - X.mean(0)
    cov = np.cov(t.vectors.T)
    assert np.allclose(cov, np.diag(np.diag(cov)), atol=1e-8)  # components uncorrelated
    assert np.allclose(np.linalg.norm(t.vectors, axis=0) ** 2, np.linalg.svd(Xc, compute_uv=False)[:3] ** 2)
    assert np.array_equal(truncate_dimension(emb, 3).vectors, t.vectors)
    with pytest.raises(ShapeError, match="dim"):
        truncate_dimension(emb, 11)


def _cli(argv):
    from embstab.cli import compress as cmd

    parser = argparse.ArgumentParser(prog="embstab")
    sub = parser.add_subparsers(dest="command")
    cmd.register(sub)
    args = parser.parse_args(["compress", *argv])
    return args.func(args)


def test_cli_compress_and_like(tmp_path, capsys):
    old, new = _emb(80, 12, seed=1, name="old"), _emb(80, 12, seed=2, name="new")
    old.save(tmp_path / "old.txt")
    new.save(tmp_path / "new.txt")
    assert _cli([str(tmp_path / "old.txt"), str(tmp_path / "old.esq"), "--bits", "4"]) == 0
    assert _cli([str(tmp_path / "new.txt"), str(tmp_path / "new.esq"), "--bits", "4", "--like",
                 str(tmp_path / "old.txt")]) == 0
    assert "bits/word" in capsys.readouterr().err
    old_l, new_l = embstab.load(tmp_path / "old.esq"), embstab.load(tmp_path / "new.esq")
    ref_old, ref_new = compress_pair(embstab.load(tmp_path / "old.txt"), embstab.load(tmp_path / "new.txt"), 4)
    assert np.array_equal(old_l.vectors, ref_old.vectors) and np.array_equal(new_l.vectors, ref_new.vectors)
    assert _cli([str(tmp_path / "old.txt"), str(tmp_path / "o.npz"), "--format", "mxfp4", "--output-format", "npz",
                 "--quiet"]) == 0
    expected = compress_embedding(embstab.load(tmp_path / "old.txt"), format="mxfp4").vectors
    assert np.array_equal(embstab.load(tmp_path / "o.npz").vectors, expected)
    with pytest.raises(EmbstabError, match="give --bits"):
        _cli([str(tmp_path / "old.txt"), str(tmp_path / "x.esq")])
    with pytest.raises(SystemExit):  # argparse: --bits must be 1-16 or 32
        _cli([str(tmp_path / "old.txt"), str(tmp_path / "x.esq"), "--bits", "28"])
    assert "must be 1-16 (2**bits levels) or 32" in capsys.readouterr().err
    with pytest.raises(EmbstabError, match="unknown number format"):
        _cli([str(tmp_path / "old.txt"), str(tmp_path / "x.esq"), "--format", "fp7"])
    assert not (tmp_path / "x.esq").exists()


def test_cli_through_main_turns_bad_input_into_exit_code_2(tmp_path, monkeypatch, capsys):
    import embstab.cli as cli

    _emb(20, 4).save(tmp_path / "a.txt")
    assert cli.main(["compress", str(tmp_path / "a.txt"), str(tmp_path / "a.esq"), "--bits", "2", "--quiet"]) == 0
    assert embstab.load(tmp_path / "a.esq").metadata["compression"]["bits"] == 2
    assert capsys.readouterr().err == ""  # --quiet: no progress bar, no summary
    (tmp_path / "bad.esq").write_bytes(MAGIC + b"\x05\x00")
    assert cli.main(["compress", str(tmp_path / "bad.esq"), str(tmp_path / "b.esq"), "--bits", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "truncated" in err[0]


def test_cli_few_bit_stochastic_rounding(tmp_path, capsys):
    old = _emb(80, 12, seed=1, name="old")
    old.save(tmp_path / "old.txt")
    args = [str(tmp_path / "old.txt"), str(tmp_path / "sr.npz"), "--bits", "4", "--rounding", "sr:3",
            "--seed", "5", "--output-format", "npz", "--quiet"]
    assert _cli(args) == 0
    expected = compress_embedding(embstab.load(tmp_path / "old.txt"), 4, rounding="stochastic:3", seed=5)
    assert np.array_equal(embstab.load(tmp_path / "sr.npz").vectors, expected.vectors)
    nearest = compress_embedding(embstab.load(tmp_path / "old.txt"), 4).vectors
    assert not np.array_equal(expected.vectors, nearest)
    with pytest.raises(SystemExit):
        _cli(args[:5] + ["stochastic:99"] + args[6:])
    assert "1 <= K <= 52" in capsys.readouterr().err


def test_compressed_embedding_carries_typed_codes_not_metadata(tmp_path):
    from embstab.io.compressed import CompressedData

    emb = compress_embedding(_emb(), format="mxfp4")
    assert isinstance(emb.codes, CompressedData) and emb.codes.bits == 4
    assert not any(isinstance(v, CompressedData) for v in emb.metadata.values())
    emb.save(tmp_path / "c.esq")
    assert read_compressed_data(tmp_path / "c.esq").bits == 4  # the exact codes, not float32
    assert np.array_equal(embstab.load(tmp_path / "c.esq").vectors, emb.vectors)
    moved = emb.normalize()  # the codes no longer decode to these vectors: stored losslessly as float32
    moved.save(tmp_path / "n.esq")
    assert read_compressed_data(tmp_path / "n.esq").bits == 32
    assert Embedding(["a"], np.ones((1, 2))).codes is None


@pytest.mark.parametrize("name, fmt", [("o.npz", "npz"), ("o.txt", "word2vec"), ("o.esq", "embstab"),
                                       ("o.data", "embstab")])
def test_cli_out_suffix_names_the_format(tmp_path, name, fmt):
    # an .npz OUT used to hold .esq bytes: numpy could not read it
    from embstab.io import detect_format

    _emb(40, 6).save(tmp_path / "in.txt")
    assert _cli([str(tmp_path / "in.txt"), str(tmp_path / name), "--bits", "4", "--quiet"]) == 0
    assert detect_format(tmp_path / name) == fmt
    expected = compress_embedding(embstab.load(tmp_path / "in.txt"), 4).vectors
    np.testing.assert_allclose(embstab.load(tmp_path / name).vectors, expected, rtol=1e-6)


def test_cli_out_dash_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _emb(20, 4).save(tmp_path / "in.txt")
    with pytest.raises(EmbstabError, match="OUT is a file to write"):
        _cli([str(tmp_path / "in.txt"), "-", "--bits", "4"])
    assert not (tmp_path / "-").exists()

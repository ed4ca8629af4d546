"""Vector-store precisions: sentence-transformers' codes bit for bit, Matryoshka truncation, exact
Hamming search, the Embedding entry and ``embstab compress --precision``."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import embstab
from embstab import cli
from embstab.compress import (bytes_per_vector, compress_for_store, hamming_topk, quantize_embeddings, rescore,
                              truncate_embeddings)
from embstab.errors import ConfigError, ShapeError, UnknownNameError

PRECISIONS = ("int8", "uint8", "binary", "ubinary")


@functools.cache
def _reference_module():
    """The installed ``sentence_transformers/util/quantization.py``, loaded as a module of a private
    package over the same folder: importing ``sentence_transformers`` itself pulls in transformers
    (about 15 s), while these two files need only numpy, scipy and torch."""
    spec = importlib.util.find_spec("sentence_transformers")  # finds without importing
    if spec is None or spec.origin is None:
        return None
    package = types.ModuleType("_st_reference_util")
    package.__path__ = [str(Path(spec.origin).parent / "util")]
    sys.modules["_st_reference_util"] = package
    return importlib.import_module("_st_reference_util.quantization")


def _st_quantize():
    module = _reference_module()
    if module is None:
        pytest.skip("sentence-transformers is the reference for the codes (the test extra)")
    return module.quantize_embeddings


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(60, 8), (37, 13), (120, 100), (5, 1), (200, 384)])
def test_codes_equal_sentence_transformers(shape, dtype):
    st = _st_quantize()
    rng = np.random.default_rng(shape[1])
    n, d = shape
    calibration = rng.normal(size=(150, d)).astype(dtype)
    # held-out vectors, a wider spread so many values fall beyond the calibration range
    x = (rng.normal(size=(n, d)) * 2.5).astype(dtype)
    x[0], x[-1] = calibration.max(0) + 0.5, calibration.min(0) - 0.5
    assert (x < calibration.min(0)).any() and (x > calibration.max(0)).any()
    for precision in PRECISIONS:
        kwargs = {"calibration_embeddings": calibration} if precision.endswith("int8") else {}
        ours = quantize_embeddings(x, precision, calibration=calibration if kwargs else None)
        ref = st(x, precision, **kwargs)
        assert ours.dtype == ref.dtype and ours.shape == ref.shape, precision
        np.testing.assert_array_equal(ours, ref, err_msg=precision)
    # explicit ranges, one dimension with a zero step (min == max)
    ranges = np.vstack((calibration.min(0), calibration.max(0)))
    ranges[:, 0] = 0.25
    for precision in ("int8", "uint8"):
        np.testing.assert_array_equal(quantize_embeddings(x, precision, ranges=ranges),
                                      st(x, precision, ranges=ranges))
    np.testing.assert_array_equal(quantize_embeddings(x, "float32"), st(x, "float32"))
    # one query alone (1-d), with the documents' ranges
    for precision in PRECISIONS:
        kwargs = {"ranges": ranges} if precision.endswith("int8") else {}
        np.testing.assert_array_equal(quantize_embeddings(x[1], precision, **kwargs), st(x[1], precision, **kwargs))


@pytest.mark.slow
def test_codes_equal_the_imported_package():
    quantization = pytest.importorskip("sentence_transformers.util.quantization")
    rng = np.random.default_rng(11)
    calibration, x = rng.normal(size=(300, 77)), rng.normal(size=(50, 77)) * 3
    for precision in PRECISIONS:
        kwargs = {"calibration_embeddings": calibration} if precision.endswith("int8") else {}
        np.testing.assert_array_equal(quantize_embeddings(x, precision, calibration=calibration if kwargs else None),
                                      quantization.quantize_embeddings(x, precision, **kwargs))


def test_self_calibration_matches_and_warns_below_100_rows():
    st = _st_quantize()
    x = np.random.default_rng(3).normal(size=(40, 24)).astype(np.float32)
    with pytest.warns(UserWarning, match="calibration="):
        ours = quantize_embeddings(x, "int8")
    np.testing.assert_array_equal(ours, st(x, "int8"))
    big = np.random.default_rng(4).normal(size=(120, 24))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at 100 rows and more
        np.testing.assert_array_equal(quantize_embeddings(big, "uint8"), st(big, "uint8"))


def test_clipping_and_packing_rules_without_the_reference():
    # values beyond the calibration range clip to the end codes (no wrap-around)
    ranges = np.array([[0.0, -1.0], [1.0, 1.0]])  # minima, maxima
    codes = quantize_embeddings(np.array([[-5.0, 9.0], [0.5, 0.0]]), "uint8", ranges=ranges)
    assert codes[0].tolist() == [0, 255]
    assert codes[1].tolist() == [127, 127]
    assert quantize_embeddings(np.array([[-5.0, 9.0]]), "int8", ranges=ranges)[0].tolist() == [-128, 127]
    # binary: most significant bit first, the last byte padded with zero bits, binary = ubinary - 128
    v = np.array([[1.0, -1, 1, 1, -1, -1, -1, -1, 1, 0.0]])
    assert quantize_embeddings(v, "ubinary").tolist() == [[0b10110000, 0b10000000]]
    assert quantize_embeddings(v, "binary").tolist() == [[0b10110000 - 128, 0]]


def test_bytes_per_vector():
    assert bytes_per_vector("float32", 384) == 1536
    assert bytes_per_vector("int8", 384) == bytes_per_vector("uint8", 384) == 384
    assert bytes_per_vector("binary", 384) == bytes_per_vector("ubinary", 384) == 48
    assert bytes_per_vector("binary", 13) == 2 and bytes_per_vector("ubinary", 1) == 1
    for d in (1, 7, 8, 9, 100):  # as stored: the packed codes' width
        assert bytes_per_vector("binary", d) == quantize_embeddings(np.ones((1, d)), "binary").nbytes


def test_truncation_is_leading_dims_then_l2():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(30, 64)).astype(np.float32)
    x[3] = 0.0
    out = truncate_embeddings(x, 16)
    ref = x[:, :16] / np.maximum(np.linalg.norm(x[:, :16], axis=1, keepdims=True), 1e-12)
    assert out.dtype == np.float32 and out.shape == (30, 16)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-7)
    assert not out[3].any()  # a zero row stays zero
    np.testing.assert_array_equal(truncate_embeddings(x, 16, normalize=False), x[:, :16])


def test_truncation_follows_torch_normalize():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(6).normal(size=(20, 48)).astype(np.float32)
    ref = torch.nn.functional.normalize(torch.from_numpy(x)[:, :32], p=2, dim=1).numpy()
    np.testing.assert_allclose(truncate_embeddings(x, 32), ref, rtol=1e-6, atol=1e-7)


def _hamming_reference(q_codes, d_codes, k):
    qb = np.unpackbits(q_codes.view(np.uint8), axis=1)
    db = np.unpackbits(d_codes.view(np.uint8), axis=1)
    dist = (qb[:, None, :] != db[None, :, :]).sum(axis=2)
    idx = np.array([sorted(range(len(db)), key=lambda j: (row[j], j))[:k] for row in dist])
    return idx, np.take_along_axis(dist, idx, axis=1)


@pytest.mark.parametrize("d", [13, 64, 100])
def test_hamming_topk_matches_brute_force(d, monkeypatch):
    rng = np.random.default_rng(d)
    # few distinct values per dimension: many equal distances, so the tie rule is exercised
    docs = rng.integers(-1, 2, size=(250, d)).astype(np.float32)
    queries = rng.integers(-1, 2, size=(30, d)).astype(np.float32)
    for precision in ("ubinary", "binary"):
        dc, qc = quantize_embeddings(docs, precision), quantize_embeddings(queries, precision)
        ref_idx, ref_dist = _hamming_reference(qc, dc, 12)
        found = hamming_topk(qc, dc, 12)
        np.testing.assert_array_equal(found.indices, ref_idx)
        np.testing.assert_array_equal(found.distances, ref_dist)
    import embstab.compress.vectorstore as vs

    monkeypatch.setattr(vs, "_BLOCK_BYTES", 2048)  # many small blocks: the running top-k merge
    blocked = hamming_topk(qc, dc, 12)
    np.testing.assert_array_equal(blocked.indices, ref_idx)
    monkeypatch.delattr(np, "bitwise_count", raising=False)  # numpy before 2.0: the bit-count table
    np.testing.assert_array_equal(hamming_topk(qc, dc, 12).distances, ref_dist)
    # binary queries against ubinary documents: the same bits, the same answer
    np.testing.assert_array_equal(hamming_topk(qc, quantize_embeddings(docs, "ubinary"), 12).indices, ref_idx)
    assert hamming_topk(qc, dc, 1000).indices.shape == (30, 250)  # k beyond the documents: all of them


def test_rescore_reranks_binary_candidates_by_float_query():
    rng = np.random.default_rng(8)
    docs = rng.normal(size=(300, 32))
    queries = rng.normal(size=(12, 32))
    dc = quantize_embeddings(docs, "ubinary")
    i8 = quantize_embeddings(docs, "int8", calibration=docs)
    res = rescore(queries, dc, i8, 5, multiplier=4)
    cand = hamming_topk(quantize_embeddings(queries, "ubinary"), dc, 20).indices
    for qi in range(len(queries)):
        scores = i8[cand[qi]].astype(np.float64) @ queries[qi]
        order = sorted(range(20), key=lambda j: (-scores[j], cand[qi][j]))[:5]
        np.testing.assert_array_equal(res.indices[qi], cand[qi][order])
        np.testing.assert_allclose(res.scores[qi], scores[order])
    # with every document a candidate, rescoring against float documents is exact search
    full = rescore(queries, dc, docs, 5, multiplier=100)
    np.testing.assert_array_equal(full.indices, np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :5])


def _embedding(n=150, d=24, seed=0):
    x = np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)
    return embstab.Embedding([f"w{i}" for i in range(n)], x, name="docs")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_compress_for_store_holds_the_codes(precision, tmp_path):
    emb = _embedding()
    out = compress_for_store(emb, precision, truncate_dim=20)
    info = out.metadata["compression"]
    assert out.dim == 20 and info["bytes_per_vector"] == bytes_per_vector(precision, 20)
    assert info["memory_bits_per_word"] == 8 * info["bytes_per_vector"]
    x = truncate_embeddings(emb.vectors, 20)
    codes = quantize_embeddings(x, precision)
    if precision.endswith("int8"):
        np.testing.assert_array_equal(out.vectors, codes.astype(np.float32))
        np.testing.assert_array_equal(quantize_embeddings(x, precision, ranges=np.array(info["ranges"])), codes)
    else:
        np.testing.assert_array_equal(out.vectors, np.where(x > 0, 1.0, -1.0))
    out.save(tmp_path / "x.esq")
    back = embstab.load(tmp_path / "x.esq")
    np.testing.assert_array_equal(back.vectors, out.vectors)
    bits = 8 if precision.endswith("int8") else 1
    assert (tmp_path / "x.esq").stat().st_size < len(emb) * 20 * bits / 8 + 6000  # codes, not float32


def test_compress_for_store_with_calibration_and_float32():
    emb, queries = _embedding(), _embedding(n=3, seed=1)
    out = compress_for_store(queries, "int8", calibration=emb)
    np.testing.assert_array_equal(out.vectors, quantize_embeddings(queries.vectors, "int8", calibration=emb.vectors))
    plain = compress_for_store(emb, "float32")
    np.testing.assert_array_equal(plain.vectors, emb.vectors)
    assert plain.metadata["compression"]["bytes_per_vector"] == 4 * 24


def test_cli_round_trip(tmp_path, capsys):
    emb = _embedding()
    emb.save(tmp_path / "docs.txt")
    assert cli.main(["compress", str(tmp_path / "docs.txt"), str(tmp_path / "b.esq"), "--precision", "binary",
                     "--truncate-dim", "16"]) == 0
    line = capsys.readouterr().err
    assert "2 bytes/vector" in line and "truncated from 24" in line
    back = embstab.load(tmp_path / "b.esq")
    np.testing.assert_array_equal(back.vectors, np.where(truncate_embeddings(emb.vectors, 16) > 0, 1.0, -1.0))
    assert cli.main(["compress", str(tmp_path / "docs.txt"), str(tmp_path / "i.npz"), "--precision", "int8",
                     "--quiet"]) == 0
    np.testing.assert_array_equal(embstab.load(tmp_path / "i.npz").vectors,
                                  quantize_embeddings(embstab.load(tmp_path / "docs.txt").vectors, "int8"))
    # the --bits path still works
    assert cli.main(["compress", str(tmp_path / "docs.txt"), str(tmp_path / "u.esq"), "--bits", "4", "--quiet"]) == 0


def _one_line_error(capsys, argv, *needles):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


def test_cli_errors_are_one_line(tmp_path, capsys):
    _embedding().save(tmp_path / "docs.txt")
    _embedding(n=1, seed=2).save(tmp_path / "q.txt")
    src, out = str(tmp_path / "docs.txt"), str(tmp_path / "o.esq")
    _one_line_error(capsys, ["compress", src, out, "--precision", "int8", "--bits", "4"], "not allowed with")
    _one_line_error(capsys, ["compress", src, out, "--precision", "int8", "--truncate-dim", "25"], "--truncate-dim 25")
    _one_line_error(capsys, ["compress", src, out, "--bits", "4", "--truncate-dim", "8"], "--truncate-dim")
    _one_line_error(capsys, ["compress", src, out, "--precision", "binary", "--rotate", "hadamard"], "--rotate")
    _one_line_error(capsys, ["compress", str(tmp_path / "q.txt"), out, "--precision", "int8"], "--calibration")
    assert cli.main(["compress", str(tmp_path / "q.txt"), out, "--precision", "int8", "--calibration", src,
                     "--quiet"]) == 0
    _embedding(n=30).save(tmp_path / "few.txt")  # below 100 rows: one warning line naming the flag
    assert cli.main(["compress", str(tmp_path / "few.txt"), out, "--precision", "uint8", "--quiet"]) == 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "only 30 vectors" in err and "--calibration FILE" in err, err


def test_library_errors_are_one_line():
    x = np.random.default_rng(0).normal(size=(10, 8))
    cases = [
        (UnknownNameError, lambda: quantize_embeddings(x, "int4")),
        (UnknownNameError, lambda: bytes_per_vector("fp8", 8)),
        (ConfigError, lambda: bytes_per_vector("int8", 0)),
        (ConfigError, lambda: quantize_embeddings(x[:1], "int8")),
        (ConfigError, lambda: quantize_embeddings(x[0], "uint8")),
        (ConfigError, lambda: quantize_embeddings(quantize_embeddings(x, "binary"), "int8")),
        (ConfigError, lambda: quantize_embeddings(x, "binary", calibration=x)),
        (ShapeError, lambda: quantize_embeddings(np.zeros((0, 8)), "binary")),
        (ShapeError, lambda: quantize_embeddings(np.where(x > 1, np.nan, x), "int8", calibration=x)),
        (ShapeError, lambda: quantize_embeddings(x, "int8", ranges=np.zeros((2, 7)))),
        (ShapeError, lambda: truncate_embeddings(x, 9)),
        (ConfigError, lambda: truncate_embeddings(x, 0)),
        (ShapeError, lambda: hamming_topk(np.zeros((2, 2), np.uint8), np.zeros((5, 3), np.uint8), 1)),
        (ConfigError, lambda: hamming_topk(np.zeros((2, 2), np.uint8), np.zeros((5, 2), np.uint8), 0)),
        (ConfigError, lambda: rescore(x, quantize_embeddings(x, "ubinary"), x, 2, multiplier=0.5)),
    ]
    for kind, call in cases:
        with pytest.raises(kind) as info:
            call()
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="single vector.*bucket 0; pass calibration="):
        quantize_embeddings(x[:1], "int8")
    with pytest.raises(ConfigError, match="single vector"):  # a one-row calibration set: the same flaw
        quantize_embeddings(x, "uint8", calibration=x[:1])
    with pytest.raises(ConfigError, match="maximum below its minimum"):
        quantize_embeddings(x, "uint8", ranges=np.array([[0.0] * 8, [-1.0] * 8]))
    with pytest.warns(UserWarning, match="only 10 vectors"):
        quantize_embeddings(x[:1], "int8", calibration=x)

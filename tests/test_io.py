"""Embedding files: round trips in every format, detection, and one test per malformed-file case."""

import os
import subprocess
import sys

import numpy as np
import pytest

import embstab
from embstab import EmbeddingFormatError
from embstab.io import detect_format, load


@pytest.fixture
def emb():
    rng = np.random.default_rng(0)
    words = ["the", "of", "new york", "naïve", "çà", "x1"]
    return embstab.Embedding(words, rng.normal(size=(6, 4)), counts=np.arange(60, 0, -10), name="toy")


ROUND_TRIP = [("e.txt", "word2vec"), ("e.vec", "vec"), ("e.glove", "glove"), ("e.npz", "npz"),
              ("e.npy", "npy"), ("e.kv", "gensim")]


@pytest.mark.parametrize("fname, fmt", ROUND_TRIP)
def test_round_trip_is_exact_and_detected(tmp_path, emb, fname, fmt):
    path = tmp_path / fname
    emb.save(path)
    expected = {"vec": "word2vec", "glove": "glove"}.get(fmt, fmt)
    assert detect_format(path) == expected
    if fmt == "gensim":  # a pickle: loaded only when asked for, never on detection
        with pytest.raises(EmbeddingFormatError, match="trust-pickle"):
            embstab.load(path)
    back = embstab.load(path, format="gensim" if fmt == "gensim" else None)
    assert back.words == emb.words
    np.testing.assert_array_equal(back.vectors, emb.vectors)
    if fmt in ("npz", "npy", "gensim"):
        np.testing.assert_array_equal(back.counts, emb.counts)


def test_word2vec_binary_round_trip(tmp_path, emb):
    single = emb.subset([w for w in emb.words if " " not in w])
    path = tmp_path / "e.bin"
    single.save(path)
    assert detect_format(path) == "word2vec_binary"
    back = embstab.load(path)
    assert back.words == single.words
    np.testing.assert_array_equal(back.vectors, single.vectors.astype(np.float32))
    with pytest.raises(EmbeddingFormatError, match="white space"):
        emb.save(tmp_path / "spaces.bin")


def test_gensim_reads_our_files_and_we_read_gensims(tmp_path, emb):
    from gensim.models import KeyedVectors

    path = tmp_path / "e.bin"
    small = emb.subset(["the", "of", "x1"])
    small.save(path)
    kv = KeyedVectors.load_word2vec_format(str(path), binary=True)
    np.testing.assert_allclose(kv["of"], small["of"], rtol=1e-6)
    kv.save_word2vec_format(str(tmp_path / "g.txt"))
    back = embstab.load(tmp_path / "g.txt")
    assert back.words == ["the", "of", "x1"]
    np.testing.assert_allclose(back.vectors, small.vectors, rtol=1e-6)


def test_text_without_header_and_words_with_spaces(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("new york 0.5 1.5\nthe 1 2\n\nof -1 -2\n")
    e = embstab.load(path)
    assert e.words == ["new york", "the", "of"]
    np.testing.assert_array_equal(e["new york"], [0.5, 1.5])


def test_real_glove_round_trip_through_text(tmp_path):
    from embstab.data.pretrained import glove_6b_50d

    g = glove_6b_50d(top_n=2000)
    assert g.words[:3] == ["the", ",", "."]
    np.testing.assert_allclose(g["the"][:5], [0.418, 0.24968, -0.41242, 0.1217, 0.34527], rtol=1e-6)
    g.save(tmp_path / "glove.txt")
    back = embstab.load(tmp_path / "glove.txt")
    np.testing.assert_array_equal(back.vectors, g.vectors)


BAD = [
    ("width.txt", "2 3\na 1 2 3\nb 1 2\n", "inconsistent width: 2 values where 3", 3),
    ("width_more.txt", "a 1 2\nb 1 2 3\n", "inconsistent width: 3 values where 2", 2),
    ("nonnum.txt", "a 1 2\nb 1 x2\n", "non-numeric field 'x2'", 2),
    ("nan.txt", "a 1 2\nb nan 2\n", "NaN or Inf in the vector of 'b'", 2),
    ("inf.txt", "a 1 2\nb 1 -inf\n", "NaN or Inf", 2),
    ("fewer.txt", "3 2\na 1 2\nb 1 2\n", "declares 3 words but the file holds 2", None),
    ("more.txt", "1 2\na 1 2\nb 1 2\n", "declares 1 words but the file holds 2", None),
    ("dup.txt", "a 1 2\nb 1 2\na 3 4\n", "duplicate word 'a' (first seen on line 1)", 3),
    ("empty.txt", "", "the file is empty", None),
    ("blank.txt", "\n\n  \n", "only blank lines", None),
    ("header_only.txt", "0 5\n", "no vectors found", None),
]


@pytest.mark.parametrize("name, content, message, line", BAD, ids=[b[0] for b in BAD])
def test_malformed_text_files_name_file_line_and_problem(tmp_path, name, content, message, line):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(EmbeddingFormatError) as info:
        embstab.load(path)
    err = info.value
    assert message in str(err)
    assert err.path == str(path) and err.line == line
    assert isinstance(err, ValueError)


def test_duplicates_first_keeps_first_with_warning(tmp_path):
    path = tmp_path / "dup.txt"
    path.write_text("a 1 2\nb 1 2\na 3 4\n")
    with pytest.warns(UserWarning, match="duplicate word 'a'"):
        e = embstab.load(path, duplicates="first")
    assert e.words == ["a", "b"] and list(e["a"]) == [1, 2]


def test_binary_garbage_and_undecodable_text(tmp_path):
    garbage = tmp_path / "garbage.txt"
    garbage.write_bytes(bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8)))
    with pytest.raises(EmbeddingFormatError, match=r"binary data|undecodable"):
        embstab.load(garbage)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("a 1 2\ncaf\xe9 1 2\n".encode("latin-1"))
    with pytest.raises(EmbeddingFormatError, match="undecodable text") as info:
        embstab.load(latin1)
    assert info.value.line == 2


def test_truncated_and_overlong_word2vec_binary(tmp_path, emb):
    path = tmp_path / "e.bin"
    emb.subset(["the", "of", "x1"]).save(path)
    data = path.read_bytes()
    (tmp_path / "cut.bin").write_bytes(data[:-10])
    with pytest.raises(EmbeddingFormatError, match="truncated") as info:
        embstab.load(tmp_path / "cut.bin")
    assert info.value.line == 3
    (tmp_path / "extra.bin").write_bytes(data + b"zz 1234567890123456")
    with pytest.raises(EmbeddingFormatError, match="after the 3 records"):
        embstab.load(tmp_path / "extra.bin")


def test_npz_and_npy_problems(tmp_path):
    np.savez(tmp_path / "novocab.npz", vectors=np.ones((2, 2)))
    with pytest.raises(EmbeddingFormatError, match="lacks the array"):
        embstab.load(tmp_path / "novocab.npz")
    np.save(tmp_path / "lonely.npy", np.ones((2, 2)))
    with pytest.raises(EmbeddingFormatError, match="vocabulary file"):
        embstab.load(tmp_path / "lonely.npy")
    (tmp_path / "short.npy").write_bytes((tmp_path / "lonely.npy").read_bytes())
    (tmp_path / "short.vocab").write_text("a\n")
    with pytest.raises(EmbeddingFormatError, match="1 words but 2 vector rows"):
        embstab.load(tmp_path / "short.npy")


def test_failed_save_writes_nothing(tmp_path, emb):
    bad = embstab.Embedding(["ok", "tab\tword"], np.ones((2, 2)))
    target = tmp_path / "out.txt"
    with pytest.raises(EmbeddingFormatError, match="cannot be written") as info:
        bad.save(target)
    assert info.value.path == str(target)
    assert os.listdir(tmp_path) == []
    emb.save(target)  # an existing file is replaced only by a complete one
    with pytest.raises(EmbeddingFormatError):
        bad.save(target)
    assert embstab.load(target).words == emb.words
    assert sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_missing_file():
    with pytest.raises(FileNotFoundError):
        embstab.load("/nonexistent/emb.txt")


def test_cli_turns_format_errors_into_one_line(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("a 1 2\nb 2 1\nc 0 1\n")
    bad = tmp_path / "bad.txt"
    bad.write_text("a 1 2\nb 1 oops\n")
    proc = subprocess.run([sys.executable, "-m", "embstab", "compare", str(good), str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"embstab compare: error: {bad}, line 2: non-numeric field 'oops'"
    assert "Traceback" not in proc.stderr


def test_saved_files_get_normal_permissions(tmp_path, emb):
    old = os.umask(0o022)
    try:
        emb.save(tmp_path / "e.txt")
        emb.save(tmp_path / "e.npy")
    finally:
        os.umask(old)
    for name in ("e.txt", "e.npy", "e.vocab"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644


def test_compressed_header_is_checksummed_and_versions_1_and_2_still_read(tmp_path, emb):
    import json
    import zlib

    from embstab.io.compressed import MAGIC

    embstab.save(emb, tmp_path / "e.esq")
    blob = (tmp_path / "e.esq").read_bytes()
    pos = len(MAGIC)
    hlen = int.from_bytes(blob[pos:pos + 4], "little")
    header = json.loads(blob[pos + 4:pos + 4 + hlen])
    assert header["version"] == 3 and header["transform"] is None
    body = blob[pos + 4 + hlen + 4:]
    # one edited digit in the header (the name) is caught by the header checksum
    edited = blob.replace(b'"name":"toy"', b'"name":"toz"')
    (tmp_path / "edited.esq").write_bytes(edited)
    with pytest.raises(EmbeddingFormatError, match="header checksum"):
        embstab.load(tmp_path / "edited.esq")
    # a version-1 file (no header checksum) written by an older embstab
    head1 = json.dumps(dict(header, version=1)).encode()
    (tmp_path / "v1.esq").write_bytes(MAGIC + len(head1).to_bytes(4, "little") + head1 + body)
    back = embstab.load(tmp_path / "v1.esq")
    assert back.words == emb.words
    np.testing.assert_array_equal(back.vectors, emb.vectors.astype(np.float32))
    # a version-2 file (checksummed header, no transform) written by an older embstab
    v2 = dict(header, version=2)
    del v2["transform"]
    head2 = json.dumps(v2).encode()
    (tmp_path / "v2.esq").write_bytes(MAGIC + len(head2).to_bytes(4, "little") + head2
                                      + zlib.crc32(head2).to_bytes(4, "little") + body)
    back = embstab.load(tmp_path / "v2.esq")
    assert back.words == emb.words
    np.testing.assert_array_equal(back.vectors, emb.vectors.astype(np.float32))


@pytest.mark.parametrize("text", ["a 1 2 3\nb 1 2\n", "a 1 2\nb 1 2 3\n"])
def test_a_two_line_file_blames_the_line_that_departs_from_the_first(tmp_path, text):
    path = tmp_path / "two.txt"
    path.write_text(text)
    with pytest.raises(EmbeddingFormatError, match="line 2: inconsistent width"):
        load(path)

"""``embstab compress`` is :func:`embstab.compress.compress_like` saved: the same bytes, the pair protocol in one place."""

from __future__ import annotations

import numpy as np
import pytest

import embstab
from embstab import cli
from embstab.compress import (CompressResult, TransformError, compress_embedding, compress_like, optimal_clip,
                              transform_quantize_pair)
from embstab.io import save


def _pair(n=160, d=16, seed=3):
    rng = np.random.default_rng(seed)
    old = rng.standard_normal((n, d)).astype(np.float32)
    old[:, 2] *= 6  # an outlier dimension: OCS splits it
    new = old + 0.1 * rng.standard_normal(old.shape).astype(np.float32)
    words = [f"w{i}" for i in range(n)]
    # new in another row order, with words old lacks: alignment has work to do
    new_words = words[::-1][: n - 20] + [f"x{i}" for i in range(20)]
    new_rows = np.vstack([new[::-1][: n - 20], rng.standard_normal((20, d)).astype(np.float32)])
    return embstab.Embedding(words, old, name="old"), embstab.Embedding(new_words, new_rows, name="new")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    old, new = _pair()
    save(old, root / "old.txt")
    save(new, root / "new.txt")
    return root, embstab.load(root / "old.txt"), embstab.load(root / "new.txt")


CASES = [
    (["--bits", "4"], dict(bits=4), False),
    (["--bits", "4", "--like", "OLD"], dict(bits=4), True),
    (["--bits", "4", "--rotate", "hadamard"], dict(bits=4, transform="hadamard"), False),
    (["--bits", "3", "--rotate", "orthogonal", "--seed", "5", "--like", "OLD"],
     dict(bits=3, transform="orthogonal", seed=5), True),
    (["--bits", "4", "--ocs", "0.1"], dict(bits=4, transform="ocs:0.1"), False),
    (["--bits", "4", "--ocs", "0.1", "--rotate", "hadamard", "--like", "OLD"],
     dict(bits=4, transform="hadamard+ocs:0.1"), True),
    (["--bits", "4", "--tt-ranks", "2"], dict(bits=4, transform="tt:2"), False),
    (["--bits", "4", "--tt-ranks", "2", "--like", "OLD"], dict(bits=4, transform="tt:2"), True),
    (["--format", "fp8", "--like", "OLD"], dict(format="fp8"), True),
]


@pytest.mark.parametrize("flags, kwargs, with_like", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_the_cli_writes_what_compress_like_returns(tmp_path, files, capsys, flags, kwargs, with_like):
    root, old, new = files
    argv = [str(root / "old.txt") if f == "OLD" else f for f in flags]
    assert cli.main(["compress", str(root / "new.txt"), str(tmp_path / "cli.esq"), *argv]) == 0
    summary = capsys.readouterr().err.splitlines()[0]
    result = compress_like(new, old if with_like else None, **kwargs)
    save(result.embedding, tmp_path / "lib.esq", format="embstab")
    assert (tmp_path / "cli.esq").read_bytes() == (tmp_path / "lib.esq").read_bytes()
    assert f"-> {result.bits_per_word:g} bits/word ({result.method})" in summary
    assert result.reference.words == result.embedding.words


def _protocol_from_primitives(new, old, bits, transform, seed):
    """The pair protocol spelled out: new aligned onto old, old's grid (its clip, its splits)."""
    aligned = new.align_to(old) if old is not None else new
    first = old if old is not None else new
    if transform == "none":
        clip = optimal_clip(first.vectors, bits)
        return compress_embedding(aligned, bits, clip=clip, seed=seed)
    res = transform_quantize_pair(first.vectors, aligned.vectors, bits, transform, seed=0 if seed is None else seed)
    return aligned.with_vectors(res.new)


@pytest.mark.parametrize("transform", ["none", "hadamard", "ocs:0.1", "tt:2"])
@pytest.mark.parametrize("with_like", [False, True])
def test_compress_like_is_the_pair_protocol(files, transform, with_like):
    _, old, new = files
    like = old if with_like else None
    result = compress_like(new, like, 4, transform=transform)
    expected = _protocol_from_primitives(new, like, 4, transform, None)
    np.testing.assert_array_equal(result.embedding.vectors, expected.vectors)
    assert result.embedding.words == expected.words
    info = result.embedding.metadata["compression"]
    assert info["bits"] == 4 and result.transform == transform
    if transform == "none":
        assert result.method == f"clip {info['clip']:.4g}"
        if with_like:  # old's clip, not new's own
            assert info["clip"] == pytest.approx(optimal_clip(old.vectors, 4))
    else:
        assert info["transform"] == transform and result.method == transform


def test_codes_round_trip_and_refusals(tmp_path, files):
    _, old, new = files
    result = compress_like(new, old, 4, transform="hadamard+ocs:0.1")
    assert isinstance(result, CompressResult)
    result.embedding.save(tmp_path / "x.esq")
    np.testing.assert_array_equal(embstab.load(tmp_path / "x.esq").vectors, result.embedding.vectors)
    with pytest.raises(TransformError, match="applies to uniform quantization"):
        compress_like(new, old, format="fp8", transform="hadamard")
    with pytest.raises(ValueError, match="give bits"):
        compress_like(new, old)

"""``embstab compare`` leaves its decisions to the library: top_n's default and check, and which files are hyperbolic."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import embstab
from embstab import cli
from embstab.embedding import DEFAULT_TOP_N
from embstab.errors import EmbeddingFormatError, VocabularyError
from embstab.io import HYPERBOLIC_MAGIC, PRODUCT_MAGIC, detect_format, save, sniff_format

ROOT = Path(__file__).resolve().parents[1] / "embstab"


def _files(tmp_path, n_old=80, n_new=70, d=6):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(n_old)]
    old = embstab.Embedding(words, rng.standard_normal((n_old, d)), name="old")
    new = embstab.Embedding(words[:n_new], rng.standard_normal((n_new, d)), name="new")
    save(old, tmp_path / "old.txt")
    save(new, tmp_path / "new.txt")
    return str(tmp_path / "old.txt"), str(tmp_path / "new.txt")


def test_top_n_default_and_check_come_from_the_library(tmp_path, capsys):
    old, new = _files(tmp_path)
    args = cli.build_parser().parse_args(["compare", old, new])
    assert args.top_n is DEFAULT_TOP_N  # the library's ceiling, passed through as it is
    assert cli.build_parser().parse_args(["compare", old, new, "--top-n", "0"]).top_n is None
    assert cli.main(["compare", old, new, "--null-samples", "0", "--measures", "knn"]) == 0
    assert "70 shared words compared" in capsys.readouterr().out  # fewer than 10,000: all of them
    assert cli.main(["compare", old, new, "--top-n", "71", "--measures", "knn"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--top-n" in err[0] and "share only 70 words" in err[0]
    with pytest.raises(VocabularyError, match="share only 70 words.*\\(--top-n 0\\)"):
        embstab.compare(embstab.load(old), embstab.load(new), top_n=71, measures=["knn"])


def test_io_tells_hyperbolic_files_apart(tmp_path):
    from embstab.hyperbolic import HyperbolicEmbedding, save_embedding

    hyp = tmp_path / "a.hyp"
    save_embedding(HyperbolicEmbedding(np.array([[0.1, 0.2], [-0.3, 0.1]]), nodes=[1, 2]), hyp)
    assert hyp.read_text().splitlines()[0] == HYPERBOLIC_MAGIC
    assert detect_format(hyp) == sniff_format(hyp) == "hyperbolic"
    product = tmp_path / "p.txt"
    product.write_text(PRODUCT_MAGIC + "\n# {}\n")
    assert sniff_format(product) == "hyperbolic"
    with pytest.raises(EmbeddingFormatError, match="hyperbolic .*embstab.hyperbolic.load_embedding"):
        embstab.load(hyp)
    old, _ = _files(tmp_path)
    assert sniff_format(old) == "word2vec"
    (tmp_path / "empty.txt").write_text("")
    specs = ["builtin:glove_6b_50d", tmp_path / "missing.txt", tmp_path, tmp_path / "empty.txt"]
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        specs.append(tmp_path / "fifo")
    for spec in specs:
        assert sniff_format(spec) is None  # the reader reports what is wrong; a pipe is never read here


def test_the_magic_lines_have_one_home():
    # a first line of embstab.hyperbolic spelled out anywhere but embstab.io would be a second detector
    hits = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if "# embstab-" in p.read_text()]
    assert hits == ["io/__init__.py"], hits

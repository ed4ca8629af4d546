"""``embstab compare`` heads its table with each side's path, size and dimension, each named once."""

from __future__ import annotations

import numpy as np

from embstab import Embedding
from embstab.cli import main


def test_header_names_each_side_once(tmp_path, capsys):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    Embedding(words, rng.normal(size=(40, 6)).astype(np.float32)).save(old)
    Embedding(words[:30], rng.normal(size=(30, 6)).astype(np.float32)).save(new)
    assert main(["compare", str(old), str(new), "--measures", "knn", "--null-samples", "0"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    # a file named old.txt used to give "old old (40 words, 6-d) vs new new (...)"
    assert first.startswith(f"old: {old} (40 words, 6 dims) vs new: {new} (30 words, 6 dims): 30 shared words")
    assert "old old" not in first and "new new" not in first

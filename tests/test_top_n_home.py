"""top_n is decided in one place (embstab.embedding.take_top_n): compare, shared_vocabulary and the study agree."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from embstab import Embedding, compare
from embstab.embedding import shared_vocabulary, take_top_n
from embstab.errors import ShapeError, VocabularyError
from embstab.study.steps import measure_pair

ROOT = Path(__file__).resolve().parents[1] / "embstab"


def _emb(words, dim=4, seed=0, name=""):
    rng = np.random.default_rng(seed)
    return Embedding(list(words), rng.standard_normal((len(words), dim)).astype(np.float32), name=name)


def test_take_top_n_rules():
    words = ["a", "b", "c"]
    assert take_top_n(words, None) == words and take_top_n(words, 2) == ["a", "b"]
    assert take_top_n(words, 5) == words  # at most top_n
    assert take_top_n(words, np.int64(1)) == ["a"]
    with pytest.raises(VocabularyError, match="top_n=5 was asked but x and y share only 3 words"):
        take_top_n(words, 5, exact=True, names="x and y")
    for bad in (0, -3, 2.5, True, "3"):
        with pytest.raises(ShapeError, match="top_n must be a positive integer"):
            take_top_n(words, bad)


def test_shared_vocabulary_and_compare_pick_the_same_words():
    a = _emb([f"w{i}" for i in range(60)], name="a")
    b = _emb([f"w{i}" for i in range(59, -1, -1)] + ["extra"], seed=1, name="b")
    anchor_a = _emb([f"w{i}" for i in range(0, 60, 2)], seed=2)
    anchor_b = _emb([f"w{i}" for i in range(0, 60, 2)], seed=3)
    assert shared_vocabulary(a, b, 10) == [f"w{i}" for i in range(10)]
    assert shared_vocabulary(a, b, 10, rank_by="b") == [f"w{i}" for i in range(59, 49, -1)]
    picked = shared_vocabulary(a, b, 12, also_in=(anchor_a, anchor_b))
    assert picked == [f"w{i}" for i in range(0, 24, 2)]
    df = compare(a, b, measures=["knn"], top_n=12, anchors=(anchor_a, anchor_b), params={"knn": {"k": 3}})
    assert df.attrs["n_words"] == 12
    with pytest.raises(VocabularyError, match="share only 30 words \\(with the anchors\\)"):
        compare(a, b, measures=["knn"], top_n=31, anchors=(anchor_a, anchor_b))
    with pytest.raises(VocabularyError, match="share only 60 words"):
        compare(a, b, measures=["knn"], top_n=61)
    with pytest.raises(ShapeError, match="top_n must be a positive integer"):
        compare(a, b, measures=["knn"], top_n=0)
    with pytest.raises(ShapeError, match="top_n must be a positive integer"):
        shared_vocabulary(a, b, 0)


def test_the_study_compares_at_most_top_n_words_all_four_share():
    # `from embstab import compare` above imported embstab.measures.compare first: the study must
    # still call the function, not the module of the same name
    a = _emb([f"w{i}" for i in range(40)], name="new")
    b = _emb([f"w{i}" for i in range(40)], seed=1, name="old")
    anchor_new = _emb([f"w{i}" for i in range(25)], seed=2)
    anchor_old = _emb([f"w{i}" for i in range(30)], seed=3)
    config = {"names": ["knn"], "top_n": 1000, "params": {"knn": {"k": 3}}}
    assert measure_pair(b, a, anchor_old, anchor_new, config)["n_words"] == 25  # capped, not refused
    assert measure_pair(b, a, anchor_old, anchor_new, {**config, "top_n": 20})["n_words"] == 20


def test_no_other_module_slices_by_top_n():
    # a `words[:top_n]` (or a `top_n <= 0` check) outside take_top_n would be a second decision
    hits = []
    for p in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Slice) and isinstance(node.upper, ast.Name) and node.upper.id == "top_n":
                hits.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert len(hits) == 1 and hits[0].startswith("embedding.py:"), hits

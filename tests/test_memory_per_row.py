"""Memory per row has one formula (embstab.compress.memory): every path gives the same number."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embstab import Embedding
from embstab.compress import compress_embedding, compress_pair
from embstab.compress.memory import bits_per_entry, memory_bits, table_bits
from embstab.selection.results import validate_results
from embstab.study.steps import assemble_row

ROOT = Path(__file__).resolve().parents[1] / "embstab"
CASES = [(4, 1), (12, 4), (50, 8), (7, 32)]


def _emb(n: int, dim: int, seed: int) -> Embedding:
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.standard_normal((n, dim)).astype(np.float32))


def test_the_formula_and_its_bad_input():
    assert memory_bits(300, 4) == 1200 and isinstance(memory_bits(300, 4), int)
    assert memory_bits(48, bits_per_entry("mxint8", 48)) == pytest.approx(48 * 8 + 16)
    assert memory_bits(10, 4, overhead_bits=16) == 56
    assert table_bits(14, 6, 2) == 14 * 12 + 32 and table_bits(14, 6, 32, clip_bits=0) == 14 * 192
    col = memory_bits(pd.Series([4, 12]), pd.Series([2, 8]))
    assert isinstance(col, pd.Series) and col.tolist() == [8, 96]
    for bad in [(-1, 4), (4, 0), (pd.Series([4, -4]), 2)]:
        with pytest.raises(ValueError, match="dim must be >= 0 and bitrate > 0"):
            memory_bits(*bad)
    with pytest.raises(ValueError, match="overhead_bits"):
        memory_bits(4, 4, overhead_bits=-1)


@pytest.mark.parametrize("dim,bits", CASES)
def test_compress_study_row_and_results_table_agree(dim, bits):
    expected = memory_bits(dim, bits)
    emb = _emb(30, dim, 0)
    # compressing one embedding, and a pair (what the study and contextual features go through)
    assert compress_embedding(emb, bits).metadata["compression"]["memory_bits_per_word"] == expected
    a, b = compress_pair(emb, _emb(30, dim, 1), bits)
    assert a.metadata["compression"]["memory_bits_per_word"] == expected
    assert b.metadata["compression"]["memory_bits_per_word"] == expected
    # a study row whose member states no memory of its own (word and contextual kinds)
    down = {"disagreement": 1.0, "quality_a": 80.0, "quality_b": 79.0}
    row = assemble_row({"algo": "x", "seed": 1, "dim": dim, "bitrate": bits, "task": "t"}, {"knn": 0.5}, down)
    assert row["memory"] == expected
    # a stated memory (a transform, a KG member) wins over the formula
    stated = assemble_row({"algo": "x", "seed": 1, "dim": dim, "bitrate": bits, "task": "t"},
                          {"knn": 0.5, "memory_bits_per_word": 123.0}, down)
    assert stated["memory"] == 123.0
    # a results table without a memory column gains the same number, and refuses another one
    table = pd.DataFrame({"algo": ["x"], "seed": [1], "dim": [dim], "bitrate": [bits], "task": ["t"],
                          "disagreement": [1.0], "quality": [80.0]})
    assert validate_results(table)["memory"].tolist() == [expected]
    with pytest.raises(Exception, match="must equal dim \\* bitrate"):
        validate_results(table.assign(memory=expected + 1))


def test_kg_quantization_counts_each_table_with_the_same_formula():
    pytest.importorskip("pykeen")
    from embstab.kg import load_graph, train
    from embstab.kg.quantize import quantize_model

    graph = load_graph("nations")
    trained = train(graph, "TransE", dim=6, epochs=1, seed=0, progress=False, evaluate_on=None)
    for bits in (2, 8):
        q = quantize_model(trained, bits)
        rows = graph.n_entities * memory_bits(6, bits) + graph.n_relations * memory_bits(6, bits)
        assert q.memory_bits == rows + 2 * 32  # one float32 clip per table
        assert q.memory_bits == table_bits(graph.n_entities, 6, bits) + table_bits(graph.n_relations, 6, bits)
        assert q.full_precision_bits == (graph.n_entities + graph.n_relations) * memory_bits(6, 32)


def _names(node) -> str:
    return " ".join(n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else n.value
                    for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
                    or isinstance(n, ast.Constant) and isinstance(n.value, str)).lower()


def test_no_ad_hoc_dim_times_bits_left():
    # code (not text) that multiplies a dimension by bits: storage byte counts (io/compressed.py)
    # and a transform's own accounting are not memory per row
    allowed = {"compress/memory.py", "io/compressed.py", "compress/transforms.py"}
    hits = []
    for p in ROOT.rglob("*.py"):
        if str(p.relative_to(ROOT)) in allowed:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                left, right = _names(node.left), _names(node.right)
                if "dim" in left and "bit" in right or "bit" in left and "dim" in right:
                    hits.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert hits == [], hits

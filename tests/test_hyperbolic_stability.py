"""Precision (through embstab.lowprec) and instability between hyperbolic embeddings."""

from __future__ import annotations

import numpy as np
import pytest

from embstab import lowprec
from embstab.hyperbolic import GraphError, embed_combinatorial
from embstab.hyperbolic.hmds import hmds
from embstab.hyperbolic.stability import (bits_sweep, embedding_instability, format_resolution_bits,
                                          perturb_graph, quantize_coordinates, stability_study)
from embstab.measures.hyperbolic import hyperbolic_knn

from _graphs import load_graph as _graph


def test_perturb_graph_keeps_connectivity_and_is_seeded():
    g = _graph("bio-diseasome")
    a, b = perturb_graph(g, 0.05, seed=1), perturb_graph(g, 0.05, seed=1)
    assert a.n_components() == g.n_components() == 1
    assert 0.02 < 1 - a.n_edges / g.n_edges <= 0.05
    assert np.array_equal(a.edge_list(), b.edge_list())
    with pytest.raises(GraphError, match="tree"):
        perturb_graph(_graph("smalltree"), 0.05)


def test_identical_embeddings_are_perfectly_stable():
    g = _graph("smalltree")
    e = embed_combinatorial(g, eps=1.0, precision_bits=128)
    out = embedding_instability(e, e, k=3)
    assert out.knn_overlap == 1.0 and out.d_avg == 0.0 and out.d_wc == pytest.approx(1.0)
    # the same geometry in another model / precision is still the same metric
    f = e.astype_float64()
    assert hyperbolic_knn(e, f, k=3) == 1.0
    assert embedding_instability(e, f, k=1).d_avg < 1e-9


def test_instability_between_graph_and_perturbed_graph():
    g = _graph("bio-diseasome")
    df = stability_study(g, lambda h: hmds(h, 10), remove=0.05, seeds=[0, 1], k=5, rows=100,
                         progress=False)
    assert list(df.columns) == ["seed", "removed", "knn_overlap", "d_avg", "d_wc",
                                "map_original", "map_perturbed"]
    assert len(df) == 2
    assert df["knn_overlap"].between(0, 1).all() and (df["knn_overlap"] < 1).all()
    assert (df["d_avg"] > 0).all()


def test_quantize_embedding_rounds_through_lowprec():
    g = _graph("smalltree")
    e = embed_combinatorial(g, bits=20, precision_bits=64)
    q = quantize_coordinates(e, lowprec.FixedFormat(24, 22))
    grid = q.coords * 2 ** 22
    np.testing.assert_array_equal(grid, np.round(grid))
    assert q.scale == e.scale and not q.multiprecision
    assert format_resolution_bits(lowprec.FloatFormat(5, 10)) == 11
    assert format_resolution_bits(lowprec.FixedFormat(16, 14)) == 14


def test_bits_sweep_more_bits_do_not_hurt():
    g = _graph("smalltree")
    df = bits_sweep(g, [lowprec.FixedFormat(6, 5), lowprec.FixedFormat(12, 11),
                        lowprec.FixedFormat(32, 31)], progress=False)
    assert list(df["bits"]) == [6, 12, 32] and list(df["memory"]) == [12, 24, 64]
    assert df["tau"].is_monotonic_increasing
    assert df["d_avg"].iloc[-1] < df["d_avg"].iloc[0]
    assert df["map"].iloc[-1] == 1.0

"""The test data helpers: in-repository copies first, ../shared/data otherwise, and a skip that
names the missing file when a fresh clone has no ../shared beside it."""

from __future__ import annotations

import pytest

import _shared
from _graphs import LOCAL_GRAPHS, graph_path, load_graph
from _shared import shared_file


def test_a_missing_shared_file_skips_naming_the_file_and_what_it_is(monkeypatch, tmp_path):
    monkeypatch.setattr(_shared, "SHARED_DATA", tmp_path / "shared" / "data")
    with pytest.raises(pytest.skip.Exception,
                       match=r"needs \.\./shared/data/graphs/phylo_tree\.edges \(a test graph of the hyperbolic"):
        graph_path("phylo_tree")
    with pytest.raises(pytest.skip.Exception,
                       match=r"needs \.\./shared/data/anchor_stability/x\.csv \(the published word2vec"):
        shared_file("anchor_stability/x.csv")


def test_a_graph_not_in_the_repository_is_read_from_shared(monkeypatch, tmp_path):
    monkeypatch.setattr(_shared, "SHARED_DATA", tmp_path)
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "triangle.edges").write_text("0 1\n1 2\n2 0\n")
    assert graph_path("triangle") == tmp_path / "graphs" / "triangle.edges"
    assert load_graph("triangle").n_edges == 3


def test_smalltree_runs_without_shared(monkeypatch, tmp_path):
    """The copy in tests/data is the balanced tree (branching 3, depth 3), found with no ../shared."""
    monkeypatch.setattr(_shared, "SHARED_DATA", tmp_path / "absent")
    assert graph_path("smalltree").parent == LOCAL_GRAPHS
    g = load_graph("smalltree")
    assert (g.n_nodes, g.n_edges) == (40, 39)
    assert sorted(map(tuple, g.edge_list())) == [((i - 1) // 3, i) for i in range(1, 40)]


def test_repo_smalltree_is_the_shared_file():
    assert (LOCAL_GRAPHS / "smalltree.edges").read_bytes() == \
        shared_file("graphs/smalltree.edges").read_bytes()

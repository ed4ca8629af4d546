"""Edge-list loading, BFS trees and root choice."""

from __future__ import annotations

import numpy as np
import pytest

from embstab.errors import EmbstabError
from embstab.hyperbolic import Graph, GraphError, load_edgelist, tree_from_graph
from embstab.hyperbolic.graph import find_root


def test_load_edgelist_keeps_file_order_and_weights(tmp_path):
    p = tmp_path / "g.edges"
    p.write_text("# comment\n2 0 1.5\n0 1\n\n1 3 2\n0 1\n3 3\n")
    g = load_edgelist(p)
    assert g.n_nodes == 4 and g.n_edges == 3  # duplicate and self-loop dropped
    assert g.neighbors(0).tolist() == [2, 1]  # edge-file order, as networkx keeps it
    assert g.weighted
    assert g.shortest_paths([2])[0].tolist() == [1.5, 2.5, 0.0, 4.5]


@pytest.mark.parametrize("text,match", [("0 1 2 3\n", "line 1: expected"),
                                        ("0 1 x\n", "line 1: weight 'x'"),
                                        ("0 1 -1\n", "weight"),
                                        ("# only a comment\n", "no edges")])
def test_malformed_edge_lists_name_the_problem(tmp_path, text, match):
    p = tmp_path / "bad.edges"
    p.write_text(text)
    with pytest.raises(GraphError, match=match):
        load_edgelist(p)


def test_missing_file_is_an_embstab_error(tmp_path):
    with pytest.raises(EmbstabError, match="no such edge-list file"):
        load_edgelist(tmp_path / "nope.edges")


def test_bfs_tree_of_a_cycle_and_roots():
    g = Graph.from_edges([(0, 1), (1, 2), (2, 3), (3, 0), (0, 4)])
    t = tree_from_graph(g, root=0)
    assert t.parent.tolist() == [-1, 0, 1, 0, 0]
    assert t.children[0] == [1, 3, 4]
    assert t.order.tolist() == [0, 1, 3, 4, 2]
    assert t.height == 2 and t.max_degree == 3
    assert find_root(g, "max_degree") == 0
    path = Graph.from_edges([(i, i + 1) for i in range(6)])
    assert find_root(path, "center") == 3
    assert find_root(g, "3") == 3  # labels given as strings on a command line still resolve
    with pytest.raises(GraphError, match="not in graph"):
        find_root(g, 99)


def test_disconnected_graph_is_refused():
    g = Graph.from_edges([(0, 1), (2, 3)])
    with pytest.raises(GraphError, match="disconnected"):
        tree_from_graph(g)


def test_string_labels_and_networkx_roundtrip():
    nx = pytest.importorskip("networkx")
    h = nx.Graph()
    h.add_edges_from([("root", "x"), ("root", "y"), ("x", "z")])
    g = Graph.from_networkx(h)
    assert g.labels.tolist() == ["root", "x", "y", "z"]
    assert g.index("z") == 3
    np.testing.assert_array_equal(g.shortest_paths([0])[0], [0, 1, 1, 2])


def test_edge_removal_keeps_labels():
    g = Graph.from_edges([(0, 1), (1, 2), (2, 0)])
    h = g.subgraph_edges_removed(np.array([[2, 1]]))
    assert h.n_edges == 2 and h.n_nodes == 3
    assert sorted(map(tuple, h.edge_list().tolist())) == [(0, 1), (0, 2)]


def test_closure_weights_double_with_depth():
    from embstab.hyperbolic.graph import closure_weighted_tree

    g = Graph.from_edges([(0, 1), (1, 2), (2, 3), (0, 4)])
    t = closure_weighted_tree(tree_from_graph(g, root=0))
    assert t.weight.tolist() == [0.0, 1.0, 2.0, 4.0, 1.0]
    assert t.height == 7.0


def test_forest_embedding_separates_components():
    from embstab.hyperbolic import embed_combinatorial, evaluate
    from embstab.hyperbolic.forest import components, embed_forest

    g = Graph.from_edges([(0, 1), (1, 2), (1, 3), (4, 5), (5, 6), (7, 8)], nodes=list(range(10)))
    assert [len(c) for c in components(g)] == [4, 3, 2, 1]
    with pytest.raises(GraphError, match="forest=True"):
        embed_combinatorial(g, eps=0.1)
    for dim in (2, 4):
        emb = embed_combinatorial(g, dim=dim, eps=0.1, precision_bits=512, forest=True)
        res = evaluate(g, emb, progress=False)
        assert emb.metadata["components"] == 4 and res.isolated == 1
        assert res.map == 1.0 and res.d_wc < 1.05
        # each within-component distance is as in a single-component embedding
        alone = embed_combinatorial(Graph.from_edges([(0, 1), (1, 2), (1, 3)]), dim=dim,
                                    tau=emb.scale, precision_bits=512)
        np.testing.assert_allclose(emb.distances_from(1)[:4], alone.distances_from(1), rtol=1e-12)
    # the original's centres at Euclidean radius 0.9 crowd the components for large τ
    crowded = embed_forest(g, eps=0.1, precision_bits=256, centre_radius=0.9)
    assert evaluate(g, crowded, progress=False).map < 1.0

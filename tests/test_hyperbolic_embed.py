"""The one entry ``embed(graph, method=...)``, networkx graphs everywhere, and the shared base's files."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from embstab.errors import EmbeddingFormatError, UnknownNameError
from embstab.hyperbolic import (Graph, GraphError, GraphEvaluation, HyperbolicEmbedding, HyperbolicError,
                                ManifoldEmbedding, PrecisionError, ProductEmbedding, as_graph, bits_needed,
                                embed, embed_combinatorial, evaluate, fit_sgd, hmds, load_embedding,
                                perturb_graph, save_embedding, steiner_tree, tree_from_graph)
from embstab.hyperbolic.tau import GUARD_BITS, choose_tau


def _nx_tree() -> nx.Graph:
    return nx.balanced_tree(3, 3)  # smalltree: 40 nodes, 39 edges


def test_networkx_graphs_are_accepted_wherever_a_graph_is_taken():
    g = _nx_tree()
    ours = as_graph(g)
    assert isinstance(ours, Graph) and ours.n_nodes == 40 and ours.n_edges == 39
    assert as_graph(ours) is ours
    emb = embed_combinatorial(g, eps=1.0, precision_bits=128)
    same = embed_combinatorial(ours, eps=1.0, precision_bits=128)
    np.testing.assert_array_equal(emb.distance_matrix(), same.distance_matrix())
    assert evaluate(g, emb, progress=False).map == 1.0
    assert tree_from_graph(g).n_nodes == 40
    assert hmds(g, 3).dim == 3
    assert steiner_tree(nx.cycle_graph(6)).n_original == 6
    assert len(fit_sgd(g, 2, epochs=1, progress=False)) == 40
    directed = nx.DiGraph([("a", "b"), ("b", "c")])
    assert as_graph(directed).directed and as_graph(directed).labels.tolist() == ["a", "b", "c"]
    assert perturb_graph(nx.cycle_graph(30), 0.1).n_edges < 30


@pytest.mark.parametrize("bad", [[(0, 1), (1, 2)], "edges.txt", None, {"a": "b"}])
def test_an_unsupported_graph_object_is_one_clear_error(bad):
    with pytest.raises(GraphError, match="expected an embstab.hyperbolic.Graph or a networkx graph"):
        embed(bad)
    with pytest.raises(GraphError, match="networkx graph"):
        embed_combinatorial(bad)


def test_embed_chooses_just_enough_precision_for_tau():
    g = _nx_tree()
    emb = embed(g, eps=0.1)
    tree = tree_from_graph(as_graph(g))
    need = bits_needed(choose_tau(tree, eps=0.1), tree.height, GUARD_BITS)
    assert emb.precision_bits == max(256, need)
    deep = Graph.from_edges([(i, i + 1) for i in range(40)])
    emb = embed(deep, tau=30.0, root="first")
    assert emb.precision_bits == bits_needed(30.0, 40, GUARD_BITS) > 256
    assert evaluate(deep, emb, progress=False).map == 1.0
    with pytest.raises(PrecisionError, match="too low"):
        embed(deep, tau=30.0, root="first", precision=256)


def test_embed_probes_a_forest_from_256_bits_up():
    g = Graph.from_edges([(0, 1), (1, 2), (2, 3), (10, 11), (11, 12), (20, 21)])
    emb = embed(g, tau=40.0, forest=True)
    assert emb.metadata["forest"] and emb.precision_bits in (256, 512, 1024, 2048)
    assert emb.precision_bits >= emb.metadata["bits_needed"] - GUARD_BITS
    if emb.precision_bits > 256:  # the probe stopped at the first power of two that fits
        with pytest.raises(PrecisionError):
            embed(g, tau=40.0, forest=True, precision=emb.precision_bits // 2)
    assert evaluate(g, emb, progress=False).map == 1.0


def test_embed_methods_and_precision_policy():
    g = _nx_tree()
    h = embed(g, "hmds", dim=3, scale=1.0)
    np.testing.assert_array_equal(h.coords, hmds(g, 3, scale=1.0).coords)
    # with every positive eigenpair kept the embedding is unique up to isometry: both solvers agree
    path = nx.path_graph(8)
    full = embed(path, "hmds", dim=hmds(path, 1, scale=0.5).metadata["n_positive"], scale=0.5)
    mp_h = embed(path, "hmds", dim=full.dim, scale=0.5, precision=80)
    assert mp_h.multiprecision and mp_h.precision_bits == 80
    np.testing.assert_allclose(mp_h.distance_matrix(), full.distance_matrix(), rtol=1e-8, atol=1e-9)
    s = embed(g, "sgd", manifold="lorentz", epochs=2, seed=1)
    np.testing.assert_array_equal(s.coords, fit_sgd(g, 2, manifold="lorentz", epochs=2, seed=1,
                                                     progress=False).coords)
    p = embed(g, "product_sgd", factors="H2,S1", epochs=2)
    assert isinstance(p, ProductEmbedding) and p.signature == "H2,S1"
    with pytest.raises(PrecisionError, match="float64"):
        embed(g, "sgd", precision=128)
    with pytest.raises(UnknownNameError, match="unknown embedding method 'rsgd'"):
        embed(g, "rsgd")
    with pytest.raises(HyperbolicError, match="'factors' is not an option of method 'sgd'"):
        embed(g, "sgd", factors="H2")
    with pytest.raises(PrecisionError, match="number of bits"):
        embed(g, precision=0)


def test_both_kinds_share_one_base_and_one_file_layer(tmp_path):
    x = np.array([[0.1, 0.2], [-0.3, 0.0], [0.0, 0.5]])
    hyp = HyperbolicEmbedding(x, nodes=["a", "b", "c"], scale=2.0)
    prod = ProductEmbedding([x, np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])], "H2,S1", nodes=[1, 2, 3])
    for emb, name in ((hyp, "h.emb"), (prod, "p.emb")):
        assert isinstance(emb, ManifoldEmbedding) and emb.geometry == "hyperbolic"
        emb.save(tmp_path / name)
        back = type(emb).load(tmp_path / name)
        assert type(back) is type(emb) and back.nodes.tolist() == emb.nodes.tolist()
        np.testing.assert_array_equal(back.distance_matrix(), emb.distance_matrix())
        assert type(ManifoldEmbedding.load(tmp_path / name)) is type(emb)
    with pytest.raises(EmbeddingFormatError, match="holds a ProductEmbedding, not a HyperbolicEmbedding"):
        HyperbolicEmbedding.load(tmp_path / "p.emb")
    with pytest.raises(TypeError, match="HyperbolicEmbedding or ProductEmbedding"):
        save_embedding(np.zeros((2, 2)), tmp_path / "x.emb")
    assert not (tmp_path / "x.emb").exists()


def test_files_naming_the_model_the_old_way_still_load(tmp_path):
    x = np.array([[1.25, 0.75, 0.0], [1.0, 0.0, 0.0]])
    emb = HyperbolicEmbedding(x, manifold="lorentz", scale=1.5)
    path = tmp_path / "l.emb"
    save_embedding(emb, path)
    lines = path.read_text().splitlines()
    head = json.loads(lines[1][2:])
    assert head["manifold"] == "lorentz"
    head["model"] = "hyperboloid"  # how files named the Lorentz model before
    del head["manifold"]
    path.write_text("\n".join([lines[0], "# " + json.dumps(head), *lines[2:]]) + "\n")
    back = load_embedding(path)
    assert back.manifold == emb.manifold and back.scale == 1.5
    np.testing.assert_array_equal(back.coords, x)
    head["model"] = "klein"
    path.write_text("\n".join([lines[0], "# " + json.dumps(head), *lines[2:]]) + "\n")
    with pytest.raises(EmbeddingFormatError, match="line 2: bad header"):
        load_embedding(path)
    path.write_bytes(b"\xff\xfe binary\n")
    with pytest.raises(EmbeddingFormatError, match="not an embstab hyperbolic embedding"):
        load_embedding(path)


def test_evaluation_is_a_typed_result():
    g = _nx_tree()
    res = evaluate(g, embed(g, eps=1.0), progress=False)
    assert isinstance(res, GraphEvaluation)
    d = res.to_dict()
    assert d["map"] == res.map == 1.0 and set(d["map_by_ties"]) == {"pessimistic", "optimistic", "order"}
    json.dumps(d)  # JSON-ready
    frame = res.to_frame()
    assert frame.shape[0] == 1 and frame["map_order"].iloc[0] == res.map_by_ties["order"]
    assert frame["rows"].iloc[0] == 40 and not frame["sampled"].iloc[0]
    with pytest.raises(UnknownNameError, match="tie rule"):
        evaluate(g, embed(g, eps=1.0), ties="random", progress=False)

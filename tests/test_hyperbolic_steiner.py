"""Gromov-product Steiner trees (spec hyperbolic.md §1.1) and embedding them."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from _graphs import load_graph

from embstab.cli import hyperbolic as cli
from embstab.hyperbolic import (
    Graph,
    GraphError,
    HyperbolicError,
    embed_combinatorial,
    evaluate,
    load_edgelist,
    load_embedding,
    tree_from_graph,
)
from embstab.hyperbolic import steiner as steiner_mod
from embstab.hyperbolic.graph import find_root
from embstab.hyperbolic.steiner import SteinerNode, SteinerTree, steiner_tree


# -- literal float64 reference of the same construction (plain Python loops) -----------------------
def _naive_steiner(dist, r, *, numpy_select=False):
    """Removal by largest Gromov product (ties: lowest pair; of equally far nodes the larger id
    goes), re-insertion through tripod centres on the path to the root, contraction of centres
    that fall on a node (tolerance 1e-12 · max(1, height)). Returns partner, parent, weight,
    n_steiner."""
    n = len(dist)
    dr = [float(dist[x][r]) for x in range(n)]

    def gp(p, q):
        return 0.5 * (dr[p] + dr[q] - float(dist[p][q]))

    active = list(range(n))
    partner, product, removed = {}, {}, []
    while len(active) > 1:
        if numpy_select:  # same rule, one full argmax per step (for graphs too big for loops)
            idx = np.asarray(active)
            sub = 0.5 * (np.add.outer(np.asarray(dr)[idx], np.asarray(dr)[idx])
                         - dist[np.ix_(idx, idx)])
            sub[np.tril_indices(len(idx))] = -np.inf
            k = int(np.argmax(sub))
            a, b = int(idx[k // len(idx)]), int(idx[k % len(idx)])
            best = float(sub.flat[k])
        else:
            best, a, b = None, -1, -1
            for i, x in enumerate(active):
                for y in active[i + 1:]:
                    v = gp(x, y)
                    if best is None or v > best:
                        best, a, b = v, x, y
        p, q = (a, b) if dr[a] > dr[b] else (b, a)
        partner[p], product[p] = q, best
        removed.append(p)
        active.remove(p)
    tol = 1e-12 * max(1.0, max(dr))
    parent, weight, depth = {r: -1}, {r: 0.0}, {x: dr[x] for x in range(n)}
    nxt = n
    for p in reversed(removed):
        q = partner[p]
        g = min(max(product[p], 0.0), depth[q])
        x, below = q, -1
        while depth[x] > g + tol:
            x, below = parent[x], x
        if depth[x] >= g - tol:
            s = x
        else:
            s = nxt
            nxt += 1
            parent[s], weight[s], depth[s] = x, g - depth[x], g
            parent[below], weight[below] = s, depth[below] - g
        parent[p], weight[p] = s, dr[p] - depth[s]
    return partner, parent, weight, nxt - n


def _tree_distance(parent, weight, u, v):
    """Distance in a parent-pointer tree: climb both nodes to their lowest common ancestor."""
    up = {}
    x, acc = u, 0.0
    while x != -1:
        up[x] = acc
        acc += weight[x]
        x = parent[x]
    x, acc = v, 0.0
    while x not in up:
        acc += weight[x]
        x = parent[x]
    return acc + up[x]


def _cycle(n):
    return Graph.from_edges([(i, (i + 1) % n) for i in range(n)], name=f"cycle{n}")


def _grid(a, b):
    e = [(i * b + j, i * b + j + 1) for i in range(a) for j in range(b - 1)]
    e += [(i * b + j, (i + 1) * b + j) for i in range(a - 1) for j in range(b)]
    return Graph.from_edges(e, name=f"grid{a}x{b}")


def _random_weighted(n=30, m=60, seed=3):
    rng = np.random.default_rng(seed)
    e = [(i, int(rng.integers(0, i)), float(rng.uniform(0.2, 3.0))) for i in range(1, n)]
    e += [(int(a), int(b), float(w)) for a, b, w in
          zip(rng.integers(0, n, m), rng.integers(0, n, m), rng.uniform(0.2, 3.0, m))]
    return Graph.from_edges(e, name="random-weighted")


def _check_structure(g, st):
    n, s = g.n_nodes, st.n_steiner
    t = st.tree
    assert isinstance(st, SteinerTree) and t.n_nodes == n + s
    assert t.graph.n_edges == n + s - 1 and t.graph.n_components() == 1  # a spanning tree
    assert len(t.order) == n + s and sorted(t.order.tolist()) == list(range(n + s))
    assert np.all(t.weight[t.parent >= 0] > 0)
    assert t.graph.labels.tolist()[:n] == g.labels.tolist()
    assert all(isinstance(x, SteinerNode) for x in t.graph.labels.tolist()[n:])
    assert np.all(t.parent[n:] >= 0)  # Steiner nodes are never the root
    # every graph node keeps its graph distance to the root
    d_root = g.shortest_paths([st.root])[0]
    np.testing.assert_allclose(t.root_distance[:n], d_root, rtol=0, atol=1e-12)
    dt = st.distances()
    assert dt.shape == (n, n) and np.all(dt >= 0) and np.all(np.isfinite(dt))
    off = ~np.eye(n, dtype=bool)
    assert np.all(dt[off] > 0)  # distinct graph nodes never coincide
    return dt


# -- trees: the Steiner tree is the tree itself ----------------------------------------------------
@pytest.mark.parametrize("root", ["max_degree", "first", "center"])
@pytest.mark.parametrize("name", ["smalltree", "phylo_tree"])
def test_tree_graph_metric_is_reproduced_exactly(name, root):
    g = load_graph(name)
    st = steiner_tree(g, root)
    assert st.n_steiner == 0  # tree metrics are 0-hyperbolic: every centre is a graph node
    dt = _check_structure(g, st)
    assert np.array_equal(dt, g.shortest_paths(np.arange(g.n_nodes)))


def test_generated_weighted_tree_and_leaf_root():
    rng = np.random.default_rng(0)
    g = Graph.from_edges([(i, int(rng.integers(0, i)), float(rng.integers(1, 5)) / 2)
                          for i in range(1, 60)])
    leaf = int(np.flatnonzero(g.degrees() == 1)[0])
    st = steiner_tree(g, root=leaf)
    assert st.n_steiner == 0 and st.root == leaf
    assert np.array_equal(_check_structure(g, st), g.shortest_paths(np.arange(g.n_nodes)))


def test_triangle_gets_one_steiner_node_and_is_exact():
    g = Graph.from_edges([(0, 1), (1, 2), (2, 0)])
    st = steiner_tree(g, root=0)
    # (1|2)_0 = 1/2: node 2 is removed (equal depth, larger id) with partner 1 and hangs off
    # the centre, which splits the edge 0–1 halfway
    assert st.partner.tolist() == [-1, 0, 1] and st.removal_order.tolist() == [2, 1]
    assert st.n_steiner == 1
    assert st.tree.parent.tolist() == [-1, 3, 3, 0]
    assert st.tree.weight.tolist() == [0.0, 0.5, 0.5, 0.5]
    assert np.array_equal(st.distances(), g.shortest_paths([0, 1, 2]))
    assert str(st.tree.graph.labels[3]) == "steiner:0"


# -- non-trees: structure, and agreement with the literal reference --------------------------------
@pytest.mark.parametrize("make,root", [(lambda: _cycle(12), 0), (lambda: _cycle(9), 4),
                                       (lambda: _grid(6, 6), "max_degree"),
                                       (lambda: _grid(4, 7), "center"),
                                       (lambda: _random_weighted(), "max_degree")])
def test_matches_plain_python_reference(make, root):
    g = make()
    st = steiner_tree(g, root)
    dt = _check_structure(g, st)
    dist = g.shortest_paths(np.arange(g.n_nodes))
    dist = np.minimum(dist, dist.T)  # Dijkstra's two directions may differ in the last bit
    partner, parent, weight, n_steiner = _naive_steiner(dist, find_root(g, root))
    assert st.n_steiner == n_steiner
    assert st.partner.tolist() == [partner.get(i, -1) for i in range(g.n_nodes)]
    assert st.tree.parent.tolist() == [parent[i] for i in range(g.n_nodes + n_steiner)]
    ref = np.array([[_tree_distance(parent, weight, u, v) for v in range(g.n_nodes)]
                    for u in range(g.n_nodes)])
    np.testing.assert_allclose(dt, ref, rtol=0, atol=1e-12)


def test_diseasome_structure_and_reference():
    g = load_graph("bio-diseasome")
    st = steiner_tree(g)
    assert st.n_steiner > 0
    dt = _check_structure(g, st)
    dist = g.shortest_paths(np.arange(g.n_nodes))
    partner, parent, weight, n_steiner = _naive_steiner(dist, st.root, numpy_select=True)
    assert st.n_steiner == n_steiner
    assert st.partner.tolist() == [partner.get(i, -1) for i in range(g.n_nodes)]
    rng = np.random.default_rng(0)
    for u, v in rng.integers(0, g.n_nodes, (300, 2)):
        assert dt[u, v] == pytest.approx(_tree_distance(parent, weight, int(u), int(v)),
                                         abs=1e-12)


def test_deterministic_and_progress_flag():
    g = _grid(5, 5)
    a, b = steiner_tree(g), steiner_tree(g, progress=True)
    assert np.array_equal(a.tree.parent, b.tree.parent)
    assert np.array_equal(a.tree.weight, b.tree.weight)


# -- errors ----------------------------------------------------------------------------------------
def test_too_large_graph_is_refused(monkeypatch):
    monkeypatch.setattr(steiner_mod, "MAX_NODES", 10)
    with pytest.raises(HyperbolicError, match="limited to 10 nodes"):
        steiner_tree(_cycle(11))


def test_disconnected_graph_is_refused():
    g = Graph.from_edges([(0, 1), (1, 2), (3, 4)])
    with pytest.raises(GraphError, match="disconnected"):
        steiner_tree(g)
    with pytest.raises(HyperbolicError, match="forests"):
        embed_combinatorial(g, tree="steiner", forest=True)


def test_bad_tree_argument_and_ready_rooted_tree():
    g = _cycle(6)
    with pytest.raises(HyperbolicError, match="tree must be 'bfs' or 'steiner'"):
        embed_combinatorial(g, tree="kruskal")
    with pytest.raises(HyperbolicError, match="needs a Graph"):
        embed_combinatorial(tree_from_graph(g), tree="steiner")


# -- embedding -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, 4])
def test_embed_steiner_returns_only_graph_nodes(dim):
    g = Graph.from_edges([("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("a", "e"),
                          ("e", "f"), ("f", "c")], name="small")
    emb = embed_combinatorial(g, dim=dim, tree="steiner", bits=256, precision_bits=256)
    st = steiner_tree(g)
    assert len(emb) == g.n_nodes and emb.dim == dim
    assert emb.nodes.tolist() == g.labels.tolist()
    assert emb.metadata["tree"] == "steiner" and emb.metadata["n_steiner"] == st.n_steiner
    assert emb.metadata["root"] == g.labels[st.root]
    res = evaluate(g, emb, progress=False)
    assert res.bad == 0 and 0 < res.map <= 1 and res.d_wc >= 1
    # a ready SteinerTree gives the same points
    again = embed_combinatorial(st, dim=dim, bits=256, precision_bits=256)
    assert all(x == y for x, y in zip(again.coords.ravel(), emb.coords.ravel()))


def test_steiner_embedding_decodes_the_tree_metric():
    g = _grid(4, 4)
    st = steiner_tree(g)
    emb = embed_combinatorial(g, tree="steiner", eps=0.05, precision_bits=1024)
    dt = st.distances()
    for a in (0, 5, 15):
        d_hat = np.asarray(emb.distances_from(a), dtype=float)
        off = np.arange(g.n_nodes) != a
        ratio = d_hat[off] / dt[a, off]
        assert ratio.max() / ratio.min() <= 1.05 + 1e-9  # within the requested 1+eps


def test_bfs_default_unchanged():
    g = load_graph("smalltree")
    a = embed_combinatorial(g, bits=256, precision_bits=256)
    b = embed_combinatorial(g, bits=256, precision_bits=256, tree="bfs")
    assert a.metadata == b.metadata and a.metadata["tree"] == "bfs"
    assert embed_combinatorial(tree_from_graph(g), bits=256,
                               precision_bits=256).metadata["tree"] == "given"
    assert all(x == y for x, y in zip(a.coords.ravel(), b.coords.ravel()))


# -- CLI -------------------------------------------------------------------------------------------
def _run(argv):
    parser = argparse.ArgumentParser(prog="embstab")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_embed_with_steiner_tree(tmp_path, capsys):
    src = tmp_path / "g.edges"
    src.write_text("".join(f"{u} {v}\n" for u, v in _grid(4, 5).edge_list().tolist()))
    out = tmp_path / "g.hyp"
    assert _run(["hyperbolic", "embed", str(src), "--method", "comb", "--tree", "steiner",
                 "-o", str(out), "--quiet"]) == 0
    text = capsys.readouterr().err  # (the summary goes to stderr: -o may be /dev/stdout)
    assert "Steiner tree (+" in text and "20 nodes" in text
    emb = load_embedding(out)
    assert len(emb) == 20 and emb.metadata["tree"] == "steiner"
    assert _run(["hyperbolic", "eval", str(src), str(out), "--json", "--quiet"]) == 0
    assert '"bad": 0' in capsys.readouterr().out


def test_cli_steiner_refuses_forest(tmp_path):
    src = tmp_path / "f.edges"
    src.write_text("0 1\n1 2\n3 4\n")
    with pytest.raises(HyperbolicError, match="--forest"):
        _run(["hyperbolic", "embed", str(src), "--tree", "steiner", "--forest",
              "-o", str(tmp_path / "f.hyp"), "--quiet"])
    assert not (tmp_path / "f.hyp").exists()
    assert load_edgelist(src).n_components() == 2

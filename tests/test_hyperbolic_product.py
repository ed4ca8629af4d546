"""Product-space embeddings (H × E × S): distances, fitting, file round trip, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from embstab.errors import EmbeddingFormatError
from embstab.hyperbolic import (
    Graph,
    HyperbolicError,
    ProductEmbedding,
    embedding_instability,
    evaluate,
    fit_product_sgd,
    fit_sgd,
    load_embedding,
    save_embedding,
)
from embstab.hyperbolic.product import parse_factors

from _graphs import load_graph


def _cycle(n: int) -> Graph:
    return Graph.from_edges([(k, (k + 1) % n) for k in range(n)])


def _literal_distance(kind: str, u: np.ndarray, v: np.ndarray) -> float:
    """Textbook formulas, one pair at a time, in float64."""
    if kind == "poincare":
        return math.acosh(1 + 2 * float(np.sum((u - v) ** 2)) / ((1 - float(u @ u)) * (1 - float(v @ v))))
    if kind == "lorentz":
        return math.acosh(max(1.0, float(u[0] * v[0] - u[1:] @ v[1:])))
    if kind == "euclidean":
        return math.sqrt(float(np.sum((u - v) ** 2)))
    return math.acos(max(-1.0, min(1.0, float(u @ v))))  # sphere


def _random_product(rng: np.random.Generator, n: int) -> ProductEmbedding:
    ball = rng.uniform(-0.4, 0.4, size=(n, 3))
    spatial = rng.normal(size=(n, 2))
    hyperboloid = np.hstack([np.sqrt(1 + np.sum(spatial**2, axis=1, keepdims=True)), spatial])
    flat = rng.normal(size=(n, 2))
    sphere = rng.normal(size=(n, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    return ProductEmbedding([ball, hyperboloid, flat, sphere], "H3,L2,E2,S2", scale=1.7,
                            nodes=[f"n{k}" for k in range(n)])


@pytest.mark.parametrize("combine", ["l2", "l1"])
def test_product_distances_match_literal_formulas(combine):
    rng = np.random.default_rng(0)
    emb = _random_product(rng, 12)
    emb.combine = combine
    kinds = [k for k, _ in emb.factors]
    for a in (0, 5, 11):
        got = emb.distances_from(a)
        for b in range(len(emb)):
            parts = [_literal_distance(k, blk[a], blk[b]) for k, blk in zip(kinds, emb.coords)]
            want = (math.sqrt(sum(p * p for p in parts)) if combine == "l2" else sum(parts)) / 1.7
            assert got[b] == pytest.approx(want, rel=1e-9, abs=1e-7)
    assert emb.distances_from(3)[3] == 0.0
    m = emb.distance_matrix()
    np.testing.assert_allclose(m, m.T, rtol=1e-12, atol=1e-12)


def test_single_poincare_factor_is_exactly_fit_sgd():
    g = load_graph("smalltree")
    kw = {"epochs": 15, "seed": 3, "learn_scale": True, "weighting": "exp", "progress": False}
    ball = fit_sgd(g, 2, **kw)
    prod = fit_product_sgd(g, "H2", **kw)
    np.testing.assert_array_equal(prod.coords[0], ball.coords)
    assert prod.scale == ball.scale
    np.testing.assert_array_equal(prod.distances_from(7), ball.distances_from(7))


def test_a_sphere_factor_fits_a_cycle_that_the_ball_cannot():
    """Gu et al.'s point: a cycle is not tree-like; H2 × S1 beats H2 alone by far."""
    n = 24
    g = _cycle(n)
    kw = {"scale": 2 * math.pi / n, "epochs": 300, "lr": 0.05, "batch_size": 64, "seed": 0, "progress": False}
    ball = evaluate(g, fit_product_sgd(g, "H2", **kw), progress=False)
    prod_emb = fit_product_sgd(g, "H2,S1", **kw)
    prod = evaluate(g, prod_emb, progress=False)
    assert prod.d_avg < 0.25 * ball.d_avg
    assert prod.map == 1.0
    assert prod_emb.metadata["loss_history"][-1] < prod_emb.metadata["loss_history"][0]
    # every sphere point stays on the unit circle
    np.testing.assert_allclose(np.linalg.norm(prod_emb.coords[1], axis=1), 1.0, atol=1e-9)


def test_fit_is_deterministic_and_l1_differs_from_l2():
    g = _cycle(10)
    kw = {"epochs": 20, "seed": 5, "progress": False, "scale": 0.5}
    a = fit_product_sgd(g, "H2,E1,S1", **kw)
    b = fit_product_sgd(g, [("poincare", 2), ("euclidean", 1), ("sphere", 1)], **kw)
    for x, y in zip(a.coords, b.coords):
        np.testing.assert_array_equal(x, y)
    c = fit_product_sgd(g, "H2,E1,S1", combine="l1", **kw)
    assert not np.array_equal(a.coords[0], c.coords[0])
    lorentz = fit_product_sgd(g, "L2,L2", **kw)
    x = lorentz.coords[0]
    np.testing.assert_allclose(x[:, 0] ** 2 - np.sum(x[:, 1:] ** 2, axis=1), 1.0, rtol=1e-9)
    inst = embedding_instability(a, c, k=3)
    assert 0.0 <= inst.knn_overlap <= 1.0


def test_file_round_trip_is_exact(tmp_path):
    emb = _random_product(np.random.default_rng(1), 9)
    emb.metadata["note"] = "x"
    path = tmp_path / "p.emb"
    save_embedding(emb, path)
    back = load_embedding(path)  # the one loader dispatches on the magic line
    assert isinstance(back, ProductEmbedding)
    assert back.factors == emb.factors and back.scale == emb.scale and back.combine == emb.combine
    assert back.nodes.tolist() == emb.nodes.tolist() and back.metadata == {"note": "x"}
    for x, y in zip(back.coords, emb.coords):
        np.testing.assert_array_equal(x, y)


def test_malformed_product_files_are_refused_with_file_and_line(tmp_path):
    emb = _random_product(np.random.default_rng(2), 4)
    path = tmp_path / "p.emb"
    save_embedding(emb, path)
    lines = path.read_text().splitlines()
    bad = tmp_path / "bad.emb"
    bad.write_text("\n".join(lines[:3] + [lines[3].rsplit("\t", 1)[0]]) + "\n")
    with pytest.raises(EmbeddingFormatError, match="line 4"):
        load_embedding(bad)
    bad.write_text("\n".join(lines[:4]) + "\n")
    with pytest.raises(EmbeddingFormatError, match="truncated"):
        load_embedding(bad)
    bad.write_text("\n".join(lines[:2] + [lines[2].replace("\t", "\tx", 1)]) + "\n")
    with pytest.raises(EmbeddingFormatError, match="non-numeric"):
        load_embedding(bad)


def test_bad_factors_and_blocks_are_refused():
    assert parse_factors("h2, S1") == (("poincare", 2), ("sphere", 1))
    for bad in ("H", "X2", "H0", "", [("hyperbolic", 2)]):
        with pytest.raises(HyperbolicError):
            parse_factors(bad)
    good = np.zeros((3, 2))
    with pytest.raises(HyperbolicError, match="shape"):
        ProductEmbedding([good, np.zeros((4, 2))], "H2,E2")
    with pytest.raises(HyperbolicError, match="NaN"):
        ProductEmbedding([np.full((3, 2), np.nan)], "E2")
    with pytest.raises(HyperbolicError, match="combine"):
        ProductEmbedding([good], "E2", combine="max")
    with pytest.raises(HyperbolicError, match="combine"):
        fit_product_sgd(_cycle(5), "H2", combine="max", progress=False)


def test_cli_embeds_a_product_and_evaluates_it(tmp_path, capsys):
    import argparse
    import json

    from embstab.cli import hyperbolic as cli
    from embstab.errors import EmbstabError

    def run(argv):
        parser = argparse.ArgumentParser(prog="embstab")
        cli.register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(argv)
        return args.func(args)

    edges = tmp_path / "c.edges"
    edges.write_text("".join(f"{k} {(k + 1) % 12}\n" for k in range(12)))
    out = tmp_path / "c.emb"
    assert run(["hyperbolic", "embed", str(edges), "--method", "sgd", "--manifold", "product",
                "--factors", "H2,S1", "--sigma", str(2 * math.pi / 12), "--epochs", "200",
                "--lr", "0.05", "--batch-size", "16", "-o", str(out), "--quiet"]) == 0
    assert "in H2,S1 by sgd" in capsys.readouterr().err
    assert isinstance(load_embedding(out), ProductEmbedding)
    assert run(["hyperbolic", "eval", str(edges), str(out), "--json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["map"] == 1.0 and res["d_avg"] < 0.2  # the fit itself is tested above
    with pytest.raises(EmbstabError, match="--init"):
        run(["hyperbolic", "embed", str(edges), "--method", "sgd", "--manifold", "product",
             "--init", "hmds", "-o", str(out), "--quiet"])
    with pytest.raises(EmbstabError, match="bad factor"):
        run(["hyperbolic", "embed", str(edges), "--method", "sgd", "--manifold", "product",
             "--factors", "Q3", "-o", str(out), "--quiet"])

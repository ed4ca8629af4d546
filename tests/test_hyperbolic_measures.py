"""The hyperbolic measures in the registry: literal references, invariants, and compare() on a pair."""

from __future__ import annotations

import math

import numpy as np
import pytest

import embstab
from embstab import Embedding
from embstab.errors import ShapeError
from embstab.hyperbolic import HyperbolicEmbedding, ProductEmbedding, embedding_instability
from embstab.measures import REGISTRY, measures_for
from embstab.measures.hyperbolic import DistanceInstability, hyperbolic_knn

HYPERBOLIC = measures_for("hyperbolic")


def _pair(seed: int = 0, n: int = 30, noise: float = 0.05):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    x *= rng.uniform(0.05, 0.9, size=(n, 1)) / np.linalg.norm(x, axis=1, keepdims=True)
    y = x + noise * rng.normal(size=x.shape)
    y *= np.minimum(1.0, 0.95 / np.linalg.norm(y, axis=1, keepdims=True))
    nodes = [f"v{i}" for i in range(n)]
    return (HyperbolicEmbedding(x, scale=1.3, nodes=nodes), HyperbolicEmbedding(y, scale=1.3, nodes=nodes))


def _literal(a: HyperbolicEmbedding, b: HyperbolicEmbedding, k: int) -> dict[str, float]:
    """Textbook definitions, one pair at a time, in float64 (no ties in random data)."""
    n = len(a)

    def d(e, i, j):
        u, v = e.coords[i], e.coords[j]
        return math.acosh(1 + 2 * float(np.sum((u - v) ** 2)) / ((1 - float(u @ u)) * (1 - float(v @ v)))) / e.scale

    knn, aps, rel, ratios = [], [], [], []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        na = sorted(others, key=lambda j: d(a, i, j))[:k]
        ranked = sorted(others, key=lambda j: d(b, i, j))
        knn.append(len(set(na) & set(ranked[:k])) / k)
        hits, ap = 0, 0.0
        for rank, j in enumerate(ranked, 1):
            if j in na:
                hits += 1
                ap += hits / rank
        aps.append(ap / k)
        r = [d(b, i, j) / d(a, i, j) for j in others]
        rel.append(sum(abs(x - 1) for x in r) / len(r))
        ratios.extend(r)
    return {"hyperbolic_knn": float(np.mean(knn)), "hyperbolic_map": float(np.mean(aps)),
            "distortion_avg": float(np.mean(rel)), "distortion_worst": max(ratios) * max(1 / x for x in ratios)}


def test_registry_declares_the_hyperbolic_measures():
    assert HYPERBOLIC == ("hyperbolic_knn", "hyperbolic_map", "distortion_avg", "distortion_worst")
    assert all(REGISTRY[n].geometry == "hyperbolic" for n in HYPERBOLIC)
    assert not set(HYPERBOLIC) & set(measures_for("euclidean"))


def test_compare_matches_the_literal_definitions():
    a, b = _pair()
    df = embstab.compare(a, b, params={n: {"k": 5} for n in HYPERBOLIC})
    assert list(df["measure"]) == list(HYPERBOLIC) and df.attrs["n_nodes"] == 30
    ref = _literal(a, b, 5)
    for name, value in zip(df["measure"], df["value"]):
        assert value == pytest.approx(ref[name], rel=1e-10, abs=1e-12), name
        assert 0 < ref[name] and (ref[name] < 1 or name == "distortion_worst")
    row = df.set_index("measure")
    assert row.loc["hyperbolic_knn", "distance"] == pytest.approx(1 - ref["hyperbolic_knn"])
    assert row.loc["distortion_avg", "distance"] == row.loc["distortion_avg", "value"]


def test_each_measure_through_the_registry_equals_one_streaming_pass():
    a, b = _pair(1)
    full = embedding_instability(a, b, k=4, rows=12, seed=3)
    assert isinstance(full, DistanceInstability) and full.rows == 12 and full.k == 4
    fields = {"hyperbolic_knn": full.knn_overlap, "hyperbolic_map": full.map, "distortion_avg": full.d_avg,
              "distortion_worst": full.d_wc}
    for name, want in fields.items():
        assert REGISTRY[name].evaluate(a, b, k=4, rows=12, seed=3) == want


def test_the_new_member_as_reference_equals_the_literal_definitions_read_from_it():
    a, b = _pair(4)
    df = embstab.compare(a, b, params={n: {"k": 5, "reference": "new"} for n in HYPERBOLIC})
    ref = _literal(b, a, 5)
    for name, value in zip(df["measure"], df["value"]):
        assert value == pytest.approx(ref[name], rel=1e-10, abs=1e-12), name
    assert df.set_index("measure").loc["hyperbolic_map", "value"] != pytest.approx(_literal(a, b, 5)["hyperbolic_map"])
    with pytest.raises(embstab.errors.ConfigError, match="reference must be 'old'"):
        hyperbolic_knn(a, b, k=5, reference="b")


def test_identical_geometry_is_perfectly_stable_in_any_model():
    a, _ = _pair(2)
    lorentz = HyperbolicEmbedding(a.hyperboloid64(), manifold="lorentz", scale=a.scale, nodes=a.nodes)
    vals = embstab.compare(a, lorentz).set_index("measure")["value"]
    assert vals["hyperbolic_knn"] == 1.0 and vals["hyperbolic_map"] == 1.0
    assert vals["distortion_avg"] < 1e-12 and vals["distortion_worst"] == pytest.approx(1.0, abs=1e-12)


def test_invariances_declared_in_the_registry_hold():
    a, b = _pair(3)
    rescaled = HyperbolicEmbedding(b.coords, scale=b.scale * 3.7, nodes=b.nodes)  # isotropic scaling of b
    # an isometry of the ball: the reflection R_mu that swaps mu and the origin
    from embstab.hyperbolic.geometry import reflect_to_origin

    moved = HyperbolicEmbedding(reflect_to_origin(np.array([0.3, -0.2, 0.1]), b.coords), scale=b.scale, nodes=b.nodes)
    base = embstab.compare(a, b).set_index("measure")["value"]
    for other, change in ((rescaled, "isotropic scaling"), (moved, "isometry")):
        got = embstab.compare(a, other).set_index("measure")["value"]
        for name in HYPERBOLIC:
            if change in REGISTRY[name].invariances:
                assert got[name] == pytest.approx(base[name], rel=1e-9, abs=1e-12), (name, change)
    assert embstab.compare(a, rescaled).set_index("measure")["value"]["distortion_avg"] != pytest.approx(
        base["distortion_avg"])  # not scale-invariant, and not declared so


def test_products_are_measured_too():
    rng = np.random.default_rng(4)
    ball = rng.uniform(-0.4, 0.4, size=(12, 2))
    circle = rng.normal(size=(12, 2))
    circle /= np.linalg.norm(circle, axis=1, keepdims=True)
    p = ProductEmbedding([ball, circle], "H2,S1")
    df = embstab.compare(p, p, measures=["hyperbolic_knn", "distortion_worst"])
    assert list(df["value"]) == [1.0, pytest.approx(1.0)]


def test_mixed_or_mismatched_pairs_are_refused_clearly():
    a, b = _pair(5)
    words = Embedding([f"w{i}" for i in range(30)], np.random.default_rng(0).normal(size=(30, 4)))
    with pytest.raises(ShapeError, match="cannot compare a euclidean embedding with a hyperbolic one"):
        embstab.compare(words, a)
    with pytest.raises(ShapeError, match="knn compares euclidean embeddings"):
        embstab.compare(a, b, measures=["knn"])
    with pytest.raises(ShapeError, match="hyperbolic_knn compares hyperbolic embeddings"):
        embstab.compare(words, words, measures=["hyperbolic_knn"], anchors=None)
    with pytest.raises(ShapeError, match="the new one is a ndarray"):
        embstab.compare(a, np.zeros((30, 3)))
    other = HyperbolicEmbedding(b.coords, nodes=list(reversed(b.nodes.tolist())))
    with pytest.raises(ShapeError, match="different nodes"):
        hyperbolic_knn(a, other)
    with pytest.raises(ShapeError, match="k must be between 1 and n-1"):
        hyperbolic_knn(a, b, k=30)
    with pytest.raises(ShapeError, match="rows must be positive"):
        embedding_instability(a, b, rows=0)

"""The HyperbolicEmbedding container: persistence and safe float64 export."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from embstab.errors import EmbeddingFormatError
from embstab.hyperbolic import (Graph, HyperbolicEmbedding, HyperbolicError, PrecisionError,
                                embed_combinatorial, load_embedding, save_embedding)


def _deep_tree():
    # a path of 12 nodes at τ = 10: the end sits ~160 bits deep
    return Graph.from_edges([(i, i + 1) for i in range(11)])


def test_multiprecision_roundtrip_keeps_distances(tmp_path):
    e = embed_combinatorial(_deep_tree(), tau=10.0, precision_bits=256, root="first")
    p = tmp_path / "deep.hyp"
    save_embedding(e, p)
    f = load_embedding(p)
    assert f.multiprecision and f.precision_bits == 256 and f.scale == e.scale
    assert f.metadata["method"] == "combinatorial"
    np.testing.assert_allclose(f.distances_from(0), e.distances_from(0), rtol=1e-13)
    np.testing.assert_allclose(e.distances_from(0), np.arange(12), rtol=1e-3)


def test_float_roundtrip_with_string_labels(tmp_path):
    e = HyperbolicEmbedding(np.array([[0.1, 0.2], [-0.3, 0.0]]), nodes=["x", "y"], scale=2.0)
    p = tmp_path / "f.hyp"
    save_embedding(e, p)
    f = load_embedding(p)
    assert f.nodes.tolist() == ["x", "y"]
    np.testing.assert_array_equal(f.coords, e.coords)


def test_float64_export_only_where_safe():
    e = embed_combinatorial(_deep_tree(), tau=10.0, precision_bits=256, root="first")
    with pytest.raises(PrecisionError, match="within 2\\^-52 of the boundary"):
        e.poincare64()
    dirs, radii = e.polar()  # the safe alternative: exact radii in float64
    np.testing.assert_allclose(radii, 10.0 * np.arange(12), rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(dirs[1:], axis=1), 1.0)
    shallow = embed_combinatorial(_deep_tree(), tau=1.0, precision_bits=128, root="first")
    assert shallow.poincare64().dtype == np.float64


def test_bad_files_and_inputs(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("hello\n")
    with pytest.raises(EmbeddingFormatError, match="not an embstab hyperbolic embedding"):
        load_embedding(p)
    with pytest.raises(EmbeddingFormatError, match="no such file"):
        load_embedding(tmp_path / "missing.hyp")
    with pytest.raises(HyperbolicError, match="NaN"):
        HyperbolicEmbedding(np.array([[np.nan, 0.0]]))
    with pytest.raises(HyperbolicError, match="precision_bits"):
        HyperbolicEmbedding(np.array([[mpmath.mpf(0), mpmath.mpf(0)]], dtype=object))

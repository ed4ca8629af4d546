"""TT-Rec: shapes, TT-SVD against float64 references, lookups, bags, cache life cycle, bad input."""

import math

import numpy as np
import pytest
import torch

from embstab.compress.transforms import transform_quantize_pair
from embstab.embedding import Embedding
from embstab.errors import EmbstabError, UnknownNameError
from embstab.recipes import RECIPES
from embstab.recipes.tt import (TTConfigError, TTEmbedding, TTShape, suggest_tt_shape, tt_compress_embedding,
                                tt_decompose, tt_full)


def test_shape_parameter_counts_match_spec():
    for r, params in ((8, 6560), (16, 23360), (32, 87680)):
        s = TTShape((20, 20, 25), (4, 4, 4), (r, r))
        assert s.num_parameters == params
        assert s.compression_ratio(10_000) == pytest.approx(640_000 / params)


def test_suggest_shape_balanced_and_ratio():
    s = suggest_tt_shape(10_000, 64, ranks=8)
    assert 10_000 <= s.num_rows <= 10_200 and max(s.p) / min(s.p) <= 25 / 20 and s.q == (4, 4, 4)
    assert sorted(suggest_tt_shape(10_000, 64, ranks=8, slack=0).p) == [20, 20, 25]
    s = suggest_tt_shape(10_007, 64, ratio=20)  # prime n: the grid rounds up
    assert s.num_rows >= 10_007 and s.compression_ratio(10_007) >= 20
    bigger = TTShape(s.p, s.q, (s.ranks[0] + 1, s.ranks[1] + 1))
    assert bigger.compression_ratio(10_007) < 20  # the largest rank reaching the ratio
    with pytest.raises(TTConfigError, match="no TT rank"):
        suggest_tt_shape(100, 8, ratio=1e6)


def test_tt_full_matches_entrywise_definition():
    rng = np.random.default_rng(0)
    s = TTShape((2, 3, 4), (2, 2, 3), (3, 2))
    g = [rng.standard_normal(c) for c in s.core_shapes]
    W = tt_full(g)
    for i in (0, 5, 17, 23):
        i1, i2, i3 = i // 12, (i % 12) // 4, i % 4
        for j in (0, 4, 11):
            j1, j2, j3 = j // 6, (j % 6) // 3, j % 3
            ref = g[0][0, i1, j1, :] @ g[1][:, i2, j2, :] @ g[2][:, i3, j3, 0]
            assert W[i, j] == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_tt_svd_recovers_exact_tt_table():
    rng = np.random.default_rng(1)
    s = TTShape((4, 5, 6), (2, 2, 4), (3, 5))
    W = tt_full([rng.standard_normal(c) for c in s.core_shapes])
    fit = tt_decompose(W, s)
    assert np.abs(tt_full(fit) - W).max() < 1e-9 * np.abs(W).max()
    assert fit.num_parameters <= s.num_parameters


# Exact TT tables whose row count leaves padding rows in the grid (and a few that fill it, whole
# first-digit slabs or whole (i1, i2) blocks): (row factors, column factors, ranks, row counts).
EXACT_PADDED = [
    ((20, 20, 25), (4, 4, 4), (8, 8), (10_000, 9_500, 9_973, 8_476, 7_001, 501)),
    ((4, 5, 6), (2, 2, 4), (3, 5), (120, 90, 84, 115, 85, 37, 7, 1)),
    ((5, 6, 7), (2, 3, 2), (4, 6), (210, 168, 163, 121, 43, 6)),
    ((3, 4, 5), (2, 2, 2), (2, 4), (60, 56, 40, 21, 3)),
    ((6, 5, 4), (1, 2, 3), (2, 3), (120, 119, 100, 33, 4)),
]


def _exact_tt_table(p, q, ranks, seed):
    s = TTShape(p, q, ranks)
    return s, tt_full([np.random.default_rng(seed).standard_normal(c) for c in s.core_shapes])


@pytest.mark.parametrize("seed", [7301, 7302])
@pytest.mark.parametrize("p, q, ranks, counts", EXACT_PADDED, ids=lambda v: "x".join(map(str, v)))
def test_tt_fit_recovers_exact_tt_table_for_any_row_count(p, q, ranks, counts, seed):
    s, W = _exact_tt_table(p, q, ranks, seed)
    for n in counts:
        X = W[:n]
        fit = tt_decompose(X, s)
        err = np.linalg.norm(tt_full(fit, n) - X) / np.linalg.norm(X)
        assert err <= 1e-10, (n, err)
        assert fit.shape.ranks[0] <= ranks[0] and fit.shape.ranks[1] <= ranks[1]
        assert fit.num_parameters <= s.num_parameters


def _exact_on_suggested_grid(n, d, rank, seed):
    s = suggest_tt_shape(n, d, ranks=rank)
    assert s.num_rows > n  # the suggested grid pads this table
    return _exact_tt_table(s.p, s.q, s.ranks, seed)[1][:n]


def test_tt_compress_embedding_exact_on_suggested_padded_grid():
    W = _exact_on_suggested_grid(997, 16, 4, 7303)
    out = tt_compress_embedding(Embedding([f"w{i}" for i in range(997)], W), ranks=4)
    assert np.linalg.norm(out.vectors - W) <= 1e-10 * np.linalg.norm(W)


def test_tt_transform_keeps_exact_tt_pair_at_full_precision():
    A, B = _exact_on_suggested_grid(701, 16, 3, 7304), _exact_on_suggested_grid(653, 16, 3, 7305)
    out = transform_quantize_pair(A, B, 32, "tt:3")  # 32 bits: cores kept as fitted
    for ref, got in ((A, out.old), (B, out.new)):
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()  # float32 rounding only


def test_tt_fit_on_degenerate_tables():
    s = TTShape((3, 4, 5), (2, 2, 2), (2, 2))
    fit = tt_decompose(np.zeros((37, 8)), s)  # all zero: well-formed cores, zero rows
    assert min(fit.shape.ranks) >= 1 and not tt_full(fit, 37).any()
    row = np.random.default_rng(7306).standard_normal((1, 8))
    assert np.allclose(tt_full(tt_decompose(row, s), 1), row, rtol=0, atol=1e-12)


def test_rows_match_reconstruction_and_backward():
    emb = TTEmbedding(500, 24, 4, init="normal", generator=3)
    assert emb.shape.num_rows >= 500 and emb.shape.dim == 24
    ids = torch.tensor([0, 7, 499, 123, 7])
    ref = tt_full(list(emb.cores), 500)[ids.numpy()]
    got = emb.rows(ids).detach().double().numpy()
    assert np.abs(got - ref).max() < 1e-4 * np.abs(ref).max()
    emb.forward(ids.reshape(1, -1)).sum().backward()
    assert all(c.grad is not None and torch.isfinite(c.grad).all() for c in emb.cores)


def test_bags_with_offsets_equal_2d_bags():
    emb = TTEmbedding(100, 8, 2, generator=0, mode="mean").eval()
    ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    a = emb(ids)
    b = emb(ids.reshape(-1), offsets=torch.tensor([0, 3]))
    assert torch.allclose(a, b, atol=1e-6)
    assert torch.allclose(a[0], emb.rows(ids[0]).mean(0), atol=1e-6)


def test_inits_and_determinism():
    for init in ("sampled_gaussian", "uniform", "normal"):
        a = TTEmbedding(1000, 16, 4, init=init, generator=5)
        b = TTEmbedding(1000, 16, 4, init=init, generator=5)
        assert all(torch.equal(x, y) for x, y in zip(a.cores, b.cores))
    g = TTEmbedding(1000, 16, 4, init="sampled_gaussian", generator=1).cores[0].detach()
    assert float(g.abs().min()) >= 2 * (3000) ** (-1 / 6) - 1e-6  # tails only
    assert float(TTEmbedding(1000, 16, 4, init="uniform", generator=1).full().min()) > 0


def test_cache_life_cycle():
    emb = TTEmbedding(200, 8, 3, cache_rows=2, generator=0).train()
    emb.rows(torch.tensor([5, 5, 5, 9, 9, 1]))
    assert emb.cache_populate() == 2
    assert sorted(emb.cache_ids.tolist()) == [5, 9]
    with torch.no_grad():
        emb.cache_weight[emb.cache_slot[5]] += 1.0  # a dense update of a cached row
    before = emb.full()[5].clone()
    emb.rows(torch.tensor([5, 1, 1, 1, 1]))
    assert emb.cache_hit_rate == pytest.approx(1 / 5)
    emb.cache_populate()  # counts now: 1 -> 5, 5 -> 4, 9 -> 2: row 9 evicted, 5 keeps its dense value
    assert sorted(emb.cache_ids.tolist()) == [1, 5]
    assert torch.equal(emb.full()[5], before)
    assert torch.allclose(emb.full()[9], emb.tt_rows(torch.tensor([9]))[0])
    emb.cache_flush()
    assert emb.cache_weight.shape[0] == 0


def test_compress_embedding_metadata():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    emb = Embedding(words, rng.standard_normal((300, 16)).astype(np.float32))
    out = tt_compress_embedding(emb, ranks=4)
    assert out.shape == emb.shape and out.words == emb.words
    assert out.metadata["tt_params"] <= TTShape(tuple(out.metadata["tt_shape"]["p"]),
                                                 tuple(out.metadata["tt_shape"]["q"]), (4, 4)).num_parameters
    assert 0 < np.linalg.norm(out.vectors - emb.vectors) < np.linalg.norm(emb.vectors)


def test_bad_input():
    with pytest.raises(TTConfigError, match="multiply to"):
        TTEmbedding(100, 10, 2, q=(2, 2, 2))
    with pytest.raises(TTConfigError, match="fewer than"):
        TTShape((2, 2, 2), (2, 2, 2), (2, 2)).validate(9, 8)
    with pytest.raises(UnknownNameError, match="did you mean"):
        TTEmbedding(100, 8, 2, init="unifrom")
    with pytest.raises(EmbstabError, match="row ids"):
        TTEmbedding(100, 8, 2).rows(torch.tensor([100]))


def test_registered_check_passes():
    res = RECIPES["ttrec"].check(seed=0)
    assert res.passed, res.claims
    assert res.table["params"].tolist() == [6560, 23360, 87680]
    assert res.table["err_tt_rank8"][0] == pytest.approx(0.1 / math.sqrt(1.01), abs=0.005)

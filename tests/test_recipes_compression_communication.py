"""Communication-efficient exchange: Maurey sparsification statistics, exact bit counts, top-k, round-robin."""

import math

import numpy as np
import pytest

from embstab.recipes.communication import (CommunicationError, maurey_dense, maurey_sparsify, message_bits,
                                           pnorm_link, pnorm_mirror_descent, round_robin, topk_sparsify)


def test_maurey_unbiased_with_reference_variance():
    rng = np.random.default_rng(0)
    w = np.array([3.0, -1.0, 0.0, 0.5, -0.5])
    s = 4
    draws = np.stack([maurey_dense(*maurey_sparsify(w, s, rng), 5) for _ in range(20000)])
    assert np.abs(draws.mean(0) - w).max() < 0.03
    ref = (5.0 ** 2 - (9 + 1 + 0.25 + 0.25)) / s  # (|w|_1^2 - |w|_2^2) / s = 3.625
    assert np.mean(np.sum((draws - w) ** 2, axis=1)) == pytest.approx(ref, rel=0.03)
    idx, signs, scale = maurey_sparsify(w, s, 1)
    assert scale == 5.0 / 4 and 2 not in idx.tolist()  # a zero entry is never drawn
    assert np.all(signs == np.sign(w[idx]))


def test_message_bits_exact():
    assert message_bits(256, 4096) == 256 * 13 + 32 == 3360
    assert message_bits(16, 4096) == 240
    assert message_bits(1, 1000) == 1 * (10 + 1) + 32


def test_topk_and_bad_input():
    assert topk_sparsify([1.0, -5.0, 2.0, 0.1], 2).tolist() == [0.0, -5.0, 2.0, 0.0]
    with pytest.raises(CommunicationError, match="positive"):
        maurey_sparsify([1.0, 2.0], 0)
    with pytest.raises(CommunicationError, match="positive"):
        topk_sparsify([1.0], 0)
    with pytest.raises(CommunicationError, match="at least one shard"):
        round_robin([], 0.1)


def test_pnorm_link_inverse():
    rng = np.random.default_rng(1)
    v = rng.standard_normal(50)
    p = 1 + 1 / math.log(50)
    q = p / (p - 1)
    assert np.allclose(pnorm_link(pnorm_link(v, p), q), v, atol=1e-10)
    assert np.allclose(pnorm_link(v, 2.0), v)  # p = 2: the identity map


def test_round_robin_bits_and_learning():
    rng = np.random.default_rng(2)
    d, m, n = 256, 4, 200
    w_star = np.zeros(d)
    w_star[:4] = [1.0, -1.0, 0.5, -0.5]
    X = rng.standard_normal((m * n, d))
    y = X @ w_star + 0.1 * rng.standard_normal(m * n)
    shards = [(X[j * n:(j + 1) * n], y[j * n:(j + 1) * n]) for j in range(m)]
    dense = round_robin(shards, 0.02, compress=None)
    sparse = round_robin(shards, 0.02, compress="maurey", s=64, generator=0)
    assert dense.messages == sparse.messages == 2 * m - 1
    assert sparse.bits == 7 * message_bits(64, d) and dense.bits == 7 * 32 * d
    risk0 = float(np.sum(w_star ** 2))
    assert np.sum((dense.w - w_star) ** 2) < 0.3 * risk0
    assert np.sum((sparse.w - w_star) ** 2) < 0.5 * risk0
    q = round_robin(shards, 0.02, compress="bf16", generator=0)
    assert q.bits == 7 * 16 * d
    last, avg = pnorm_mirror_descent(np.zeros(d), X[:50], y[:50], 0.02)
    assert last.shape == avg.shape == (d,)


@pytest.mark.slow
def test_registered_check_passes():
    from embstab.recipes import RECIPES

    res = RECIPES["communication"].check(seed=0)
    assert res.passed, res.claims

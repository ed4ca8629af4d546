"""OCS and rotation before quantization: exactness of splits/rotations, float64 references, bad input."""

import math

import numpy as np
import pytest

from embstab.errors import EmbstabError, UnknownNameError
from embstab.lowprec import UniformFormat
from embstab.recipes import RECIPES
from embstab.recipes.ocs import OCSError, ocs_merge, ocs_quantize, ocs_split, symmetric_quantize
from embstab.recipes.rotation import (RotationError, hadamard, random_hadamard, random_orthogonal,
                                      rotate_quantize)


def test_half_split_keeps_function_and_picks_largest():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((6, 10))
    W[2, 7] = 50.0
    s = ocs_split(W, 0.2, split="half")  # ceil(0.2 * 10) = 2 splits
    assert s.values.shape == (6, 12) and s.splits[0] == (7, 10)
    assert s.splits[1][0] in (7, 10)  # the halved outlier column is still the largest
    x = rng.standard_normal(10)
    assert np.allclose(s.values @ x[s.source_index], W @ x, atol=1e-12)
    assert np.allclose(ocs_merge(s), W, atol=1e-12)


def test_quant_aware_split_error_bound():
    rng = np.random.default_rng(1)
    W = rng.standard_normal((400, 8))
    W[:, 0] *= 8
    W[:, 1] *= 6  # two outlier columns, each split once
    bits, alpha = 4, float(np.abs(W).max())
    step = alpha / (2 ** (bits - 1) - 1)
    errs = {}
    for rule in ("half", "quant_aware"):
        s = ocs_split(W, 0.25, split=rule, step=step if rule == "quant_aware" else None)
        assert sorted(src for src, _ in s.splits) == [0, 1]
        assert np.abs(s.values).max() <= alpha  # no clamping on this grid
        errs[rule] = np.abs(ocs_merge(s, symmetric_quantize(s.values, bits, alpha)) - W)[:, :2].max()
    assert errs["quant_aware"] <= step / 2 + 1e-12  # as plain rounding
    assert errs["half"] > step / 2  # naive halving can err by up to a full step
    assert errs["half"] <= step + 1e-12


def test_symmetric_quantizer_reference():
    W = np.array([0.0, 0.49, 0.5, 1.5, 2.5, -3.1, 10.0])
    # 3 bits: 3 levels per side, alpha 3 -> step 1, half to even, clamp at 3
    assert symmetric_quantize(W, 3, 3.0).tolist() == [0.0, 0.0, 0.0, 2.0, 2.0, -3.0, 3.0]


def test_gram_split_preserves_gram_and_quantize_result():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, 8))
    X[:, 1] *= 20
    g = ocs_split(X, 0.5, split="gram")
    assert np.allclose(g.values @ g.values.T, X @ X.T, rtol=1e-12, atol=1e-9)
    assert np.abs(g.values).max() < np.abs(X).max()
    res = ocs_quantize(X, 8, 0.25, split="gram")
    assert res.dequantized.shape == X.shape and res.columns_added == 2
    assert res.rel_mse == pytest.approx(np.sum((X - res.dequantized) ** 2) / np.sum(X ** 2))


def test_ocs_bad_input():
    W = np.ones((3, 4))
    for r in (0, 1, -0.1, 1.5):
        with pytest.raises(OCSError, match="expand_ratio"):
            ocs_split(W, r)
    with pytest.raises(OCSError, match="grid step"):
        ocs_split(W, 0.5, split="quant_aware")
    with pytest.raises(UnknownNameError, match="did you mean"):
        ocs_split(W, 0.5, split="halve")
    with pytest.raises(OCSError, match="bits"):
        ocs_quantize(W, 1, 0.5)


def test_hadamard_reference_and_random_variants():
    assert hadamard(4).tolist() == [[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]]
    for d in (1, 17, 64, 100):
        R = random_hadamard(d, 3)
        assert R.shape == (d, d) and np.allclose(R @ R.T, np.eye(d), atol=1e-12)
        P = random_hadamard(d, 3, mode="pad")
        D = 1 << (d - 1).bit_length()
        assert P.shape == (d, D) and np.allclose(P @ P.T, np.eye(d), atol=1e-12)
        assert np.allclose(np.abs(P) * math.sqrt(D), 1.0)
    assert np.array_equal(random_hadamard(64, 5), random_hadamard(64, 5))
    Q = random_orthogonal(10, 0)
    assert np.allclose(Q.T @ Q, np.eye(10), atol=1e-12)


def test_rotate_quantize_pair_shares_rotation():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((300, 24))
    B = A + 0.01 * rng.standard_normal(A.shape)
    fmt = UniformFormat(8, 6.0)
    Aq, R = rotate_quantize(A, fmt, "hadamard", generator=7)
    Bq, R2 = rotate_quantize(B, fmt, R)
    assert R2 is R and Aq.shape == A.shape
    assert np.sum((A - Aq) ** 2) / np.sum(A ** 2) < 1e-3
    Y, _ = rotate_quantize(A, UniformFormat(32, 100.0), R, rotate_back=False)  # no rounding
    assert np.allclose(Y @ Y.T, A @ A.T, atol=1e-3)
    with pytest.raises(RotationError, match="cannot rotate"):
        rotate_quantize(A, fmt, np.eye(10))
    with pytest.raises(RotationError, match="positive integer"):
        random_hadamard(0)
    with pytest.raises(EmbstabError):
        rotate_quantize(A, fmt, "hadamart")


@pytest.mark.parametrize("name", ["ocs", "rotation"])
def test_registered_checks_pass(name):
    res = RECIPES[name].check(seed=0)
    assert res.passed, res.claims

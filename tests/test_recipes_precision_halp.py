"""HALP: bit-centered SVRG reaches the optimum; offsets live on a b-bit grid; bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from embstab.recipes import HALP, PrecisionRecipeError, least_squares_halp


def test_halp_linear_convergence_like_svrg():
    halp = least_squares_halp("halp", (5, 15))
    svrg = least_squares_halp("svrg", (5, 15))
    lp = least_squares_halp("lp-svrg", (15,))
    assert halp[15] < 1e-9 and svrg[15] < 1e-9
    assert halp[15] < 1e-4 * halp[5]
    assert lp[15] > 1e-3  # no re-centering: stalls at the grid's scale


def test_offset_on_signed_b_bit_grid():
    torch.manual_seed(0)
    X = torch.randn(40, 3, dtype=torch.float64)
    y = X @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    opt = HALP([w], lr=0.05, T=10, mu=0.5, bits=4, full_closure=lambda: 0.5 * ((X @ w - y) ** 2).mean())
    for t in range(7):
        opt.step(lambda t=t: 0.5 * ((X[t] @ w - y[t]) ** 2))
        st = opt.state[w]
        k = st["z"] / st["scale"]
        assert torch.allclose(k, k.round(), atol=1e-9)
        assert k.min() >= -8 and k.max() <= 7
        assert torch.allclose(w.detach(), st["anchor"] + st["z"])


def test_logistic_regression_on_digits():
    from sklearn.datasets import load_digits
    X, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    X = torch.tensor(X[keep] / 16.0, dtype=torch.float64)
    t = torch.tensor((y[keep] == 8).astype(float))
    w = torch.zeros(X.shape[1], dtype=torch.float64, requires_grad=True)
    lam = 1e-2

    def loss(rows):
        return torch.nn.functional.binary_cross_entropy_with_logits(X[rows] @ w, t[rows]) + 0.5 * lam * w.pow(2).sum()

    opt = HALP([w], lr=0.1, T=len(X), mu=lam, bits=8, full_closure=lambda: loss(slice(None)))
    g = torch.Generator().manual_seed(0)
    for _ in range(5 * len(X)):
        i = torch.randint(0, len(X), (1,), generator=g)
        opt.step(lambda i=i: loss(i))
    acc = float(((X @ w.detach() > 0).double() == t).double().mean())
    assert acc > 0.95


@pytest.mark.parametrize("kwargs,match", [({"mu": 0.0}, "mu > 0"), ({"mu": -1.0}, "mu > 0"), ({"bits": 1}, "bits"),
                                          ({"lr": 0.0}, "lr > 0"), ({"T": 0}, "T >= 1"),
                                          ({"rounding": "up"}, "rounding")])
def test_bad_input(kwargs, match):
    w = torch.zeros(2, requires_grad=True)
    args = {"lr": 0.1, "T": 5, "mu": 1.0, "full_closure": lambda: w.sum()} | kwargs
    with pytest.raises(PrecisionRecipeError, match=match):
        HALP([w], **args)


def test_cli_check_json():
    out = subprocess.run([sys.executable, "-m", "embstab", "recipes", "check", "halp", "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["passed"] and res["recipe"] == "halp"

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


def _ls_loader(seed: int = 0, batch: int = 1):
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(seed)
    X = torch.randn(100, 5, generator=g, dtype=torch.float64)
    y = X @ torch.randn(5, generator=g, dtype=torch.float64) + 0.1 * torch.randn(100, generator=g, dtype=torch.float64)
    loader = DataLoader(TensorDataset(X, y), batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(1))
    w_opt = torch.linalg.lstsq(X, y.unsqueeze(1)).solution.squeeze(1)
    mu = float(torch.linalg.eigvalsh(X.T @ X / len(X)).min())
    return X, y, loader, w_opt, mu


def test_loader_full_gradient_equals_the_full_closure():
    X, y, _, _, mu = _ls_loader()
    from torch.utils.data import DataLoader, TensorDataset

    uneven = DataLoader(TensorDataset(X, y), batch_size=30)  # 30, 30, 30, 10: weighted by batch size
    w = torch.full((5,), 0.3, dtype=torch.float64, requires_grad=True)
    a = HALP([w], lr=0.1, T=5, mu=mu, loader=uneven, batch_loss=lambda b: 0.5 * ((b[0] @ w - b[1]) ** 2).mean())
    a.recenter()
    b = HALP([w], lr=0.1, T=5, mu=mu, full_closure=lambda: 0.5 * ((X @ w - y) ** 2).mean())
    b.recenter()
    assert torch.allclose(a.state[w]["full_grad"], b.state[w]["full_grad"], rtol=0, atol=1e-14)
    assert a.state[w]["scale"] == pytest.approx(b.state[w]["scale"], rel=1e-12)


def test_loader_form_converges_linearly_like_the_closure_form():
    X, y, loader, w_opt, mu = _ls_loader()
    w = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    opt = HALP([w], lr=0.02, T=len(loader), mu=mu, bits=8, generator=2, loader=loader,
               batch_loss=lambda b: 0.5 * ((b[0] @ w - b[1]) ** 2).mean())
    dist = []
    for _ in range(4):
        losses = opt.fit(epochs=10)
        assert len(losses) == 10
        dist.append(float(torch.linalg.norm(w.detach() - w_opt)))
    assert dist[-1] < 1e-9 and dist[-1] < 1e-4 * dist[0]
    assert opt.epochs == 40  # re-centred once per pass (T = len(loader))


def test_loader_form_bad_input():
    w = torch.zeros(2, requires_grad=True)
    with pytest.raises(PrecisionRecipeError, match="batch_loss"):
        HALP([w], lr=0.1, T=5, mu=1.0, loader=[torch.zeros(2)])
    with pytest.raises(PrecisionRecipeError, match="not both"):
        HALP([w], lr=0.1, T=5, mu=1.0, full_closure=lambda: w.sum(), loader=[torch.zeros(2)], batch_loss=lambda b: w.sum())
    with pytest.raises(PrecisionRecipeError, match="full_closure"):
        HALP([w], lr=0.1, T=5, mu=1.0)
    with pytest.raises(PrecisionRecipeError, match="loader="):
        HALP([w], lr=0.1, T=5, mu=1.0, full_closure=lambda: w.sum()).fit()

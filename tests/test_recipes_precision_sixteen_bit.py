"""16-bit-FPU training recipe: update modes on least squares, bytes per parameter, bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from embstab.errors import EmbstabError
from embstab.recipes import (
    RECIPES,
    PrecisionRecipeError,
    least_squares_16bit,
    sixteen_bit,
)


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


def test_update_modes_order_on_least_squares():
    # bf16, lr 1e-2: nearest stalls at ~1e-1 (spec 7.9e-2); SR and Kahan reach the 2^-9 floor
    rn = least_squares_16bit("nearest", 1e-2, steps=1000)
    sr = least_squares_16bit("stochastic", 1e-2, steps=1000)
    kh = least_squares_16bit("kahan", 1e-2, steps=1000)
    assert rn > 0.04 and rn > 5 * sr and rn > 5 * kh
    assert sr < 2 ** -8 and kh < 2 ** -8


def test_nearest_worse_at_smaller_lr():
    assert least_squares_16bit("nearest", 1e-3, steps=1500) > least_squares_16bit("nearest", 1e-2, steps=1000)


def test_weights_activations_and_grads_are_bf16_values():
    from embstab.lowprec import quantize
    model = _mlp()
    rec = sixteen_bit(model, torch.optim.SGD(model.parameters(), lr=0.1), "bf16", "stochastic")
    x = torch.randn(16, 4)
    out = rec.model(x)
    assert torch.equal(out, quantize(out, "bf16"))
    rec.optimizer.zero_grad()
    out.pow(2).mean().backward()
    rec.optimizer.step()
    for p in rec.model.parameters():
        assert torch.equal(p.detach(), quantize(p.detach(), "bf16"))
        assert torch.equal(p.grad, quantize(p.grad, "bf16"))


def test_copy_rebuilds_optimizer_on_the_copy():
    model = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    rec = sixteen_bit(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), "fp16", "kahan")
    assert rec.model is not model
    rec.optimizer.zero_grad()
    rec.model(torch.randn(8, 4)).sum().backward()
    rec.optimizer.step()
    assert all(torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
    assert rec.optimizer.param_groups[0]["momentum"] == 0.9


@pytest.mark.parametrize("mode,total", [("nearest", 2 + 2 + 2), ("stochastic", 6), ("kahan", 8), ("mixed", 4 + 2 + 4 + 2)])
def test_bytes_per_parameter(mode, total):
    model = _mlp()
    rec = sixteen_bit(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), "bf16", mode, inplace=True)
    rec.optimizer.zero_grad()
    rec.model(torch.randn(8, 4)).sum().backward()
    rec.optimizer.step()  # creates the momentum buffer
    assert rec.bytes_per_parameter()["total"] == total


@pytest.mark.parametrize("kwargs,match", [
    ({"fmt": "fp32"}, "at most 16 bits"),
    ({"fmt": "int8_fixed_does_not_exist"}, "format"),
    ({"fmt": "mxfp8_e4m3"}, "floating-point format"),
    ({"update": "round-up"}, "update must be one of"),
])
def test_bad_input(kwargs, match):
    model = _mlp()
    with pytest.raises(EmbstabError, match=match):
        sixteen_bit(model, torch.optim.SGD(model.parameters(), lr=0.1), **kwargs)


def test_foreign_optimizer_refused():
    with pytest.raises(PrecisionRecipeError, match="not the model's"):
        sixteen_bit(_mlp(), torch.optim.SGD(_mlp().parameters(), lr=0.1))


def test_recurrent_refused():
    model = nn.Sequential(nn.LSTM(4, 4))
    with pytest.raises(PrecisionRecipeError, match="recurrent"):
        sixteen_bit(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_registered_and_cli_lists_it():
    assert "sixteen_bit" in RECIPES
    out = subprocess.run([sys.executable, "-m", "embstab", "recipes", "list"], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "sixteen_bit" in out.stdout

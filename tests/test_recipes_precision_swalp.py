"""SWALP: block-float low-precision SGD, float64 averaging, batch-norm recompute, bad input."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embstab.lowprec import quantize
from embstab.recipes import (
    RECIPES,
    SWALP,
    PrecisionRecipeError,
    least_squares_swalp,
    swalp_formats,
)
from embstab.recipes.swalp import check_swalp


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def _train(sw, steps=5):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(16, 6, generator=g)
        sw.zero_grad()
        nn.functional.cross_entropy(sw.model(x), torch.randint(0, 2, (16,), generator=g)).backward()
        sw.step()


def test_weights_live_on_the_block_float_grid():
    sw = SWALP(_net(), lr=0.1, momentum=0.9)
    _train(sw)
    f = swalp_formats(8)
    for p in sw.model.parameters():
        fmt = f["channel"] if p.dim() > 1 else f["tensor"]
        assert torch.equal(p.detach(), quantize(p.detach(), fmt))
    # 1-D tensors share one exponent: at most 2^8 distinct values on one grid step
    bias = sw.model[3][0].bias.detach() if isinstance(sw.model[3], nn.Sequential) else sw.model[3].bias.detach()
    step = 2.0 ** (torch.floor(torch.log2(bias.abs().max())) - 6)
    assert torch.equal(bias / step, torch.round(bias / step))


def test_average_is_the_float64_mean_of_iterates():
    sw = SWALP(_net(), lr=0.1, swa_start=2, swa_freq=1)
    seen = []
    g = torch.Generator().manual_seed(1)
    for _ in range(6):
        x = torch.randn(16, 6, generator=g)
        sw.zero_grad()
        sw.model(x).pow(2).mean().backward()
        sw.step()
        if sw.steps > 2:
            seen.append([p.detach().double().clone() for p in sw.model.parameters()])
    assert sw.n_averaged == 4
    avg = sw.averaged_model()
    for i, p in enumerate(avg.parameters()):
        ref = torch.stack([s[i] for s in seen]).mean(0)
        assert torch.allclose(p.detach().double(), ref, atol=1e-7)


def test_bn_recompute_matches_the_data_statistics():
    sw = SWALP(_net(), lr=0.1)
    _train(sw, 3)
    data = [torch.randn(32, 6, generator=torch.Generator().manual_seed(k)) for k in range(4)]
    avg = sw.averaged_model(data)
    with torch.no_grad():
        h = torch.cat([avg[0](x) for x in data])
    bn = avg[1]
    assert torch.allclose(bn.running_mean, h.mean(0), atol=1e-5)
    assert bn.momentum == 0.1  # restored


def test_least_squares_fp32_and_word_bits():
    assert least_squares_swalp(2000, "fp32")["last"] < 1e-10
    with pytest.raises(PrecisionRecipeError, match="word_bits"):
        least_squares_swalp(10, word_bits=1)


def test_check_small_horizons_passes():
    r = check_swalp(0, horizons=(10_000, 30_000))
    assert r.passed, r.claims
    assert "swalp" in RECIPES


@pytest.mark.parametrize("kwargs,match", [({"lr": 0.0}, "lr > 0"), ({"lr": 0.1, "word_bits": 1}, "word_bits"),
                                          ({"lr": 0.1, "swa_freq": 0}, "swa_freq")])
def test_bad_input(kwargs, match):
    with pytest.raises(PrecisionRecipeError, match=match):
        SWALP(_net(), **kwargs)


def test_average_before_any_step_refused():
    with pytest.raises(PrecisionRecipeError, match="averaged no iterate"):
        SWALP(_net(), lr=0.1).averaged_model()

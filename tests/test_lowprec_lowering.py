"""lower(): a quantizer after every layer of chosen kinds (QPyTorch's sequential_lower)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embstab.lowprec import FixedFormat, Quantizer, lower, quantize

FWD = FixedFormat(8, 4)
BWD = FixedFormat(8, 6)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(),
                         nn.Sequential(nn.Linear(8, 8), nn.Tanh()),  # nested
                         nn.Linear(8, 3))


def test_every_linear_output_and_its_gradient_is_quantized():
    model = _model()
    q = Quantizer(FWD, BWD)
    low = lower(model, q, ["linear"])
    assert low.lowered_modules == ["0", "2.0", "3"]
    assert isinstance(model[0], nn.Linear)  # the original model is untouched
    outputs, grads = [], []
    for name in low.lowered_modules:
        wrapper = low.get_submodule(name)
        wrapper.register_forward_hook(lambda m, i, o: outputs.append(o))
        # the gradient reaching the layer itself has passed the quantizer's backward rounding
        wrapper[0].register_full_backward_hook(lambda m, gi, go: grads.append(go[0]))
    x = torch.randn(5, 6, requires_grad=True)
    y = low(x)
    (y * torch.linspace(0.1, 1.7, 3)).sum().backward()
    assert len(outputs) == len(grads) == 3
    for o in outputs:
        assert torch.equal(quantize(o.detach(), FWD), o.detach())
    for g in grads:
        assert torch.equal(quantize(g, BWD), g) and g.abs().sum() > 0
    assert torch.equal(y.detach(), outputs[-1].detach())
    assert all(p.grad is not None for p in low.parameters())
    # same weights, same input: the lowered model differs from the original only by the rounding
    with torch.no_grad():
        assert (model(x) - y).abs().max() < 0.5


def test_groups_classes_and_inplace():
    model = _model()
    q = Quantizer(FWD)
    low = lower(model, q, ["activation", nn.Linear], inplace=True)
    assert low is model
    assert low.lowered_modules == ["0", "1", "2.0", "2.1", "3"]
    again = lower(low, q, ["linear", "activation"])  # already lowered layers are not wrapped twice
    assert sum(isinstance(m, Quantizer) for m in again.modules()) == 1  # one shared instance
    assert sum(1 for m in again.modules() if isinstance(m, nn.Sequential) and len(m) == 2
               and isinstance(m[1], Quantizer)) == 5


def test_stochastic_lowering_is_reproducible_under_the_quantizer_seed():
    x = torch.randn(4, 6)
    outs = [lower(_model(), Quantizer(FWD, forward_rounding="stochastic", generator=3))(x) for _ in range(2)]
    assert torch.equal(outs[0], outs[1])


def test_refusals_name_the_problem():
    q = Quantizer(FWD)
    with pytest.raises(ValueError, match="unknown layer group 'dense'"):
        lower(_model(), q, ["dense"])
    with pytest.raises(ValueError, match="no layer of the model"):
        lower(_model(), q, ["conv"])
    with pytest.raises(ValueError, match="recurrent"):
        lower(nn.Sequential(nn.LSTM(4, 4)), q, [nn.LSTM])
    with pytest.raises(ValueError, match="empty"):
        lower(_model(), q, [])
    with pytest.raises(TypeError, match="Quantizer"):
        lower(_model(), lambda t: t, ["linear"])

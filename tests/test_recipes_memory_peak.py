"""The memory profile's predicted peak against the CPU allocator's measured peak."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embstab.recipes import memory_profile
from embstab.recipes.peak import measure_peak


def _mlp(width: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


@pytest.mark.parametrize("width,batch", [(256, 128), (512, 512), (128, 2048)])
def test_predicted_peak_within_ten_percent_of_the_measured_allocation(width, batch):
    """Weight-heavy, balanced and activation-heavy MLPs (Adam state present, gradients set to None)."""
    model = _mlp(width)
    x, t = torch.randn(batch, width), torch.randint(0, 10, (batch,))
    opt = torch.optim.Adam(model.parameters())
    nn.functional.cross_entropy(model(x), t).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    prof = memory_profile(model, (x, t), nn.functional.cross_entropy, optimizer=opt)
    measured = measure_peak(model, (x, t), nn.functional.cross_entropy, opt)
    assert measured.events > 10 and measured.step_peak > 0
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)
    # the four-kind total alone misses backward's in-flight gradients when activations dominate
    assert prof.backward_peak is not None and prof.backward_peak >= prof.activations


def test_measured_peak_sees_a_known_allocation():
    """The allocator's events: a step whose only big temporary is a known size shows it."""
    lin = nn.Linear(1000, 1, bias=False)
    x = torch.randn(2000, 1000)  # saved for the weight gradient; the input's own gradient is not needed
    m = measure_peak(lin, x)
    assert m.baseline == 4 * (1000 + 2000 * 1000)
    # backward allocates the weight gradient (4 kB) and small outputs; nothing near the input's size
    assert 4 * 1000 <= m.step_peak < 4 * 2000 * 1000 // 10

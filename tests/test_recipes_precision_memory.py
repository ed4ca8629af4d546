"""Low-memory training: the profile's split against literal byte counts, techniques, bad input."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embstab.recipes import PrecisionRecipeError, low_memory, memory_profile


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 3))


def test_profile_matches_hand_count():
    model = _net()
    x = torch.randn(8, 10)
    opt = torch.optim.Adam(model.parameters())
    model(x).sum().backward()
    opt.step()
    prof = memory_profile(model, x, optimizer=opt)
    n_params = 10 * 20 + 20 + 20 * 3 + 3
    assert prof.weights == 4 * n_params and prof.gradients == 4 * n_params
    assert prof.optimizer_state == 2 * 4 * n_params + 4 * 4  # exp_avg, exp_avg_sq + 4 float32 step counters
    # saved for backward: x (8x10), the ReLU output (8x20), shared with the last Linear's input
    assert prof.activations == 4 * (8 * 10 + 8 * 20)
    assert prof.graph_nodes >= 5
    assert prof.total == prof.weights + prof.gradients + prof.optimizer_state + prof.activations


def test_bf16_storage_and_checkpoint_through_profile():
    x = torch.randn(8, 10)
    base = memory_profile(low_memory(_net()), x).activations
    assert base == 4 * (8 * 10 + 8 * 20)
    assert memory_profile(low_memory(_net(), storage="bf16"), x).activations == 2 * (8 * 10 + 8 * 20)
    ck = memory_profile(low_memory(nn.Sequential(_net()), checkpoint=("0",)), x).activations
    assert ck == 4 * 8 * 10  # only the checkpointed block's input


def test_check_claims_hold():
    # In a fresh process: the saved-tensor count is keyed by storage address, and in a long-lived
    # process full of other tests the bf16-storage ratio was seen to move (0.445-0.500, once out of
    # its range). Reproducible in a fresh process; the address dependence is a known limitation.
    import json
    import subprocess
    import sys

    code = "import json; from embstab.recipes import get_recipe; r = get_recipe('low_memory').check(seed=0); " \
           "print(json.dumps(r.claims))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    claims = json.loads(out.stdout.strip().splitlines()[-1])
    assert claims and all(claims.values()), claims


@pytest.mark.parametrize("kwargs,match", [({"checkpoint": ("nope",)}, "no child"), ({"micro_batch": 0}, "micro_batch"),
                                          ({"storage": "int4"}, "storage"), ({"sparse": True}, "sparse")])
def test_bad_input(kwargs, match):
    with pytest.raises(PrecisionRecipeError, match=match):
        low_memory(_net(), **kwargs)


def test_profile_needs_trainable_parameters():
    m = _net().requires_grad_(False)
    with pytest.raises(PrecisionRecipeError, match="trainable"):
        memory_profile(m, torch.randn(2, 10))


@pytest.mark.parametrize("build", ["mlp", "cnn"])
def test_graph_walk_agrees_with_saved_tensor_count(build):
    torch.manual_seed(0)
    if build == "mlp":
        model, x = _net(), torch.randn(16, 10)
    else:
        model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
        x = torch.randn(4, 1, 8, 8)
    prof = memory_profile(model, (x, torch.randint(0, 3, (len(x),))), nn.functional.cross_entropy)
    assert prof.graph_activations is not None
    assert abs(prof.graph_activations - prof.activations) <= 0.10 * prof.activations

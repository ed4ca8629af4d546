"""Dynamic sparse reparameterization: fixed budget, prune by magnitude, regrow, adaptive threshold."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embstab.recipes import DynamicSparsity, PrecisionRecipeError, low_memory, memory_profile, sparse_candidates


def _net(seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))


def _data(n: int = 256):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, 20, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()


def _train(wrapped, steps: int = 60, lr: float = 1e-2):
    x, y = _data()
    opt = torch.optim.Adam(wrapped.parameters(), lr=lr)
    for s in range(steps):
        idx = slice((s * 32) % 256, (s * 32) % 256 + 32)
        opt.zero_grad()
        wrapped.backward_step([x[idx]], y[idx], nn.functional.cross_entropy)
        wrapped.step(opt)
    return opt


def test_budget_is_fixed_and_weights_outside_the_mask_stay_zero():
    wrapped = low_memory(_net(), sparse=0.8, sparse_every=10, seed=3)
    sp = wrapped.sparsity
    total = sum(p.numel() for p in sp.params.values())
    assert set(sp.params) == {"0.weight", "2.weight", "4.weight"}  # biases stay dense
    assert sp.budget == sum(max(1, round(0.2 * p.numel())) for p in sp.params.values())
    assert abs(sp.budget / total - 0.2) < 0.01
    _train(wrapped)
    assert len(sp.history) == 6
    assert sp.nonzeros() == sp.budget
    for name, p in sp.params.items():
        assert torch.count_nonzero(p.detach()[~sp.masks[name]]) == 0


def test_reallocation_prunes_the_smallest_magnitudes_and_regrows_as_many():
    model = _net()
    sp = DynamicSparsity(sparse_candidates(model), 0.5, every=1, prune_fraction=0.1, seed=0)
    before = {n: (m.clone(), sp.params[n].detach().clone()) for n, m in sp.masks.items()}
    rec = sp.reallocate()
    target = round(0.1 * sp.budget)
    assert rec.pruned == target  # the first threshold prunes exactly the target
    # the pruned weights are the target-many smallest magnitudes among the active ones
    active = torch.sort(torch.cat([w[m].abs() for m, w in before.values()])).values
    assert rec.threshold == float(active[target])
    for n, (m, w) in before.items():
        cut = m & (w.abs() < rec.threshold)
        # a pruned weight is zero now, whether or not its position was drawn again for regrowth
        assert torch.count_nonzero(sp.params[n].detach()[cut]) == 0
        assert torch.equal(sp.params[n].detach()[m & ~cut], w[m & ~cut])  # the rest is untouched
    assert sp.nonzeros() == sp.budget
    # regrown positions hold zero until trained
    grown = sum(int((~m & sp.masks[n]).sum()) for n, (m, _) in before.items())
    assert grown > 0
    for n, (m, _) in before.items():
        assert torch.count_nonzero(sp.params[n].detach()[~m & sp.masks[n]]) == 0


def test_threshold_adapts_and_budget_moves_between_layers():
    wrapped = low_memory(_net(), sparse=0.9, sparse_every=5, sparse_prune=0.2, seed=0)
    _train(wrapped, steps=100)
    sp = wrapped.sparsity
    thresholds = [r.threshold for r in sp.history]
    assert len(set(thresholds)) > 1  # doubled or halved as the pruned count left its band
    first, last = sp.history[0].density, sp.history[-1].density
    assert any(abs(first[n] - last[n]) > 0.005 for n in first)  # re-allocation moved weights between layers
    assert sp.nonzeros() == sp.budget


def test_optimizer_state_is_reset_where_the_mask_changed():
    wrapped = low_memory(_net(), sparse=0.7, sparse_every=1000, seed=0)
    opt = _train(wrapped, steps=5)
    sp = wrapped.sparsity
    old = {n: m.clone() for n, m in sp.masks.items()}
    sp.reallocate(opt)
    for n, p in sp.params.items():
        changed = old[n] ^ sp.masks[n]
        assert changed.any()
        for v in opt.state[p].values():
            if isinstance(v, torch.Tensor) and v.shape == p.shape:
                assert torch.count_nonzero(v[changed]) == 0


def test_sparse_training_learns_and_is_deterministic_under_a_seed():
    def run():
        wrapped = low_memory(_net(), sparse=0.8, sparse_every=10, seed=5)
        _train(wrapped, steps=120)
        return wrapped

    a, b = run(), run()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    x, y = _data()
    with torch.no_grad():
        acc = float((a(x).argmax(1) == y).float().mean())
    assert acc > 0.8


def test_profile_counts_csr_storage_of_the_sparse_weights():
    dense = low_memory(_net())
    sparse = low_memory(_net(), sparse=0.9, seed=0)
    x, y = _data(32)
    pd_, ps = memory_profile(dense, (x, y), nn.functional.cross_entropy), \
        memory_profile(sparse, (x, y), nn.functional.cross_entropy)
    sp = sparse.sparsity
    biases = 4 * (64 + 64 + 3)
    csr = sum(m.sum().item() * 8 + (p.shape[0] + 1) * 4 for m, p in zip(sp.masks.values(), sp.params.values()))
    assert ps.weights == biases + csr
    assert ps.gradients == biases + 4 * sp.budget
    assert ps.weights < 0.25 * pd_.weights
    assert ps.activations == pd_.activations  # sparsity of weights does not shrink activations


@pytest.mark.parametrize("kwargs,match", [({"sparse": 1.0}, "sparsity"), ({"sparse": -0.1}, "sparsity"),
                                          ({"sparse": 0.5, "sparse_every": 0}, "period"),
                                          ({"sparse": 0.5, "sparse_prune": 1.5}, "prune_fraction")])
def test_bad_sparse_settings(kwargs, match):
    with pytest.raises(PrecisionRecipeError, match=match):
        low_memory(_net(), **kwargs)


def test_a_model_without_weight_matrices_is_refused():
    with pytest.raises(PrecisionRecipeError, match="weight matrix"):
        low_memory(nn.Sequential(nn.Embedding(10, 4)), sparse=0.5)

"""Training recipes on sparse tables: only touched rows are rounded, with the dense path's semantics."""

from __future__ import annotations

import pytest
import torch

from embstab.lowprec import LowPrecisionOptimizer, quantize
from embstab.recipes import TRAINING_RECIPES, PrecisionRecipeError, training_recipe
from embstab.recipes.swalp import swalp_formats


def _sparse_grad(n: int, dim: int, rows: list[int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    idx = torch.tensor([rows], dtype=torch.int64)
    return torch.sparse_coo_tensor(idx, torch.randn(len(rows), dim, generator=g), (n, dim), check_invariants=True)


def _table(n: int = 40, dim: int = 8) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.randn(n, dim, generator=torch.Generator().manual_seed(0)))


def test_swalp_rounds_touched_rows_onto_their_block_grid_and_leaves_the_rest():
    table = _table()
    opt = training_recipe("swalp").wrap(torch.optim.SGD([table], lr=0.1), seed=3)
    fmt = swalp_formats(8)["channel"]
    assert torch.equal(quantize(table.detach(), fmt), table.detach())  # on the grid from the start
    before = table.detach().clone()
    touched = [1, 5, 5, 17]  # a repeated row is one row
    table.grad = _sparse_grad(40, 8, touched, seed=1)
    opt.step()
    after = table.detach()
    others = [i for i in range(40) if i not in touched]
    assert torch.equal(after[others], before[others])
    for i in set(touched):
        assert not torch.equal(after[i], before[i])
        assert torch.equal(quantize(after[i:i + 1], fmt), after[i:i + 1])


@pytest.mark.parametrize("recipe", ["bf16-nearest", "fp16-nearest", "bf16-kahan"])
def test_deterministic_updates_equal_the_whole_table_path_bit_for_bit(recipe):
    rec = training_recipe(recipe)
    a, b = _table(), _table()
    fast = rec.wrap(torch.optim.Adagrad([a], lr=0.05), seed=0)
    dense = LowPrecisionOptimizer(torch.optim.Adagrad([b], lr=0.05), weight=rec.weight_format, update=rec.update)
    for step in range(20):
        g = _sparse_grad(40, 8, [step % 7, (3 * step) % 40, 11], seed=step)
        a.grad, b.grad = g.clone(), g.clone()
        fast.step()
        dense.step()
    assert torch.equal(a.detach(), b.detach())


def test_stochastic_rows_have_the_dense_paths_distribution():
    """Same mean (the unbiased float32 update) and the same spread as rounding the whole table."""
    rec = TRAINING_RECIPES["swalp"]
    fmt = swalp_formats(8)["channel"]
    grad = _sparse_grad(40, 8, [2, 9], seed=5)
    start = quantize(_table().detach(), fmt)
    exact = start - 0.05 * grad.to_dense()
    fast_runs, dense_runs = [], []
    for seed in range(300):
        a = torch.nn.Parameter(start.clone())
        opt = rec.wrap(torch.optim.SGD([a], lr=0.05), seed=seed)
        a.grad = grad.clone()
        opt.step()
        fast_runs.append(a.detach()[[2, 9]].clone())
        b = torch.nn.Parameter(start.clone())
        lp = LowPrecisionOptimizer(torch.optim.SGD([b], lr=0.05), weight=fmt, update="stochastic", generator=seed)
        b.grad = grad.to_dense()
        lp.step()
        dense_runs.append(b.detach()[[2, 9]].clone())
    fast, dense = torch.stack(fast_runs), torch.stack(dense_runs)
    step = (2.0 ** (torch.floor(torch.log2(exact[[2, 9]].abs().amax(1, keepdim=True))) - 6))
    # the mean of 300 stochastic roundings is within 4 standard errors (<= step/2 / sqrt(300)) of exact
    tol = 4 * 0.5 * step / 300 ** 0.5
    assert ((fast.mean(0) - exact[[2, 9]]).abs() <= tol).all()
    assert ((dense.mean(0) - exact[[2, 9]]).abs() <= tol).all()
    assert ((fast.std(0) - dense.std(0)).abs() <= 0.15 * step + 1e-12).all()


def test_the_seed_reproduces_stochastic_rows_and_another_seed_does_not():
    def run(seed):
        t = _table()
        opt = training_recipe("bf16-stochastic").wrap(torch.optim.Adagrad([t], lr=0.01), seed=seed)
        for s in range(5):
            t.grad = _sparse_grad(40, 8, [s, s + 10], seed=s)
            opt.step()
        return t.detach()

    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))


def test_recipes_refuse_non_float32_parameters():
    p = torch.nn.Parameter(torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(PrecisionRecipeError, match="float32"):
        training_recipe("bf16-stochastic").wrap(torch.optim.SGD([p], lr=0.1), seed=0)

"""Weighted low-rank fitting of observed matrix entries with AdaGrad (the core of GloVe and MC)."""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from embstab._threads import torch_threads
from embstab.recipes.training import IterateAverage, TrainingRecipe, training_recipe

__all__ = ["fit_observed_entries"]


def fit_observed_entries(rows: np.ndarray, cols: np.ndarray, targets: np.ndarray, weights: np.ndarray,
                         n: int, dim: int, *, epochs: int = 25, lr: float = 0.05, batch_size: int = 4096,
                         biases: bool = True, seed: int = 0, init_scale: float | None = None,
                         progress: bool = True, desc: str = "fitting", threads: int | None = None,
                         recipe: str | TrainingRecipe | None = None) -> dict[str, np.ndarray | list]:
    """Minimise Σ w_ij (u_i·v_j [+ a_i + b_j] − t_ij)² over the observed (i, j) with AdaGrad.

    Mini-batches of ``batch_size`` entries are drawn in a shuffled order from a local
    ``torch.Generator`` seeded with ``seed`` (global RNGs are never touched); the loss is summed,
    not averaged, so each entry moves the parameters as in GloVe's per-entry updates.

    Parameters
    ----------
    rows, cols : ndarray of int
        Observed entries.
    targets, weights : ndarray of float
    n : int
        Number of rows (= columns) of the square matrix.
    dim : int
        Rank of the factors.
    epochs, lr, batch_size : training schedule.
    biases : bool
        Fit per-row and per-column biases (GloVe) or not (plain factorisation).
    seed : int
    init_scale : float, optional
        Factors start U(−s, s); default s = 0.5 / dim as in GloVe.
    progress : bool
    desc : str
        Progress-bar label.
    threads : int, optional
        torch intra-op threads for the fit (see :func:`embstab._threads.torch_threads`).
    recipe : str or TrainingRecipe, optional
        How the factors are stored and updated (see :data:`embstab.recipes.TRAINING_RECIPES`):
        ``"fp32"`` (default), ``"bf16-nearest"``, ``"bf16-stochastic"``, ``"bf16-kahan"``, the
        ``fp16`` variants, or ``"swalp"`` (8-bit block floating point, stochastic rounding, the
        float64 average of the second half's epochs returned).

    Returns
    -------
    dict
        ``u``, ``v`` (n, dim) float32 arrays, ``a``, ``b`` biases (zeros without biases) and
        ``loss`` (weighted loss per epoch, a list).
    """
    recipe = training_recipe(recipe)
    gen = torch.Generator().manual_seed(int(seed))
    scale = 0.5 / dim if init_scale is None else init_scale

    def uniform(*shape: int) -> torch.nn.Parameter:
        return torch.nn.Parameter((torch.rand(*shape, generator=gen, dtype=torch.float32) * 2 - 1) * scale)

    u, v = uniform(n, dim), uniform(n, dim)
    a = torch.nn.Parameter(torch.zeros(n, 1)) if biases else None
    b = torch.nn.Parameter(torch.zeros(n, 1)) if biases else None
    params = [p for p in (u, v, a, b) if p is not None]
    # initial_accumulator_value=1 mirrors GloVe's gradsq initialised to 1 (a damped first step).
    opt = torch.optim.Adagrad(params, lr=lr, initial_accumulator_value=1.0)
    # the rounding stream is its own seeded generator, so the batch order is the same for every recipe
    opt = recipe.wrap(opt, seed=int(seed) + 1)
    average = IterateAverage(params) if recipe.average else None
    r_t = torch.as_tensor(np.asarray(rows, dtype=np.int64))
    c_t = torch.as_tensor(np.asarray(cols, dtype=np.int64))
    y_t = torch.as_tensor(np.asarray(targets, dtype=np.float32))
    w_t = torch.as_tensor(np.asarray(weights, dtype=np.float32))
    m = len(r_t)
    with warnings.catch_warnings(), torch_threads(threads):
        # torch warns once per sparse AdaGrad step that it skips invariant checks; our indices are valid.
        warnings.filterwarnings("ignore", message="Sparse invariant checks")
        history = _run_epochs(epochs, desc, progress, gen, m, batch_size, r_t, c_t, y_t, w_t, u, v, a, b, opt,
                              average)
    final = [p.detach() for p in params]
    if average is not None and average.mean is not None:
        final = [m_.to(torch.float32) for m_ in average.mean]
    out = {"u": final[0].numpy().copy(), "v": final[1].numpy().copy(), "loss": history}
    out["a"] = final[2].numpy().ravel().copy() if biases else np.zeros(n, np.float32)
    out["b"] = final[3].numpy().ravel().copy() if biases else np.zeros(n, np.float32)
    return out


def _run_epochs(epochs, desc, progress, gen, m, batch_size, r_t, c_t, y_t, w_t, u, v, a, b, opt,
                average=None) -> list[float]:
    history: list[float] = []
    # SWALP averages once per epoch over the second half of training
    average_from = epochs // 2
    for epoch in tqdm(range(epochs), desc=desc, unit="epoch", disable=not progress):
        order = torch.randperm(m, generator=gen)
        total = 0.0
        for start in range(0, m, batch_size):
            idx = order[start:start + batch_size]
            ri, ci = r_t[idx], c_t[idx]
            pred = (F.embedding(ri, u, sparse=True) * F.embedding(ci, v, sparse=True)).sum(1)
            if a is not None:
                pred = pred + F.embedding(ri, a, sparse=True).squeeze(1) + F.embedding(ci, b, sparse=True).squeeze(1)
            loss = (w_t[idx] * (pred - y_t[idx]) ** 2).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach())
        history.append(total)
        if average is not None and epoch >= average_from:
            average.update()
    return history

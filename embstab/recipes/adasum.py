"""Adasum: combine gradients (or model deltas) by an adaptive sum instead of an average.

``AS(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b``: orthogonal vectors add, parallel ones
average, ``AS(g, -g) = 0``. Dots and squared norms are accumulated in float64, one set per tensor; a
coefficient stays 1 when that squared norm is below ``eps``. ``2**k`` workers are reduced by recursive
pairing (worker ``r`` with ``r ^ level`` for level = 1, 2, 4, ...). Other counts are refused unless
``pad="identity"``: missing workers are zero tensors, which Adasum leaves out (``AS(0, g) = g``).

:class:`AdasumOptimizer` runs the same reduction over ``torch.distributed`` (any backend; gloo on
CPU): each rank takes its local optimizer step, the model deltas are all-gathered and every rank
reduces them with the same tree, so all ranks end identical. ``embstab.recipes.adasum_demo`` is a
least-squares demo meant for ``torchrun``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from embstab.errors import ConfigError, lookup
from embstab.recipes.registry import CheckResult, register_recipe

__all__ = ["AdasumError", "REDUCTIONS", "adasum_pair", "adasum_reduce", "simulate_data_parallel",
           "AdasumOptimizer", "least_squares_problem", "least_squares_grad_fn", "check_adasum"]

#: Ways to combine the workers' updates (name -> description).
REDUCTIONS = {"adasum": "adaptive sum (recursive pairing)", "average": "mean of the workers", "sum": "sum of the workers"}


#: Bad Adasum input: worker count, mismatched tensors, unknown granularity.
#: A :class:`~embstab.errors.ConfigError` under the name this module has always raised.
AdasumError = ConfigError


def adasum_pair(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Adasum of two tensors, dot and norms in float64.

    Parameters
    ----------
    a, b : torch.Tensor
        Same shape.
    eps : float
        A coefficient stays 1 when the squared norm is below ``eps``.

    Returns
    -------
    torch.Tensor
        ``AS(a, b)`` in ``a``'s dtype.
    """
    a = torch.as_tensor(a)
    b = torch.as_tensor(b)
    if a.shape != b.shape:
        raise AdasumError(f"Adasum needs equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
    a64, b64 = a.double(), b.double()
    dot = float((a64 * b64).sum())
    na, nb = float((a64 * a64).sum()), float((b64 * b64).sum())
    ca = 1.0 if na < eps else 1.0 - dot / (2 * na)
    cb = 1.0 if nb < eps else 1.0 - dot / (2 * nb)
    return (ca * a64 + cb * b64).to(a.dtype)


def _pair_granular(a: torch.Tensor, b: torch.Tensor, per: str, eps: float) -> torch.Tensor:
    if per == "row" and a.dim() >= 2:
        return torch.stack([adasum_pair(x, y, eps) for x, y in zip(a, b)])
    return adasum_pair(a, b, eps)


def adasum_reduce(workers: Sequence[Any], per: str = "tensor", pad: str | None = None,
                  eps: float = 1e-8) -> Any:
    """Adasum-reduce one value per worker by recursive pairing.

    Parameters
    ----------
    workers : sequence
        One entry per worker: a tensor, or a list of tensors (one per parameter).
    per : {"tensor", "row", "flat"}
        Granularity of the dots/norms: each tensor, each row of 2-D tensors (embedding tables), or
        all tensors of a worker flattened together.
    pad : {None, "identity"}
        ``"identity"`` pads a non-power-of-two worker count with zero tensors.
    eps : float
        Squared-norm threshold below which a coefficient stays 1.

    Returns
    -------
    tensor or list of tensors
        Same structure as one worker's entry.

    Raises
    ------
    AdasumError
        No workers, a non-power-of-two count without padding, or mismatched structures.
    """
    lookup({"tensor": 0, "row": 0, "flat": 0}, per, "Adasum granularity")
    if pad not in (None, "identity"):
        raise AdasumError(f"pad must be None or 'identity', got {pad!r}")
    n = len(workers)
    if n == 0:
        raise AdasumError("Adasum needs at least one worker")
    single = isinstance(workers[0], torch.Tensor)
    vals = [[torch.as_tensor(w)] if single else [torch.as_tensor(t) for t in w] for w in workers]
    if any(len(v) != len(vals[0]) for v in vals):
        raise AdasumError("every worker must send the same number of tensors")
    if n & (n - 1):
        if pad != "identity":
            raise AdasumError(f"Adasum reduces a power-of-two number of workers, got {n}; pass pad='identity' "
                              "to pad with zero tensors")
        m = 1 << (n - 1).bit_length()
        vals += [[torch.zeros_like(t) for t in vals[0]] for _ in range(m - n)]
    shapes = [t.shape for t in vals[0]]
    while len(vals) > 1:
        nxt = []
        for i in range(0, len(vals), 2):
            a, b = vals[i], vals[i + 1]
            if per == "flat":
                fa = torch.cat([t.reshape(-1) for t in a])
                fb = torch.cat([t.reshape(-1) for t in b])
                f = adasum_pair(fa, fb, eps)
                out, k = [], 0
                for s in shapes:
                    size = math.prod(s)
                    out.append(f[k:k + size].reshape(s))
                    k += size
                nxt.append(out)
            else:
                nxt.append([_pair_granular(x, y, per, eps) for x, y in zip(a, b)])
        vals = nxt
    return vals[0][0] if single else vals[0]


def _combine(updates: list[list[torch.Tensor]], reduce: str, per: str, pad: str | None) -> list[torch.Tensor]:
    if reduce == "adasum":
        return adasum_reduce(updates, per=per, pad=pad)
    total = [torch.stack(ts).sum(0) for ts in zip(*updates)]
    return total if reduce == "sum" else [t / len(updates) for t in total]


def simulate_data_parallel(params: Sequence[torch.Tensor], grad_fn: Callable[[list[torch.Tensor], int, int], list[torch.Tensor]],
                           n_workers: int, lr: float, steps: int, reduce: str = "adasum", per: str = "tensor",
                           pad: str | None = None, comm_format: Any = None, rounding: str = "stochastic",
                           generator: torch.Generator | int | None = None) -> list[torch.Tensor]:
    """Simulate synchronous data-parallel SGD in one process.

    Each round every worker computes ``lr * grad_fn(params, worker, step)`` (its model delta under
    SGD; Adasum is homogeneous, so reducing deltas or gradients is the same for SGD), optionally
    rounds it onto ``comm_format``, and the deltas are combined by ``reduce``.

    Parameters
    ----------
    params : sequence of torch.Tensor
        Initial parameters (copied, not modified).
    grad_fn : callable
        ``grad_fn(params, worker, step) -> list of gradients``.
    n_workers : int
        Workers per round.
    lr : float
        SGD learning rate.
    steps : int
        Rounds.
    reduce : {"adasum", "average", "sum"}
        Combination rule.
    per, pad : str
        Passed to :func:`adasum_reduce`.
    comm_format : lowprec Format or str, optional
        Format of the transmitted deltas (through :func:`embstab.lowprec.quantize`).
    rounding : str
        Rounding of the transmitted deltas.
    generator : torch.Generator or int, optional
        Seed for stochastic rounding.

    Returns
    -------
    list of torch.Tensor
        Final parameters.
    """
    lookup(REDUCTIONS, reduce, "reduction")
    if n_workers < 1 or steps < 0:
        raise AdasumError(f"need n_workers >= 1 and steps >= 0, got {n_workers} and {steps}")
    gen = generator if isinstance(generator, torch.Generator) else torch.Generator().manual_seed(
        0 if generator is None else int(generator))
    w = [p.detach().clone() for p in params]
    for step in range(steps):
        deltas = []
        for k in range(n_workers):
            d = [lr * g for g in grad_fn(w, k, step)]
            if comm_format is not None:
                from embstab.lowprec import quantize
                d = [quantize(t, comm_format, rounding=rounding, generator=gen) for t in d]
            deltas.append(d)
        upd = _combine(deltas, reduce, per, pad)
        w = [p - u for p, u in zip(w, upd)]
        if not all(bool(torch.isfinite(p).all()) for p in w):
            break
    return w


class AdasumOptimizer:
    """Wrap a torch optimizer so that each step's model delta is Adasum-reduced across ranks.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        The local optimizer (its step is taken first on every rank).
    per : {"tensor", "row", "flat"}
        Granularity of the reduction.
    pad : {None, "identity"}
        Padding for a non-power-of-two world size.
    group : torch.distributed.ProcessGroup, optional
        Process group (default: the world).

    Notes
    -----
    The deltas are exchanged by ``all_gather`` and every rank applies the same pairing tree, so the
    ranks stay bit-identical; this moves ``world_size`` deltas per rank, more than Horovod's
    vector-halving exchange, and is meant for correctness on CPU rather than for speed.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, per: str = "tensor", pad: str | None = None,
                 group: Any = None) -> None:
        lookup({"tensor": 0, "row": 0, "flat": 0}, per, "Adasum granularity")
        self.optimizer, self.per, self.pad, self.group = optimizer, per, pad, group

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the wrapped optimizer's gradients.

        Parameters
        ----------
        set_to_none : bool, default True
            Set the gradients to None instead of zeroing them.
        """
        self.optimizer.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        """Local step, then replace every parameter by ``start + Adasum(deltas of all ranks)``."""
        import torch.distributed as dist

        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        start = [p.detach().clone() for p in params]
        self.optimizer.step()
        deltas = [p.detach() - s for p, s in zip(params, start)]
        world = dist.get_world_size(self.group)
        gathered = []
        for d in deltas:
            bufs = [torch.empty_like(d) for _ in range(world)]
            dist.all_gather(bufs, d.contiguous(), group=self.group)
            gathered.append(bufs)
        per_worker = [[gathered[i][r] for i in range(len(deltas))] for r in range(world)]
        reduced = adasum_reduce(per_worker, per=self.per, pad=self.pad)
        for p, s, u in zip(params, start, reduced):
            p.copy_(s + u)


def least_squares_problem(d: int = 100, n: int = 8192, noise: float = 0.1, seed: int = 0
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares with covariance eigenvalues ``logspace(0, -2, d)``.

    Parameters
    ----------
    d : int, default 100
        Number of features.
    n : int, default 8192
        Number of samples.
    noise : float, default 0.1
        Standard deviation of the label noise.
    seed : int, default 0
        Seed of the data.

    Returns
    -------
    (X, y, w_star)
        Data (float64) and the least-squares solution.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.sqrt(np.logspace(0, -2, d))[None, :]
    y = X @ rng.standard_normal(d) + noise * rng.standard_normal(n)
    return X, y, np.linalg.lstsq(X, y, rcond=None)[0]


def least_squares_grad_fn(X: torch.Tensor, y: torch.Tensor, workers: int, batch: int, seed: int
                          ) -> Callable[[list[torch.Tensor], int, int], list[torch.Tensor]]:
    """``grad_fn(w, worker, step)`` for :func:`simulate_data_parallel` on ``0.5 mean((X w - y)^2)``.

    Each step draws one ``(workers, batch)`` block of sample ids from a generator seeded with
    ``seed``; worker ``k`` uses row ``k``. Every process that builds it with the same arguments sees
    the same ids, which is what lets a multi-process run match the simulator.

    Parameters
    ----------
    X : torch.Tensor
        ``(n, d)`` data.
    y : torch.Tensor
        ``(n,)`` targets.
    workers : int
        Number of simulated workers.
    batch : int
        Samples per worker and step.
    seed : int
        Seed of the sample ids.

    Returns
    -------
    callable
        ``grad(w, worker, step)``: the one-element list holding the gradient for ``w[0]`` on that
        worker's mini-batch.
    """
    gen = torch.Generator().manual_seed(seed)
    cache: dict[int, torch.Tensor] = {}

    def grad(w: list[torch.Tensor], k: int, step: int) -> list[torch.Tensor]:
        if step not in cache:
            cache.clear()
            cache[step] = torch.randint(0, X.shape[0], (workers, batch), generator=gen)
        idx = cache[step][k]
        xb = X[idx]  # gather the mini-batch rows once, not twice (same numbers, faster check)
        return [xb.T @ (xb @ w[0] - y[idx]) / batch]

    return grad


def _loss(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        return float(0.5 * np.mean((X @ w - y) ** 2))


@register_recipe("adasum", "Adasum: adaptive sum of workers' updates (float64 per-tensor dots, recursive pairing)",
                 ("adasum_pair", "adasum_reduce", "simulate_data_parallel", "AdasumOptimizer"))
def check_adasum(seed: int = 0, seeds: int = 3, rounds: int = 300) -> CheckResult:
    """Adasum identities and the least-squares learning-rate sweep (8 workers x batch 16).

    Adasum adds nearly orthogonal updates and averages parallel ones, which makes it approximate
    the eight workers' steps taken one after another ("sequential" below). On this problem
    (covariance eigenvalues 1 ... 0.01) that is what averaging lacks: the slow directions need the
    eight steps, not one step of eight times the batch. How much averaging loses therefore depends
    on how much of ``w*`` the seed puts in the slow directions, so the sweep's claims compare
    Adasum with sequential SGD on the same problem and batches, not with a fixed factor over
    averaging. (Earlier claims, "Adasum >= 25x better than averaging" and "within 1.5x of
    sequential", failed at 20 and 15 of the 46 seeds below: down to 14x at lr 0.2, seed 7, and up
    to 1.63x.)

    Measured over seeds 0-23, 100-109, 1000-1009, 12345 and 987654 (46 seeds; worst case over
    lr <= 0.2): Adasum / sequential at most 1.63 (claimed: < 2); averaging / sequential at least
    18 (claimed: >= 5); Adasum's share of sequential's log advantage over averaging at least 0.85
    (claimed: >= 0.75). The lr 0.4 and 0.8 claims held at all of them.

    Parameters
    ----------
    seed : int
        First seed of the sweep.
    seeds : int
        Seeds per configuration (median reported).
    rounds : int
        Rounds per run.

    Returns
    -------
    CheckResult
        One row per (lr, method): median excess loss (inf = diverged).
    """
    g = torch.randn(50, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    h = torch.randn(50, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    e1, e2 = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    e1[0], e2[1] = 3.0, 5.0
    eye = torch.eye(8, dtype=torch.float64)
    ident = {
        "orthogonal vectors add": torch.allclose(adasum_pair(e1, e2), e1 + e2),
        "AS(g, g) = g and AS(2g, g) = 1.5 g": torch.allclose(adasum_pair(g, g), g)
        and torch.allclose(adasum_pair(2 * g, g), 1.5 * g),
        "AS(g, -g) = 0 and AS(0, g) = g": torch.allclose(adasum_pair(g, -g), torch.zeros_like(g))
        and torch.allclose(adasum_pair(torch.zeros_like(g), g), g),
        "symmetric and homogeneous": torch.allclose(adasum_pair(g, h), adasum_pair(h, g))
        and torch.allclose(adasum_pair(3 * g, 3 * h), 3 * adasum_pair(g, h)),
        "tree of 8 equal vectors -> g, of 8 orthogonal vectors -> sum":
            torch.allclose(adasum_reduce([g] * 8), g) and torch.allclose(adasum_reduce(list(eye)), eye.sum(0)),
    }
    X, y, w_star = least_squares_problem(seed=seed)
    base = _loss(X, y, w_star)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    rows = []
    for lr in (0.05, 0.1, 0.2, 0.4, 0.8):
        for method in ("sum", "average", "adasum", "sequential"):
            losses = []
            for s in range(seed, seed + seeds):
                gf = least_squares_grad_fn(Xt, yt, 8, 16, s)
                w0 = [torch.zeros(X.shape[1], dtype=torch.float64)]
                if method == "sequential":  # one worker taking the 8 batches of a round in turn
                    w = w0[0].clone()
                    for step in range(rounds):
                        for k in range(8):
                            w = w - lr * gf([w], k, step)[0]
                        if not bool(torch.isfinite(w).all()):
                            break
                    wf = w.numpy()
                else:
                    wf = simulate_data_parallel(w0, gf, 8, lr, rounds, reduce=method)[0].numpy()
                ex = _loss(X, y, wf) - base
                losses.append(ex if np.isfinite(ex) and ex < 1e3 else np.inf)
            rows.append({"lr": lr, "method": method, "excess_loss": float(np.median(losses))})
    t = pd.DataFrame(rows)
    e = {(r.lr, r.method): r.excess_loss for r in t.itertuples()}
    claims = {k: bool(v) for k, v in ident.items()}
    claims.update({
        "lr <= 0.2: Adasum within 2x of sequential SGD (the order of steps it approximates)":
            all(e[(lr, "adasum")] < 2 * e[(lr, "sequential")] for lr in (0.05, 0.1, 0.2)),
        "lr <= 0.2: averaging is >= 5x worse than sequential SGD and Adasum keeps >= 75% of that gap (log scale)":
            all(e[(lr, "average")] >= 5 * e[(lr, "sequential")]
                and math.log(e[(lr, "average")] / e[(lr, "adasum")])
                >= 0.75 * math.log(e[(lr, "average")] / e[(lr, "sequential")]) for lr in (0.05, 0.1, 0.2)),
        "lr 0.4: sum diverges, Adasum stays finite": math.isinf(e[(0.4, "sum")]) and math.isfinite(e[(0.4, "adasum")]),
        "lr 0.8: Adasum diverges, average does not": math.isinf(e[(0.8, "adasum")]) and math.isfinite(e[(0.8, "average")]),
    })
    return CheckResult("adasum", t, claims, seed)

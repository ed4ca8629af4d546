"""HALP: SVRG with bit centering, an optimizer whose inner loop works on a b-bit offset.

Each epoch takes a full-precision anchor ``w~`` and its full gradient ``g~``, then runs ``T``
inner SVRG steps on an offset ``z`` stored as a ``b``-bit signed integer grid of step
``s = ||g~|| / (mu (2^(b-1) - 1))``. By ``mu``-strong convexity ``||w~ - w*|| <= ||g~|| / mu``, so
the grid covers the ball holding the optimum; as the gradient shrinks the grid gets finer, and
HALP converges linearly to the exact optimum where low-precision SGD or SVRG without re-centering
stall in a quantization-sized ball. Rounding onto the grid uses :func:`embstab.lowprec.quantize`
with an integer :class:`~embstab.lowprec.FixedFormat` (stochastic by default).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd
import torch

from embstab.lowprec import FixedFormat, quantize
from embstab.recipes.registry import CheckResult, register_recipe
from embstab.recipes.sixteen_bit import PrecisionRecipeError

__all__ = ["HALP", "least_squares_halp"]


class HALP(torch.optim.Optimizer):
    """SVRG with bit centering (HALP).

    Parameters
    ----------
    params : iterable
        Parameters to optimize (as for any ``torch.optim`` optimizer).
    lr : float
        Step size of the inner SVRG steps.
    T : int
        Inner steps per epoch (after ``T`` steps the offset is folded into the anchor).
    mu : float
        Strong-convexity estimate; sets the offset grid's range.
    full_closure : callable, optional
        ``full_closure() -> loss`` on the whole training set (or a large batch) at the current
        parameters; used once per epoch for the anchor gradient. Give it, or ``loader`` and
        ``batch_loss``.
    bits : int, default 8
        Bits of the signed offset grid (>= 2).
    rounding : {"stochastic", "nearest"}, default "stochastic"
        Rounding onto the offset grid (nearest is the biased variant).
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding (seed 0 by default).
    loader : iterable of batches, optional
        The data-loader form: a re-iterable source of mini-batches (e.g. a
        ``torch.utils.data.DataLoader``). The anchor gradient is the mean loss over one pass of it
        (each batch weighted by its size, gradients accumulated batch by batch, so the data never
        has to fit in one graph), and :meth:`fit` runs the inner loop over its batches.
    batch_loss : callable, optional
        ``batch_loss(batch) -> loss``, the mean loss of one batch of ``loader`` at the current
        parameters; required with ``loader``.

    Raises
    ------
    PrecisionRecipeError
        For ``lr <= 0``, ``mu <= 0``, ``T < 1``, ``bits < 2``, or neither ``full_closure`` nor
        ``loader`` with ``batch_loss``.

    Notes
    -----
    :meth:`step` takes a closure that evaluates the loss *of one fixed minibatch*; it is called
    twice per step, at ``w~ + z`` and at ``w~``, and must use the same minibatch both times.
    """

    def __init__(self, params, lr: float, T: int, mu: float, full_closure: Callable[[], torch.Tensor] | None = None,
                 bits: int = 8, rounding: str = "stochastic", generator: torch.Generator | int | None = 0, *,
                 loader: Iterable | None = None, batch_loss: Callable[..., torch.Tensor] | None = None) -> None:
        if not lr > 0:
            raise PrecisionRecipeError(f"HALP needs lr > 0, got {lr!r}")
        if not mu > 0:
            raise PrecisionRecipeError(f"HALP needs mu > 0 (a strong-convexity estimate), got {mu!r}")
        if not (isinstance(T, int) and T >= 1):
            raise PrecisionRecipeError(f"HALP needs an epoch length T >= 1, got {T!r}")
        if not (isinstance(bits, int) and 2 <= bits <= 53):
            raise PrecisionRecipeError(f"HALP needs bits in 2..53, got {bits!r}")
        if loader is not None and not callable(batch_loss):
            raise PrecisionRecipeError("HALP with a loader needs batch_loss, a callable returning one batch's mean loss")
        if loader is None and not callable(full_closure):
            raise PrecisionRecipeError("HALP needs full_closure (a callable returning the full-data loss) or a "
                                       "loader with batch_loss")
        if loader is not None and full_closure is not None:
            raise PrecisionRecipeError("HALP takes full_closure or loader, not both")
        if rounding not in ("stochastic", "nearest"):
            raise PrecisionRecipeError(f"HALP rounding must be 'stochastic' or 'nearest', got {rounding!r}")
        super().__init__(params, {"lr": lr})
        self.T, self.mu, self.bits, self.rounding = T, float(mu), bits, rounding
        self.full_closure = full_closure
        self.loader, self.batch_loss = loader, batch_loss
        self.grid = FixedFormat(bits, 0)  # the integers -2^(b-1) .. 2^(b-1)-1
        self._gen = generator if isinstance(generator, torch.Generator) else torch.Generator().manual_seed(
            0 if generator is None else int(generator))
        self.inner = 0
        self.epochs = 0

    def _params(self):
        for g in self.param_groups:
            for p in g["params"]:
                yield g, p

    def _grads(self, closure: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        self.zero_grad(set_to_none=True)
        with torch.enable_grad():
            loss = closure()
            loss.backward()
        return loss.detach(), [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone()
                               for _, p in self._params()]

    def _loader_grads(self) -> list[torch.Tensor]:
        """Gradient of the mean loss over one pass of the loader, accumulated batch by batch."""
        batches = [(b, _batch_size(b)) for b in self.loader]
        total = sum(n for _, n in batches)
        if total == 0:
            raise PrecisionRecipeError("HALP's loader yielded no data")
        self.zero_grad(set_to_none=True)
        with torch.enable_grad():
            for batch, n in batches:
                (self.batch_loss(batch) * (n / total)).backward()
        return [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for _, p in self._params()]

    @torch.no_grad()
    def recenter(self) -> None:
        """Fold the offset into the anchor, recompute the full gradient and the grid scales."""
        full = self._loader_grads() if self.loader is not None else self._grads(self.full_closure)[1]
        for (_, p), g in zip(self._params(), full):
            st = self.state[p]
            st["anchor"] = p.detach().clone()
            st["full_grad"] = g
            st["scale"] = float(torch.linalg.vector_norm(g)) / (self.mu * (2 ** (self.bits - 1) - 1))
            st["z"] = torch.zeros_like(p)
        self.epochs += 1

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        """One inner HALP step on the minibatch ``closure`` evaluates; returns its loss at ``w~ + z``.

        Parameters
        ----------
        closure : callable
            Re-evaluates the loss of one fixed minibatch at the current parameters.

        Returns
        -------
        torch.Tensor
            The minibatch loss before the step.
        """
        if self.inner % self.T == 0:
            self.recenter()
        self.inner += 1
        loss, g_off = self._grads(closure)  # at w~ + z
        for _, p in self._params():
            p.copy_(self.state[p]["anchor"])
        _, g_anchor = self._grads(closure)  # at w~, same minibatch
        for (group, p), g1, g0 in zip(self._params(), g_off, g_anchor):
            st = self.state[p]
            v = st["z"] - group["lr"] * (g1 - g0 + st["full_grad"])
            s = st["scale"]
            if s > 0 and math.isfinite(s):
                st["z"] = quantize(v / s, self.grid, self.rounding, self._gen) * s
            else:  # zero gradient: the anchor is already optimal
                st["z"] = torch.zeros_like(v)
            p.copy_(st["anchor"] + st["z"])
        self.zero_grad(set_to_none=True)
        return loss


    def fit(self, epochs: int = 1) -> list[float]:
        """The data-loader form: ``epochs`` passes of inner steps over ``loader``'s batches.

        Each batch is one inner step (its loss evaluated at ``w~ + z`` and at ``w~``); the anchor
        is re-centred every ``T`` inner steps as always (``T = len(loader)`` re-centres once per
        pass, as SVRG does).

        Parameters
        ----------
        epochs : int, default 1
            Passes over the loader.

        Returns
        -------
        list of float
            Mean batch loss of each pass (at the iterate, before each step).

        Raises
        ------
        PrecisionRecipeError
            If the optimizer was built without a loader, or ``epochs < 1``.
        """
        if self.loader is None:
            raise PrecisionRecipeError("HALP.fit needs the optimizer built with loader= and batch_loss=")
        if not (isinstance(epochs, int) and epochs >= 1):
            raise PrecisionRecipeError(f"HALP.fit needs epochs >= 1, got {epochs!r}")
        history = []
        for _ in range(epochs):
            losses = []
            for batch in self.loader:
                losses.append(float(self.step(lambda batch=batch: self.batch_loss(batch))))
            history.append(sum(losses) / max(len(losses), 1))
        return history


def _batch_size(batch) -> int:
    first = batch[0] if isinstance(batch, (tuple, list)) else batch
    return int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() > 0 else 1


def _problem(seed: int, n: int = 100, d: int = 5):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, generator=g, dtype=torch.float64)
    y = X @ w + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    w_opt = torch.linalg.lstsq(X, y.unsqueeze(1)).solution.squeeze(1)
    mu = float(torch.linalg.eigvalsh(X.T @ X / n).min())
    return X, y, w_opt, mu


def least_squares_halp(method: str, epochs: tuple[int, ...] = (5, 10, 20, 40), *, seed: int = 0, lr: float = 0.02,
                       T: int = 200, bits: int = 8, lp_step: float = 2.0 ** -5) -> dict[int, float]:
    """Distance to the least-squares optimum after each epoch count, for HALP and its baselines.

    ``n = 100, d = 5, y = X w + 0.1 noise``, batch 1, ``mu = lambda_min(X^T X / n)``.

    Parameters
    ----------
    method : {"sgd", "lp-sgd", "svrg", "lp-svrg", "halp"}
        ``lp-*`` keep the weights on a fixed ``bits``-bit grid of step ``lp_step`` (stochastic
        rounding, no re-centering); ``halp`` runs :class:`HALP` on a float64 linear model.
    epochs : tuple of int
        Epoch counts (``T`` steps each) to report.
    seed : int
        Seeds data, sampling and rounding.
    lr, T, bits, lp_step :
        Step size, epoch length, bits and the fixed grid step of the non-centered baselines.

    Returns
    -------
    dict of int to float
        ``||w - w_opt||`` after each requested epoch count.
    """
    methods = ("sgd", "lp-sgd", "svrg", "lp-svrg", "halp")
    if method not in methods:
        raise PrecisionRecipeError(f"method must be one of {methods}, got {method!r}")
    X, y, w_opt, mu = _problem(seed)
    n, d = X.shape
    g = torch.Generator().manual_seed(seed + 1)
    qgen = torch.Generator().manual_seed(seed + 2)
    total = max(epochs) * T
    idx = torch.randint(0, n, (total,), generator=g)
    out: dict[int, float] = {}
    if method == "halp":
        w = torch.zeros(d, dtype=torch.float64, requires_grad=True)
        cur = {"i": 0}
        opt = HALP([w], lr=lr, T=T, mu=mu, bits=bits, generator=seed + 2,
                   full_closure=lambda: 0.5 * ((X @ w - y) ** 2).mean())
        for t in range(total):
            cur["i"] = int(idx[t])
            opt.step(lambda: 0.5 * (X[cur["i"]] @ w - y[cur["i"]]) ** 2)
            if (t + 1) % T == 0 and (t + 1) // T in epochs:
                out[(t + 1) // T] = float(torch.linalg.norm(w.detach() - w_opt))
        return out
    fmt = FixedFormat(bits, round(-math.log2(lp_step)))
    lp = method.startswith("lp-")
    w = torch.zeros(d, dtype=torch.float64)
    anchor, full = w.clone(), None
    for t in range(total):
        if method.endswith("svrg") and t % T == 0:
            anchor = w.clone()
            full = X.T @ (X @ anchor - y) / n
        i = int(idx[t])
        gi = (X[i] @ w - y[i]) * X[i]
        if method.endswith("svrg"):
            gi = gi - (X[i] @ anchor - y[i]) * X[i] + full
        w = w - lr * gi
        if lp:
            w = quantize(w, fmt, "stochastic", qgen)
        if (t + 1) % T == 0 and (t + 1) // T in epochs:
            out[(t + 1) // T] = float(torch.linalg.norm(w - w_opt))
    return out


@register_recipe("halp", "HALP: SVRG with bit centering; 8-bit offsets converge linearly like fp32 SVRG",
                 ("HALP", "least_squares_halp"))
def check_halp(seed: int = 0) -> CheckResult:
    """Least squares (n 100, d 5): HALP 8-bit and fp32 SVRG reach ~1e-12; LP-SGD and LP-SVRG stall.

    Parameters
    ----------
    seed : int
        Seed.

    Returns
    -------
    CheckResult
        One row per method with the distance to the optimum after 5/10/20/40 epochs.
    """
    epochs = (5, 10, 20, 40)
    rows = []
    for m in ("sgd", "lp-sgd", "svrg", "lp-svrg", "halp"):
        res = least_squares_halp(m, epochs, seed=seed)
        rows.append({"method": m, **{f"epoch_{k}": res[k] for k in epochs}})
    table = pd.DataFrame(rows).set_index("method")
    last = table["epoch_40"]
    claims = {
        "HALP 8-bit below 1e-10 after 40 epochs": bool(last["halp"] < 1e-10),
        "fp32 SVRG below 1e-10 after 40 epochs": bool(last["svrg"] < 1e-10),
        "LP-SVRG and LP-SGD stall above 1e-3": bool(last["lp-svrg"] > 1e-3 and last["lp-sgd"] > 1e-3),
        "HALP falls linearly (epoch 20 < 1e-3 x epoch 5)":
            bool(table.loc["halp", "epoch_20"] < 1e-3 * table.loc["halp", "epoch_5"]),
        "HALP within 100x of SVRG at epoch 20": bool(np.log10(table.loc["halp", "epoch_20"] / table.loc["svrg", "epoch_20"]) < 2),
    }
    return CheckResult("halp", table.reset_index(), claims, seed)

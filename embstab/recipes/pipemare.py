"""PipeMare: asynchronous pipeline training with per-stage delays, simulated on a deep linear net.

In a pipeline without flushes, stage ``i``'s forward pass used weights ``tau_i`` optimizer steps older
than its backward pass. On ``f(w) = lambda w^2 / 2`` delayed gradient descent
``w_{t+1} = w_t - alpha lambda w_{t-tau}`` is stable iff ``alpha lambda < 2 sin(pi / (2 (2 tau + 1)))``,
so the step must shrink like ``1/tau``. PipeMare's fixes, both simulated here:

- learning-rate rescheduling: stage ``i`` steps with ``alpha tau_i^(-p)``, ``p`` annealed linearly from 1
  to 0 over the first ``anneal_steps`` steps;
- discrepancy correction: a velocity EMA ``v <- gamma v + (1 - gamma)(w_{t+1} - w_t)`` per weight, and
  the backward pass runs at ``w_t - tau_i v`` (an estimate of the forward weights) instead of ``w_t``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from embstab.errors import EmbstabError
from embstab.recipes.registry import CheckResult, register_recipe

__all__ = ["PipeMareError", "PipelineRun", "delayed_gd_threshold", "delayed_gd_threshold_closed_form",
           "simulate_pipeline", "check_pipemare"]


class PipeMareError(EmbstabError, ValueError):
    """Bad pipeline-simulation parameters (delays, learning rate, steps)."""


def _max_root(alpha: float, tau: int) -> float:
    # w_{t+1} = w_t - alpha w_{t-tau}  <=>  z^(tau+1) - z^tau + alpha = 0
    coeffs = np.zeros(tau + 2)
    coeffs[0], coeffs[1] = 1.0, -1.0
    coeffs[-1] += alpha
    return float(np.abs(np.roots(coeffs)).max())


def delayed_gd_threshold(tau: int, tol: float = 1e-12) -> float:
    """Largest ``alpha lambda`` for which delayed GD with delay ``tau`` is stable, by bisection on roots.

    Parameters
    ----------
    tau : int
        Delay (>= 0).
    tol : float
        Bisection tolerance.

    Returns
    -------
    float
    """
    if not (isinstance(tau, (int, np.integer)) and tau >= 0):
        raise PipeMareError(f"delay must be a non-negative int, got {tau!r}")
    lo, hi = 0.0, 2.0 + 1e-9
    if tau == 0:
        return 2.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if _max_root(mid, int(tau)) < 1.0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def delayed_gd_threshold_closed_form(tau: int) -> float:
    """``2 sin(pi / (2 (2 tau + 1)))``.

    Parameters
    ----------
    tau : int
        The delay, in steps.

    Returns
    -------
    float
        The largest stable ``alpha lambda`` of delayed GD, in closed form (:func:`delayed_gd_threshold`
        finds it numerically).
    """
    return 2 * math.sin(math.pi / (2 * (2 * tau + 1)))


@dataclass
class PipelineRun:
    """Outcome of :func:`simulate_pipeline`.

    Attributes
    ----------
    losses : numpy.ndarray
        Loss after every step (inf once diverged).
    weights : list of numpy.ndarray
        Final stage weights.
    diverged : bool
        True when the loss became non-finite or exceeded ``1e6``.
    """

    losses: np.ndarray
    weights: list[np.ndarray]
    diverged: bool

    @property
    def final_loss(self) -> float:
        """The last loss."""
        return float(self.losses[-1])


def simulate_pipeline(X: np.ndarray, Y: np.ndarray, widths: tuple[int, ...], delays: tuple[int, ...], lr: float,
                      steps: int, reschedule: bool = False, anneal_steps: int = 0, correction: bool = False,
                      gamma: float = 0.5, seed: int = 0) -> PipelineRun:
    """Full-batch asynchronous pipeline SGD on a deep linear net ``Y ~ W_P ... W_1 X``.

    Parameters
    ----------
    X : numpy.ndarray, shape (d_in, m)
        Inputs (columns are examples).
    Y : numpy.ndarray, shape (d_out, m)
        Targets.
    widths : tuple of int
        Layer widths ``(d_in, h_1, ..., d_out)``; one stage per layer.
    delays : tuple of int
        Per-stage delay ``tau_i`` (forward weights are ``tau_i`` steps old).
    lr : float
        Base step ``alpha``.
    steps : int
        Optimizer steps.
    reschedule : bool
        Use ``alpha max(tau_i, 1)^(-p)`` with ``p`` annealed from 1 to 0 over ``anneal_steps``.
    anneal_steps : int
        Annealing length (0: keep ``p = 1``).
    correction : bool
        Discrepancy correction: backward at ``w_t - tau_i v`` with a velocity EMA ``v``.
    gamma : float
        EMA decay of the velocity.
    seed : int
        Seed of the initial weights.

    Returns
    -------
    PipelineRun
    """
    P = len(widths) - 1
    if len(delays) != P or min(delays) < 0:
        raise PipeMareError(f"need {P} non-negative delays (one per stage), got {delays}")
    if not (lr > 0 and steps >= 1):
        raise PipeMareError(f"need lr > 0 and steps >= 1, got {lr} and {steps}")
    rng = np.random.default_rng(seed)
    W = [rng.standard_normal((widths[i + 1], widths[i])) / math.sqrt(widths[i]) for i in range(P)]
    hist = [[w.copy() for w in W]]  # hist[-1 - k] = weights k steps ago
    vel = [np.zeros_like(w) for w in W]
    m = X.shape[1]
    losses = np.full(steps, np.inf)
    for t in range(steps):
        grads = []
        for i in range(P):
            old = hist[max(0, len(hist) - 1 - delays[i])]
            acts = [X]
            for j in range(P):  # forward with stale weights
                acts.append(old[j] @ acts[-1])
            err = (acts[-1] - Y) / m
            back = [W[j] - delays[i] * vel[j] if correction else W[j] for j in range(P)]
            for j in range(P - 1, i, -1):  # backward with fresh (or corrected) weights
                err = back[j].T @ err
            grads.append(err @ acts[i].T)
        p = 1.0 if anneal_steps <= 0 else max(0.0, 1.0 - t / anneal_steps)
        new = []
        for i in range(P):
            a = lr * max(delays[i], 1) ** (-p) if reschedule else lr
            new.append(W[i] - a * grads[i])
        vel = [gamma * v + (1 - gamma) * (n - w) for v, n, w in zip(vel, new, W)]
        W = new
        hist.append([w.copy() for w in W])
        if len(hist) > max(delays) + 1:
            hist.pop(0)
        out = X
        for w in W:
            out = w @ out
        with np.errstate(all="ignore"):
            loss = float(0.5 * np.sum((out - Y) ** 2) / m)
        if not np.isfinite(loss) or loss > 1e6:
            return PipelineRun(losses, W, True)
        losses[t] = loss
    return PipelineRun(losses, W, False)


@register_recipe("pipemare", "PipeMare: delayed pipeline SGD with per-stage lr rescheduling and discrepancy correction",
                 ("simulate_pipeline", "delayed_gd_threshold"))
def check_pipemare(seed: int = 0) -> CheckResult:
    """Delayed-GD stability thresholds and a 2-layer linear net with stage delays (3, 1), 400 full-batch steps.

    Parameters
    ----------
    seed : int
        Seed of the data and weights.

    Returns
    -------
    CheckResult
        Threshold rows (tau, bisection, closed form) and run rows (setting, final loss, diverged).
    """
    taus = (0, 1, 2, 4, 8)
    ref = (2.0, 1.0, 0.6180339887, 0.3472963553, 0.1845367190)
    thr = [delayed_gd_threshold(t) for t in taus]
    rows = [{"kind": "threshold", "setting": f"tau={t}", "value": v, "closed_form": delayed_gd_threshold_closed_form(t)}
            for t, v in zip(taus, thr)]
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((8, 256))
    Y = rng.standard_normal((2, 8)) @ X / math.sqrt(8)
    kw = dict(widths=(8, 8, 2), delays=(3, 1), lr=0.2, steps=400, seed=seed)
    runs = {"synchronous": simulate_pipeline(X, Y, **{**kw, "delays": (0, 0)}),
            "delayed": simulate_pipeline(X, Y, **kw),
            "delayed+reschedule": simulate_pipeline(X, Y, **kw, reschedule=True),
            "delayed+reschedule+correction": simulate_pipeline(X, Y, **kw, reschedule=True, correction=True),
            "lr0.3 delayed+reschedule": simulate_pipeline(X, Y, **{**kw, "lr": 0.3}, reschedule=True),
            "lr0.3 delayed+reschedule+correction": simulate_pipeline(X, Y, **{**kw, "lr": 0.3}, reschedule=True,
                                                                     correction=True)}
    for name, r in runs.items():
        rows.append({"kind": "run", "setting": name, "value": r.final_loss if not r.diverged else math.inf,
                     "closed_form": math.nan})
    t = pd.DataFrame(rows)
    fin = {k: (math.inf if r.diverged else r.final_loss) for k, r in runs.items()}
    claims = {
        "bisection thresholds 2, 1, 0.618, 0.347, 0.185 for tau = 0, 1, 2, 4, 8 (1e-6)":
            all(abs(a - b) < 1e-6 for a, b in zip(thr, ref)),
        "closed form 2 sin(pi/(2(2 tau+1))) agrees (1e-6)":
            all(abs(a - delayed_gd_threshold_closed_form(k)) < 1e-6 for a, k in zip(thr, taus)),
        "synchronous training converges at the base lr 0.2": fin["synchronous"] < 1e-8,
        "delays (3, 1) diverge at lr 0.2 without rescheduling": runs["delayed"].diverged,
        "rescheduling alpha tau_i^-1 converges at lr 0.2": fin["delayed+reschedule"] < 1e-8,
        "at lr 0.3 correction converges where rescheduling alone diverges":
            runs["lr0.3 delayed+reschedule"].diverged and fin["lr0.3 delayed+reschedule+correction"] < 1e-8,
    }
    return CheckResult("pipemare", t, claims, seed)

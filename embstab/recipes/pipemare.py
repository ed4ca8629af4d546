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

from embstab.errors import ConfigError
from embstab.recipes.registry import CheckResult, register_recipe

__all__ = ["PipeMareError", "PipelineRun", "delayed_gd_threshold", "delayed_gd_threshold_closed_form",
           "simulate_pipeline", "divergence_lr", "check_pipemare"]


#: Bad pipeline-simulation parameters (delays, learning rate, steps).
#: A :class:`~embstab.errors.ConfigError` under the name this module has always raised.
PipeMareError = ConfigError


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


def divergence_lr(X: np.ndarray, Y: np.ndarray, lo: float = 0.02, hi: float = 4.0, rtol: float = 0.005,
                  **kwargs) -> float:
    """Smallest learning rate at which :func:`simulate_pipeline` diverges, by bisection on ``log lr``.

    Divergence is taken to be monotone in the learning rate (every larger step diverges too), as
    for delayed gradient descent on a quadratic.

    Parameters
    ----------
    X, Y : numpy.ndarray
        Inputs and targets, as for :func:`simulate_pipeline`.
    lo, hi : float
        Bracket: ``lo`` is expected to converge and ``hi`` to diverge.
    rtol : float
        Relative width at which the bisection stops.
    **kwargs
        The other arguments of :func:`simulate_pipeline` (all but ``lr``).

    Returns
    -------
    float
        A diverging learning rate within a factor ``1 + rtol`` of the edge; ``lo`` when ``lo``
        already diverges and ``inf`` when ``hi`` does not.
    """
    if not (0 < lo < hi and rtol > 0):
        raise PipeMareError(f"need 0 < lo < hi and rtol > 0, got lo={lo}, hi={hi}, rtol={rtol}")
    if simulate_pipeline(X, Y, lr=lo, **kwargs).diverged:
        return lo
    if not simulate_pipeline(X, Y, lr=hi, **kwargs).diverged:
        return math.inf
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        if simulate_pipeline(X, Y, lr=mid, **kwargs).diverged:
            hi = mid
        else:
            lo = mid
    return hi


@register_recipe("pipemare", "PipeMare: delayed pipeline SGD with per-stage lr rescheduling and discrepancy correction",
                 ("simulate_pipeline", "delayed_gd_threshold", "divergence_lr"))
def check_pipemare(seed: int = 0) -> CheckResult:
    """Delayed-GD stability thresholds, and where a 2-layer linear net with stage delays (3, 1) diverges.

    The curvature of the problem, hence every learning rate at which a run diverges, depends on the
    seed (the plain delayed pipeline first diverges anywhere from lr 0.14 to 0.35 over seeds 0-99),
    so no fixed learning rate separates the methods at every seed. The check finds each setting's
    divergence edge (the smallest lr diverging within 400 full-batch steps) by bisection to 1 %
    and tests the order PipeMare claims:

    - delays (3, 1) bring the edge below half the synchronous one: on a quadratic a delay of 1
      alone halves the stable step (``thr(1) / thr(0)``), a delay of 3 cuts it to 0.22x;
    - rescheduling (``alpha tau_i^-1``) moves the edge up; it slows only the delay-3 stage (the
      delay-1 stage keeps the full step), so by a modest, seed-dependent factor;
    - discrepancy correction moves it at least 1.3x further;
    - at ``a2``, 1.02x the rescheduled edge, the plain and rescheduled pipelines diverge while the
      corrected one cuts the loss a million-fold within 3,000 steps. Convergence is judged this
      loosely because at a few learning rates below its edge the corrected run wanders for
      thousands of steps before settling (seed 307 at ``a2``: loss 2e-5 after 1,000 steps, 2e-9
      after 3,000); a fixed lr or a fixed 1e-8 after 400 steps failed at some seeds.

    The plain delayed pipeline's edge ranges over lr 0.14-0.35 across seeds 0-99, which is why a
    fixed lr of 0.2 failed half the seeds; the check passes at seeds 0-9, 123 and 4242, and the
    slow tier runs it at seeds 100-109.

    Parameters
    ----------
    seed : int
        Seed of the data and weights.

    Returns
    -------
    CheckResult
        Threshold rows (tau, bisection, closed form), edge rows (the smallest diverging lr found
        for each setting) and run rows at ``a2`` (setting, lr, the final loss as value, inf once
        diverged, and the loss after the first step).
    """
    taus = (0, 1, 2, 4, 8)
    ref = (2.0, 1.0, 0.6180339887, 0.3472963553, 0.1845367190)
    thr = [delayed_gd_threshold(t) for t in taus]
    rows = [{"kind": "threshold", "setting": f"tau={t}", "lr": math.nan, "value": v,
             "closed_form": delayed_gd_threshold_closed_form(t), "first_loss": math.nan} for t, v in zip(taus, thr)]
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((8, 256))
    Y = rng.standard_normal((2, 8)) @ X / math.sqrt(8)
    kw = dict(widths=(8, 8, 2), delays=(3, 1), steps=400, seed=seed)
    settings = {"synchronous": {"delays": (0, 0)}, "delayed": {}, "delayed+reschedule": {"reschedule": True},
                "delayed+reschedule+correction": {"reschedule": True, "correction": True}}
    edge = {name: divergence_lr(X, Y, lo=0.05, hi=2.5, rtol=0.01, **{**kw, **extra}) for name, extra in settings.items()}
    rows += [{"kind": "edge", "setting": name, "lr": e, "value": math.nan, "closed_form": math.nan,
              "first_loss": math.nan} for name, e in edge.items()]
    a2 = 1.02 * edge["delayed+reschedule"]  # past the bisected edge whatever the last bisection step was
    runs = {name: simulate_pipeline(X, Y, lr=a2, **{**kw, **settings[name], "steps": steps})
            for name, steps in (("delayed", 400), ("delayed+reschedule", 400), ("delayed+reschedule+correction", 3000))}
    for name, r in runs.items():
        rows.append({"kind": "run", "setting": name, "lr": a2, "value": math.inf if r.diverged else r.final_loss,
                     "closed_form": math.nan, "first_loss": float(r.losses[0])})
    t = pd.DataFrame(rows)
    corr = runs["delayed+reschedule+correction"]
    claims = {
        "bisection thresholds 2, 1, 0.618, 0.347, 0.185 for tau = 0, 1, 2, 4, 8 (1e-6)":
            all(abs(a - b) < 1e-6 for a, b in zip(thr, ref)),
        "closed form 2 sin(pi/(2(2 tau+1))) agrees (1e-6)":
            all(abs(a - delayed_gd_threshold_closed_form(k)) < 1e-6 for a, k in zip(thr, taus)),
        "delays (3, 1) diverge below half the synchronous edge lr": edge["delayed"] < 0.5 * edge["synchronous"],
        "rescheduling alpha tau_i^-1 moves the divergence edge up": edge["delayed+reschedule"] > edge["delayed"],
        "discrepancy correction moves it >= 1.3x further up":
            edge["delayed+reschedule+correction"] >= 1.3 * edge["delayed+reschedule"],
        "just past the rescheduled edge, plain and rescheduled pipelines diverge and correction cuts the loss "
        "1e6-fold": runs["delayed"].diverged and runs["delayed+reschedule"].diverged and not corr.diverged
        and corr.final_loss < 1e-6 * corr.losses[0],  # losses[0]: after the first step
    }
    return CheckResult("pipemare", t, claims, seed)

"""SWALP: low-precision SGD plus a full-precision running average of its iterates.

Low-precision SGD keeps weights, gradients, momentum and the gradient accumulator in 8-bit block
floating point with stochastic rounding (one exponent per output channel for tensors with more
than one dimension, one per tensor for 1-D tensors), and rounds activations (forward) and errors
(backward) with one exponent per whole tensor. Its iterates bounce in a quantization-noise ball;
averaging them in full precision, off the training path, cancels that noise, so the average
approaches the optimum where the last iterate cannot. Batch-norm statistics are recomputed for
the averaged weights with one pass over the training data.

Built on :mod:`embstab.lowprec` (:class:`~embstab.lowprec.BlockFloatFormat`,
:func:`~embstab.lowprec.lower`, :class:`~embstab.lowprec.LowPrecisionOptimizer`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import pandas as pd
import torch
from torch import nn

from embstab.lowprec import (
    BlockFloatFormat,
    FixedFormat,
    LowPrecisionOptimizer,
    Quantizer,
    lower,
    quantize,
)
from embstab.recipes.registry import CheckResult, register_recipe
from embstab.recipes.sixteen_bit import PrecisionRecipeError

__all__ = ["SWALP", "bn_update", "least_squares_swalp", "swalp_formats"]


def swalp_formats(word_bits: int = 8) -> dict[str, BlockFloatFormat]:
    """SWALP's block-floating-point formats.

    Parameters
    ----------
    word_bits : int
        Bits per element including the sign (>= 2).

    Returns
    -------
    dict
        ``"channel"`` (one exponent per first-axis slice), ``"tensor"`` (one per tensor); both
        allow the most negative integer, as SWALP's quantizer does.

    Raises
    ------
    PrecisionRecipeError
        If ``word_bits < 2`` or above 24.
    """
    if not isinstance(word_bits, int) or not 2 <= word_bits <= 24:
        raise PrecisionRecipeError(f"SWALP needs word_bits in 2..24, got {word_bits!r}")
    return {"channel": BlockFloatFormat(word_bits, axis=0, symmetric=False),
            "tensor": BlockFloatFormat(word_bits, axis=None, symmetric=False)}


class SWALP:
    """Low-precision SGD with a full-precision running average (SWALP).

    Parameters
    ----------
    model : torch.nn.Module
        The model to train; it is lowered on a deep copy (``self.model``).
    lr : float
        SGD learning rate.
    momentum, weight_decay : float
        SGD hyper-parameters (momentum is kept in the low-precision format).
    word_bits : int, default 8
        Word length of every quantized tensor.
    swa_start : int, default 0
        Steps before averaging starts.
    swa_freq : int, default 1
        Average every ``swa_freq`` steps after ``swa_start`` (the reference averages once per epoch).
    quantize_activations : bool, default True
        Round activations and errors after every conv/linear layer.
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding (seed 0 by default).

    Attributes
    ----------
    model : torch.nn.Module
        The low-precision training model.
    n_averaged : int
        Iterates averaged so far.

    Raises
    ------
    PrecisionRecipeError
        For ``lr <= 0``, ``word_bits`` outside 2..24, ``swa_freq < 1``, ``swa_start < 0`` or
        recurrent layers.
    """

    def __init__(self, model: nn.Module, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                 word_bits: int = 8, swa_start: int = 0, swa_freq: int = 1, quantize_activations: bool = True,
                 generator: torch.Generator | int | None = 0) -> None:
        if not lr > 0:
            raise PrecisionRecipeError(f"SWALP needs lr > 0, got {lr!r}")
        if not (isinstance(swa_freq, int) and swa_freq >= 1) or not (isinstance(swa_start, int) and swa_start >= 0):
            raise PrecisionRecipeError(f"SWALP needs swa_start >= 0 and swa_freq >= 1, got {swa_start!r}, {swa_freq!r}")
        recurrent = [n for n, m in model.named_modules() if isinstance(m, nn.RNNBase)]
        if recurrent:
            raise PrecisionRecipeError(f"SWALP cannot lower recurrent layers: {', '.join(recurrent)}")
        fmts = swalp_formats(word_bits)
        self.formats = fmts
        self._template = copy.deepcopy(model)
        if quantize_activations and any(isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d))
                                        for m in model.modules()):
            q = Quantizer(fmts["tensor"], fmts["tensor"], "stochastic", "stochastic", generator=generator)
            self.model = lower(model, q, ("conv", "linear"))
        else:
            self.model = copy.deepcopy(model)
        params = list(self.model.parameters())
        self._opts = []
        for key, group in (("channel", [p for p in params if p.dim() > 1]), ("tensor", [p for p in params if p.dim() <= 1])):
            if group:
                base = torch.optim.SGD(group, lr=lr, momentum=momentum, weight_decay=weight_decay)
                f = fmts[key]
                self._opts.append(LowPrecisionOptimizer(base, weight=f, grad=f, state=f, accumulator=f,
                                                        update="stochastic", rounding="stochastic",
                                                        generator=generator))
        self.swa_start = swa_start
        self.swa_freq = swa_freq
        self.n_averaged = 0
        self.steps = 0
        self._avg = [p.detach().double().clone() for p in params]

    def zero_grad(self) -> None:
        """Clear the gradients of the low-precision model."""
        for o in self._opts:
            o.zero_grad()

    def step(self) -> None:
        """One low-precision SGD step, then fold the iterate into the average when it is due."""
        for o in self._opts:
            o.step()
        self.steps += 1
        if self.steps > self.swa_start and (self.steps - self.swa_start) % self.swa_freq == 0:
            self.update_average()

    @torch.no_grad()
    def update_average(self) -> None:
        """``avg <- (m*avg + w) / (m + 1)`` in float64, ``m <- m + 1``."""
        m = self.n_averaged
        for a, p in zip(self._avg, self.model.parameters()):
            a.mul_(m / (m + 1)).add_(p.detach().double(), alpha=1.0 / (m + 1))
        self.n_averaged += 1

    def averaged_model(self, loader: Iterable | None = None) -> nn.Module:
        """A full-precision model (the un-lowered architecture) holding the averaged weights.

        Parameters
        ----------
        loader : iterable of tensors or (inputs, ...) tuples, optional
            Training inputs; when given, batch-norm running statistics are recomputed for the
            averaged weights with one pass (cumulative average over the batches).

        Returns
        -------
        torch.nn.Module

        Raises
        ------
        PrecisionRecipeError
            If nothing was averaged yet.
        """
        if self.n_averaged == 0:
            raise PrecisionRecipeError("SWALP has averaged no iterate yet (train past swa_start first)")
        out = copy.deepcopy(self._template)
        with torch.no_grad():
            for p, a in zip(out.parameters(), self._avg):
                p.copy_(a.to(p.dtype))
        if loader is not None:
            bn_update(out, loader)
        return out


@torch.no_grad()
def bn_update(model: nn.Module, loader: Iterable) -> None:
    """Recompute batch-norm running statistics of ``model`` with one pass over ``loader``.

    Parameters
    ----------
    model : torch.nn.Module
        The model (left in its training or evaluation mode afterwards).
    loader : iterable
        Batches: tensors, or tuples/lists whose first item is the input.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    saved = {m: m.momentum for m in bns}
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average: every batch weighs the same
    was_training = model.training
    model.train()
    for batch in loader:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        model(x)
    for m in bns:
        m.momentum = saved[m]
    model.train(was_training)


def least_squares_swalp(steps: int, rounding: str = "stochastic", *, seed: int = 0, lr: float = 0.01,
                        word_bits: int = 8, frac_bits: int = 6, n: int = 512, d: int = 16) -> dict[str, float]:
    """Low-precision SGD with fixed-point weights on realizable least squares, with its average.

    Batch 1, ``w* ~ U[-1, 1]^d``, Gaussian features, weights kept in ``fixed(word_bits, frac_bits)``
    after every step; the average is taken over the second half of the run in float64.

    Parameters
    ----------
    steps : int
        SGD steps ``T``.
    rounding : {"stochastic", "nearest", "fp32"}
        Weight rounding (``"fp32"``: no quantization).
    seed : int
        Seeds data, sampling and rounding.
    lr : float
        Learning rate.
    word_bits, frac_bits : int
        The fixed-point weight format.
    n, d : int
        Problem size.

    Returns
    -------
    dict
        ``last`` and ``average``: squared distances ``||w - w*||^2``.
    """
    if word_bits < 2:
        raise PrecisionRecipeError(f"SWALP needs word_bits >= 2, got {word_bits!r}")
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    w_star = torch.rand(d, generator=g, dtype=torch.float64) * 2 - 1
    y = X @ w_star
    fmt = FixedFormat(word_bits, frac_bits)
    qgen = torch.Generator().manual_seed(seed + 1)
    idx = torch.randint(0, n, (steps,), generator=g)
    w = torch.zeros(d, dtype=torch.float64)
    avg = torch.zeros(d, dtype=torch.float64)
    m = 0
    for t in range(steps):
        i = int(idx[t])
        w = w - lr * (X[i] @ w - y[i]) * X[i]
        if rounding != "fp32":
            w = quantize(w, fmt, rounding, qgen)
        if t >= steps // 2:
            m += 1
            avg += (w - avg) / m
    return {"last": float(((w - w_star) ** 2).sum()), "average": float(((avg - w_star) ** 2).sum())}


@register_recipe("swalp", "SWALP: 8-bit block-float SGD with stochastic rounding + full-precision averaging",
                 ("SWALP", "swalp_formats", "least_squares_swalp"))
def check_swalp(seed: int = 0, horizons: tuple[int, ...] = (10_000, 40_000, 160_000)) -> CheckResult:
    """Fixed-point least squares: SGD-LP flat near the noise ball, SWALP's average falling with T,
    nearest-rounded fixed point flat and worse (averaging cannot remove a bias).

    Parameters
    ----------
    seed : int
        Seed.
    horizons : tuple of int
        Run lengths T (the claims need at least two, increasing).

    Returns
    -------
    CheckResult
        One row per (method, T): ``||w - w*||^2``.
    """
    rows = []
    for T in horizons:
        sr = least_squares_swalp(T, "stochastic", seed=seed)
        rn = least_squares_swalp(T, "nearest", seed=seed)
        rows += [{"T": T, "method": "SGD-LP (SR, last)", "sq_error": sr["last"]},
                 {"T": T, "method": "SWALP (SR, average)", "sq_error": sr["average"]},
                 {"T": T, "method": "RN-LP (last)", "sq_error": rn["last"]},
                 {"T": T, "method": "RN-LP (average)", "sq_error": rn["average"]}]
    fp = least_squares_swalp(horizons[0], "fp32", seed=seed)
    rows.append({"T": horizons[0], "method": "SGD fp32 (last)", "sq_error": fp["last"]})
    table = pd.DataFrame(rows)
    e = {(r.T, r.method): r.sq_error for r in table.itertuples()}
    delta2d = (2.0 ** -6) ** 2 * 16
    t0, t1 = horizons[0], horizons[-1]
    claims = {
        "SGD-LP last iterate within [0.2, 5] x delta^2 d at every T":
            all(0.2 * delta2d < e[T, "SGD-LP (SR, last)"] < 5 * delta2d for T in horizons),
        "SWALP average 10x below SGD-LP at every T":
            all(e[T, "SWALP (SR, average)"] * 10 < e[T, "SGD-LP (SR, last)"] for T in horizons),
        "SWALP average falls with T": e[t1, "SWALP (SR, average)"] < e[t0, "SWALP (SR, average)"],
        "RN-LP average no better than half its last iterate and worse than SWALP":
            all(e[T, "RN-LP (average)"] > 0.5 * e[T, "RN-LP (last)"]
                and e[T, "RN-LP (average)"] > 10 * e[T, "SWALP (SR, average)"] for T in horizons),
        "fp32 SGD reaches 1e-20": e[t0, "SGD fp32 (last)"] < 1e-20,
    }
    return CheckResult("swalp", table, claims, seed)

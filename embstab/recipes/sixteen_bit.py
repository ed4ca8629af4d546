"""16-bit-FPU training: every tensor in a 16-bit float format, with a choice of weight update.

Pure 16-bit training keeps weights, activations, gradients and optimizer state in the format and
rounds every result to nearest. Its damage comes from the weight update ``w <- RN(w - lr*u)``:
an update below half a unit in the last place of ``w`` is cancelled, more often as the learning
rate decays. Two fixes change only the update: stochastic rounding (unbiased) and a Kahan
compensation buffer kept in the same format. The usual mixed-precision baseline keeps float32
master weights instead.

Built on :mod:`embstab.lowprec`: :func:`~embstab.lowprec.lower` quantizes activations (forward)
and errors (backward) after every layer, :class:`~embstab.lowprec.LowPrecisionOptimizer` quantizes
weights, gradients and state and performs the chosen update.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from embstab.errors import ConfigError, EmbstabError
from embstab.lowprec import (
    FloatFormat,
    LowPrecisionOptimizer,
    Quantizer,
    get_format,
    lower,
)
from embstab.recipes.registry import CheckResult, register_recipe

__all__ = [
    "SIXTEEN_BIT_MODES",
    "PrecisionRecipeError",
    "SixteenBitTraining",
    "least_squares_16bit",
    "sixteen_bit",
]

#: Weight-update modes: three all-16-bit updates and the float32-master-weight baseline.
SIXTEEN_BIT_MODES = ("nearest", "stochastic", "kahan", "mixed")


#: A precision recipe was given a setting it cannot use (format, bits, mu, layer, mode).
#: A :class:`~embstab.errors.ConfigError` under the name this module has always raised.
PrecisionRecipeError = ConfigError


def _float_format(fmt: FloatFormat | str, recipe: str, max_bits: int = 16) -> FloatFormat:
    """Resolve ``fmt`` and insist on a floating-point format of at most ``max_bits`` bits."""
    try:
        resolved = get_format(fmt)
    except EmbstabError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        raise PrecisionRecipeError(f"{recipe}: unknown format {fmt!r} ({exc})") from None
    if not isinstance(resolved, FloatFormat):
        raise PrecisionRecipeError(f"{recipe} needs a floating-point format, got {resolved} "
                                   f"({type(resolved).__name__})")
    if resolved.bits > max_bits:
        raise PrecisionRecipeError(f"{recipe} needs a format of at most {max_bits} bits, got {resolved} "
                                   f"({resolved.bits} bits)")
    return resolved


@dataclass
class SixteenBitTraining:
    """A model and optimizer prepared for 16-bit training.

    Attributes
    ----------
    model : torch.nn.Module
        The lowered model: a quantizer after every conv/linear/activation/pool layer rounds
        activations forward and errors backward into ``fmt``.
    optimizer : LowPrecisionOptimizer
        Wraps the base optimizer; call ``zero_grad``/``step`` as usual.
    fmt : FloatFormat
        The 16-bit format.
    mode : str
        One of :data:`SIXTEEN_BIT_MODES`.
    """

    model: nn.Module
    optimizer: LowPrecisionOptimizer
    fmt: FloatFormat
    mode: str

    def bytes_per_parameter(self) -> dict[str, float]:
        """Storage per parameter in bytes (weight, grad, state, compensation, accumulator, total).

        In ``"mixed"`` mode the weight is the float32 master copy and a 16-bit working copy of the
        weights is counted as ``"working_copy"``.

        Returns
        -------
        dict of str to float
            The optimizer's ``weight``, ``grad``, ``state``, ``compensation`` and ``accumulator``, plus
            ``working_copy`` (0 unless mixed) and their ``total``.
        """
        out = dict(self.optimizer.bytes_per_parameter())
        out["working_copy"] = self.fmt.bits / 8.0 if self.mode == "mixed" else 0.0
        out["total"] = sum(v for k, v in out.items() if k != "total")
        return out


def sixteen_bit(model: nn.Module, optimizer: torch.optim.Optimizer, fmt: FloatFormat | str = "bf16",
                update: str = "nearest", *, generator: torch.Generator | int | None = 0,
                layer_types: tuple[str, ...] = ("conv", "linear", "activation", "pool"),
                inplace: bool = False) -> SixteenBitTraining:
    """Make ``model`` train with every tensor in a 16-bit format.

    Parameters
    ----------
    model : torch.nn.Module
        The model; its float32 parameters are rounded onto ``fmt`` (storage stays float32 so every
        format, not only the native bf16/fp16 dtypes, can be simulated exactly).
    optimizer : torch.optim.Optimizer
        The base optimizer over ``model``'s parameters (SGD, Adam, ...).
    fmt : FloatFormat or str, default "bf16"
        A floating-point format of at most 16 bits.
    update : {"nearest", "stochastic", "kahan", "mixed"}, default "nearest"
        Weight update: round to nearest (the stalling baseline), stochastic rounding, nearest with
        a Kahan compensation buffer in ``fmt``, or ``"mixed"``: float32 master weights (activations,
        errors, gradients still in ``fmt``).
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding (seed 0 by default, so runs are reproducible).
    layer_types : tuple of str
        Layer groups of :data:`embstab.lowprec.LAYER_GROUPS` whose outputs are rounded.
    inplace : bool, default False
        Lower ``model`` itself instead of a deep copy. With a copy, ``optimizer`` must be rebuilt
        on the copy's parameters; this function does so by re-creating the base optimizer with the
        same class and hyper-parameters.

    Returns
    -------
    SixteenBitTraining
        The lowered model, the wrapped optimizer, the format and mode.

    Raises
    ------
    PrecisionRecipeError
        For a non-float format, a format wider than 16 bits, an unknown mode, an optimizer over
        other parameters than the model's, or a model with
        recurrent layers (their tuple outputs cannot be rounded layer by layer).
    """
    fmt = _float_format(fmt, "16-bit training")
    if update not in SIXTEEN_BIT_MODES:
        raise PrecisionRecipeError(f"16-bit training: update must be one of {SIXTEEN_BIT_MODES}, got {update!r}")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise PrecisionRecipeError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    owned = {id(p) for p in model.parameters()}
    if any(id(p) not in owned for g in optimizer.param_groups for p in g["params"]):
        raise PrecisionRecipeError("16-bit training: the optimizer holds parameters that are not the model's")
    recurrent = [n for n, m in model.named_modules() if isinstance(m, nn.RNNBase)]
    if recurrent:
        raise PrecisionRecipeError(f"16-bit training cannot lower recurrent layers: {', '.join(recurrent)}")
    q = Quantizer(fmt, fmt, generator=generator)
    try:
        lowered = lower(model, q, layer_types, inplace=inplace)
    except ValueError as exc:
        raise PrecisionRecipeError(f"16-bit training: {exc}") from None
    if lowered is not model:
        # The copy has new parameter objects: rebuild the base optimizer over them, group by group.
        old = list(model.parameters())
        new = list(lowered.parameters())
        index = {id(p): i for i, p in enumerate(old)}
        groups = []
        for g in optimizer.param_groups:
            ng = {k: v for k, v in g.items() if k != "params"}
            ng["params"] = [new[index[id(p)]] for p in g["params"]]
            groups.append(ng)
        optimizer = type(optimizer)(groups)
    if update == "mixed":
        opt = LowPrecisionOptimizer(optimizer, weight=None, grad=fmt, state=None, update="nearest",
                                    generator=generator)
    else:
        opt = LowPrecisionOptimizer(optimizer, weight=fmt, grad=fmt, state=fmt, update=update,
                                    generator=generator)
    return SixteenBitTraining(lowered, opt, fmt, update)


def _ls_problem(seed: int, n: int = 2000, d: int = 32):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g)
    w_star = 10.0 + 3.0 * torch.randn(d, generator=g)
    return X, X @ w_star, w_star


def least_squares_16bit(mode: str, lr: float, *, steps: int = 3000, fmt: FloatFormat | str = "bf16",
                        seed: int = 0, batch: int = 64) -> float:
    """Relative error ``||w - w*|| / ||w*||`` of minibatch SGD on a realizable least-squares problem.

    ``n = 2000, d = 32, w* = 10 + 3 N(0, 1)``, Gaussian features, batch 64, weights from zero.

    Parameters
    ----------
    mode : str
        ``"fp32"`` or one of :data:`SIXTEEN_BIT_MODES`.
    lr : float
        Learning rate (constant).
    steps : int
        SGD steps.
    fmt : FloatFormat or str
        The 16-bit format.
    seed : int
        Seeds the data, the minibatches and stochastic rounding.
    batch : int
        Minibatch size.

    Returns
    -------
    float
        The relative distance to the optimum after ``steps`` steps.
    """
    X, y, w_star = _ls_problem(seed)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(X.shape[1], 1, bias=False))
    nn.init.zeros_(model[0].weight)
    base = torch.optim.SGD(model.parameters(), lr=lr)
    if mode == "fp32":
        net, opt = model, base
    else:
        rec = sixteen_bit(model, base, fmt, mode, generator=seed, inplace=True)
        net, opt = rec.model, rec.optimizer
    g = torch.Generator().manual_seed(seed + 1)
    n = X.shape[0]
    for _ in range(steps):
        idx = torch.randint(0, n, (batch,), generator=g)
        opt.zero_grad()
        loss = 0.5 * ((net(X[idx]).squeeze(1) - y[idx]) ** 2).mean()
        loss.backward()
        opt.step()
    w = next(model.parameters()).detach().double().squeeze(0)
    return float(torch.linalg.norm(w - w_star.double()) / torch.linalg.norm(w_star.double()))


@register_recipe("sixteen_bit", "16-bit-FPU training: nearest vs stochastic vs Kahan weight updates (bf16)",
                 ("sixteen_bit", "SixteenBitTraining"))
def check_sixteen_bit(seed: int = 0, steps: int = 1000) -> CheckResult:
    """Least squares in bf16: nearest-rounded updates stall far from the optimum, worse at a
    smaller learning rate; stochastic rounding and Kahan summation reach the bf16 storage floor.

    Parameters
    ----------
    seed : int
        Seed for data, minibatches and rounding.
    steps : int
        SGD steps per run at lr 1e-2 (ten times as many at lr 1e-3).

    Returns
    -------
    CheckResult
        One row per (mode, lr) with the relative error and bytes per parameter.
    """
    rows = []
    for lr in (1e-2, 1e-3):
        for mode in ("fp32", "nearest", "stochastic", "kahan", "mixed"):
            # smaller lr needs proportionally more steps to converge (fp32 reference included)
            n_steps = steps if lr >= 1e-2 else steps * 10
            err = least_squares_16bit(mode, lr, steps=n_steps, seed=seed)
            rows.append({"lr": lr, "mode": mode, "steps": n_steps, "rel_error": err})
    table = pd.DataFrame(rows)
    e = {(r.lr, r.mode): r.rel_error for r in table.itertuples()}
    floor = 2.0 ** -8  # a few bf16 ulps relative to |w|
    claims = {
        "nearest >> stochastic at lr 1e-2 (ratio > 5)": e[1e-2, "nearest"] > 5 * e[1e-2, "stochastic"],
        "nearest >> kahan at lr 1e-2 (ratio > 5)": e[1e-2, "nearest"] > 5 * e[1e-2, "kahan"],
        "nearest worse at lr 1e-3 than at lr 1e-2": e[1e-3, "nearest"] > e[1e-2, "nearest"],
        "stochastic and kahan near the bf16 floor (< 2^-8) at both lr":
            all(e[lr, m] < floor for lr in (1e-2, 1e-3) for m in ("stochastic", "kahan")),
        "stochastic within 5x of kahan": bool(np.isclose(np.log(e[1e-2, "stochastic"] / e[1e-2, "kahan"]), 0,
                                                         atol=np.log(5))),
        "fp32 and mixed precision below 1e-3": all(e[lr, m] < 1e-3 for lr in (1e-2, 1e-3) for m in ("fp32", "mixed")),
    }
    return CheckResult("sixteen_bit", table, claims, seed)

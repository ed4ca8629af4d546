"""A wrapper that runs any ``torch.optim`` optimizer with low-precision weights, gradients and state."""

from __future__ import annotations

from typing import Any

import torch

from embstab.errors import ConfigError
from embstab.lowprec.rounding import as_generator, check_rounding
from embstab.lowprec.formats import BF16, FP16, FloatFormat, Format, get_format
from embstab.lowprec.quantize import quantize

__all__ = ["LowPrecisionOptimizer"]

_UPDATES = ("nearest", "stochastic", "kahan")
_NATIVE = {torch.bfloat16: BF16, torch.float16: FP16}


def _fmt_bytes(fmt: Format | None, dtype: torch.dtype) -> float:
    if fmt is None:
        return float(torch.empty((), dtype=dtype).element_size())
    return float(fmt.bits) / 8.0


class LowPrecisionOptimizer:
    """Quantize weights, gradients, optimizer state and an optional accumulator around ``base``.

    On :meth:`step`, in QPyTorch's order with its gradient-scale bug fixed:
    (1) ``grad ← Q_grad(grad · grad_scale) / grad_scale``; (2) the base optimizer steps on a
    float32 working copy (the accumulator, when one is kept); (3) ``acc ← Q_acc(new)``;
    (4) the weight is written back in its format with the ``update`` rule; (5) every floating
    state tensor of the base optimizer is quantized with ``state``.

    Parameters
    ----------
    base : torch.optim.Optimizer
        Any optimizer over the parameters to train.
    weight, grad, state, accumulator : Format or str, optional
        Formats (None = no quantization; for the weight, None means the parameter's own dtype,
        e.g. bf16 parameters are kept in bf16).
    grad_scale : float
        Multiplies gradients before they are quantized (a loss scale) and is divided back out.
    update : {"nearest", "stochastic", "stochastic:K", "kahan"}
        How the new weight is rounded into the weight format: nearest (small updates are
        cancelled — the baseline that stalls), exact stochastic rounding (unbiased), stochastic
        rounding with K random bits as hardware does it (updates below 2**-K of a weight's grid
        step are cancelled again), or nearest with a Kahan compensation buffer kept in the
        weight format.
    rounding : str
        Rounding for gradients, state and accumulator.
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding.
    """

    def __init__(self, base: torch.optim.Optimizer, weight: Format | str | None = None, grad: Format | str | None = None,
                 state: Format | str | None = None, accumulator: Format | str | None = None, grad_scale: float = 1.0,
                 update: str = "nearest", rounding: str = "nearest", generator: torch.Generator | int | None = None) -> None:
        if not isinstance(base, torch.optim.Optimizer):
            raise TypeError(f"base must be a torch.optim.Optimizer, got {type(base).__name__}")
        update = _check_update(update)
        if not (grad_scale > 0):
            raise ConfigError(f"grad_scale must be positive, got {grad_scale!r}")
        self.base = base
        self.weight = None if weight is None else get_format(weight)
        self.grad = None if grad is None else get_format(grad)
        self.state_format = None if state is None else get_format(state)
        self.accumulator = None if accumulator is None else get_format(accumulator)
        self.grad_scale = float(grad_scale)
        self.update = update
        self.rounding = check_rounding(rounding)
        self._generator = generator
        self._gens: dict[torch.device, Any] = {}
        self._acc: dict[torch.Tensor, torch.Tensor] = {}
        self._comp: dict[torch.Tensor, torch.Tensor] = {}
        with torch.no_grad():
            for p in self._params():
                fmt = self._weight_fmt(p)
                if fmt is not None and p.dtype not in _NATIVE:
                    p.copy_(quantize(p, fmt))  # start on the grid, so every stored weight is representable
                if self.accumulator is not None:
                    self._acc[p] = quantize(p.detach().float(), self.accumulator)
                if update == "kahan":
                    self._comp[p] = torch.zeros_like(p)

    # ------------------------------------------------------------------ torch.optim-like surface
    @property
    def param_groups(self):
        return self.base.param_groups

    @property
    def state(self):
        return self.base.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients through the base optimizer.

        Parameters
        ----------
        set_to_none : bool, default True
            Set gradients to None instead of zero tensors (as in ``torch.optim``).
        """
        self.base.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """The base optimizer's state plus the accumulators and compensation buffers.

        Returns
        -------
        dict
            ``base`` (the base optimizer's state dict), and ``acc`` and ``comp``: per parameter, in
            parameter order, its tensor or None.
        """
        return {"base": self.base.state_dict(), "acc": [self._acc.get(p) for p in self._params()],
                "comp": [self._comp.get(p) for p in self._params()]}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore a state made by :meth:`state_dict` (tensors are copied).

        Parameters
        ----------
        sd : dict
            The state, for the same parameters in the same order.
        """
        self.base.load_state_dict(sd["base"])
        for p, a, c in zip(self._params(), sd["acc"], sd["comp"]):
            if a is not None:
                self._acc[p] = a.clone()
            if c is not None:
                self._comp[p] = c.clone()

    # ------------------------------------------------------------------ internals
    def _params(self):
        for group in self.base.param_groups:
            yield from group["params"]

    def _gen(self, device: torch.device):
        if device not in self._gens:
            self._gens[device] = as_generator(self._generator, device)
        return self._gens[device]

    def _weight_fmt(self, p: torch.Tensor) -> FloatFormat | Format | None:
        return self.weight if self.weight is not None else _NATIVE.get(p.dtype)

    def _q(self, t: torch.Tensor, fmt: Format | None, rounding: str) -> torch.Tensor:
        return t if fmt is None else quantize(t, fmt, rounding, self._gen(t.device))

    @torch.no_grad()
    def step(self, closure=None):
        """One optimizer step: quantized gradient, base step on a float32 working copy, quantized
        accumulator, weight written back with the update rule, quantized state.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss (as in ``torch.optim``); run with gradients on.

        Returns
        -------
        object
            The closure's loss, or None without a closure.
        """
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = [p for p in self._params() if p.grad is not None]
        stored = {}
        for p in params:
            g = p.grad.float()
            if self.grad is not None:
                g = self._q(g * self.grad_scale, self.grad, self.rounding) / self.grad_scale
            stored[p] = p.data
            work = self._acc[p].clone() if p in self._acc else p.data.float().clone()
            p.data = work
            p.grad = g
        try:
            self.base.step()
        finally:
            for p in params:
                new = p.data
                old = stored[p]
                p.data = old
                p.grad = p.grad.to(old.dtype)
                if p in self._acc:
                    self._acc[p] = self._q(new, self.accumulator, self.rounding)
                    new = self._acc[p]
                self._write(p, old, new)
        if self.state_format is not None:
            for p in params:
                for key, val in self.base.state.get(p, {}).items():
                    if isinstance(val, torch.Tensor) and val.is_floating_point() and val.dim() > 0:
                        val.copy_(self._q(val, self.state_format, self.rounding))
        return loss

    def _write(self, p: torch.Tensor, old: torch.Tensor, new: torch.Tensor) -> None:
        fmt = self._weight_fmt(p)
        if fmt is None:
            old.copy_(new.to(old.dtype))
            return
        if self.update == "kahan":
            # y = delta - c; s = w + y; c = (s - w) - y; w = s — every operation rounded to the
            # weight format, so the buffer recovers what rounding of the sum cancelled.
            w = old.float()
            c = self._comp[p].float()
            y = self._q((new - w) - c, fmt, "nearest")
            s = self._q(w + y, fmt, "nearest")
            self._comp[p].copy_(self._q(self._q(s - w, fmt, "nearest") - y, fmt, "nearest").to(old.dtype))
            old.copy_(s.to(old.dtype))
        else:
            old.copy_(self._q(new, fmt, self.update).to(old.dtype))

    def bytes_per_parameter(self) -> dict[str, float]:
        """Storage per parameter in bytes of weight, gradient, optimizer state, compensation buffer and
        accumulator (formats count their bit width; None counts the dtype).

        Returns
        -------
        dict of str to float
            ``weight``, ``grad``, ``state``, ``compensation``, ``accumulator`` and their ``total`` (all 0
            without parameters).
        """
        params = list(self._params())
        if not params:
            return {"weight": 0.0, "grad": 0.0, "state": 0.0, "compensation": 0.0, "accumulator": 0.0, "total": 0.0}
        p = params[0]
        n_state = 0
        for q in params:
            n_state = max(n_state, sum(1 for v in self.base.state.get(q, {}).values()
                                       if isinstance(v, torch.Tensor) and v.dim() > 0 and v.is_floating_point()))
        weight = _fmt_bytes(self._weight_fmt(p), p.dtype)
        out = {
            "weight": weight,
            "grad": _fmt_bytes(self.grad, torch.float32),
            "state": n_state * _fmt_bytes(self.state_format, torch.float32),
            "compensation": weight if self.update == "kahan" else 0.0,
            "accumulator": _fmt_bytes(self.accumulator, torch.float32) if self.accumulator is not None else 0.0,
        }
        out["total"] = sum(out.values())
        return out


def _check_update(update: str) -> str:
    """The canonical update rule: one of :data:`_UPDATES` or ``"stochastic:K"``."""
    if update == "kahan":
        return update
    try:
        canonical = check_rounding(update)
    except (TypeError, ValueError):
        canonical = None
    if canonical not in ("nearest", "stochastic") and not (canonical or "").startswith("stochastic:"):
        raise ConfigError(f"update must be one of {_UPDATES} or 'stochastic:K', got {update!r}")
    return canonical

"""Straight-through quantization for autograd: quantize activations forward, gradients backward."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from embstab.errors import ConfigError
from embstab.lowprec.rounding import as_generator, check_rounding
from embstab.lowprec.fixedq import quantize_fixed
from embstab.lowprec.formats import FixedFormat, Format, get_format
from embstab.lowprec.quantize import quantize

__all__ = ["Quantizer", "quantizer"]

GradHook = Callable[[torch.Tensor], torch.Tensor]


class _STE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fwd, bwd, fwd_round, bwd_round, zero_clamped, hooks, generator):  # type: ignore[override]
        mask = None
        if fwd is None:
            y = x.clone()
        elif zero_clamped:
            y, mask = quantize_fixed(x.detach(), fwd, fwd_round, generator, return_mask=True)
        else:
            y = quantize(x.detach(), fwd, fwd_round, generator)
        ctx.bwd, ctx.bwd_round, ctx.hooks, ctx.generator = bwd, bwd_round, hooks, generator
        ctx.save_for_backward(mask if mask is not None else torch.empty(0))
        ctx.has_mask = mask is not None
        return y

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        g = grad
        for hook in ctx.hooks:  # QPyTorch drops hooks unless clamping_grad_zero is set; we never do
            g = hook(g)
        if ctx.bwd is not None:
            g = quantize(g, ctx.bwd, ctx.bwd_round, ctx.generator)
        if ctx.has_mask:
            (mask,) = ctx.saved_tensors
            g = g.masked_fill(mask, 0.0)
        return g, None, None, None, None, None, None, None


def _check(fwd: Format | str | None, bwd: Format | str | None, fwd_round: str, bwd_round: str,
           clamping_grad_zero: bool):
    fwd = None if fwd is None else get_format(fwd)
    bwd = None if bwd is None else get_format(bwd)
    if clamping_grad_zero and not (isinstance(fwd, FixedFormat) and fwd.clamp):
        raise ConfigError("clamping_grad_zero needs a clamping FixedFormat as the forward format")
    return fwd, bwd, check_rounding(fwd_round), check_rounding(bwd_round)


def quantizer(forward_format: Format | str | None = None, backward_format: Format | str | None = None,
              forward_rounding: str = "nearest", backward_rounding: str = "nearest",
              clamping_grad_zero: bool = False, backward_hooks: Sequence[GradHook] = (),
              generator: torch.Generator | int | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """A function ``x -> y`` that quantizes ``x`` with ``forward_format`` and passes the gradient
    straight through, quantized with ``backward_format``.

    Parameters
    ----------
    forward_format, backward_format : Format or str, optional
        Formats (or preset names) of the forward value and of the gradient; None = identity.
    forward_rounding, backward_rounding : str, default "nearest"
        Any of :data:`embstab.lowprec.ROUNDINGS` (or an alias).
    clamping_grad_zero : bool, default False
        Zero the gradient of elements the forward pass clamped (needs a clamping FixedFormat).
    backward_hooks : sequence of callables, default ()
        Gradient transforms (e.g. loss scaling), applied in order to the incoming gradient before
        it is quantized, always (QPyTorch applied them only with ``clamping_grad_zero``).
    generator : torch.Generator or int, optional
        Randomness for stochastic rounding in both directions (one generator per device).

    Returns
    -------
    callable
        ``torch.Tensor -> torch.Tensor``, differentiable through the straight-through estimator.

    Raises
    ------
    ValueError
        If ``clamping_grad_zero`` is set without a clamping FixedFormat forward.
    UnknownNameError
        If a format or rounding name is unknown.
    """
    fwd, bwd, fr, br = _check(forward_format, backward_format, forward_rounding, backward_rounding,
                              clamping_grad_zero)
    hooks = tuple(backward_hooks)
    gen_cache: dict[torch.device, Any] = {}

    def apply(x: torch.Tensor) -> torch.Tensor:
        if x.device not in gen_cache:
            gen_cache[x.device] = as_generator(generator, x.device)
        return _STE.apply(x, fwd, bwd, fr, br, clamping_grad_zero, hooks, gen_cache[x.device])

    return apply


class Quantizer(torch.nn.Module):
    """Module form of :func:`quantizer` (same parameters), for dropping into ``nn.Sequential``."""

    def __init__(self, forward_format: Format | str | None = None, backward_format: Format | str | None = None,
                 forward_rounding: str = "nearest", backward_rounding: str = "nearest",
                 clamping_grad_zero: bool = False, backward_hooks: Sequence[GradHook] = (),
                 generator: torch.Generator | int | None = None) -> None:
        super().__init__()
        self.forward_format = forward_format
        self.backward_format = backward_format
        self.forward_rounding = forward_rounding
        self.backward_rounding = backward_rounding
        self.clamping_grad_zero = clamping_grad_zero
        self._fn = quantizer(forward_format, backward_format, forward_rounding, backward_rounding,
                             clamping_grad_zero, backward_hooks, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Quantize ``x`` (see :func:`quantizer`).

        Parameters
        ----------
        x : torch.Tensor
            The input.

        Returns
        -------
        torch.Tensor
            The quantized tensor, same shape and dtype.
        """
        return self._fn(x)

    def extra_repr(self) -> str:
        """The formats and rounding modes, shown in the module's ``repr``.

        Returns
        -------
        str
            One line.
        """
        return (f"forward={self.forward_format}, backward={self.backward_format}, "
                f"rounding=({self.forward_rounding}, {self.backward_rounding})")

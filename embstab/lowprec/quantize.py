"""The public entry point :func:`quantize`: any format, any rounding, torch or numpy input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from embstab.lowprec import gpu
from embstab.lowprec._core import as_generator, check_rounding
from embstab.lowprec.blockq import quantize_block, quantize_mx
from embstab.lowprec.fixedq import quantize_fixed, quantize_uniform
from embstab.lowprec.floatq import quantize_float
from embstab.lowprec.formats import (BlockFloatFormat, FixedFormat, FloatFormat, Format, MXFormat,
                                     UniformFormat, get_format)

__all__ = ["quantize", "to_work_tensor"]


def to_work_tensor(x: Any) -> tuple[torch.Tensor, Callable[[torch.Tensor], Any]]:
    """``x`` as a detached float32/float64 torch tensor, and a function that turns a result back
    into ``x``'s type and dtype (numpy stays numpy, bf16/fp16 tensors are upcast exactly)."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dtype in (torch.float32, torch.float64):
            return t, lambda y: y
        if t.dtype in (torch.float16, torch.bfloat16):
            dtype = t.dtype
            return t.float(), lambda y: y.to(dtype)
        if t.is_floating_point():  # fp8 dtypes: widen exactly, narrow with torch's cast afterwards
            dtype = t.dtype
            return t.float(), lambda y: y.to(dtype)
        raise TypeError(f"quantize needs a floating-point tensor, got {t.dtype}")
    arr = np.asarray(x)
    if arr.dtype in (np.float32, np.float64):
        dtype = arr.dtype
        # copy keeps the caller's array safe and makes read-only arrays (Embedding.vectors) usable
        return torch.from_numpy(np.array(arr, copy=True)), lambda y: y.numpy().astype(dtype, copy=False)
    if arr.dtype.kind in "fV" or arr.dtype.name in ("bfloat16",) or arr.dtype.kind == "f":
        dtype = arr.dtype
        return torch.from_numpy(arr.astype(np.float32)), lambda y: y.numpy().astype(dtype)
    if arr.dtype.kind in "iub":
        return torch.from_numpy(arr.astype(np.float64)), lambda y: y.numpy()
    raise TypeError(f"quantize needs numeric input, got dtype {arr.dtype}")


def quantize(x: Any, fmt: Format | str, rounding: str = "nearest", generator: torch.Generator | int | None = None,
             *, compiled: bool = False) -> Any:
    """Round ``x`` onto the values of ``fmt``.

    Parameters
    ----------
    x : torch.Tensor or array_like
        Input on any device. torch in → torch out, numpy in → numpy out, same dtype as the input
        (fp16/bf16 inputs are widened exactly, rounded, and cast back, so a format with more
        precision than the input dtype is rounded once more by that cast).
    fmt : Format or str
        A :class:`FloatFormat`, :class:`FixedFormat`, :class:`BlockFloatFormat`, :class:`MXFormat`,
        :class:`UniformFormat`, or a preset name (``"bf16"``, ``"fp8_e4m3fn"``, ``"mxfp4"``, ...).
    rounding : {"nearest", "nearest_away", "nearest_up", "toward_zero", "stochastic", "stochastic:K"}
        ``"nearest"`` is round-half-to-even. ``"stochastic"`` rounds up with probability equal to
        the distance to the lower grid point over the gap (unbiased at every exponent, subnormals
        included), except where saturation at ±max biases it toward zero. ``"stochastic:K"``
        uses only K random bits, like hardware stochastic rounding: the probability is that
        distance truncated to K bits, so results are biased toward zero by less than 2**-K of a
        grid step (exact scaled path; slower than ``"stochastic"``).
    generator : torch.Generator or int, optional
        Source of randomness for stochastic rounding; an int is a seed for a fresh generator.
        ``None`` uses torch's default generator. Draws happen on the generator's device, so a seed
        reproduces results whatever the thread count.
    compiled : bool
        Use the ``torch.compile``-fused kernel for float formats (several times faster on large
        CPU tensors; the first call per format, mode and dtype compiles for tens of seconds).
        Results are bit-identical to the eager path.

    Returns
    -------
    Same type as ``x``.

    Notes
    -----
    Not differentiable; use :class:`embstab.lowprec.Quantizer` for a straight-through gradient.
    NaN inputs stay NaN for every format (formats without a NaN code cannot store them:
    :func:`encode` raises). Infinite inputs follow the format's overflow policy.
    """
    fmt = get_format(fmt)
    rounding = check_rounding(rounding)
    t, back = to_work_tensor(x)
    gen = as_generator(generator, t.device)
    with torch.no_grad():
        y = gpu.try_kernel(t, fmt, rounding, gen)  # float32 CUDA tensors: one fused pass
        if y is not None:
            return back(y)
        if isinstance(fmt, FloatFormat):
            y = quantize_float(t, fmt, rounding, gen, compiled=compiled)
        elif isinstance(fmt, FixedFormat):
            y = quantize_fixed(t, fmt, rounding, gen)
        elif isinstance(fmt, BlockFloatFormat):
            y = quantize_block(t, fmt, rounding, gen)
        elif isinstance(fmt, MXFormat):
            y = quantize_mx(t, fmt, rounding, gen)
        elif isinstance(fmt, UniformFormat):
            y = quantize_uniform(t, fmt, rounding, gen)
        else:
            raise TypeError(f"fmt must be a number format or a preset name, got {type(fmt).__name__}")
    return back(y)

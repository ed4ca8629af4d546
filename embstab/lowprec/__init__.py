"""The low-precision core: number formats, exact rounding, quantizers and a low-precision optimizer.

- formats: :class:`FloatFormat` (bf16, fp16, fp8, fp6, fp4 and QPyTorch-style floats),
  :class:`FixedFormat`, :class:`BlockFloatFormat`, :class:`MXFormat`, :class:`UniformFormat`,
  named presets (:data:`PRESETS`, :func:`get_format`);
- :func:`quantize` (torch or numpy, CPU or CUDA; nearest-even, nearest-away, toward zero and exact
  stochastic rounding from an explicit ``torch.Generator``), :func:`encode`/:func:`decode`;
- :class:`Quantizer` / :func:`quantizer` (straight-through autograd), :func:`lower` (a quantizer
  after every layer of chosen kinds, as QPyTorch's ``sequential_lower``) and
  :class:`LowPrecisionOptimizer` (quantized weights, gradients, state; nearest, stochastic or
  Kahan-compensated updates);
- :mod:`embstab.lowprec.rounding`: rounding-mode names (:func:`check_rounding`) and generators
  (:func:`as_generator`); :mod:`embstab.lowprec.handlers`: what each kind of format does
  (:func:`handler_for`, :func:`register_handler`);
- :mod:`embstab.lowprec.qtorch`: QPyTorch-compatible numerics; :mod:`embstab.lowprec.native`: the
  compiled CPU rounding kernel :func:`quantize` uses by default; :mod:`embstab.lowprec.gpu`: CUDA
  kernels (optional, need cupy and a GPU).
"""

from __future__ import annotations

from embstab.lowprec import gpu, native, qtorch, rounding
from embstab.lowprec.autograd import Quantizer, quantizer
from embstab.lowprec.codes import BlockCodes, CodeError, float_code_table
from embstab.lowprec.formats import (BF16, FP4_E2M1, FP6_E2M3, FP6_E3M2, FP8_E3M4, FP8_E4M3, FP8_E4M3FN,
                                     FP8_E4M3FNUZ, FP8_E5M2, FP8_E5M2FNUZ, FP16, FP32, MXFP4, MXFP6_E2M3,
                                     MXFP6_E3M2, MXFP8_E4M3, MXFP8_E5M2, MXINT8, PRESETS, TF32, BlockFloatFormat,
                                     FixedFormat, FloatFormat, Format, MXFormat, UniformFormat, get_format,
                                     qtorch_float, E8M0_BIAS, MXINT8_FRAC_BITS)
from embstab.lowprec.lowering import LAYER_GROUPS, lower
from embstab.lowprec.optim import LowPrecisionOptimizer
from embstab.lowprec.handlers import FormatHandler, RowCodes, StorageError, handler_for, register_handler
from embstab.lowprec.quantize import decode, encode, quantize
from embstab.lowprec.rounding import ROUNDINGS, as_generator, check_rounding

__all__ = [
    "BF16", "FP16", "TF32", "FP32", "FP8_E4M3FN", "FP8_E4M3", "FP8_E4M3FNUZ", "FP8_E5M2", "FP8_E5M2FNUZ",
    "FP8_E3M4", "FP6_E3M2", "FP6_E2M3", "FP4_E2M1", "MXFP8_E4M3", "MXFP8_E5M2", "MXFP6_E3M2", "MXFP6_E2M3",
    "LAYER_GROUPS", "MXFP4", "MXINT8", "PRESETS", "ROUNDINGS",
    "BlockCodes", "BlockFloatFormat", "CodeError", "FixedFormat", "FloatFormat", "Format", "MXFormat",
    "UniformFormat", "LowPrecisionOptimizer", "Quantizer",
    "FormatHandler", "RowCodes", "StorageError", "as_generator", "check_rounding", "handler_for",
    "register_handler", "rounding", "E8M0_BIAS", "MXINT8_FRAC_BITS",
    "decode", "encode", "float_code_table", "get_format", "gpu", "lower", "native", "qtorch", "qtorch_float", "quantize",
    "quantizer",
]

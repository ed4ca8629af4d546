"""A model's weights rounded to a low-precision format through :func:`embstab.lowprec.quantize`.

The quantized copy keeps float storage (weights hold exactly representable values), so it runs
with the same code; comparing it with its full-precision self is a compression pair.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from embstab.compress.memory import bits_per_entry
from embstab.contextual.model import ContextualModel
from embstab.lowprec import Format, get_format, quantize

__all__ = ["quantize_weights"]


def quantize_weights(model: ContextualModel, format: Format | str, *, rounding: str = "nearest",
                     seed: Any = None, include_embeddings: bool = True, name: str | None = None) -> ContextualModel:
    """Round every weight matrix of the network (linear layers, and the embedding tables) to ``format``.

    Biases and LayerNorm parameters stay in float32, as weight-only quantization schemes keep them.

    Parameters
    ----------
    model : ContextualModel
        Left untouched; a quantized copy is returned.
    format : Format or str
        A :mod:`embstab.lowprec` format or preset name (``"bf16"``, ``"fp8_e4m3"``, ``"mxfp4"``,
        ``"mxint8"``, …).
    rounding : str
        Rounding mode of :func:`embstab.lowprec.quantize`.
    seed : int or torch.Generator, optional
        For stochastic rounding.
    include_embeddings : bool
        Quantize the word, position and type embedding tables too.
    name : str, optional

    Returns
    -------
    ContextualModel
        ``metadata["weight_format"]`` and ``metadata["weight_bits_per_entry"]`` say what was done.
    """
    fmt = get_format(format) if isinstance(format, str) else format
    out = copy.deepcopy(model)
    n_done = 0
    with torch.no_grad():
        for module in out.network.modules():
            if isinstance(module, torch.nn.Linear) or (include_embeddings and isinstance(module, torch.nn.Embedding)):
                w = module.weight
                # tied decoder weights share storage with the word embeddings: quantizing twice is harmless
                w.copy_(quantize(w.detach(), fmt, rounding, seed))
                n_done += 1
    out.name = name or f"{model.name}@{fmt}"
    out.metadata = {**model.metadata, "weight_format": str(fmt), "quantized_matrices": n_done,
                    "weight_bits_per_entry": bits_per_entry(fmt, model.hidden_size)}
    return out

"""Quantized knowledge-graph models: compressed entity and relation tables inside the scoring function.

The tables of a trained model are quantized with embstab's uniform quantizer (clip by golden-section
search, as :func:`embstab.compress.compress_pair`) and written back into a copy of the PyKEEN model,
so link prediction and triple classification run on exactly the values a compressed model ships.
Uniform quantization acts on each entry with one clip per table, so quantizing PyKEEN's stored
layout of a complex table (interleaved real and imaginary parts) equals quantizing its real view.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embstab._bits import check_bits
from embstab.compress.memory import table_bits
from embstab.compress.uniform import optimal_clip, uniform_quantize
from embstab.embedding import Embedding
from embstab.errors import ShapeError
from embstab.kg.graph import KnowledgeGraph
from embstab.kg.training import KGTrainResult, check_model_fits, export_embeddings
from embstab.pair import MISSING, unpack_pair

__all__ = ["QuantizedKGModel", "quantize_model", "quantize_pair", "embedding_tables"]


@dataclass
class QuantizedKGModel:
    """A knowledge-graph model whose embedding tables were quantized.

    Attributes
    ----------
    model : pykeen.models.Model
        A copy of the trained model with the quantized tables (the original is untouched).
    graph : KnowledgeGraph
    entities, relations : Embedding
        The quantized entity and relation tables (real view for complex models).
    bits : int
        Bits per entry (32 and more: clipped only).
    clips : dict
        Table name (``entity0``, ``relation0``, ...) → clip value used.
    memory_bits : float
        Bits of all quantized tables (codes plus one float32 clip per table).
    full_precision_bits : float
        Bits of the same tables in float32.
    settings : dict
        The source model's settings plus the rounding mode.
    """

    model: Any = field(repr=False)
    graph: KnowledgeGraph = field(repr=False)
    entities: Embedding = field(repr=False)
    relations: Embedding = field(repr=False)
    bits: int
    clips: dict[str, float]
    memory_bits: float
    full_precision_bits: float
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def compression_ratio(self) -> float:
        return self.full_precision_bits / self.memory_bits


def embedding_tables(model: Any) -> dict[str, Any]:
    """The model's embedding tables by name (``entity0``, ``relation0``, ``relation1``, ...).

    Only ``pykeen.nn.Embedding`` representations count; others are left out.

    Parameters
    ----------
    model : pykeen.models.Model

    Returns
    -------
    dict of str to torch.nn.Parameter
        The weight behind each table, shared with the model (writing to it changes the model).
    """
    from pykeen.nn import Embedding as PyKEmbedding

    out = {}
    for kind, reps in (("entity", model.entity_representations), ("relation", model.relation_representations)):
        for i, rep in enumerate(reps):
            if isinstance(rep, PyKEmbedding):
                out[f"{kind}{i}"] = rep._embeddings.weight
    return out


def _source(trained: Any) -> KGTrainResult:
    if not isinstance(trained, KGTrainResult):
        raise TypeError(f"expected a KGTrainResult (embstab.kg.train), got {type(trained).__name__}")
    return trained


def quantize_model(trained: KGTrainResult, bits: int, *, clips: dict[str, float] | None = None,
                   rounding: str = "nearest", seed: Any = None) -> QuantizedKGModel:
    """Quantize every embedding table of a trained model and plug the result into a model copy.

    Parameters
    ----------
    trained : KGTrainResult
    bits : int
        Bits per entry: 1..16 rounds onto ``2**bits`` levels in ``[-clip, clip]``; 32 only clips
        (:data:`embstab._bits.BIT_WIDTHS`).
    clips : dict, optional
        Clip per table name (see :func:`embedding_tables`); by default found on this model's own
        tables by golden-section search (:func:`quantize_pair` passes the old model's).
    rounding : {"nearest", "stochastic"}
    seed : int or torch.Generator, optional
        Randomness for stochastic rounding.

    Returns
    -------
    QuantizedKGModel
    """
    import torch

    trained = _source(trained)
    bits = check_bits(bits)
    model = copy.deepcopy(trained.model)
    tables = embedding_tables(model)
    if clips is not None and set(clips) != set(tables):
        raise ShapeError(f"clips are given for tables {sorted(clips)}, but the model has {sorted(tables)}")
    gen = None
    if seed is not None:
        from embstab.lowprec import as_generator

        gen = as_generator(seed, torch.device("cpu"))
    used: dict[str, float] = {}
    total = full = 0.0
    with torch.no_grad():
        for name, weight in tables.items():
            x = weight.detach().cpu().numpy().astype(np.float32)
            r = float(clips[name]) if clips is not None else float(optimal_clip(x, bits))
            q = uniform_quantize(x, bits, clip=r, rounding=rounding, seed=gen)
            weight.copy_(torch.as_tensor(np.asarray(q, dtype=np.float32)))
            used[name] = r
            total += table_bits(x.shape[0], x.shape[1], min(bits, 32))
            full += table_bits(x.shape[0], x.shape[1], 32, clip_bits=0)
    model.eval()
    check_model_fits(model, trained.graph)
    settings = {**trained.settings, "rounding": rounding, "bits": bits}
    name = f"{trained.entities.name.removesuffix('_entities')}_q{bits}"
    entities, relations = export_embeddings(model, trained.graph, name,
                                            {**trained.entities.metadata, "compression":
                                             {"method": "uniform", "bits": bits, "clip": used.get("entity0")}})
    return QuantizedKGModel(model, trained.graph, entities, relations, bits, used, float(total), float(full),
                            settings)


def quantize_pair(old: KGTrainResult, new: KGTrainResult = MISSING, bits: int = MISSING, *, rounding: str = "nearest",
                  seed: Any = None) -> tuple[QuantizedKGModel, QuantizedKGModel]:
    """Quantize an (old, new) pair of models with the old model's clips for both (the pair protocol).

    Unlike word embeddings, the new model is not rotated onto the old one first: a rotation of the
    entity table alone would change the scores of bilinear models, whose relations it does not
    rotate. Both models must have the same tables (same PyKEEN model and dimension).

    Parameters
    ----------
    old, new : KGTrainResult
        The models of the old and the new graph version; ``old`` may instead be an
        :class:`embstab.Pair` of both, with ``bits`` second.
    bits : int
        Bits per entry, as in :func:`quantize_model`.
    rounding : {"nearest", "stochastic"}
    seed : int or torch.Generator, optional
        Randomness for stochastic rounding (the same for both models).

    Returns
    -------
    (QuantizedKGModel, QuantizedKGModel)
        The quantized old and new models.

    Raises
    ------
    TypeError
        If a model is not a KGTrainResult.
    ShapeError
        If the two models' tables differ in names or shapes.
    ValueError
        For invalid ``bits``.
    """
    old, new, (bits,) = unpack_pair(old, new, (bits,), (MISSING,))
    old, new = _source(old), _source(new)
    a_tables, b_tables = embedding_tables(old.model), embedding_tables(new.model)
    shapes_a = {k: tuple(v.shape) for k, v in a_tables.items()}
    shapes_b = {k: tuple(v.shape) for k, v in b_tables.items()}
    if shapes_a != shapes_b:
        raise ShapeError(f"the two models have different tables: {shapes_a} vs {shapes_b}")
    qa = quantize_model(old, bits, rounding=rounding, seed=seed)
    qb = quantize_model(new, bits, clips=qa.clips, rounding=rounding, seed=seed)
    return qa, qb

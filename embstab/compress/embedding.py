"""Compressing whole embeddings: one embedding, a pair (the paper's protocol), and saving codes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from embstab._fs import json_safe
from embstab.compress.memory import bits_per_entry, memory_bits
from embstab.compress.transforms import TransformError, parse_transform, transform_quantize_pair
from embstab.compress.uniform import _check_bits, optimal_clip
from embstab.embedding import Embedding
from embstab.errors import ConfigError, ShapeError
from embstab.io.compressed import CompressedData, write_compressed
from embstab.pair import MISSING, unpack_pair
from embstab.lowprec import (Format, UniformFormat, as_generator, check_rounding, get_format, handler_for,
                             quantize)

__all__ = ["CompressResult", "quantize_embedding", "compress_embedding", "compress_like", "compress_pair",
           "save_compressed", "resolve_storage"]


def resolve_storage(bits: int | None, format: Format | str | None, clip: float | None) -> tuple[str, Any, int]:
    """How a quantized embedding will be stored: uniform levels or codes of a number format.

    Parameters
    ----------
    bits : int or None
        Bits per entry for uniform quantization (1–16, or 32 for clipping only); with a
        number format, optional and then checked against the format's code width.
    format : Format, str or None
        A number format or preset name; None or ``"uniform"`` means uniform quantization.
    clip : float or None
        The clip of uniform quantization (refused with a number format).

    Returns
    -------
    tuple
        ``("uniform", bits, bits)`` or ``("format", storage format, bits per code)``.

    Raises
    ------
    ValueError
        For missing or out-of-range bits, a clip with a number format, or bits that contradict
        the format's width.
    """
    if format is None or (isinstance(format, str) and format.lower() == "uniform"):
        if bits is None:
            raise ConfigError("give bits for uniform quantization (or a number format)")
        bits = _check_bits(bits)
        return "uniform", bits, bits
    if clip is not None:
        raise ConfigError("clip applies to uniform quantization only")
    fmt = get_format(format)
    if isinstance(fmt, UniformFormat):
        return "uniform", fmt.bits, fmt.bits
    fmt, width = handler_for(fmt).for_storage(fmt)  # width 32: stored as float32 values, not codes
    if bits is not None and int(bits) != width:
        raise ConfigError(f"bits={bits} contradicts format {fmt} ({width} bits per code)")
    return "format", fmt, width


def _code_dtype(bits: int) -> type:
    return np.uint8 if bits <= 8 else np.uint16


def quantize_embedding(emb: Embedding, bits: int | None = None, *, format: Format | str | None = None,
                       clip: float | None = None, rounding: str = "nearest", seed: Any = None,
                       progress: bool = False) -> CompressedData:
    """Quantize ``emb`` and return its codes.

    Parameters
    ----------
    emb : Embedding
        The embedding to compress.
    bits : int, optional
        Uniform bit rate (1..16 stored as packed codes; 17 and more stored as clipped float32).
    format : Format or str, optional
        Instead of uniform: a number format applied per row — fp8/fp6/fp4/bf16/fp16 presets
        (saturating), ``"bfp8"`` (block float, one exponent per row), MX formats (blocks of 32
        along the row), or a :class:`FloatFormat`/:class:`BlockFloatFormat`/:class:`MXFormat`.
    clip : float, optional
        Uniform clip value; by default found by golden-section search on ``emb``.
    rounding : {"nearest", "stochastic"}
        Rounding mode (any of :data:`embstab.lowprec.ROUNDINGS`).
    seed : int or torch.Generator, optional
        Randomness for stochastic rounding.
    progress : bool
        Progress bar for the clip search.

    Returns
    -------
    CompressedData
        The codes, their value table, per-block scales and the compression metadata.

    Raises
    ------
    ShapeError
        For an empty embedding.
    ValueError
        For contradictory or unsupported bits/format/clip (:class:`~embstab.lowprec.StorageError`
        for formats that cannot store embedding rows).
    """
    rounding = check_rounding(rounding)
    kind, spec, width = resolve_storage(bits, format, clip)
    X = np.asarray(emb.vectors)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ShapeError("cannot compress an empty embedding")
    gen = as_generator(seed, torch.device("cpu"))
    meta: dict[str, Any] = {"rounding": rounding}
    if kind == "uniform":
        r = float(optimal_clip(X, spec, progress=progress) if clip is None else clip)
        fmt = UniformFormat(spec, r)
        meta.update(method="uniform", bits=spec, clip=r)
        stored = spec <= 16 and r != 0.0  # otherwise no packed grid: clipped float32 values
    else:
        fmt = spec
        meta.update(method="format", format=str(fmt), bits=width)
        stored = width != 32
    if stored:
        rc = handler_for(fmt).row_codes(X, fmt, rounding, gen)
        codes, table, data_bits, scales, block = rc.codes.astype(_code_dtype(rc.width)), rc.table, rc.width, rc.scales, rc.block
    else:
        vals = np.asarray(quantize(X.astype(np.float32), fmt, rounding, gen), np.float32)
        codes, table, data_bits, scales, block = vals, None, 32, None, None
    meta["memory_bits_per_word"] = memory_bits(emb.dim, bits_per_entry(width if kind == "uniform" else fmt, emb.dim))
    return CompressedData(emb.words, codes, data_bits, table, scales, block, emb.counts, emb.name,
                          {"compression": meta})


def compress_embedding(emb: Embedding, bits: int | None = None, *, format: Format | str | None = None,
                       clip: float | None = None, rounding: str = "nearest", seed: Any = None,
                       progress: bool = False) -> Embedding:
    """Quantize one embedding and return it dequantized (float32).

    ``metadata["compression"]`` describes the method, bits, clip and memory, and the exact codes
    are kept so ``emb.save("x.esq")`` writes them bit-packed.

    Parameters
    ----------
    emb : Embedding
        The embedding to compress.
    bits : int, optional
        Uniform bit rate (see :func:`quantize_embedding`).
    format : Format or str, optional
        A number format instead of uniform (see :func:`quantize_embedding`).
    clip : float, optional
        Uniform clip value; by default found by golden-section search on ``emb``.
    rounding : {"nearest", "stochastic"}, default "nearest"
        Rounding mode.
    seed : int or torch.Generator, optional
        Randomness for stochastic rounding.
    progress : bool, default False
        Progress bar for the clip search.

    Returns
    -------
    Embedding
        float32 embedding with the same words and counts, its metadata merged over ``emb``'s.

    Raises
    ------
    ShapeError
        For an empty embedding.
    ValueError
        For contradictory or unsupported bits/format/clip.
    """
    data = quantize_embedding(emb, bits, format=format, clip=clip, rounding=rounding, seed=seed, progress=progress)
    out = data.to_embedding(source=emb.source)
    out.metadata = {**emb.metadata, **out.metadata}
    return out


def compress_pair(old: Embedding, new: Embedding = MISSING, bits: int = MISSING, rounding: str = MISSING,
                  seed: Any = MISSING, *,
                  format: Format | str | None = None, transform: str | None = None,
                  progress: bool = False) -> tuple[Embedding, Embedding]:
    """Compress an (old, new) pair the way the stability study does.

    ``new`` is first rotated onto ``old`` by orthogonal Procrustes fitted on the shared
    vocabulary (applied to all its rows), so both share a coordinate frame. For uniform
    quantization the clip is found on ``old`` alone by golden-section search and ``new`` is
    quantized with **old's** clip at the same bit rate; with 32 bits both are only clipped (to
    ``max|old|``). With ``format=`` (fp8, mxfp4, ...) both aligned members are rounded per row.

    Parameters
    ----------
    old, new : Embedding
        Same dimension, sharing at least one word; ``old`` may instead be an
        :class:`embstab.Pair` of both, with ``bits`` second.
    bits : int
    rounding : {"nearest", "stochastic"}
    seed : int or torch.Generator, optional
        One generator serves old then new, so a seed reproduces the pair.
    format : Format or str, optional
    transform : str, optional
        Applied around uniform quantization (see :func:`embstab.compress.transforms.parse_transform`):
        ``"hadamard"``, ``"orthogonal"``, ``"ocs:R"``, ``"tt:R"`` or ``"none"``. The members come back
        dequantized in the original coordinates, with the transform and its true memory per word in
        ``metadata["compression"]``; they keep their codes in the transformed coordinates, so saving
        one to ``.esq`` stores those bits per word.
    progress : bool

    Returns
    -------
    (old_compressed, new_compressed) : tuple of Embedding

    Raises
    ------
    TransformError
        A transform with ``format=`` (transforms apply to uniform quantization), or a malformed one.
    """
    old, new, (bits, rounding, seed) = unpack_pair(old, new, (bits, rounding, seed), (None, "nearest", None))
    rounding = check_rounding(rounding)
    t = parse_transform(transform)
    if not t.is_identity and format is not None:
        raise TransformError(f"compression transform {t.name!r} applies to uniform quantization (bits=), not format=")
    kind, spec, _ = resolve_storage(bits, format, None)  # bits with a format: checked against its width
    aligned = new.align_to(old)
    gen = as_generator(seed, torch.device("cpu"))
    if not t.is_identity:
        res = transform_quantize_pair(old.vectors, aligned.vectors, spec, t, rounding=rounding, seed=gen)
        meta = _transform_metadata(spec, t.name, rounding, res)
        return (_with_codes(old, res.old, dict(meta), res.stored[0]),
                _with_codes(aligned, res.new, {**meta, "aligned_to": old.name}, res.stored[1]))
    if kind == "uniform":
        r = optimal_clip(old.vectors, spec, progress=progress)
        old_c = compress_embedding(old, spec, clip=r, rounding=rounding, seed=gen)
        new_c = compress_embedding(aligned, spec, clip=r, rounding=rounding, seed=gen)
    else:
        old_c = compress_embedding(old, format=spec, rounding=rounding, seed=gen)
        new_c = compress_embedding(aligned, format=spec, rounding=rounding, seed=gen)
    new_c.metadata["compression"]["aligned_to"] = old.name
    return old_c, new_c


def _transform_metadata(bits: int, name: str, rounding: str, res: Any) -> dict[str, Any]:
    """``metadata["compression"]`` of a member quantized through a transform (``res``: a TransformedPair)."""
    return {"method": "uniform", "bits": bits, "transform": name, "rounding": rounding,
            "memory_bits_per_word": res.bits_per_word, **res.details}


def _with_codes(emb: Embedding, vectors: np.ndarray, meta: dict[str, Any], stored: Any) -> Embedding:
    """``emb`` holding the dequantized ``vectors``, with its codes kept in the transformed coordinates."""
    out = emb.with_vectors(vectors, compression=meta)
    out.codes = stored.to_data(out.words, out.counts, out.name, json_safe(out.metadata))
    return out


@dataclass
class CompressResult:
    """One embedding compressed by :func:`compress_like`, with what it stands for and how.

    Parameters
    ----------
    embedding : Embedding
        The compressed embedding, dequantized (float32) in the original coordinates; it keeps its
        exact codes, so saving it to ``.esq`` stores them, and ``metadata["compression"]``
        describes the method and its memory per word.
    reference : Embedding
        The uncompressed embedding it stands for: the input, aligned to ``like`` when one was given
        (what its k-NN overlap is measured against).
    transform : str
        The transform quantized through, as spelled by the caller (``"none"`` without one).
    """

    embedding: Embedding
    reference: Embedding
    transform: str = "none"

    @property
    def method(self) -> str:
        """How the entries were quantized, in a few words: the transform, the uniform clip or the number format.

        Returns
        -------
        str
            ``"hadamard+ocs:0.03"``, ``"clip 1.234"`` or ``"fp8_e4m3fn"``.
        """
        if self.transform != "none":
            return self.transform
        info = self.embedding.metadata["compression"]
        return f"clip {info['clip']:.4g}" if "clip" in info else str(info.get("format", ""))

    @property
    def bits_per_word(self) -> float:
        """Memory per word of the compressed embedding, in bits (its codes, transforms included).

        Returns
        -------
        float
        """
        return self.embedding.metadata["compression"]["memory_bits_per_word"]


def compress_like(emb: Embedding, like: Embedding | None = None, bits: int | None = None, *,
                  format: Format | str | None = None, transform: str | None = None, rounding: str = "nearest",
                  seed: Any = None, progress: bool = False) -> CompressResult:
    """Compress one embedding, as the newer member of a pair when ``like`` (the older one) is given.

    This is ``embstab compress IN OUT [--like OLD]``. With ``like``, ``emb`` is first rotated onto
    it (orthogonal Procrustes on the shared words, see :meth:`Embedding.align_to`) and quantized
    on the grid chosen on ``like``: the uniform clip found on ``like``, and through a transform,
    ``like``'s outlier splits (the same ``seed`` gives the same rotation for both members).
    Compressing ``like`` itself with the same settings and no ``like`` gives the other member.
    Without ``like`` the grid is ``emb``'s own.

    Parameters
    ----------
    emb : Embedding
        The embedding to compress.
    like : Embedding, optional
        The older member of the pair, of the same dimension and sharing words with ``emb``.
    bits : int, optional
        Uniform bit rate (see :func:`quantize_embedding`).
    format : Format or str, optional
        A number format instead of uniform (see :func:`quantize_embedding`).
    transform : str, optional
        Around uniform quantization (see :func:`embstab.compress.transforms.parse_transform`):
        ``"hadamard"``, ``"orthogonal"``, ``"ocs:R"``, a rotation and OCS joined by ``+``,
        ``"tt:R"`` or ``"none"``; recorded in the metadata as spelled.
    rounding : str, default "nearest"
        Rounding mode (any of :data:`embstab.lowprec.ROUNDINGS`).
    seed : int or torch.Generator, optional
        Randomness of stochastic rounding and of the rotation. Through a transform None is 0 (the
        rotation is reproducible); otherwise None is torch's default generator.
    progress : bool, default False
        Progress bar for the clip search.

    Returns
    -------
    CompressResult
        The compressed embedding (with its codes), the uncompressed one it stands for, and the
        transform.

    Raises
    ------
    TransformError
        A transform with a number format (transforms apply to uniform quantization), or a
        malformed one.
    ValueError
        For contradictory or unsupported bits/format (a :class:`~embstab.errors.ConfigError`).
    ShapeError
        For an empty embedding, or ``like`` of another dimension.
    VocabularyError
        When ``emb`` and ``like`` share too few words to align.
    """
    rounding = check_rounding(rounding)
    t = parse_transform(transform)
    kind, spec, _ = resolve_storage(bits, format, None)  # bits with a format: checked against its width
    if not t.is_identity and kind != "uniform":
        raise TransformError(f"compression transform {t.name!r} applies to uniform quantization (bits=), not format=")
    reference = emb if like is None else emb.align_to(like)
    if t.is_identity:
        clip = optimal_clip(like.vectors, spec, progress=progress) if like is not None and kind == "uniform" else None
        out = compress_embedding(reference, spec if kind == "uniform" else None,
                                 format=None if kind == "uniform" else spec, clip=clip, rounding=rounding, seed=seed,
                                 progress=progress)
        return CompressResult(out, reference)
    name = transform if isinstance(transform, str) else t.name
    # the grid (clip, splits) is chosen on the first member: like's, or emb's own
    res = transform_quantize_pair((reference if like is None else like).vectors, reference.vectors, spec, t,
                                  rounding=rounding, seed=0 if seed is None else seed)
    return CompressResult(_with_codes(reference, res.new, _transform_metadata(spec, name, rounding, res),
                                      res.stored[1]), reference, name)


def save_compressed(emb: Embedding | CompressedData, path: str | os.PathLike, bits: int | None = None, *,
                    format: Format | str | None = None, clip: float | None = None, rounding: str = "nearest",
                    seed: Any = None) -> None:
    """Write a bit-packed compressed file (``.esq``), loadable with :func:`embstab.load`.

    An embedding returned by :func:`compress_embedding`/:func:`compress_pair` (or codes from
    :func:`quantize_embedding`) is written as is; with ``bits`` or ``format`` any embedding is
    quantized first. A plain embedding without either is stored losslessly as float32.

    Parameters
    ----------
    emb : Embedding or CompressedData
        What to write.
    path : str or os.PathLike
        Destination (replaced atomically).
    bits : int, optional
        Quantize with this uniform bit rate first.
    format : Format or str, optional
        Quantize to this number format first.
    clip, rounding, seed
        As in :func:`quantize_embedding`, used only when quantizing here.

    Raises
    ------
    ValueError
        For contradictory or unsupported bits/format/clip.
    """
    if isinstance(emb, Embedding) and (bits is not None or format is not None):
        emb = quantize_embedding(emb, bits, format=format, clip=clip, rounding=rounding, seed=seed)
    write_compressed(emb, path)

"""Transforms applied around uniform quantization of an embedding pair.

A *transform* changes what is quantized, not how: ``"hadamard"`` / ``"orthogonal"`` rotate both
members with the same random rotation before quantizing and rotate back (outliers that sit in a
few dimensions are spread over all of them), ``"ocs:R"`` splits the ``ceil(R d)`` dimensions holding
the largest values of the old member in half (the same dimensions for both members), and
``"tt:R"`` replaces each member by a tensor train of inner rank ``R`` whose cores are quantized.
``"none"`` is plain uniform quantization. Each transform reports the memory it really needs per
word, which is what a budget compares, and keeps its codes in the coordinates it quantized in
(:class:`StoredCodes`), so a ``.esq`` file of the result holds that many bits per word.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from embstab.compress.uniform import optimal_clip, uniform_quantize
from embstab.errors import ConfigError, EmbstabError, lookup
from embstab.io.compressed import CompressedData, StoredTransform, uniform_table
from embstab.recipes.ocs import ocs_split
from embstab.recipes.rotation import random_hadamard, random_orthogonal
from embstab.recipes.tt import suggest_tt_shape, tt_decompose

__all__ = ["Transform", "TransformError", "TRANSFORMS", "StoredCodes", "TransformedPair", "parse_transform",
           "transform_quantize_pair"]


class TransformError(ConfigError):
    """A compression transform that is malformed or cannot apply to this pair."""


#: Transform kinds and what their parameter means.
TRANSFORMS: dict[str, str] = {
    "none": "plain uniform quantization",
    "hadamard": "randomized Hadamard rotation of both members, quantize, rotate back",
    "orthogonal": "random orthogonal rotation of both members, quantize, rotate back",
    "ocs": "ocs:R — split the ceil(R*d) largest dimensions (chosen on old) in half, quantize, merge",
    "tt": "tt:R — tensor-train cores of inner rank R, quantized; rows rebuilt from the cores",
}


@dataclass(frozen=True)
class Transform:
    """A parsed transform: an optional rotation, then optional OCS; or a tensor train alone.

    Attributes
    ----------
    rotation : {"hadamard", "orthogonal"} or None
    ocs : float or None
        OCS expand ratio in (0, 1).
    tt_rank : int or None
        Inner TT rank.
    """

    rotation: str | None = None
    ocs: float | None = None
    tt_rank: int | None = None

    @property
    def is_identity(self) -> bool:
        """True for plain uniform quantization."""
        return self.rotation is None and self.ocs is None and self.tt_rank is None

    @property
    def name(self) -> str:
        """The canonical spelling (``"none"``, ``"hadamard+ocs:0.03"``, ``"tt:8"``)."""
        parts = ([self.rotation] if self.rotation else []) + ([f"ocs:{self.ocs:g}"] if self.ocs else [])
        parts += [f"tt:{self.tt_rank}"] if self.tt_rank else []
        return "+".join(parts) or "none"


def _parse_step(step: str, spec: str) -> tuple[str, float | None]:
    kind, _, arg = step.strip().partition(":")
    lookup(TRANSFORMS, kind, "compression transform")
    if kind in ("none", "hadamard", "orthogonal"):
        if arg:
            raise TransformError(f"compression transform {kind!r} takes no parameter, got {spec!r}")
        return kind, None
    try:
        value = float(arg)
    except ValueError:
        raise TransformError(f"compression transform {spec!r}: {TRANSFORMS[kind]}") from None
    if not math.isfinite(value):  # int() of it would raise OverflowError, or compare as nothing
        raise TransformError(f"compression transform {spec!r}: the parameter must be a finite number, got {arg}")
    if kind == "ocs" and not 0 < value < 1:
        raise TransformError(f"OCS expand ratio must lie in (0, 1), got {arg}")
    if kind == "tt" and (value != int(value) or value < 1):
        raise TransformError(f"TT rank must be a positive integer, got {arg}")
    return kind, value


def parse_transform(spec: str | Transform | None) -> Transform:
    """Parse ``"none"``, ``"hadamard"``, ``"orthogonal"``, ``"ocs:R"``, ``"tt:R"`` or a rotation and
    OCS joined by ``+`` (``"hadamard+ocs:0.03"``: rotate, then split, quantize, merge, rotate back).

    Parameters
    ----------
    spec : str or Transform or None
        The spelling (``None`` is ``"none"``); a :class:`Transform` is returned as is.

    Returns
    -------
    Transform

    Raises
    ------
    UnknownNameError
        An unknown transform kind.
    TransformError
        A missing or out-of-range parameter (OCS ratio in (0, 1), TT rank a positive integer), or a
        combination that does not compose (two rotations, TT with anything else).
    """
    if spec is None:
        return Transform()
    if isinstance(spec, Transform):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise TransformError(f"a compression transform is a name such as 'hadamard' or 'ocs:0.05', got {spec!r}")
    steps = [_parse_step(step, spec) for step in spec.split("+")]
    kinds = [k for k, _ in steps if k != "none"]
    if len(kinds) != len(set(kinds)) or ("hadamard" in kinds and "orthogonal" in kinds):
        raise TransformError(f"compression transform {spec!r} repeats a step; use at most one rotation and one OCS")
    if "tt" in kinds and len(kinds) > 1:
        raise TransformError(f"compression transform {spec!r}: a tensor train stands alone")
    values = dict(steps)
    rotation = next((k for k in kinds if k in ("hadamard", "orthogonal")), None)
    return Transform(rotation, values.get("ocs"), int(values["tt"]) if "tt" in values else None)


@dataclass
class TransformedPair:
    """Dequantized pair after a transform, what it costs, and the codes that are stored.

    Attributes
    ----------
    old, new : numpy.ndarray
        Dequantized vectors, float32, in the original coordinates: exactly what the stored codes
        decode to.
    bits_per_word : float
        Stored bits per word (extra OCS dimensions, Hadamard padding, TT cores spread over rows).
    details : dict
        What the transform chose (clip, channels split, TT shape), for the embedding's metadata.
    stored : tuple of StoredCodes
        The old and new members' codes in the transformed coordinates.
    """

    old: np.ndarray
    new: np.ndarray
    bits_per_word: float
    details: dict[str, Any]
    stored: tuple[StoredCodes, StoredCodes]


@dataclass
class StoredCodes:
    """One member's codes as a compressed file holds them, before a vocabulary is attached.

    Attributes
    ----------
    codes : numpy.ndarray
        ``(n, columns)`` codes of the transformed table (float32 values at 32 bits).
    bits : int
    table : numpy.ndarray or None
        Value of each code (None at 32 bits or for a tensor train, whose cores carry clips).
    transform : StoredTransform
        How the codes map back to the original coordinates.
    """

    codes: np.ndarray
    bits: int
    table: np.ndarray | None
    transform: StoredTransform

    def to_data(self, words: list[str], counts: Any = None, name: str | None = None,
                metadata: dict[str, Any] | None = None) -> CompressedData:
        """The codes with a vocabulary, ready for :func:`embstab.io.compressed.write_compressed`.

        Parameters
        ----------
        words : list of str
            One word per row.
        counts : array_like, optional
        name : str, optional
        metadata : dict, optional

        Returns
        -------
        CompressedData
        """
        return CompressedData(list(words), self.codes, self.bits, self.table, counts=counts, name=name,
                              metadata=dict(metadata or {}), transform=self.transform)

    def decode(self) -> np.ndarray:
        """The table these codes stand for, in the original coordinates.

        Returns
        -------
        numpy.ndarray
            float32 ``(n, dim)``.
        """
        return self.to_data([""] * len(self.codes)).decode()


def _codes_of(values: np.ndarray, bits: int, clip: float) -> tuple[np.ndarray, np.ndarray | None]:
    """Level indices of values that lie on the uniform grid, and the grid's value table."""
    if bits >= 32:
        return np.asarray(values, np.float32), None
    n = 2 ** bits - 1
    if clip == 0:
        codes = np.full(values.shape, n // 2)
    else:
        # values are q * step - clip with integer q: the division recovers q to within rounding
        codes = np.clip(np.rint((values + clip) * (n / (2 * clip))), 0, n)
    return codes.astype(np.uint8 if bits <= 8 else np.uint16), uniform_table(bits, clip)


def _rotation_seed(seed: Any) -> int:
    """The integer seed of the rotation: a generator draws it as the rotation recipes do."""
    if isinstance(seed, torch.Generator):
        return int(torch.randint(0, 2**62, (1,), generator=seed))
    return 0 if seed is None else int(seed)


def _quantize_both(A: np.ndarray, B: np.ndarray, bits: int, rounding: str, gen: Any) -> tuple[np.ndarray, np.ndarray, float]:
    # the pair protocol: the clip is old's, so both members share one grid
    clip = optimal_clip(A, bits) if bits < 32 else float(np.abs(A).max())
    return (uniform_quantize(A, bits, clip=clip, rounding=rounding, seed=gen),
            uniform_quantize(B, bits, clip=clip, rounding=rounding, seed=gen), clip)


def _half_splits(splits: list[tuple[int, int]], X: np.ndarray) -> np.ndarray:
    """Apply a recorded sequence of half splits (made on another matrix) to ``X``'s columns."""
    cols = [X[:, i].copy() for i in range(X.shape[1])]
    for src, new in splits:
        if new != len(cols):
            raise TransformError("OCS splits must append their new dimension, as ocs_split records them")
        cols[src] = cols[src] / 2
        cols.append(cols[src].copy())
    return np.stack(cols, axis=1)


def transform_quantize_pair(old: np.ndarray, new: np.ndarray, bits: int, transform: str | Transform,
                            rounding: str = "nearest", seed: Any = None) -> TransformedPair:
    """Quantize an aligned pair uniformly at ``bits`` through ``transform``.

    The codes are kept in the transformed coordinates (``stored``); the dequantized members are
    what those codes decode to, so a file written from them reads back the same vectors.

    Parameters
    ----------
    old, new : numpy.ndarray, shape (n_old, d) and (n_new, d)
        The pair, ``new`` already aligned onto ``old``'s coordinates.
    bits : int
        Bits per stored value (32: clipping only, stored as float32).
    transform : str or Transform
        See :func:`parse_transform`.
    rounding : {"nearest", "stochastic"}
    seed : int or torch.Generator, optional
        Seed of the rotation and of stochastic rounding; a generator first draws the rotation's
        integer seed, which is what a compressed file records.

    Returns
    -------
    TransformedPair

    Raises
    ------
    TransformError
        A TT transform on a table too small to factor.
    """
    t = parse_transform(transform)
    A, B = np.asarray(old, np.float64), np.asarray(new, np.float64)
    if t.tt_rank is not None:
        return _tt_pair(A, B, bits, t.tt_rank, rounding, seed)
    details: dict[str, Any] = {}
    d = A.shape[1]
    rot_seed = None
    if t.rotation is not None:
        rot_seed = _rotation_seed(seed)
        R = random_hadamard(d, rot_seed) if t.rotation == "hadamard" else random_orthogonal(d, rot_seed)
        A, B = A @ R, B @ R
        details["rotation"] = t.rotation
        details["rotation_seed"] = rot_seed
    splits: list[tuple[int, int]] = []
    if t.ocs is not None:
        split = ocs_split(A, float(t.ocs), axis=1, split="half")
        A, B, splits = split.values, _half_splits(split.splits, B), list(split.splits)
        details["dimensions_split"] = len(splits)
    qa, qb, details["clip"] = _quantize_both(A, B, bits, rounding, seed)
    # stored: the (rotated, split) coordinates; R is regenerated from its seed
    bits_per_word = float(A.shape[1] * bits)
    how = StoredTransform(d, t.rotation, rot_seed, splits)
    stored = tuple(StoredCodes(codes, bits, table, how)
                   for codes, table in (_codes_of(q, bits, details["clip"]) for q in (qa, qb)))
    return TransformedPair(stored[0].decode(), stored[1].decode(), bits_per_word, details, stored)


def _tt_pair(A: np.ndarray, B: np.ndarray, bits: int, rank: int, rounding: str, seed: Any) -> TransformedPair:
    d = A.shape[1]
    stored, params = [], []
    for X in (A, B):
        try:
            shape = suggest_tt_shape(X.shape[0], d, ranks=rank)
            fit = tt_decompose(X, shape)
        except EmbstabError as exc:
            raise TransformError(f"tt:{rank} cannot factor a {X.shape[0]} x {d} table: {exc}") from None
        # each core on its own grid: the two members' cores live in different gauges
        codes, clips = [], []
        for c in fit.cores:
            flat = c.reshape(-1, c.shape[-1])
            clip = optimal_clip(flat, bits) if bits < 32 else 0.0
            q = uniform_quantize(flat, bits, clip=clip, rounding=rounding, seed=seed) if bits < 32 else flat
            codes.append(_codes_of(q, bits, clip)[0].reshape(c.shape))
            clips.append(clip)
        how = StoredTransform(d, tt_cores=codes, tt_clips=clips if bits < 32 else None)
        stored.append(StoredCodes(np.zeros((X.shape[0], 0), np.float32 if bits >= 32 else np.uint8), bits, None, how))
        params.append(fit.num_parameters)
    per_word = max(params[0] / A.shape[0], params[1] / B.shape[0]) * bits
    return TransformedPair(stored[0].decode(), stored[1].decode(), float(per_word),
                           {"tt_rank": rank, "tt_parameters": params,
                            "tt_shape": {"p": list(fit.shape.p), "q": list(fit.shape.q)}}, tuple(stored))

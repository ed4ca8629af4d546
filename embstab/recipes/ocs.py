"""Outlier channel splitting (OCS): halve the channel holding the largest weight and duplicate it.

For ``y = W x`` the column (input channel) with the largest ``|w|`` is halved and appended as a new
column; duplicating the matching input keeps the function unchanged while the range the quantizer
must cover shrinks. Repeating ``ceil(r * C)`` times (new columns stay candidates) expands the layer
by a ratio ``r``. Three ways to split a column ``w``:

- ``"half"``: ``(w/2, w/2)``;
- ``"quant_aware"``: ``(w/2 - step/4, w/2 + step/4)`` on the quantizer's grid, so the merged sum
  errs by at most ``step/2`` as plain rounding does (halving alone allows up to ``step``);
- ``"gram"``: ``(w/sqrt(2), w/sqrt(2))``, for embedding dimensions: the only split that keeps
  ``X X^T`` (every Gram-based measure) unchanged.

The quantizer is the symmetric linear one OCS was published with: ``scale = (2**(b-1) - 1) / alpha``,
round half to even, clamp to ``[-alpha, alpha]``; it has a zero level, unlike
:class:`embstab.lowprec.UniformFormat`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from embstab.errors import ConfigError, ShapeError, lookup
from embstab.recipes.registry import CheckResult, register_recipe

__all__ = ["OCS_SPLITS", "OCSError", "OCSSplit", "OCSResult", "ocs_split", "ocs_merge", "ocs_quantize",
           "symmetric_quantize", "mse_clip", "check_ocs"]

#: Split rules (name -> description).
OCS_SPLITS = {
    "half": "(w/2, w/2): the function is unchanged",
    "quant_aware": "(w/2 - step/4, w/2 + step/4) on the quantizer grid: merged error <= step/2",
    "gram": "(w/sqrt 2, w/sqrt 2): keeps X X^T for embedding dimensions",
}


#: Bad OCS parameters: expand ratio, bit width, clip or a missing grid step.
#: A :class:`~embstab.errors.ConfigError` under the name this module has always raised.
OCSError = ConfigError


@dataclass
class OCSSplit:
    """A split matrix and how to undo it.

    Attributes
    ----------
    values : numpy.ndarray
        The split matrix (float64), ``C + len(splits)`` channels along ``axis``.
    splits : list of (int, int)
        ``(source channel, new channel)`` in the order they were made.
    source_index : numpy.ndarray
        Original channel of every split channel.
    rule : str
        The split rule.
    axis : int
        The channel axis.
    """

    values: np.ndarray
    splits: list[tuple[int, int]] = field(default_factory=list)
    source_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rule: str = "half"
    axis: int = 1


@dataclass
class OCSResult:
    """Outcome of :func:`ocs_quantize`.

    Attributes
    ----------
    dequantized : numpy.ndarray
        Quantized split matrix merged back to the original shape.
    split : OCSSplit
        The quantized split matrix (``split.values``) and its bookkeeping.
    alpha : float
        Clip of the symmetric quantizer.
    columns_added : int
        Channels appended.
    rel_mse : float
        ``||W - W_hat||^2 / ||W||^2``.
    """

    dequantized: np.ndarray
    split: OCSSplit
    alpha: float
    columns_added: int
    rel_mse: float


def _check_ratio(expand_ratio: float) -> None:
    if not (isinstance(expand_ratio, (int, float)) and 0 < expand_ratio < 1):
        raise OCSError(f"expand_ratio must lie in (0, 1), got {expand_ratio!r}")


def ocs_split(W: Any, expand_ratio: float, axis: int = 1, split: str = "half", step: float | None = None) -> OCSSplit:
    """Split the channels holding the largest ``|w|``, ``ceil(expand_ratio * C)`` times.

    Parameters
    ----------
    W : array-like
        Weight matrix or tensor; channels along ``axis``.
    expand_ratio : float
        In (0, 1): fraction of channels to add.
    axis : int
        Channel axis (1: input channels of ``y = W x``; for embeddings, dimensions).
    split : {"half", "quant_aware", "gram"}
        Split rule (see :data:`OCS_SPLITS`).
    step : float, optional
        Quantizer grid step, required by ``"quant_aware"``.

    Returns
    -------
    OCSSplit

    Raises
    ------
    OCSError
        A ratio outside (0, 1), or ``"quant_aware"`` without a positive step.
    """
    _check_ratio(expand_ratio)
    lookup(OCS_SPLITS, split, "OCS split rule")
    if split == "quant_aware" and not (step is not None and step > 0):
        raise OCSError("the quant_aware split needs the quantizer's grid step (step > 0)")
    X = np.moveaxis(np.asarray(W, dtype=np.float64), axis, 0)
    C = X.shape[0]
    k = math.ceil(expand_ratio * C)
    chans = [X[i].copy() for i in range(C)]
    peak = [float(np.abs(c).max()) for c in chans]
    source = list(range(C))
    splits = []
    for _ in range(k):
        i = int(np.argmax(peak))
        w = chans[i]
        if split == "half":
            a = b = w / 2
        elif split == "gram":
            a = b = w / math.sqrt(2)
        else:
            a, b = w / 2 - step / 4, w / 2 + step / 4
        chans[i] = a
        chans.append(b.copy())
        peak[i] = float(np.abs(a).max())
        peak.append(float(np.abs(b).max()))
        source.append(source[i])
        splits.append((i, len(chans) - 1))
    values = np.moveaxis(np.stack(chans), 0, axis)
    return OCSSplit(values, splits, np.asarray(source, dtype=np.int64), split, axis)


def ocs_merge(split: OCSSplit, values: Any = None) -> np.ndarray:
    """Undo the splits (in reverse order): sum the copies (or ``(a + b)/sqrt 2`` for ``"gram"``).

    Parameters
    ----------
    split : OCSSplit
        The bookkeeping of :func:`ocs_split`.
    values : array-like, optional
        Values to merge instead of ``split.values`` (e.g. their quantized version).

    Returns
    -------
    numpy.ndarray
        Original shape.
    """
    V = np.asarray(split.values if values is None else values, dtype=np.float64)
    if V.shape != split.values.shape:
        raise ShapeError(f"values of shape {V.shape} do not match the split shape {split.values.shape}")
    X = list(np.moveaxis(V, split.axis, 0).copy())
    for src, new in reversed(split.splits):
        X[src] = (X[src] + X[new]) / math.sqrt(2) if split.rule == "gram" else X[src] + X[new]
        X.pop(new)
    return np.moveaxis(np.stack(X), 0, split.axis)


def symmetric_quantize(W: Any, bits: int, alpha: float) -> np.ndarray:
    """Symmetric linear quantization: ``round(w * s) / s`` clamped, ``s = (2**(bits-1) - 1) / alpha``.

    Rounding is half to even. Raises :class:`OCSError` for ``bits < 2`` or ``alpha <= 0``.

    Parameters
    ----------
    W : array-like
        Values to quantize (as float64).
    bits : int
        Bit width, at least 2: ``2**(bits-1) - 1`` levels each side of 0.
    alpha : float
        The clip, positive and finite.

    Returns
    -------
    numpy.ndarray
        The quantized values, same shape as ``W``, in ``[-alpha, alpha]``.
    """
    if not (isinstance(bits, int) and bits >= 2):
        raise OCSError(f"bits must be an int >= 2, got {bits!r}")
    if not (alpha > 0 and math.isfinite(alpha)):
        raise OCSError(f"clip alpha must be positive and finite, got {alpha!r}")
    levels = 2 ** (bits - 1) - 1
    s = levels / alpha
    return np.clip(np.round(np.asarray(W, dtype=np.float64) * s), -levels, levels) / s


def mse_clip(W: Any, bits: int, grid: int = 100) -> float:
    """The clip among ``max|W| * (1..grid)/grid`` with the least quantization MSE.

    Parameters
    ----------
    W : array-like
        Values to quantize, not all zero.
    bits : int
        Bit width, at least 2.
    grid : int, default 100
        Number of candidate clips.

    Returns
    -------
    float
        The best clip (the smallest on ties).

    Raises
    ------
    OCSError
        For ``bits`` below 2, or an all-zero ``W`` (no positive clip).
    """
    W = np.asarray(W, dtype=np.float64)
    top = float(np.abs(W).max())
    best = min(((float(np.sum((W - symmetric_quantize(W, bits, top * g / grid)) ** 2)), top * g / grid)
                for g in range(1, grid + 1)))
    return best[1]


def _alpha(W: np.ndarray, bits: int, clip: str | float) -> float:
    if isinstance(clip, str):
        lookup({"max": 0, "mse": 0}, clip, "OCS clip")
        return float(np.abs(W).max()) if clip == "max" else mse_clip(W, bits)
    if not (0 < clip <= 1):
        raise OCSError(f"a numeric clip is a fraction of max|W| in (0, 1], got {clip!r}")
    return float(clip) * float(np.abs(W).max())


def ocs_quantize(W: Any, bits: int, expand_ratio: float, clip: str | float = "max", split: str = "quant_aware",
                 axis: int = 1) -> OCSResult:
    """OCS then symmetric quantization, merged back.

    Pass one splits naively (halves) to set the clip ``alpha`` on the split matrix; for
    ``split="quant_aware"`` pass two re-splits on that grid (step ``alpha / (2**(bits-1) - 1)``).

    Parameters
    ----------
    W : array-like
        Weights, channels along ``axis``.
    bits : int
        Quantizer bits (>= 2).
    expand_ratio : float
        In (0, 1).
    clip : {"max", "mse"} or float
        ``alpha`` = max of the split matrix, its MSE-optimal clip, or this fraction of its max.
    split : {"half", "quant_aware", "gram"}
        Split rule of the final pass.
    axis : int
        Channel axis.

    Returns
    -------
    OCSResult
    """
    W = np.asarray(W, dtype=np.float64)
    if not (isinstance(bits, int) and bits >= 2):
        raise OCSError(f"bits must be an int >= 2, got {bits!r}")
    first = ocs_split(W, expand_ratio, axis, "gram" if split == "gram" else "half")
    alpha = _alpha(first.values, bits, clip)
    sp = first
    if split == "quant_aware":
        sp = ocs_split(W, expand_ratio, axis, "quant_aware", step=alpha / (2 ** (bits - 1) - 1))
    q = symmetric_quantize(sp.values, bits, alpha)
    merged = ocs_merge(sp, q)
    out = OCSSplit(q, sp.splits, sp.source_index, sp.rule, sp.axis)
    return OCSResult(merged, out, alpha, len(sp.splits), float(np.sum((W - merged) ** 2) / np.sum(W ** 2)))


@register_recipe("ocs", "Outlier channel splitting before symmetric quantization (half, quantization-aware, Gram splits)",
                 ("ocs_split", "ocs_merge", "ocs_quantize"))
def check_ocs(seed: int = 0) -> CheckResult:
    """OCS vs clipping on 512 x 512 Student-t(3) and Laplace matrices at 4 and 8 bits.

    Parameters
    ----------
    seed : int
        Seed of the matrices.

    Returns
    -------
    CheckResult
        One row per (matrix, bits, method, r): relMSE, clip and columns added.
    """
    rng = np.random.default_rng(seed)
    mats = {"student_t3": rng.standard_t(3, (512, 512)), "laplace": rng.laplace(size=(512, 512))}
    ratios = (0.01, 0.02, 0.05, 0.10)
    rows = []
    for name, W in mats.items():
        for bits in (4, 8):
            top = float(np.abs(W).max())
            for method, alpha in (("no_clip", top), ("mse_clip", mse_clip(W, bits))):
                err = float(np.sum((W - symmetric_quantize(W, bits, alpha)) ** 2) / np.sum(W ** 2))
                rows.append({"matrix": name, "bits": bits, "method": method, "r": 0.0, "rel_mse": err,
                             "alpha_over_max": alpha / top, "columns_added": 0})
            for rule in ("half", "quant_aware"):
                for r in ratios:
                    res = ocs_quantize(W, bits, r, clip="max", split=rule)
                    rows.append({"matrix": name, "bits": bits, "method": f"ocs_{rule}", "r": r,
                                 "rel_mse": res.rel_mse, "alpha_over_max": res.alpha / top,
                                 "columns_added": res.columns_added})
    t = pd.DataFrame(rows)

    def get(m, b, method, r=None):
        s = t[(t.matrix == m) & (t.bits == b) & (t.method == method)]
        return s if r is None else float(s[s.r == r].rel_mse.iloc[0])

    beats_noclip = all((get(m, b, f"ocs_{rule}").rel_mse < get(m, b, "no_clip").rel_mse.iloc[0]).all()
                       for m in mats for b in (4, 8) for rule in ("half", "quant_aware"))
    qa_le_naive = all(get(m, b, "ocs_quant_aware", r) <= get(m, b, "ocs_half", r) + 1e-12
                      for m in mats for b in (4, 8) for r in ratios)
    # Where OCS and clipping cross depends on the few largest entries, which vary from seed to seed.
    # Over 92 seeds (0-49, 100-109, 1000-1029, 12345, 987654) the 8-bit win at r >= 0.05 was
    # >= 1.12x (at r = 0.02 the Laplace matrix went either way, down to 0.97x) and the 4-bit loss
    # at r <= 0.02 >= 1.61x (at r = 0.1 a Student-t(3) draw with a huge outlier favoured OCS, 0.89x).
    beats_clip8 = all(get(m, 8, "ocs_quant_aware", r) < get(m, 8, "mse_clip").rel_mse.iloc[0]
                      for m in mats for r in ratios if r >= 0.05)
    clip_wins4 = all(get(m, 4, f"ocs_{rule}", r) > get(m, 4, "mse_clip").rel_mse.iloc[0]
                     for m in mats for rule in ("half", "quant_aware") for r in ratios if r <= 0.02)
    X = rng.standard_normal((200, 16))
    X[:, 3] *= 10
    g = ocs_split(X, 0.25, split="gram")
    claims = {
        "OCS beats no clipping at every r": bool(beats_noclip),
        "quantization-aware split <= naive split": bool(qa_le_naive),
        "at 8 bits OCS (QA, r >= .05) beats the MSE-optimal clip": bool(beats_clip8),
        "at 4 bits clipping beats OCS at r <= .02": bool(clip_wins4),
        "columns added are 6 / 11 / 26 / 52 for 512 channels":
            get("laplace", 8, "ocs_half").columns_added.tolist() == [6, 11, 26, 52],
        "the 1/sqrt(2) split preserves X X^T": bool(np.allclose(g.values @ g.values.T, X @ X.T, rtol=1e-12, atol=1e-9)),
        "merging undoes every split": bool(np.allclose(ocs_merge(g), X, atol=1e-12)),
    }
    return CheckResult("ocs", t, claims, seed)

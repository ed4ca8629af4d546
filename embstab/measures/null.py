"""What a measure gives for an unrelated partner, and whether a pair is clearly apart from that.

A value means little on its own: the EIS of two tables whose rows have nothing to do with each
other is about 1 − d/n when the pair is its own anchor, and the k-NN overlap of such tables is
about k/n. A pair whose value sits at that level says nothing about stability, whatever its size.

The *null* of a pair is the measure between side a and side b with b's rows shuffled (with b's
anchor shuffled the same way): a partner with exactly b's vectors, spectrum and anchor, assigned
to unrelated words. Its mean over a few seeded shuffles is the null value, their spread its noise.

A pair shows *signal* when it is both

* at least :data:`NULL_FOLD` times farther than its null from the uninformative end: for a
  similarity (k-NN, overlaps, CKA) the value is at least twice the null; for a distance (EIS,
  PIP loss, displacement) at most half of it; and
* more than :data:`NULL_NOISE` standard deviations of the shuffles away from the null.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np

from embstab.measures.registry import MeasureInfo

__all__ = ["NULL_FOLD", "NULL_NOISE", "NullLevel", "permutation_null", "has_signal", "shuffled_rows"]

#: How many times farther from the uninformative end than its null a pair must be.
NULL_FOLD = 2.0
#: How many standard deviations of the shuffled partners a pair must be away from their mean.
NULL_NOISE = 3.0


@dataclass(frozen=True)
class NullLevel:
    """A measure's value for unrelated partners of a pair.

    Attributes
    ----------
    value : float
        Mean over the shuffled partners.
    spread : float
        Their standard deviation (0 with one shuffle).
    samples : int
        Number of shuffles.
    """

    value: float
    spread: float
    samples: int


def shuffled_rows(arr: Any, order: np.ndarray) -> Any:
    """``arr``'s rows in ``order``, on its own device and library.

    Parameters
    ----------
    arr : array
        A 2-D array (numpy, torch or cupy).
    order : numpy.ndarray
        A permutation of its row indices.

    Returns
    -------
    array
        A new array of the same library and device.
    """
    xp = array_api_compat.array_namespace(arr)
    index = xp.asarray(order, device=array_api_compat.device(arr))
    return xp.take(arr, index, axis=0)


def permutation_null(infos: Sequence[MeasureInfo], x: Any, y: Any, *, samples: int = 3, seed: int = 0,
                     anchors: Sequence[Callable[[np.ndarray], tuple[Any, Any]] | None] | None = None,
                     params: Sequence[dict[str, Any]] | None = None) -> list[NullLevel]:
    """Each measure between ``x`` and row-shuffled copies of ``y``.

    Every shuffle is evaluated by all the measures in turn, so inside
    :func:`~embstab.measures.shared_products` they share its spans and cross products as they do
    for the pair itself.

    Parameters
    ----------
    infos : sequence of MeasureInfo
        The measures.
    x, y : arrays
        The pair, row-aligned (numpy, torch or cupy).
    samples : int, default 3
        Number of shuffles.
    seed : int, default 0
        Seed of the shuffles (a local generator; the global one is not touched).
    anchors : sequence, optional
        Per measure, for those that need anchors: a function that, given a row order, returns
        the anchors of side x and of the shuffled side y (b's anchor shuffled the same way).
    params : sequence of dict, optional
        Per measure, its parameters.

    Returns
    -------
    list of NullLevel
        One per measure.
    """
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    anchors = list(anchors) if anchors is not None else [None] * len(infos)
    params = list(params) if params is not None else [{}] * len(infos)
    rng = np.random.default_rng(seed)
    values: list[list[float]] = [[] for _ in infos]
    for _ in range(samples):
        order = rng.permutation(int(x.shape[0]))
        partner = shuffled_rows(y, order)
        for i, info in enumerate(infos):
            pair = anchors[i](order) if info.needs_anchors and anchors[i] is not None else None
            values[i].append(info.evaluate(x, partner, anchors=pair, **params[i]))
    return [NullLevel(float(np.mean(v)), float(np.std(v, ddof=1)) if samples > 1 else 0.0, samples)
            for v in values]


def _fold(info: MeasureInfo, value: float, null: float) -> float:
    low = info.range[0]  # the uninformative end of a similarity, the identical end of a distance
    if info.larger_is_more_stable:
        return (value - low) / (null - low) if null > low else math.inf
    return (null - low) / (value - low) if value > low else math.inf


def has_signal(info: MeasureInfo, value: float, null: NullLevel) -> bool:
    """Whether ``value`` is clearly apart from its null, on the stable side.

    Parameters
    ----------
    info : MeasureInfo
        The measure.
    value : float
        The pair's value.
    null : NullLevel
        Its null.

    Returns
    -------
    bool
        False also when either number is not finite.
    """
    if not (math.isfinite(value) and math.isfinite(null.value)):
        return False
    toward_stable = value > null.value if info.larger_is_more_stable else value < null.value
    apart = abs(value - null.value) > NULL_NOISE * null.spread
    return bool(toward_stable and apart and _fold(info, value, null.value) >= NULL_FOLD)

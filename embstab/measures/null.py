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

Where the shuffle's average has a closed form (:func:`closed_form_null`: EIS, k-NN, eigenspace
overlap, PIP loss) it is computed exactly instead of sampled, from the d×d products the measures
share, so it costs about one more evaluation of the measure and has no sampling noise;
:func:`null_levels` picks it where it exists and shuffles for the other measures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import array_api_compat
import numpy as np

from embstab._numbers import is_integer
from embstab.errors import ConfigError
from embstab.measures._backend import basis, column_mean, cross, one_blas_thread
from embstab.measures.registry import MeasureInfo

__all__ = ["NULL_FOLD", "NULL_NOISE", "MAX_NULL_SAMPLES", "check_null_samples", "NullLevel", "permutation_null",
           "closed_form_null", "null_levels", "CLOSED_FORM_MEASURES", "has_signal", "shuffled_rows"]

#: How many times farther from the uninformative end than its null a pair must be.
NULL_FOLD = 2.0
#: How many standard deviations of the shuffled partners a pair must be away from their mean.
NULL_NOISE = 3.0
#: The most shuffles a null may draw. Each costs one more evaluation of every sampled measure (the
#: closed forms cost none), so 10,000 is already hours on a large pair, while the null's noise
#: falls only as 1/√samples; a billion ran out of memory holding the values.
MAX_NULL_SAMPLES = 10_000


def check_null_samples(samples: object, what: str = "null_samples", allow_zero: bool = True) -> int:
    """Refuse a number of shuffles that is not an integer from 0 (or 1) to :data:`MAX_NULL_SAMPLES`.

    Parameters
    ----------
    samples : int
        The number asked for.
    what : str, default "null_samples"
        The name of the setting, for the message; ``""`` leaves it out (argparse names the flag).
    allow_zero : bool, default True
        Whether 0 (no null) is allowed.

    Returns
    -------
    int
        ``samples``, when it is in range.

    Raises
    ------
    ConfigError
        If ``samples`` is not an integer in range.
    """
    low = 0 if allow_zero else 1
    if not is_integer(samples) or not low <= samples <= MAX_NULL_SAMPLES:
        zero = " (0 skips the null)" if allow_zero else ""
        name = f"{what} " if what else ""
        raise ConfigError(f"{name}must be an integer from {low} to {MAX_NULL_SAMPLES}{zero}, got {samples!r}")
    return int(samples)


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
        Number of shuffles (0 for a closed form).
    method : {"permutation", "closed form"}
        Sampled shuffles, or the exact average over all shuffles with the spread of
        :func:`closed_form_null`.
    """

    value: float
    spread: float
    samples: int
    method: str = "permutation"


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

    Raises
    ------
    ConfigError
        If ``samples`` is not an integer from 1 to :data:`MAX_NULL_SAMPLES`.
    """
    check_null_samples(samples, "samples", allow_zero=False)
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


# --------------------------------------------------------------------------------------------
# closed forms: the average over *all* shuffles, and their spread
#
# Shuffling side b's rows by a permutation Π turns each random part of these measures into
# tr(A Π B Πᵀ) for fixed n×n symmetric matrices A (side a) and B (side b), all of low rank
# L M Lᵀ with L made of the compared matrices times small factors. Over uniform permutations
# E[Π B Πᵀ] = β I + γ (J − I) with β = tr B / n and γ = (1ᵀB1 − tr B) / (n(n − 1)) (J all ones),
# so the average is exact. The spread treats Π as a random rotation of the centred rows (it fixes
# the all-ones direction): exact for the part linear in Π, an approximation for the quadratic
# part (good when no few rows dominate a span).

#: Measures whose null has a closed form (the others are sampled by shuffling).
CLOSED_FORM_MEASURES = ("eis", "knn", "eigenspace_overlap", "pip_loss")


def _host(a: Any) -> np.ndarray:
    """A small array as float64 numpy on the host."""
    if array_api_compat.is_numpy_array(a):
        return np.asarray(a, dtype=np.float64)
    if array_api_compat.is_torch_array(a):
        return a.detach().cpu().double().numpy()
    return np.asarray(a.get(), dtype=np.float64)  # cupy


class _Products:
    """Cross products and column sums of the compared matrices (shared with the measures)."""

    def __init__(self, xp: Any, arrays: Sequence[Any], dtype: str | None) -> None:
        self.xp, self.arrays, self.dtype = xp, list(arrays), dtype
        self.n = int(arrays[0].shape[0])
        self._cross: dict[tuple[int, int], np.ndarray] = {}
        self._sums: dict[int, np.ndarray] = {}

    def cross(self, i: int, j: int) -> np.ndarray:
        if (i, j) not in self._cross:
            if (j, i) in self._cross:
                return self._cross[(j, i)].T
            # inside shared_products() the measures' own products are reused
            self._cross[(i, j)] = _host(cross(self.xp, self.arrays[i], self.arrays[j], self.dtype))
        return self._cross[(i, j)]

    def sums(self, i: int) -> np.ndarray:
        if i not in self._sums:
            self._sums[i] = _host(column_mean(self.xp, self.arrays[i], self.dtype)).ravel() * self.n
        return self._sums[i]


@dataclass(frozen=True)
class _Op:
    """The n×n symmetric matrix L M Lᵀ, L = [Z_i T_i ...] (Z_i compared matrices, T_i small)."""

    blocks: tuple[tuple[int, np.ndarray], ...]
    m: np.ndarray


def _gram(p: _Products, a: _Op, b: _Op) -> np.ndarray:
    return np.block([[ta.T @ p.cross(i, j) @ tb for j, tb in b.blocks] for i, ta in a.blocks])


def _ones(p: _Products, a: _Op) -> np.ndarray:
    return np.concatenate([t.T @ p.sums(i) for i, t in a.blocks])  # Lᵀ1


def _permuted_trace(p: _Products, terms: Sequence[tuple[_Op, _Op]]) -> tuple[float, float]:
    """Mean (exact) and standard deviation of Σ tr(A Π B Πᵀ) over uniform permutations Π."""
    n = p.n
    m = n - 1  # the centred rows, which a permutation moves around
    h = 1.0 / math.sqrt(n)
    parts = []
    for a, b in terms:
        info = []
        for op in (a, b):
            g = _gram(p, op, op)
            one = _ones(p, op) * h  # Lᵀh, h the unit all-ones vector
            info.append((op, one, float(np.sum(op.m * g.T)), float(one @ op.m @ one)))  # tr(op), hᵀ op h
        parts.append(info)
    mean = 0.0
    for (_, _, tr_a, hh_a), (_, _, tr_b, hh_b) in parts:
        beta = tr_b / n
        gamma = (n * hh_b - tr_b) / (n * (n - 1))
        mean += beta * tr_a + gamma * (n * hh_a - tr_a)

    def centred(x: tuple, y: tuple) -> tuple[float, float, float, float]:
        # for the parts of x and y on the centred rows: tr(x⊥ y⊥), tr(x⊥), tr(y⊥), and (x h)⊥·(y h)⊥
        (ox, hx, _, _), (oy, hy, _, _) = x, y
        g = _gram(p, ox, oy) - np.outer(hx, hy)
        gxx = _gram(p, ox, ox) - np.outer(hx, hx)
        gyy = _gram(p, oy, oy) - np.outer(hy, hy)
        return (float(np.sum((ox.m @ g) * (g @ oy.m))), float(np.sum(ox.m * gxx.T)), float(np.sum(oy.m * gyy.T)),
                float(hx @ ox.m @ g @ oy.m @ hy))

    c = 2.0 / ((m - 1) * (m + 2))  # a random rotation: Cov tr(AQBQᵀ), tr(CQDQᵀ) = c · tr(ĀC̄) tr(B̄D̄)
    var = 0.0
    for j, (aj, bj) in enumerate(parts):
        for aa, bb in parts[j:]:
            tra, ta1, ta2, va = centred(aj, aa)
            trb, tb1, tb2, vb = centred(bj, bb)
            cov = 4.0 * va * vb / m + c * (tra - ta1 * ta2 / m) * (trb - tb1 * tb2 / m)
            var += cov if aa is aj else 2.0 * cov
    return mean, math.sqrt(max(var, 0.0))


def _projector(p: _Products, i: int, w: Any) -> _Op:
    w = _host(w)
    return _Op(((i, w),), np.eye(w.shape[1]))


def _minus_sandwich(p: _Products, proj: _Op, i: int, k_mat: np.ndarray) -> _Op:
    """S − PS − SP for S = Z_i K Z_iᵀ and a projector P = U Uᵀ, as one low-rank matrix."""
    (j, w), = proj.blocks
    uk = w.T @ p.cross(j, i) @ k_mat  # (UᵀZ_i) K
    zero = np.zeros((w.shape[1], w.shape[1]))
    return _Op(((j, w), (i, np.eye(k_mat.shape[0]))), np.block([[zero, -uk], [-uk.T, k_mat]]))


def _eis_null(xp: Any, x: Any, y: Any, pair: tuple[Any, Any], params: dict[str, Any]) -> NullLevel:
    fa, fb = pair
    dtype, rtol, method = params.get("dtype"), params.get("rtol"), params.get("method", "auto")
    p = _Products(xp, [x, y, fa.anchor, fb.anchor], dtype)
    u, v = _projector(p, 0, basis(xp, x, dtype, rtol, method).w), _projector(p, 1, basis(xp, y, dtype, rtol, method).w)
    common = max(fa.log_scale, fb.log_scale)  # the common scale eis() puts both anchors on
    wa, wb = (math.exp(2 * f.alpha * (f.log_scale - common)) for f in (fa, fb))
    ka, kb = wa * _host(fa.k_mat), wb * _host(fb.k_mat)
    den = wa * fa.weight + wb * fb.weight
    # fixed parts tr(P Sa P), tr(P̃ Sb P̃); random parts tr(Sa Q) − 2 tr(P Sa Q) with Q = Π P̃ Πᵀ and
    # tr(P Π Sb Πᵀ) − 2 tr(P Π Sb P̃ Πᵀ) (side b's anchor moves with its rows)
    ua = u.blocks[0][1].T @ p.cross(0, 2)
    vb = v.blocks[0][1].T @ p.cross(1, 3)
    fixed = float(np.sum((ua @ ka) * ua) + np.sum((vb @ kb) * vb))
    mean, sd = _permuted_trace(p, [(_minus_sandwich(p, u, 2, ka), v), (u, _minus_sandwich(p, v, 3, kb))])
    return NullLevel(min(max((fixed + mean) / den, 0.0), 1.0), sd / den, 0, "closed form")


def _overlap_null(xp: Any, x: Any, y: Any, params: dict[str, Any]) -> NullLevel:
    dtype, rtol = params.get("dtype"), params.get("rtol")
    p = _Products(xp, [x, y], dtype)
    su, sv = basis(xp, x, dtype, rtol), basis(xp, y, dtype, rtol)
    size = max(su.rank, sv.rank)
    mean, sd = _permuted_trace(p, [(_projector(p, 0, su.w), _projector(p, 1, sv.w))])
    return NullLevel(min(mean / size, 1.0), sd / size, 0, "closed form")


def _pip_null(xp: Any, x: Any, y: Any, params: dict[str, Any]) -> NullLevel:
    # PIP² = ‖XᵀX‖² + ‖YᵀY‖² − 2 tr(XXᵀ Π YYᵀ Πᵀ); PIP = √PIP² to second order (delta method)
    dtype = params.get("dtype")
    p = _Products(xp, [x, y], dtype)
    fixed = float(np.sum(p.cross(0, 0) ** 2) + np.sum(p.cross(1, 1) ** 2))
    ex = _Op(((0, np.eye(x.shape[1])),), np.eye(x.shape[1]))
    ey = _Op(((1, np.eye(y.shape[1])),), np.eye(y.shape[1]))
    mean, sd = _permuted_trace(p, [(ex, ey)])
    sq, sq_sd = max(fixed - 2 * mean, 0.0), 2 * sd
    if sq == 0.0:
        return NullLevel(0.0, 0.0, 0, "closed form")
    root = math.sqrt(sq)
    return NullLevel(max(root - sq_sd**2 / (8 * sq * root), 0.0), sq_sd / (2 * root), 0, "closed form")


def _tied_rows(a: Any) -> bool:
    """Whether two rows of ``a`` have the same direction (a cosine tie, e.g. after 1-bit rounding)."""
    rows = _host(a)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit = np.round(rows / np.where(norms == 0, 1.0, norms), 9) + 0.0  # + 0.0 turns -0.0 into 0.0
    return bool(np.unique(unit, axis=0).shape[0] < unit.shape[0])


def _knn_null(x: Any, y: Any, params: dict[str, Any]) -> NullLevel | None:
    # a shuffled partner's k neighbours of a query are k rows drawn at random from the n − 1 others:
    # the overlap count is hypergeometric, its mean k²/(n − 1); queries taken as independent
    n = int(x.shape[0])
    k = params.get("k", 5)
    if not isinstance(k, (int, np.integer)) or not 1 <= k < n:
        return None  # the measure itself refuses it
    if _tied_rows(x) or _tied_rows(y):
        # ties are broken by row number on both sides, which a shuffle does not keep random: the
        # shuffled overlap is then above k/(n − 1) (measured: 0.017 against 0.015 for 1-bit 4-d rows)
        return None
    q = params.get("n_queries", 1000)
    q = n if q is None else min(int(q), n)
    others = n - 1
    var = k * (k / others) * ((others - k) / others) * ((others - k) / max(others - 1, 1))
    return NullLevel(k / others, math.sqrt(var / k**2 / max(q, 1)), 0, "closed form")


@one_blas_thread
def closed_form_null(info: MeasureInfo, x: Any, y: Any, *, anchors: tuple[Any, Any] | None = None,
                     params: dict[str, Any] | None = None) -> NullLevel | None:
    """A measure's null (the average over all row shuffles of side b) in closed form, if it has one.

    The average is exact: EIS and the eigenspace overlap from the spans and anchors the measures
    already compute, the PIP loss from its Gram matrices (to second order in the square root),
    k-NN as k/(n − 1) (a shuffled partner's neighbours are random rows) unless rows tie in
    direction. The spread is the standard deviation over shuffles: exact for parts linear in the
    shuffle, otherwise that of a random rotation of the centred rows (within about 10 % of the
    shuffles' at n = 14 to 300); for k-NN that of independent queries (about 20 % below the
    shuffles' when every row is a query).

    Parameters
    ----------
    info : MeasureInfo
        The measure.
    x, y : arrays
        The pair, row-aligned (numpy, torch or cupy).
    anchors : (AnchorFactors, AnchorFactors), optional
        EIS's anchor factors of side x and side y (y's are shuffled with y).
    params : dict, optional
        The measure's parameters (as :meth:`MeasureInfo.evaluate` takes them).

    Returns
    -------
    NullLevel or None
        None for a measure without a closed form here (:data:`CLOSED_FORM_MEASURES`), with
        fewer than 4 rows, or k-NN on rows that tie in direction.
    """
    n = int(x.shape[0])
    if info.name not in CLOSED_FORM_MEASURES or n < 4:
        return None
    kwargs = {**info.defaults, **(params or {})}
    xp = array_api_compat.array_namespace(x, y)
    if info.name == "knn":
        return _knn_null(x, y, kwargs)
    if info.name == "eis":
        if anchors is None or not all(hasattr(f, "k_mat") for f in anchors):
            return None
        return _eis_null(xp, x, y, anchors, kwargs)
    if info.name == "eigenspace_overlap":
        return _overlap_null(xp, x, y, kwargs)
    return _pip_null(xp, x, y, kwargs)


def null_levels(infos: Sequence[MeasureInfo], x: Any, y: Any, *, samples: int = 3, seed: int = 0,
                anchors: Sequence[tuple[Any, Any] | None] | None = None,
                params: Sequence[dict[str, Any]] | None = None, method: str = "auto") -> list[NullLevel | None]:
    """Each measure's null: in closed form where there is one, else from seeded row shuffles.

    Parameters
    ----------
    infos : sequence of MeasureInfo
        The measures.
    x, y : arrays
        The pair, row-aligned (numpy, torch or cupy).
    samples : int, default 3
        Shuffles for the measures sampled by shuffling; 0 leaves their null out (None).
    seed : int, default 0
        Seed of the shuffles.
    anchors : sequence, optional
        Per measure, its anchor factors ``(side x, side y)`` for those that need anchors.
    params : sequence of dict, optional
        Per measure, its parameters.
    method : {"auto", "permutation"}
        ``auto``: :func:`closed_form_null` where it exists; ``permutation``: shuffle for every measure.

    Returns
    -------
    list of NullLevel or None
        One per measure.

    Raises
    ------
    ConfigError
        If ``method`` is unknown or ``samples`` is not an integer from 0 to :data:`MAX_NULL_SAMPLES`.
    """
    check_null_samples(samples, "samples")
    if method not in ("auto", "permutation"):
        raise ConfigError(f"method must be 'auto' or 'permutation', got {method!r}")
    anchors = list(anchors) if anchors is not None else [None] * len(infos)
    params = list(params) if params is not None else [{}] * len(infos)
    out: list[NullLevel | None] = [
        closed_form_null(info, x, y, anchors=anchors[i], params=params[i]) if method == "auto" else None
        for i, info in enumerate(infos)]
    rest = [i for i, level in enumerate(out) if level is None]
    if rest and samples > 0:
        sampled = permutation_null([infos[i] for i in rest], x, y, samples=samples, seed=seed,
                                   anchors=[_shuffled_anchors(anchors[i]) for i in rest],
                                   params=[params[i] for i in rest])
        for i, level in zip(rest, sampled):
            out[i] = level
    return out


def _shuffled_anchors(pair: tuple[Any, Any] | None):
    # side b's anchor is shuffled with b: an unrelated partner comes with its own anchor. The k×k
    # factor of an anchor does not depend on its row order, so only the rows are permuted.
    if pair is None:
        return None
    fa, fb = pair
    return lambda order: (fa, replace(fb, anchor=shuffled_rows(fb.anchor, order)))


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

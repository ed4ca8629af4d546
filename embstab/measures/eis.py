"""Eigenspace instability (EIS), after Leszczynski et al. (MLSys 2020).

    EIS(X, X̃) = tr[(P − P̃) Σ (P − P̃)] / tr(Σ),   Σ = (E Eᵀ)^α + (Ẽ Ẽᵀ)^α,
    P = U Uᵀ (U an orthonormal basis of col(X)),  P̃ likewise for X̃.

With G = V R^α for an anchor E = V R Wᵀ we have (E Eᵀ)^α = G Gᵀ, so each anchor contributes
‖(P − P̃) G‖²_F = ‖UᵀG‖² + ‖ŨᵀG‖² − 2⟨UᵀG, (UᵀŨ) ŨᵀG⟩ and no n×n matrix is ever formed.
The anchors' G factors do not depend on X, so they are computed once and cached: a sweep
compares dozens of pairs against the same two anchors.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import array_api_compat

from embstab.errors import ConfigError, ShapeError
from embstab.measures._backend import (FLOAT32_TRUST, as_float, basis_overlap, check_pair, checked_sketch,
                                       cross, crosses, grams, namespace, one_blas_thread, rows_matmul,
                                       span, sq_norm)

__all__ = ["AnchorFactors", "anchor_factors", "eis", "clear_anchor_cache", "FLOAT32_TRUST"]



@dataclass(frozen=True)
class AnchorFactors:
    """What EIS needs of an anchor E (n×k): a k×k matrix ``k_mat`` and two scalars.

    With ``c`` the anchor's scale, ``(E Eᵀ)^α = c^{2α} · E k_mat Eᵀ`` and
    ``tr((E Eᵀ)^α) = c^{2α} · weight``. The scale is kept in log space (``log_scale``) and
    restored only as a ratio when two anchors are combined, so α = 3 (r⁶) neither overflows nor
    underflows. No n-sized array beyond the anchor itself is kept.

    For integer α ≥ 1, ``k_mat = (EᵀE / c²)^{α−1} / c²`` with c² = ‖EᵀE‖_F: k×k products, no
    eigendecomposition. Otherwise ``k_mat = M Mᵀ`` with ``M = W (s / s_max)^α`` from the span of E
    (V R^α = E M), and c = s_max.

    Where ``k_mat`` has a known square root (odd integer α, and the singular-vector route),
    ``k_root`` holds it, ``k_mat = k_root k_rootᵀ``, and EIS uses it directly: ``k_mat`` itself is
    then formed only when asked for (once; copies of these factors share it).
    """

    anchor: Any
    k_root: Any
    weight: float
    log_scale: float
    alpha: float
    n_rows: int
    _k_mat: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def k_mat(self) -> Any:
        """The k×k matrix K with ``(E Eᵀ)^α = c^{2α} · E K Eᵀ``."""
        k = self._k_mat.get("k")
        if k is None:
            k = self._k_mat["k"] = self.k_root @ self.k_root.T
        return k


_CACHE: dict[int, tuple[weakref.ref, tuple, AnchorFactors]] = {}
_CACHE_LOCK = threading.Lock()


def _fingerprint(xp, anchor, alpha: float, dtype: str, sketch) -> tuple:
    # A cheap content check so an anchor edited in place is not served stale factors: the
    # anchor's sketch (row-weighted column sums, see checked_sketch) reduced with column weights.
    k = int(anchor.shape[1])
    columns = xp.arange(k, dtype=xp.float64, device=array_api_compat.device(sketch))
    weights = xp.astype((columns * math.sqrt(2.0)) % 1.0 - 0.5, sketch.dtype)
    return (tuple(anchor.shape), str(anchor.dtype), alpha, dtype, float(xp.sum(xp.reshape(sketch, (-1,)) * weights)),
            float(sq_norm(xp, as_float(xp, anchor[:1], dtype))))


def anchor_factors(anchor: Any, alpha: float = 3.0, dtype: str | None = None, cache: bool = True,
                   method: str = "auto") -> AnchorFactors:
    """Factor an anchor embedding for :func:`eis` (cached per anchor array).

    Parameters
    ----------
    anchor : array of shape (n, k)
        The anchor embedding restricted to the compared words, row-aligned with them (numpy,
        torch or cupy).
    alpha : float, default 3.0
        Exponent of the anchor's Gram matrix (the paper uses 3), finite and ≥ 0.
    dtype : {"float64", "float32"}, optional
        Working precision (float64 by default).
    cache : bool, default True
        Reuse the factors of an identical anchor array seen before in this process.
    method : {"auto", "qr", "gram"}, default "auto"
        ``auto``: for integer α ≥ 1 the Gram matrix to the power α − 1 (no eigendecomposition);
        otherwise the anchor's singular vectors from its Gram matrix (α ≥ 1) or a QR (α < 1).
        ``qr``/``gram`` force the singular-vector route (see :func:`embstab.measures._backend.span`).

    Returns
    -------
    AnchorFactors
        The k×k matrix and scalars EIS needs, referring to ``anchor``.

    Raises
    ------
    ValueError
        If ``alpha`` is negative or not finite.
    ShapeError
        If the anchor is not a non-empty finite 2-D array, or is all zeros.
    """
    return _factor_set((anchor,), alpha, dtype, cache, method)[0]


@one_blas_thread
def _factor_set(anchors: tuple, alpha: float, dtype: str | None, cache: bool, method: str) -> tuple:
    """:func:`anchor_factors` of each anchor (or the :class:`AnchorFactors` given in its place).

    The anchors are checked and looked up in the cache in order; the Gram matrices of those still
    to factor are then made side by side (one per core on 2 cores), as EIS needs both anchors.
    """
    if not (alpha >= 0 and math.isfinite(alpha)):
        raise ConfigError(f"alpha must be a finite number >= 0, got {alpha}")
    alpha = float(alpha)
    dtype = dtype or "float64"
    out: list = []
    todo: list = []  # (position, namespace, anchor, fingerprint) of the anchors to factor
    for anchor in anchors:
        if isinstance(anchor, AnchorFactors):
            if anchor.alpha != alpha:
                raise ConfigError(f"anchor factors were computed with alpha={anchor.alpha}, not {alpha}")
            out.append(anchor)
            continue
        xp = namespace(anchor)
        sketch = checked_sketch(xp, anchor, "anchor", dtype)  # the check and the fingerprint's pass in one
        fp = _fingerprint(xp, anchor, alpha, dtype, sketch) if cache else None
        if cache:
            with _CACHE_LOCK:
                hit = _CACHE.get(id(anchor))
            if hit is not None and hit[0]() is anchor and hit[1] == fp:
                out.append(replace(hit[2], anchor=anchor))
                continue
        out.append(None)
        todo.append((len(out) - 1, xp, anchor, fp))
    unique = list({id(a): (xp, a) for _, xp, a, _ in todo}.values())  # the same array given twice: factored once
    if _power_route(alpha, method) and len({xp.__name__ for xp, _ in unique}) == 1:
        made = _power_factor_set(unique[0][0], [a for _, a in unique], int(alpha), dtype)
    else:
        made = [_span_factors(xp, a, alpha, dtype, method) for xp, a in unique]
    factors = {id(a): f for (_, a), f in zip(unique, made)}
    for position, _, anchor, fp in todo:
        out[position] = factors[id(anchor)]
        if cache:
            _remember(anchor, fp, factors[id(anchor)])
    return tuple(out)


def _remember(anchor: Any, fp: tuple, factors: AnchorFactors) -> None:
    key = id(anchor)
    try:
        ref = weakref.ref(anchor, lambda _r, k=key: _CACHE.pop(k, None))
    except TypeError:  # some array types cannot be weakly referenced: do not cache them
        return
    with _CACHE_LOCK:  # stored without the array itself, so the cache never keeps an anchor alive
        _CACHE[key] = (ref, fp, replace(factors, anchor=None))


def _power_route(alpha: float, method: str) -> bool:
    """Whether the factors come from powers of the Gram matrix (integer α ≥ 1) rather than singular vectors."""
    return method == "auto" and alpha.is_integer() and 1 <= alpha <= 64


def _span_factors(xp, anchor: Any, alpha: float, dtype: str, method: str) -> AnchorFactors:
    # any α: the anchor's singular vectors and values
    sp = span(xp, anchor, dtype, method="gram" if method == "auto" and alpha >= 1 else method)
    if sp.rank == 0:
        raise ShapeError("anchor is all zeros")
    rmax = float(sp.s[0])
    scaled = (sp.s / rmax) ** alpha
    m = sp.w * scaled
    return AnchorFactors(anchor=anchor, k_root=m, weight=float(xp.sum(scaled * scaled)), log_scale=math.log(rmax),
                         alpha=alpha, n_rows=int(anchor.shape[0]))


def _power_factor_set(xp, anchors: list, alpha: int, dtype: str) -> list[AnchorFactors]:
    # (E Eᵀ)^α = E (EᵀE)^{α−1} Eᵀ: the k×k Gram matrix to a power replaces the eigendecomposition.
    # The anchors' Gram matrices, and for α = 3 their squares, are made side by side.
    scaled = [_scaled_gram(xp, gram) for gram in grams(xp, anchors, dtype)]
    out = []
    if alpha == 3:  # N², a Gram product of the symmetric N, gives tr(N³) = ⟨N², N⟩
        squares = grams(xp, [normalized for normalized, _ in scaled], dtype)
    for i, (anchor, (normalized, c2)) in enumerate(zip(anchors, scaled)):
        common = {"anchor": anchor, "log_scale": 0.5 * math.log(c2), "alpha": float(alpha),
                  "n_rows": int(anchor.shape[0])}
        if alpha % 2 == 1 and alpha > 1:
            # odd α = 2m + 1: K = N^{2m} / c² = R Rᵀ with R = N^m / c (N symmetric), so EIS needs no
            # k×k power beyond N^m and tr(N^α) = ⟨N^m, N^m N⟩
            root = normalized
            for _ in range(alpha // 2 - 1):
                root = root @ normalized
            top = squares[i] if alpha == 3 else cross(xp, root, normalized, dtype)  # N^{m+1}
            weight = float(xp.vecdot(xp.reshape(top, (-1,)), xp.reshape(root, (-1,))))
            out.append(AnchorFactors(k_root=root / math.sqrt(c2), weight=weight, **common))
            continue
        if alpha == 1:
            power = xp.eye(normalized.shape[0], dtype=normalized.dtype, device=array_api_compat.device(normalized))
        else:  # N^{α−1} with α − 2 products (not α − 1 starting from the identity)
            power = normalized
            for _ in range(alpha - 2):
                power = power @ normalized
        weight = float(xp.sum(power * normalized))  # tr(N^α); N and its powers are symmetric
        out.append(AnchorFactors(k_root=None, weight=weight, _k_mat={"k": power / c2}, **common))
    return out


def _scaled_gram(xp, gram: Any) -> tuple[Any, float]:
    """``(N, c²)``: the Gram matrix over its Frobenius norm c² = ‖EᵀE‖_F, and that norm."""
    # a Gram matrix's largest entry is on its diagonal (|gᵢⱼ| ≤ √(gᵢᵢ gⱼⱼ))
    biggest = float(xp.max(xp.linalg.diagonal(gram)))
    if biggest == 0.0:
        raise ShapeError("anchor is all zeros")
    if not math.isfinite(biggest):  # (entries are finite: the anchor was checked)
        raise ShapeError("anchor's Gram matrix overflows: scale the anchor down")
    flat = xp.reshape(gram, (-1,))
    c2 = math.sqrt(float(xp.vecdot(flat, flat)))  # ‖EᵀE‖_F in one pass...
    if not (math.isfinite(c2) and c2 >= biggest):  # ...unless its squares overflow or underflow
        c2 = biggest * math.sqrt(float(sq_norm(xp, gram / biggest)))
    return gram / c2, c2


def clear_anchor_cache() -> None:
    """Forget every cached anchor factorisation."""
    with _CACHE_LOCK:
        _CACHE.clear()


@one_blas_thread
def eis(
    X: Any,
    Y: Any,
    anchor_x: Any,
    anchor_y: Any,
    alpha: float = 3.0,
    *,
    dtype: str | None = None,
    rtol: float | None = None,
    method: str = "auto",
) -> float:
    """Eigenspace instability between two row-aligned embeddings (smaller = more stable).

    Parameters
    ----------
    X, Y : (n, d) and (n, d̃) arrays
        The two embeddings, rows aligned on the same n words (numpy, torch or cupy).
    anchor_x, anchor_y : (n, k) arrays or :class:`AnchorFactors`
        The anchors of each side (the paper: the highest-dimension full-precision embedding of
        the same algorithm and seed on each corpus), row-aligned with X and Y.
    alpha : float, default 3.0
        Exponent applied to the anchors' Gram matrices.
    dtype : {"float64", "float32"}, optional
        Working precision; float64 by default. Inputs may be stored in either.
    rtol : float, optional
        Relative tolerance below which singular directions of X or Y count as rank deficiency.
    method : {"auto", "qr", "gram"}
        How spans are computed (QR up to 40M entries, then the Gram matrix: no n×d copy).

    Returns
    -------
    float in [0, 1]. 0 means identical column spans; the value depends on X and Y only through
    their column spans (invariant to any invertible X → XM).
    """
    xp = check_pair(X, Y)
    n = X.shape[0]
    fx, fy = _factor_set((anchor_x, anchor_y), alpha, dtype, True, method)
    for f, name in ((fx, "anchor_x"), (fy, "anchor_y")):
        if f.n_rows != n:
            raise ShapeError(f"{name} has {f.n_rows} rows but X and Y have {n}: anchors must be row-aligned "
                             "with the compared words")
        if array_api_compat.device(f.anchor) != array_api_compat.device(X):
            raise ShapeError(f"{name} is on a different device than X")
    num, size, den = _eis_terms(xp, X, Y, fx, fy, dtype, rtol, method)
    if (dtype or "float64") != "float64" and num < FLOAT32_TRUST * size:
        # The value is a difference of nearly equal terms: in float32 its relative error grows as
        # eps32·size/num. Below the trust ratio the float32 result could be off by more than 1e-3,
        # so the pair is measured again in float64 (inputs stay in their dtype; products upcast).
        f64x, f64y = _factor_set((fx.anchor, fy.anchor), fx.alpha, "float64", True, method)
        num, size, den = _eis_terms(xp, X, Y, f64x, f64y, "float64", rtol, method)
    value = num / den
    # round-off can leave tiny negatives or overshoot; the quantity is a ratio in [0, 1]
    return min(max(value, 0.0), 1.0)


def _eis_terms(xp, X, Y, fx: AnchorFactors, fy: AnchorFactors, dtype: str | None, rtol: float | None,
               method: str) -> tuple[float, float, float]:
    """EIS's numerator, the size of the terms it is the difference of, and its denominator."""
    su, sv, c = basis_overlap(xp, X, Y, dtype, rtol, method)  # EIS depends on X only through U Uᵀ; c = UᵀŨ
    # put both anchors on a common scale (the larger r_max) so the weights stay comparable
    common = max(fx.log_scale, fy.log_scale)
    num = size = den = 0.0
    for f in (fx, fy):
        w = math.exp(2 * f.alpha * (f.log_scale - common))
        xe, ye = crosses(xp, [X, Y], f.anchor, dtype)
        a = rows_matmul(xp, su.w.T, xe)  # UᵀE
        b = rows_matmul(xp, sv.w.T, ye)  # ŨᵀE
        if f.k_root is not None:
            # K = R Rᵀ: tr(A K Aᵀ) = ‖A R‖², tr(Aᵀ C B K) = ⟨A R, C B R⟩
            # [A; B] R as (Rᵀ [A; B]ᵀ)ᵀ: split over R's k rows the product keeps both cores busy
            # where [A; B] has few (2d ≪ k; at d = 100 and k = 800, 4.0 ms instead of 6.9)
            stacked = rows_matmul(xp, f.k_root.T, xp.concat([a, b], axis=0).T).T
            ar, br = stacked[: a.shape[0]], stacked[a.shape[0]:]
            t_a, t_b, t_ab = float(sq_norm(xp, ar)), float(sq_norm(xp, br)), float(xp.sum(ar * rows_matmul(xp, c, br)))
        else:
            ak, bk = a @ f.k_mat, b @ f.k_mat
            # tr((P − P̃) E K Eᵀ (P − P̃)) = tr(A K Aᵀ) + tr(B K Bᵀ) − 2 tr(Aᵀ C B K)
            t_a, t_b, t_ab = float(xp.sum(ak * a)), float(xp.sum(bk * b)), float(xp.sum(a * (c @ bk)))
        num += w * (t_a + t_b - 2 * t_ab)
        size += w * (t_a + t_b)
        den += w * f.weight
    return num, size, den

"""Measures between two embeddings that are compared through their decoded distances.

Hyperbolic embeddings (and products of hyperbolic, Euclidean and spherical factors) are not
compared by linear algebra on their coordinates, as word vectors are: two embeddings of the same
nodes are compared row by row through the distances each decodes (``distances_from(i)``, at the
embedding's own working precision). For each evaluated node i:

* **k-NN overlap** — ``|kNN_a(i) ∩ kNN_b(i)| / k``, neighbours by decoded distance (1 = stable);
* **MAP** — average precision of b's ranking of all other nodes at recovering a's k nearest
  neighbours (ties pessimistic: every node tied with a neighbour counts as ranked before it);
* **distortion** — of b's distances measured against a's: the mean of ``|d_b/d_a − 1|`` (average
  distortion) and max(d_b/d_a)·max(d_a/d_b) over all evaluated pairs (worst-case distortion).

Everything is streamed one row at a time (memory O(n)); rows may be sampled. The ranking and
distortion primitives (:func:`average_precision`, :func:`row_distortion`) are also what
:func:`embstab.hyperbolic.evaluate` scores an embedding against its graph with.

Any object with ``nodes``, ``len()`` and ``distances_from(i)`` can be measured; its ``geometry``
attribute says which registry measures apply (``"hyperbolic"``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, Sequence

import numpy as np
from tqdm.auto import tqdm

from embstab.errors import ConfigError, ShapeError, lookup
from embstab.measures._backend import _memoized

__all__ = ["DistanceRows", "DistanceInstability", "DEFAULT_K", "TIE_BITS", "TIE_RULES", "snap", "average_precision",
           "row_distortion", "select_rows", "embedding_instability", "hyperbolic_knn", "hyperbolic_map",
           "distortion_avg", "distortion_worst"]

#: Decoded distances are compared after rounding to this many mantissa bits (~1e-12 relative),
#: so pairs that are equal in exact arithmetic tie however the evaluation path rounded them.
TIE_BITS = 40
#: How :func:`average_precision` ranks a neighbour against nodes at the same distance.
TIE_RULES = {"pessimistic": "pessimistic", "optimistic": "optimistic", "order": "order"}
#: Neighbours per node of the registry's k-NN measures unless ``k`` is given (capped at n − 1).
DEFAULT_K = 10


class DistanceRows(Protocol):
    """What the measures of this module need from an embedding."""

    nodes: np.ndarray

    def __len__(self) -> int: ...

    def distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        """Decoded distances from point ``i`` to all points (or to ``targets``).

        Parameters
        ----------
        i : int
            Row index of the source point.
        targets : numpy.ndarray, optional
            Row indices of the target points (default: all, in row order).

        Returns
        -------
        numpy.ndarray
            float64 distances, one per target.
        """
        ...


def snap(d: np.ndarray, bits: int | None = TIE_BITS) -> np.ndarray:
    """Round positive floats to ``bits`` mantissa bits (relative grid); NaN becomes +inf.

    Parameters
    ----------
    d : numpy.ndarray
        Distances.
    bits : int or None, default 40
        Mantissa bits kept (None: no rounding).

    Returns
    -------
    numpy.ndarray
    """
    d = np.where(np.isnan(d), np.inf, np.asarray(d, dtype=np.float64))
    if bits is None:
        return d
    m, e = np.frexp(d)
    with np.errstate(invalid="ignore"):
        out = np.ldexp(np.round(m * 2.0 ** bits) / 2.0 ** bits, e)
    return np.where(np.isfinite(d), out, d)


def average_precision(dist: np.ndarray, self_index: int, neighbors: np.ndarray,
                      ties: str = "pessimistic", tie_bits: int | None = TIE_BITS) -> float:
    """AP of one node: how well the ranking by ``dist`` puts its ``neighbors`` first.

    AP = mean over neighbours b of ``|neighbours ranked ≤ b| / rank(b)``, self excluded. NaN
    distances rank last.

    Parameters
    ----------
    dist : numpy.ndarray
        Distances from the node to every node.
    self_index : int
        The node itself (excluded from the ranking).
    neighbors : numpy.ndarray of int
        The relevant nodes (non-empty).
    ties : {"pessimistic", "optimistic", "order"}, default "pessimistic"
        Distances equal to ``tie_bits`` mantissa bits tie. ``"pessimistic"``: every node tied with
        b counts as ranked before it — the ball form ``|N ∩ ball| / |ball|`` with ball = {v ≠ a:
        d(a,v) ≤ d(a,b)}; ``"optimistic"``: only strictly closer nodes count before b;
        ``"order"``: ties broken by node id (an ``argsort`` ranking).
    tie_bits : int or None, default 40
        See :func:`snap`.

    Returns
    -------
    float

    Raises
    ------
    UnknownNameError
        If ``ties`` is not a tie rule.
    """
    ties = lookup(TIE_RULES, ties, "tie rule")
    d = snap(dist, tie_bits)
    if ties == "order":
        keep = np.ones(len(d), dtype=bool)
        keep[self_index] = False
        ids = np.flatnonzero(keep)
        order = ids[np.lexsort((ids, d[ids]))]
        is_nb = np.zeros(len(d), dtype=bool)
        is_nb[neighbors] = True
        ranks = np.flatnonzero(is_nb[order]) + 1
        return float(np.mean(np.arange(1, len(ranks) + 1) / ranks))
    others = np.sort(np.delete(d, self_index))
    dn = np.sort(d[neighbors])
    if ties == "pessimistic":
        ball = np.searchsorted(others, dn, side="right")
        hits = np.searchsorted(dn, dn, side="right")
    else:
        ball = np.searchsorted(others, dn, side="left") + 1
        hits = np.searchsorted(dn, dn, side="left") + 1
    return float(np.mean(hits / ball))


def row_distortion(d_true: np.ndarray, d_hat: np.ndarray) -> tuple[float, float, float, int, int]:
    """Distortion terms of one row: (mean ``|d̂−d|/d``, max d̂/d, max d/d̂, n_used, n_bad).

    Pairs with d = 0 (self) or d = inf (other component) are skipped; pairs with d̂ ∈ {0, NaN,
    ±inf} are skipped and counted as bad.

    Parameters
    ----------
    d_true : numpy.ndarray
        Reference distances of the row.
    d_hat : numpy.ndarray
        Distances to score against them.

    Returns
    -------
    tuple
        ``(mean_rel, expansion, contraction, n_used, n_bad)``; the first three are NaN when no
        pair is usable.
    """
    ok_true = np.isfinite(d_true) & (d_true > 0)
    good = ok_true & np.isfinite(d_hat) & (d_hat > 0)
    n_bad = int(np.count_nonzero(ok_true & ~good))
    if not good.any():
        return np.nan, np.nan, np.nan, 0, n_bad
    r = d_hat[good] / d_true[good]
    return float(np.mean(np.abs(r - 1))), float(r.max()), float((1 / r).max()), int(r.size), n_bad


def select_rows(n: int, rows: int | Sequence[int] | None, seed: int = 0) -> np.ndarray:
    """All rows (``None``), ``rows`` distinct random rows (an int; local RNG), or given ids.

    Parameters
    ----------
    n : int
        Number of rows there are.
    rows : int, sequence of int or None
        What to evaluate.
    seed : int, default 0
        Seed of the random sample.

    Returns
    -------
    numpy.ndarray of int64

    Raises
    ------
    ShapeError
        If ``rows`` is not positive or an id is out of range.
    """
    if rows is None:
        return np.arange(n)
    if isinstance(rows, (int, np.integer)):
        if rows <= 0:
            raise ShapeError(f"rows must be positive, got {rows}")
        if rows >= n:
            return np.arange(n)
        return np.sort(np.random.default_rng(seed).choice(n, size=int(rows), replace=False))
    r = np.asarray(rows, dtype=np.int64)
    if r.size and (r.min() < 0 or r.max() >= n):
        raise ShapeError(f"row ids must be in [0, {n}), got range [{r.min()}, {r.max()}]")
    return r


@dataclass(frozen=True)
class DistanceInstability:
    """How far two embeddings of the same nodes disagree, by their decoded distances.

    Attributes
    ----------
    knn_overlap : float
        Mean ``|kNN_a(i) ∩ kNN_b(i)| / k`` (0–1; 1 = stable).
    map : float
        Mean average precision of b's ranking at recovering a's k nearest neighbours (0–1).
    d_avg : float
        Mean over rows of the row mean of ``|d_b/d_a − 1|`` (0 = identical distances).
    d_wc : float
        max d_b/d_a · max d_a/d_b over the evaluated pairs (1 = a similarity).
    bad : int
        Ordered pairs where b's distance is 0, NaN or inf (left out of the distortion).
    rows : int
        Rows evaluated.
    k : int
        Neighbours per node.
    """

    knn_overlap: float
    map: float
    d_avg: float
    d_wc: float
    bad: int
    rows: int
    k: int

    def to_dict(self) -> dict[str, float | int]:
        """The fields as a plain dict (e.g. for JSON).

        Returns
        -------
        dict
        """
        return asdict(self)


def _knn(d: np.ndarray, self_index: int, k: int) -> np.ndarray:
    """k nearest by decoded distance; distances equal to 9 decimals tie and the lower node id
    wins, so two evaluations of one geometry (e.g. multiprecision vs float64) agree."""
    d = np.round(np.where(np.isnan(d), np.inf, d), 9)
    d[self_index] = np.inf
    return np.lexsort((np.arange(len(d)), d))[:k]


def _check_pair(a: DistanceRows, b: DistanceRows) -> None:
    for side, e in (("a", a), ("b", b)):
        if not callable(getattr(e, "distances_from", None)) or not hasattr(e, "nodes"):
            raise ShapeError(f"side {side} is a {type(e).__name__}, which decodes no distances (expected an "
                             "embedding of embstab.hyperbolic)")
    if len(a) != len(b):
        raise ShapeError(f"the embeddings have {len(a)} and {len(b)} points")
    if [str(x) for x in a.nodes.tolist()] != [str(x) for x in b.nodes.tolist()]:
        raise ShapeError("the embeddings list different nodes (or in another order)")


def embedding_instability(a: DistanceRows, b: DistanceRows, *, k: int = 10,
                         rows: int | Sequence[int] | None = None, seed: int = 0,
                         progress: bool = False) -> DistanceInstability:
    """k-NN overlap, neighbour MAP and distance distortion between two embeddings of the same nodes.

    Parameters
    ----------
    a, b : embeddings with ``nodes`` and ``distances_from``
        Same nodes in the same order (any models, precisions and scales); ``a`` is the reference.
    k : int, default 10
        Neighbours per node.
    rows : int or sequence of int, optional
        All rows, a random sample of this many, or these rows.
    seed : int, default 0
        Seed of the row sample.
    progress : bool, default False
        tqdm bar.

    Returns
    -------
    DistanceInstability

    Raises
    ------
    ShapeError
        If the node lists differ, ``k`` is not in [1, n−1], or ``rows`` is invalid.
    """
    _check_pair(a, b)
    n = len(a)
    if not 1 <= k < n:
        raise ShapeError(f"k must be between 1 and n-1 = {n - 1}, got {k}")
    sel = select_rows(n, rows, seed)
    overlaps, aps, avgs = [], [], []
    expand = contract = 0.0
    bad = 0
    for i in tqdm(sel, desc="instability", disable=not progress, mininterval=1):
        i = int(i)
        da, db = a.distances_from(i), b.distances_from(i)
        na, nb = _knn(da, i, k), _knn(db, i, k)
        overlaps.append(len(np.intersect1d(na, nb)) / k)
        aps.append(average_precision(db, i, na))
        da = da.copy()
        da[i] = 0.0  # the reference's zero marks the self pair, skipped below
        mean_rel, ex, co, used, nbad = row_distortion(da, db)
        bad += nbad
        if used:
            avgs.append(mean_rel)
            expand, contract = max(expand, ex), max(contract, co)
    return DistanceInstability(knn_overlap=float(np.mean(overlaps)), map=float(np.mean(aps)),
                               d_avg=float(np.mean(avgs)) if avgs else float("nan"),
                               d_wc=float(expand * contract) if avgs else float("nan"), bad=int(bad),
                               rows=int(len(sel)), k=int(k))


def _shared(a: DistanceRows, b: DistanceRows, k: int | None, rows: Any, seed: int,
            reference: str = "old") -> DistanceInstability:
    if reference not in ("old", "new"):
        raise ConfigError(f"reference must be 'old' (the first embedding) or 'new' (the second), got {reference!r}")
    if reference == "new":
        a, b = b, a  # the measures below read their first side as the reference
    if k is None:
        _check_pair(a, b)
        k = min(DEFAULT_K, len(a) - 1)
    # one streaming pass serves every measure of this module inside ``shared_products()``
    key = ("embedding_instability", int(k), None if rows is None else str(rows), int(seed))
    return _memoized(key, (a, b), lambda: embedding_instability(a, b, k=k, rows=rows, seed=seed))


def hyperbolic_knn(a: DistanceRows, b: DistanceRows, *, k: int | None = None,
                   rows: int | Sequence[int] | None = None, seed: int = 0, reference: str = "old") -> float:
    """Mean overlap of the k nearest neighbours by decoded distance (1 = stable).

    Parameters
    ----------
    a, b : embeddings with ``nodes`` and ``distances_from``
        Same nodes in the same order.
    k : int, optional
        Neighbours per node (default :data:`DEFAULT_K`, at most n − 1).
    rows : int or sequence of int, optional
        All rows, a random sample of this many, or these rows.
    seed : int, default 0
        Seed of the row sample.
    reference : {"old", "new"}, default "old"
        The member whose distances are the reference: ``"old"`` is the first embedding, ``"new"`` the
        second.

    Returns
    -------
    float
    """
    return _shared(a, b, k, rows, seed, reference).knn_overlap


def hyperbolic_map(a: DistanceRows, b: DistanceRows, *, k: int | None = None,
                   rows: int | Sequence[int] | None = None, seed: int = 0, reference: str = "old") -> float:
    """Mean average precision of b's ranking at recovering a's k nearest neighbours (1 = stable).

    Ties count pessimistically, as in the embedding papers' graph MAP: a node at the same distance
    as a neighbour counts as ranked before it. Where distances tie (the nodes of a tree often do),
    even an embedding compared with itself scores below 1; read the value against the same
    embedding's self-score, or against its null.

    Parameters
    ----------
    a, b : embeddings with ``nodes`` and ``distances_from``
        Same nodes in the same order; ``a`` defines the neighbours unless ``reference="new"``.
    k : int, optional
        Neighbours per node (default :data:`DEFAULT_K`, at most n − 1).
    rows : int or sequence of int, optional
        All rows, a random sample of this many, or these rows.
    seed : int, default 0
        Seed of the row sample.
    reference : {"old", "new"}, default "old"
        The member whose distances are the reference: ``"old"`` is the first embedding, ``"new"`` the
        second.

    Returns
    -------
    float
    """
    return _shared(a, b, k, rows, seed, reference).map


def distortion_avg(a: DistanceRows, b: DistanceRows, *, k: int | None = None,
                   rows: int | Sequence[int] | None = None, seed: int = 0, reference: str = "old") -> float:
    """Average distortion: mean of ``|d_b/d_a − 1|`` over pairs, averaged per row (0 = identical).

    Parameters
    ----------
    a, b : embeddings with ``nodes`` and ``distances_from``
        Same nodes in the same order; ``a`` is the reference unless ``reference="new"``.
    k : int, optional
        Does not change the value; it lets one pass serve the k-NN measures too.
    rows : int or sequence of int, optional
        All rows, a random sample of this many, or these rows.
    seed : int, default 0
        Seed of the row sample.
    reference : {"old", "new"}, default "old"
        The member whose distances are the reference: ``"old"`` is the first embedding, ``"new"`` the
        second.

    Returns
    -------
    float
    """
    return _shared(a, b, k, rows, seed, reference).d_avg


def distortion_worst(a: DistanceRows, b: DistanceRows, *, k: int | None = None,
                     rows: int | Sequence[int] | None = None, seed: int = 0, reference: str = "old") -> float:
    """Worst-case distortion: max d_b/d_a · max d_a/d_b over pairs (1 = a similarity).

    Parameters
    ----------
    a, b : embeddings with ``nodes`` and ``distances_from``
        Same nodes in the same order; ``a`` is the reference unless ``reference="new"``.
    k : int, optional
        Does not change the value; it lets one pass serve the k-NN measures too.
    rows : int or sequence of int, optional
        All rows, a random sample of this many, or these rows.
    seed : int, default 0
        Seed of the row sample.
    reference : {"old", "new"}, default "old"
        The member whose distances are the reference: ``"old"`` is the first embedding, ``"new"`` the
        second.

    Returns
    -------
    float
    """
    return _shared(a, b, k, rows, seed, reference).d_wc

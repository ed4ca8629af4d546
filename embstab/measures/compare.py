"""``compare``: every measure between two :class:`~embstab.Embedding` objects, as a DataFrame.

This is the one adapter from a pair of embeddings to measure values: the command line, the
study runner and notebooks all call it. It picks the compared words, aligns the rows, shares
spans and cross products between the measures and calls each through
:meth:`~embstab.measures.MeasureInfo.evaluate`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import array_api_compat
import numpy as np
import pandas as pd

from embstab.embedding import DEFAULT_TOP_N, Embedding, shared_vocabulary, take_top_n
from embstab.errors import ConfigError, EmbstabError, ShapeError, VocabularyError
from embstab.measures._backend import shared_products
from embstab.measures.eis import _factor_set
from embstab.measures.null import check_null_samples, has_signal, null_levels
from embstab.measures.registry import DEFAULT_MEASURES, get_measure, measures_for
from embstab.pair import MISSING, Pair

__all__ = ["Anchors", "compare", "compare_many", "aligned_matrices", "MIN_ANCHOR_COVERAGE"]

COLUMNS = ["measure", "value", "distance", "direction", "null", "signal"]


#: Warn when the anchors hold less than this share of the words the pair shares: the comparison
#: then shrinks to what the anchors know.
MIN_ANCHOR_COVERAGE = 0.5


@dataclass
class Anchors:
    """The anchor embeddings of the old and the new side, with their factorisations cached per word list.

    Pass one ``Anchors`` to many :func:`compare` calls (as :func:`compare_many` does) and each
    anchor is factored once per (word list, α), not once per pair.

    Parameters
    ----------
    old, new : Embedding
        The anchors of the old and the new side (the paper: the highest-dimension full-precision
        embeddings trained on the same corpora as each side).
    """

    old: Embedding
    new: Embedding
    _factors: dict = field(default_factory=dict, init=False, repr=False)

    def factors(self, arrays: tuple[Any, Any], words: Sequence[str], alpha: float) -> tuple[Any, Any]:
        """The anchors' :class:`~embstab.measures.AnchorFactors` for these words (cached).

        Parameters
        ----------
        arrays : (array, array)
            The anchors' rows for ``words``, aligned with the compared matrices.
        words : sequence of str
            The compared words.
        alpha : float
            EIS's exponent.

        Returns
        -------
        (AnchorFactors, AnchorFactors)
        """
        # the arrays' library and device too: one Anchors may serve compare calls on numpy and on torch
        key = (hash(tuple(words)), len(words), float(alpha), type(arrays[0]).__module__,
               str(array_api_compat.device(arrays[0])))
        if key not in self._factors:
            # both anchors at once: their Gram matrices are made side by side
            self._factors[key] = _factor_set(tuple(arrays), alpha, None, False, "auto")
        return self._factors[key]


def _device_array(x: np.ndarray, device: str | None):
    if device is None or device == "cpu-numpy":
        return x
    if not isinstance(device, str) or not (device == "cpu" or device.split(":")[0] == "cuda"):
        raise ConfigError(f"device must be 'cpu', 'cuda' or 'cuda:N' (or None for numpy), got {device!r}")
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EmbstabError(f"device {device!r} was requested but torch sees no CUDA device; use --device cpu")
    return torch.from_numpy(np.array(x)).to(device)  # a writable copy: torch refuses read-only arrays


def aligned_matrices(a: Embedding, b: Embedding, words: Sequence[str], anchors=None, device: str | None = None):
    """Row-aligned matrices (and anchors) of ``a`` and ``b`` (old and new, as :func:`compare` passes them) on ``words``.

    The matrices keep their stored dtype.

    The measures cast row blocks to float64 themselves, so float32 embeddings are not copied.

    Parameters
    ----------
    a, b : Embedding
        The two embeddings; both must hold every word.
    words : sequence of str
        The compared words, in row order.
    anchors : tuple of (Embedding, Embedding), optional
        Anchor embeddings of sides a and b (for EIS); each must hold every word.
    device : str, optional
        Put the arrays on this device as torch tensors (default: numpy arrays on the CPU).

    Returns
    -------
    x, y : array
        ``(len(words), d_a)`` and ``(len(words), d_b)`` matrices.
    anchors : tuple of array or None
        The anchors' matrices on ``words``, or None without anchors.

    Raises
    ------
    VocabularyError
        If an embedding or an anchor lacks some of the words.
    """
    x = _device_array(a.subset(words).vectors, device)
    y = _device_array(b.subset(words).vectors, device)
    if anchors is None:
        return x, y, None
    ea, eb = anchors
    for anchor, side in ((ea, "a"), (eb, "b")):
        absent = [w for w in words if w not in anchor]
        if absent:
            raise VocabularyError(f"the anchor of side {side} lacks {len(absent)} of the compared words, e.g. "
                                  f"{', '.join(repr(w) for w in absent[:5])}; anchors must cover the shared vocabulary")
    return x, y, (_device_array(ea.subset(words).vectors, device), _device_array(eb.subset(words).vectors, device))


def _select_words(a: Embedding, b: Embedding, top_n: int | None, rank_by: str, anchors,
                  own_anchors: bool = False) -> list[str]:
    words = shared_vocabulary(a, b, rank_by="a" if rank_by in ("old", "a") else "b")
    if anchors is not None:
        shared = len(words)
        words = [w for w in words if w in anchors[0] and w in anchors[1]]
        if shared and len(words) < MIN_ANCHOR_COVERAGE * shared:
            warnings.warn(f"the anchors hold only {len(words)} of the {shared} words {_name(a)} and {_name(b)} "
                          f"share ({100 * len(words) / shared:.0f} %): only those are compared", stacklevel=3)
    separate = anchors is not None and not own_anchors  # (the pair as its own anchors adds no condition)
    if not words:
        raise VocabularyError(f"{_name(a)} and {_name(b)} share no words" + (" that the anchors also hold"
                                                                             if separate else ""))
    return take_top_n(words, top_n, exact=True, names=f"{_name(a)} and {_name(b)}",
                      note=" (with the anchors)" if separate else "")


def _name(e: Embedding) -> str:
    return repr(e.name) if e.name else "an embedding"


def compare(
    old: Embedding,
    new: Embedding = MISSING,
    anchors: tuple[Embedding, Embedding] | Anchors | str | None = "self",
    measures: Iterable[str] | None = None,
    top_n: int | None = DEFAULT_TOP_N,
    rank_by: str = "old",
    *,
    device: str | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    null_samples: int = 3,
    null_seed: int = 0,
    null_method: str = "auto",
) -> pd.DataFrame:
    """Compare an old and a new embedding with several stability measures, each beside its null.

    The measures themselves are symmetric (EIS, k-NN, semantic displacement, PIP loss, eigenspace
    overlap: swapping the members, with their anchors, leaves the value unchanged); what the
    order decides is whose frequency order picks the compared words (``rank_by``, default the old
    member) and whose rows are shuffled for the null (the new member's).

    Parameters
    ----------
    old, new : Embedding, or two embeddings of :mod:`embstab.hyperbolic`
        The pair, the old embedding first, or one :class:`embstab.Pair` of both (then the other
        arguments by keyword); the compared words are their shared vocabulary. Two hyperbolic (or product)
        embeddings of the same nodes are compared through their decoded distances by the measures
        of that geometry (default: all of them); the nodes may come in another row order (new's rows
        are matched to old's by label), but a node missing on one side, a node listed twice or a
        point off its manifold is refused. ``anchors``, ``top_n``, ``rank_by`` and ``device`` do not
        apply to them.
    anchors : (Embedding, Embedding), Anchors, "self" or None, default "self"
        Anchors of the old and the new side for EIS, in that order (the paper: the
        highest-dimension full-precision embeddings trained on the same corpora). ``"self"`` (the
        default, as on the command line) uses ``old`` and ``new`` themselves; ``None`` skips EIS. The result's
        ``attrs["anchors"]`` says which were used.
    measures : iterable of str, optional
        Registry names (see :data:`embstab.measures.REGISTRY`); default: the paper's five
        (EIS, k-NN, semantic displacement, PIP loss, eigenspace overlap). Measures that need equal
        dimensions are skipped, with a warning, when the dimensions differ, unless named explicitly.
    top_n : int or None, default 10000
        Keep the ``top_n`` most frequent shared words by the row order of ``rank_by``;
        ``None`` keeps all shared words. The default (:data:`embstab.embedding.DEFAULT_TOP_N`) is a
        ceiling (a pair sharing fewer words compares them all); a value given is exact, and fewer
        shared words is an error.
    rank_by : {"old", "new"}, default "old"
        Whose frequency order decides the top words (``"a"`` and ``"b"`` name the first and the
        second argument, as in :func:`embstab.shared_vocabulary`).
    device : str, optional
        ``"cpu"`` or ``"cuda"`` to compute on torch tensors there; default: numpy.
    params : dict, optional
        Parameters per measure, overriding the registry's defaults, e.g. ``{"knn": {"k": 10}}``.
    null_samples : int, default 3
        Unrelated partners (new's rows shuffled, with new's anchor) each measure is also computed on;
        their mean is the ``null`` column. EIS, k-NN, the eigenspace overlap and the PIP loss
        average over all shuffles in closed form instead (see
        :func:`~embstab.measures.null.closed_form_null`). 0 skips the null (``null`` is NaN,
        ``signal`` None); at most :data:`~embstab.measures.null.MAX_NULL_SAMPLES` (10,000).
    null_seed : int, default 0
        Seed of the shuffles.
    null_method : {"auto", "permutation"}, default "auto"
        ``permutation`` shuffles for every measure, closed forms included.

    Returns
    -------
    pandas.DataFrame
        One row per measure: ``measure``, ``value`` (raw), ``distance`` (larger is less stable,
        e.g. 1 − overlap), ``direction``, ``null`` (the value for an unrelated partner, see
        :mod:`embstab.measures.null`) and ``signal`` (whether the pair is clearly apart from its
        null; a value without signal says nothing about this pair's stability); ``attrs``
        records the number of words compared, the anchors used, in ``zero_rows`` how many compared
        words have a zero vector in old and in new (``{"old": 0, "new": 0}``) and, in
        ``null_levels``, each measure's null with its spread, shuffles and method
        (:class:`~embstab.measures.null.NullLevel` as a dict).

    Warns
    -----
    UserWarning
        When the anchors cover less than :data:`MIN_ANCHOR_COVERAGE` of the shared words, when
        there are no more compared words than dimensions (EIS and the span measures are then
        degenerate), when differing dimensions drop a measure from the default table, and (once)
        when some compared words have a zero vector (semantic displacement skips them).

    Raises
    ------
    ShapeError
        When there are no more compared words than dimensions and the span measures' d x d
        products would take more than :data:`DEGENERATE_PRODUCT_BYTES`; when a member is all zeros
        on the compared words, or has entries so large that the products overflow float64; for
        hyperbolic members of different nodes, or with a point off its manifold.
    InsufficientMemoryError
        When those products would need more memory than the machine has available.
    ConfigError
        When ``null_samples`` is not an integer from 0 to
        :data:`~embstab.measures.null.MAX_NULL_SAMPLES`, or another parameter is malformed.
    """
    a, b = _members(old, new)  # the measures' own names for the two sides
    measures, null_samples = _check_arguments(rank_by, measures, null_samples, params)
    geometry = _pair_geometry(a, b)
    if geometry != "euclidean":
        return _compare_by_distances(a, b, geometry, measures, params)
    anchors, anchor_label = _resolve_anchors(a, b, anchors)
    infos = _chosen_measures(a, b, measures, anchors is not None)
    pair_anchors = (anchors.old, anchors.new) if anchors is not None else None
    words = _select_words(a, b, top_n, rank_by, pair_anchors, own_anchors=anchor_label == "self")
    degenerate = _warn_if_degenerate(a, b, words)
    used_anchors = pair_anchors if any(i.needs_anchors for i in infos) else None
    _check_affordable(a, b, used_anchors, infos, words, params)
    x, y, anchor_arrays = aligned_matrices(a, b, words, used_anchors, device)
    _check_magnitudes(a, b, x, y)
    zero = _check_zero_rows(a, b, x, y, words, [i.name for i in infos])
    _warn_unused_params(params, infos)
    with shared_products():  # spans and cross products of x and y are shared by the measures
        rows, kwargs_of, factors = _measure_values(infos, x, y, words, params,
                                                   (anchors, anchor_arrays, anchor_label))
        levels = _nulls(rows, infos, x, y, kwargs_of, factors, degenerate,
                        (null_samples, null_seed, null_method))
    return _table(rows, infos, levels, {"n_words": len(words), "old": a.name, "new": b.name, "rank_by": rank_by,
                                        "anchors": anchor_label, "null_samples": null_samples, "zero_rows": zero,
                                        "null_method": null_method if null_samples else None})


def _table(rows: list, infos: list, levels: list, attrs: dict[str, Any]) -> pd.DataFrame:
    """The result table, with each null's level (spread, shuffles, method) and ``attrs`` in its attrs."""
    out = pd.DataFrame(rows, columns=COLUMNS)
    # how each null was found, for callers that store them
    out.attrs["null_levels"] = {info.name: asdict(level) for info, level in zip(infos, levels)}
    out.attrs.update(attrs)
    return out


def _members(old: Any, new: Any) -> tuple[Any, Any]:
    """The old and the new member, from two arguments or from one :class:`~embstab.Pair`."""
    if isinstance(old, Pair):
        if new is not MISSING:
            raise TypeError("compare(pair, ...) takes the other arguments by keyword: the Pair holds both members")
        first, second = old
        return first, second
    if new is MISSING:
        raise TypeError("compare needs the old and the new embedding, in that order (or one embstab.Pair)")
    return old, new


def _check_arguments(rank_by: str, measures: Iterable[str] | str | None, null_samples: int,
                     params) -> tuple[Iterable[str] | None, int]:
    """Refuse a malformed ``rank_by``, ``null_samples`` or ``params``; the measures and the null's samples."""
    if rank_by not in ("old", "new", "a", "b"):
        raise ConfigError(f"rank_by must be 'old' or 'new', got {rank_by!r}")
    if isinstance(measures, str):  # one name, not its letters
        measures = [measures]
    null_samples = check_null_samples(null_samples)
    _check_params(params)
    return measures, null_samples


def _chosen_measures(a: Embedding, b: Embedding, measures: Iterable[str] | None, anchored: bool) -> list:
    """The registry entries to compute: the named ones (each once) or the defaults that apply to the pair.

    A measure named explicitly that cannot be computed (no anchors for EIS, unequal dimensions) is
    an error; a default one is left out, with a warning for the dimensions.
    """
    explicit = measures is not None
    names = list(dict.fromkeys(measures)) if explicit else list(DEFAULT_MEASURES)  # each measure once
    infos = [_measure_of(n, "euclidean") for n in names]
    if not anchored:
        if explicit and any(i.needs_anchors for i in infos):
            raise ShapeError("EIS needs anchors: pass anchors=(anchor_old, anchor_new) or anchors='self'")
        infos = [i for i in infos if not i.needs_anchors]
    unequal = [i.name for i in infos if i.needs_equal_dim] if a.dim != b.dim else []
    if unequal:
        verb = "needs" if len(unequal) == 1 else "need"
        if explicit:
            raise ShapeError(f"{', '.join(unequal)} {verb} equal dimensions, but the embeddings are {a.dim}-d and "
                             f"{b.dim}-d")
        warnings.warn(f"left out {', '.join(unequal)} ({verb} equal dimensions; the embeddings are {a.dim}-d and "
                      f"{b.dim}-d)", stacklevel=3)
        infos = [i for i in infos if not i.needs_equal_dim]
    return infos


def _warn_if_degenerate(a: Embedding, b: Embedding, words: Sequence[str]) -> bool:
    """Whether there are no more compared words than dimensions (warned): the spans are then the whole space."""
    degenerate = len(words) <= max(a.dim, b.dim)
    if degenerate:
        warnings.warn(f"only {len(words)} compared words for {max(a.dim, b.dim)} dimensions: the column spans "
                      "are the whole space, so EIS and the span measures say nothing; compare more words",
                      stacklevel=3)
    return degenerate


def _check_affordable(a: Embedding, b: Embedding, anchors: tuple[Embedding, Embedding] | None, infos: list,
                      words: Sequence[str], params) -> None:
    """Refuse, before any array is built, products too large to afford and a k-NN with too few words."""
    _check_product_cost(a, b, anchors, infos, len(words))
    for info in infos:
        k = dict((params or {}).get(info.name, {})).get("k", info.defaults.get("k"))
        if info.name == "knn" and isinstance(k, int) and len(words) < k + 1:
            raise VocabularyError(f"{_name(a)} and {_name(b)} share only {len(words)} compared words: k-NN with "
                                  f"k={k} needs at least {k + 1}; compare more words (or a smaller k)")


def _warn_unused_params(params, infos: list) -> None:
    """Warn about ``params`` given for measures that are not compared (left out or not named)."""
    ignored = sorted(set(params or {}) - {i.name for i in infos})
    if ignored:
        warnings.warn(f"params for {', '.join(ignored)} are not used: not among the measures compared "
                      f"({', '.join(i.name for i in infos)})", stacklevel=3)


def _row(info, value: float) -> dict[str, Any]:
    """One row of the result table, before its null is known."""
    return {"measure": info.name, "value": value, "distance": float(info.to_distance(value)),
            "direction": info.direction, "null": math.nan, "signal": None}


def _measure_values(infos: list, x: Any, y: Any, words: Sequence[str], params,
                    anchoring: tuple[Anchors | None, Any, str]) -> tuple[list, list, list]:
    """Each measure's value on the aligned matrices: its table row, its parameters and its anchor factors."""
    anchors, anchor_arrays, anchor_label = anchoring
    rows, kwargs_of, factors = [], [], []
    for info in infos:
        kwargs = dict((params or {}).get(info.name, {}))
        pair = None
        if info.needs_anchors:
            alpha = kwargs.get("alpha", info.defaults["alpha"])
            try:
                pair = anchors.factors(anchor_arrays, words, alpha)
            except ShapeError as exc:
                raise _anchor_culprit(exc, anchors, anchor_arrays, alpha, anchor_label) from None
        rows.append(_row(info, info.evaluate(x, y, anchors=pair, **kwargs)))
        kwargs_of.append(kwargs)
        factors.append(pair)
    return rows, kwargs_of, factors


def _nulls(rows: list, infos: list, x: Any, y: Any, kwargs_of: list, factors: list, degenerate: bool,
           null: tuple[int, int, str]) -> list:
    """Each measure's null level, written into its row with whether the value shows signal ([] without nulls)."""
    samples, seed, method = null
    if not samples:
        return []
    levels = null_levels(infos, x, y, samples=samples, seed=seed, anchors=factors, params=kwargs_of, method=method)
    for row, info, level in zip(rows, infos, levels):
        # spans that are the whole space: the value and its null are both round-off
        blind = degenerate and info.needs_more_words_than_dims
        row.update(null=level.value, signal=False if blind else has_signal(info, row["value"], level))
    return levels


def _anchor_culprit(exc: ShapeError, anchors: Anchors, arrays: tuple[Any, Any], alpha: float,
                    label: str) -> ShapeError:
    """The anchor error of EIS, naming the side (and the embedding) whose anchor it is."""
    for side, emb, arr in (("old", anchors.old, arrays[0]), ("new", anchors.new, arrays[1])):
        try:
            _factor_set((arr,), alpha, None, False, "auto")
        except ShapeError as one:
            problem = str(one)
            if "all zeros" in problem:  # all zeros in float64 arithmetic: say so when the entries are not
                xp = array_api_compat.array_namespace(arr)
                if bool(xp.any(arr != 0)):
                    problem = ("its entries are so small that their squares underflow to 0 in float64; scale it "
                               "up")
                else:
                    problem = "it is all zeros on the compared words"
            whose = (f"the {side} embedding {_name(emb)}, its own anchor (no separate anchors were given)"
                     if label == "self" else f"the anchor of the {side} side, {_name(emb)}")
            return ShapeError(f"EIS cannot use {whose}: {problem}")
    return exc


def _check_magnitudes(a: Embedding, b: Embedding, x: Any, y: Any) -> None:
    """Refuse a member whose entries are so large that the measures' products overflow float64.

    Every measure sums products of entries over the rows or the dimensions (Gram and cross
    products, norms): with entries near 1e160 they overflow, and numpy's overflow warnings were
    followed by "Eigenvalues did not converge" or a meaningless value. Checked before any product.
    """
    n = max(int(x.shape[0]), int(x.shape[1]), int(y.shape[1]))
    for side, e, arr in (("old", a, x), ("new", b, y)):
        xp = array_api_compat.array_namespace(arr)
        biggest = float(xp.max(xp.abs(arr))) if arr.shape[0] and arr.shape[1] else 0.0
        if not math.isfinite(biggest * biggest * n):  # Python floats: inf on overflow, no warning
            raise ShapeError(f"the {side} embedding {_name(e)} has entries up to {biggest:.3g}: the products the "
                             f"measures sum over {n} terms overflow float64; scale it down (e.g. divide it by "
                             "its largest entry)")


def _check_zero_rows(a: Embedding, b: Embedding, x: Any, y: Any, words: Sequence[str],
                     names: Sequence[str]) -> dict[str, int]:
    """Refuse a member that is all zeros on the compared words; warn, once, about some zero rows.

    A zero vector has no direction: semantic displacement skips its word, and a member made only of
    them leaves every measure nothing to compare (EIS, the pair being its own anchor, would call it
    an all-zero *anchor*). Returns the count per side.
    """
    from embstab.measures.displacement import zero_rows  # noqa: PLC0415

    zero = {"old": zero_rows(x), "new": zero_rows(y)}
    for side, e in (("old", a), ("new", b)):
        if len(zero[side]) == len(words):
            raise ShapeError(f"the {side} embedding {_name(e)} is all zeros on the {len(words)} compared words: "
                             "there is nothing to compare")
    skipped = np.union1d(zero["old"], zero["new"])
    if len(skipped):
        where = " and ".join(f"{len(zero[s])} in {s} ({_name(e)})" for s, e in (("old", a), ("new", b))
                             if len(zero[s]))
        effect = (f"semantic displacement skips them and averages over the other {len(words) - len(skipped)}"
                  if "semantic_displacement" in names else "they have no direction")
        warnings.warn(f"{len(skipped)} of the {len(words)} compared words have a zero vector ({where}; e.g. "
                      f"{words[int(skipped[0])]!r}): {effect}", stacklevel=3)
    return {side: int(len(rows)) for side, rows in zero.items()}


#: Most memory the d x d products may take when there are no more compared words than dimensions,
#: where the span measures say nothing anyway (compare warns so): past it the pair is refused.
DEGENERATE_PRODUCT_BYTES = 256 * 2**20


def _check_product_cost(a: Embedding, b: Embedding, anchors: tuple[Embedding, Embedding] | None,
                        infos: list, n_words: int) -> None:
    """Refuse, before any array is built, a pair whose d x d products cannot be afforded.

    The span measures keep the cross products of every pair of the compared matrices (and the
    anchors) while they are shared, plus their factorisations: about four times
    ``8 * sum(d_i * d_j)`` bytes. A 20,000-d file against a 20-d one asks for gigabytes and many
    minutes, and with fewer words than dimensions the result says nothing.
    """
    from embstab._resources import check_memory, format_bytes  # noqa: PLC0415

    span = [i.name for i in infos if i.uses_dxd_products]
    if not span:
        return
    dims = sorted({a.dim, b.dim, *((anchors[0].dim, anchors[1].dim) if anchors else ())})
    estimate = 4 * 8 * sum(d * e for i, d in enumerate(dims) for e in dims[i:])
    what = (f"comparing {a.name or 'A'!r} ({a.dim}-d) with {b.name or 'B'!r} ({b.dim}-d)"
            + (f" and anchors of {anchors[0].dim} and {anchors[1].dim} dims"
               if anchors and (anchors[0] is not a or anchors[1] is not b) else "")
            + f" by {', '.join(span)} (d x d products)")
    if n_words <= max(dims) and estimate > DEGENERATE_PRODUCT_BYTES:
        raise ShapeError(f"{what} would take about {format_bytes(estimate)} for {n_words} compared words: with no "
                         f"more words than the {max(dims)} dimensions these measures say nothing; compare "
                         "embeddings of similar dimension over more shared words, or measure only knn")
    check_memory(estimate, what, "compare embeddings of a smaller dimension, or measure only knn")


def _pair_geometry(a: Any, b: Any) -> str:
    """"euclidean" for two word embeddings, else the geometry both sides declare."""
    kinds = []
    for side, e in (("old", a), ("new", b)):
        kind = "euclidean" if isinstance(e, Embedding) else getattr(e, "geometry", None)
        if kind is None or (kind == "euclidean" and not isinstance(e, Embedding)):
            raise ShapeError(f"compare takes two Embedding objects or two embstab.hyperbolic embeddings; the {side} "
                             f"one is a {type(e).__name__}")
        kinds.append(kind)
    if kinds[0] != kinds[1]:
        raise ShapeError(f"cannot compare a {kinds[0]} embedding with a {kinds[1]} one")
    return kinds[0]


def _measure_of(name: str, geometry: str):
    info = get_measure(name)
    if info.geometry != geometry:
        raise ShapeError(f"{name} compares {info.geometry} embeddings, not {geometry} ones; the {geometry} measures "
                         f"are: {', '.join(measures_for(geometry))}")
    return info


def _compare_by_distances(a: Any, b: Any, geometry: str, measures: Iterable[str] | None,
                          params: dict[str, dict[str, Any]] | None) -> pd.DataFrame:
    """:func:`compare` for embeddings compared through their decoded distances (one streaming pass)."""
    infos = [_measure_of(n, geometry) for n in (measures_for(geometry) if measures is None else measures)]
    for side, e in (("old", a), ("new", b)):
        bad = e.invalid_row() if callable(getattr(e, "invalid_row", None)) else None
        if bad is not None:
            node = e.nodes[bad[0]:bad[0] + 1].tolist()[0]
            raise ShapeError(f"the {side} embedding: node {node!r} (row {bad[0] + 1}): {bad[1]}")
    b = _aligned_nodes(a, b)
    rows = []
    with shared_products():  # the measures share one row-by-row pass over the pair
        for info in infos:
            value = info.evaluate(a, b, **dict((params or {}).get(info.name, {})))
            # decoded-distance measures have no shuffled partner yet: no null is claimed for them
            rows.append(_row(info, value))
    out = pd.DataFrame(rows, columns=COLUMNS)
    out.attrs.update({"n_nodes": len(a), "geometry": geometry, "anchors": "none"})
    return out


class _Reordered:
    """An embedding of decoded distances seen with its rows in another order (no copy of its points)."""

    def __init__(self, emb: Any, order: np.ndarray) -> None:
        self._emb, self._order = emb, order
        self.nodes = emb.nodes[order]

    def __len__(self) -> int:
        return len(self._order)

    def distances_from(self, i: int, targets: np.ndarray | None = None) -> np.ndarray:
        rows = self._order if targets is None else self._order[np.asarray(targets)]
        return self._emb.distances_from(int(self._order[int(i)]), rows)

    def __getattr__(self, name: str) -> Any:  # scale, geometry, metadata, ... of the embedding itself
        return getattr(self._emb, name)


def _node_keys(e: Any, side: str) -> list[str]:
    """The node labels of ``e`` as the hyperbolic measures compare them (as text), each once."""
    keys = [str(x) for x in e.nodes.tolist()]
    if len(set(keys)) != len(keys):
        seen: set[str] = set()
        twice = next(k for k in keys if k in seen or seen.add(k))
        raise ShapeError(f"the {side} embedding lists node {twice!r} twice")
    return keys


def _aligned_nodes(a: Any, b: Any) -> Any:
    """``b`` in ``a``'s node order: the same nodes in another row order are the same embedding."""
    ka, kb = _node_keys(a, "old"), _node_keys(b, "new")
    if ka == kb:
        return b
    where = {k: i for i, k in enumerate(kb)}
    only_a = [k for k in ka if k not in where]
    only_b = sorted(set(kb) - set(ka))
    if only_a or only_b:
        parts = [f"{len(only_a)} node(s) only in the old one (e.g. {only_a[0]!r})"] if only_a else []
        parts += [f"{len(only_b)} only in the new one (e.g. {only_b[0]!r})"] if only_b else []
        raise ShapeError(f"the embeddings are of different nodes: {', '.join(parts)}; compare two embeddings of "
                         "the same graph")
    return _Reordered(b, np.fromiter((where[k] for k in ka), dtype=np.int64, count=len(ka)))


def _check_params(params) -> None:
    """Refuse ``params`` that is not a dict of dicts keyed by known measures (with a near name)."""
    if params is None:
        return
    if not isinstance(params, dict) or not all(isinstance(v, dict) for v in params.values()):
        raise ConfigError("params must map measure names to dicts of their parameters, e.g. "
                          f"{{'knn': {{'k': 10}}}}; got {params!r}")
    for name in params:
        get_measure(name)  # an unknown (or misspelt) measure is an error, not silently ignored


def _resolve_anchors(a: Embedding, b: Embedding, anchors) -> tuple[Anchors | None, str]:
    if anchors is None:
        return None, "none"
    if isinstance(anchors, str):
        if anchors != "self":
            raise ShapeError(f"anchors must be a pair of embeddings, 'self' or None, got {anchors!r}")
        return Anchors(a, b), "self"
    if not isinstance(anchors, Anchors):
        if not (isinstance(anchors, (tuple, list)) and len(anchors) == 2
                and all(isinstance(e, Embedding) for e in anchors)):
            raise ConfigError("anchors must be (old anchor, new anchor) as two Embedding objects, an Anchors, "
                              f"'self' or None; got {type(anchors).__name__}"
                              + (" (arrays carry no words: wrap them in embstab.Embedding)"
                                 if isinstance(anchors, (tuple, list)) else ""))
        anchors = Anchors(*anchors)
    return anchors, f"{anchors.old.name or 'old anchor'} / {anchors.new.name or 'new anchor'}"


def compare_many(
    pairs: Iterable[tuple[Embedding, Embedding]] | dict[str, tuple[Embedding, Embedding]],
    anchors: tuple[Embedding, Embedding] | Anchors | str | None = "self",
    measures: Iterable[str] | None = None,
    top_n: int | None = DEFAULT_TOP_N,
    rank_by: str = "old",
    **kwargs: Any,
) -> pd.DataFrame:
    """:func:`compare` over many pairs that share the same anchors, factoring the anchors once.

    Parameters
    ----------
    pairs : list of (old, new) or dict of str to (old, new)
        The pairs (tuples or :class:`embstab.Pair`), old first; a dict labels them, a list is
        labelled ``"old.name vs new.name"``.
    anchors, measures, top_n, rank_by, **kwargs
        As for :func:`compare`; fixed anchors are factored once per word list for all pairs.

    Returns
    -------
    pandas.DataFrame
        A ``pair`` column plus :func:`compare`'s columns.
    """
    items = pairs.items() if isinstance(pairs, dict) else ((f"{a.name} vs {b.name}", (a, b)) for a, b in pairs)
    shared = Anchors(*anchors) if anchors is not None and not isinstance(anchors, (Anchors, str)) else anchors
    frames = []
    for label, (a, b) in items:
        df = compare(a, b, anchors=shared, measures=measures, top_n=top_n, rank_by=rank_by, **kwargs)
        df.insert(0, "pair", label)
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=["pair", *COLUMNS])
    return pd.concat(frames, ignore_index=True)

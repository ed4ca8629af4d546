"""``compare``: every measure between two :class:`~embstab.Embedding` objects, as a DataFrame."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from embstab.embedding import Embedding, shared_vocabulary
from embstab.errors import EmbstabError, ShapeError, VocabularyError
from embstab.measures import DEFAULT_MEASURES, anchor_factors, get_measure, shared_products

__all__ = ["compare", "compare_many", "aligned_matrices"]

COLUMNS = ["measure", "value", "distance", "direction"]


def _device_array(x: np.ndarray, device: str | None):
    if device is None or device == "cpu-numpy":
        return x
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EmbstabError(f"device {device!r} was requested but torch sees no CUDA device; use --device cpu")
    return torch.from_numpy(np.array(x)).to(device)  # a writable copy: torch refuses read-only arrays


def aligned_matrices(a: Embedding, b: Embedding, words: Sequence[str], anchors=None, device: str | None = None):
    """Row-aligned matrices (and anchors) of ``a`` and ``b`` on ``words``, in their stored dtype.

    The measures cast row blocks to float64 themselves, so float32 embeddings are not copied.
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


def _select_words(a: Embedding, b: Embedding, top_n: int | None, rank_by: str, anchors) -> list[str]:
    words = shared_vocabulary(a, b, rank_by=rank_by)
    if anchors is not None:
        words = [w for w in words if w in anchors[0] and w in anchors[1]]
    if not words:
        raise VocabularyError(f"{_name(a)} and {_name(b)} share no words" + (" that the anchors also hold"
                                                                             if anchors is not None else ""))
    if top_n is not None:
        if top_n <= 0:
            raise ValueError(f"top_n must be positive, got {top_n}")
        if len(words) < top_n:
            raise VocabularyError(f"top_n={top_n} was asked but {_name(a)} and {_name(b)} share only {len(words)} "
                                  "words" + (" (with the anchors)" if anchors is not None else "")
                                  + "; pass a smaller top_n or top_n=None for all shared words")
        words = words[:top_n]
    return words


def _name(e: Embedding) -> str:
    return repr(e.name) if e.name else "an embedding"


def compare(
    a: Embedding,
    b: Embedding,
    anchors: tuple[Embedding, Embedding] | None = None,
    measures: Iterable[str] | None = None,
    top_n: int | None = 10000,
    rank_by: str = "a",
    *,
    device: str | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    _anchor_cache: dict | None = None,
) -> pd.DataFrame:
    """Compare two embeddings with several stability measures.

    Parameters
    ----------
    a, b : Embedding
        The pair. In the paper's orientation ``a`` is the new (retrained) embedding and ``b`` the
        old one; the compared words are their shared vocabulary.
    anchors : (Embedding, Embedding) or "self", optional
        Anchors of side a and side b for EIS (e.g. the highest-dimension full-precision
        embeddings trained on the same corpora); ``"self"`` uses ``a`` and ``b`` themselves.
        Without anchors EIS is skipped.
    measures : iterable of str, optional
        Registry names (see :data:`embstab.measures.REGISTRY`); default: the paper's five
        (EIS, k-NN, semantic displacement, PIP loss, eigenspace overlap). Measures that need equal
        dimensions are skipped when the dimensions differ, unless named explicitly.
    top_n : int or None, default 10000
        Keep the ``top_n`` most frequent shared words by the row order of ``rank_by``;
        ``None`` keeps all shared words.
    rank_by : {"a", "b"}
        Whose frequency order decides the top words.
    device : str, optional
        ``"cpu"`` or ``"cuda"`` to compute on torch tensors there; default: numpy.
    params : dict, optional
        Extra keyword arguments per measure, e.g. ``{"knn": {"k": 10}}``.

    Returns
    -------
    DataFrame with one row per measure: ``measure``, ``value`` (raw), ``distance`` (larger is less
    stable, e.g. 1 − overlap) and ``direction``; ``attrs`` records the number of words compared.
    """
    if isinstance(anchors, str):
        if anchors != "self":
            raise ValueError(f"anchors must be a pair of embeddings, 'self' or None, got {anchors!r}")
        anchors = (a, b)
    explicit = measures is not None
    names = list(measures) if explicit else list(DEFAULT_MEASURES)
    infos = [get_measure(n) for n in names]
    if anchors is None:
        if explicit and any(i.needs_anchors for i in infos):
            raise ValueError("EIS needs anchors: pass anchors=(anchor_a, anchor_b)")
        infos = [i for i in infos if not i.needs_anchors]
    if not explicit and a.dim != b.dim:
        infos = [i for i in infos if not i.needs_equal_dim]
    elif explicit and a.dim != b.dim:
        bad = [i.name for i in infos if i.needs_equal_dim]
        if bad:
            raise ShapeError(f"{', '.join(bad)} need equal dimensions, but the embeddings are {a.dim}-d and {b.dim}-d")
    words = _select_words(a, b, top_n, rank_by, anchors)
    x, y, anchor_arrays = aligned_matrices(a, b, words, anchors if any(i.needs_anchors for i in infos) else None,
                                           device)
    rows = []
    with shared_products():  # spans and cross products of x and y are shared by the measures
        for info in infos:
            rows.append(_evaluate(info, x, y, anchor_arrays, anchors, words, params, _anchor_cache))
    out = pd.DataFrame(rows, columns=COLUMNS)
    out.attrs.update({"n_words": len(words), "a": a.name, "b": b.name, "rank_by": rank_by})
    return out


def _evaluate(info, x, y, anchor_arrays, anchors, words, params, cache) -> dict:
    kwargs = {**info.defaults, **(params or {}).get(info.name, {})}
    if info.name == "knn" and "n_queries" not in (params or {}).get("knn", {}):
        kwargs["n_queries"] = min(kwargs["n_queries"], len(words))  # the default must not exceed n
    if info.needs_anchors:
        fa, fb = _anchor_factors(anchor_arrays, anchors, words, kwargs.get("alpha", 3.0), cache)
        value = info.func(x, y, fa, fb, **kwargs)
    else:
        value = info.func(x, y, **kwargs)
    return {"measure": info.name, "value": float(value), "distance": float(info.to_distance(value)),
            "direction": info.direction}


def _anchor_factors(arrays, anchors, words, alpha, cache):
    if cache is None:
        return anchor_factors(arrays[0], alpha), anchor_factors(arrays[1], alpha)
    # key on the anchor objects and the word list: the factors only depend on those
    key = (id(anchors[0]), id(anchors[1]), hash(tuple(words)), alpha)
    if key not in cache:
        cache[key] = (anchor_factors(arrays[0], alpha, cache=False), anchor_factors(arrays[1], alpha, cache=False))
    return cache[key]


def compare_many(
    pairs: Iterable[tuple[Embedding, Embedding]] | dict[str, tuple[Embedding, Embedding]],
    anchors: tuple[Embedding, Embedding] | None = None,
    measures: Iterable[str] | None = None,
    top_n: int | None = 10000,
    rank_by: str = "a",
    **kwargs: Any,
) -> pd.DataFrame:
    """:func:`compare` over many pairs that share the same anchors, factoring the anchors once.

    ``pairs`` is a list of ``(a, b)`` or a dict ``{label: (a, b)}``. Returns one tidy DataFrame
    with a ``pair`` column (the label, or ``"a.name vs b.name"``) plus :func:`compare`'s columns.
    """
    items = pairs.items() if isinstance(pairs, dict) else ((f"{a.name} vs {b.name}", (a, b)) for a, b in pairs)
    cache: dict = {}
    frames = []
    for label, (a, b) in items:
        df = compare(a, b, anchors=anchors, measures=measures, top_n=top_n, rank_by=rank_by, _anchor_cache=cache,
                     **kwargs)
        df.insert(0, "pair", label)
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=["pair", *COLUMNS])
    return pd.concat(frames, ignore_index=True)

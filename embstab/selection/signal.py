"""Whether a results table's measures carry signal: each pair's value against its null.

A study row holds, beside each measure's value, its *null* (the value for an unrelated partner:
the other side's rows shuffled, see :mod:`embstab.measures.null`) in ``<measure>_null`` and
whether the value is clearly apart from it in ``<measure>_signal``. A value at its null says
nothing about the pair's stability, however small it is: the null of EIS moves with the dimension
(:data:`EIS_NULL` says how), so ranking pairs at their null by EIS ranks them by dimension.
Tables without these columns (a published CSV, a study stored before nulls existed) are
*unchecked*.

A measure shows signal on a *configuration* (algorithm, dimension, bit width) when more than half
of its pairs (seeds) that carry a null are clearly apart from it.
"""

from __future__ import annotations

import pandas as pd

from embstab.measures.registry import fallback_order
from embstab.selection.results import (
    CONFIG_COLUMNS,
    NULL_SUFFIX,
    SIGNAL_SUFFIX,
    as_results,
    measure_columns,
)

__all__ = ["EIS_NULL", "FALLBACK_ORDER", "null_column", "signal_column", "signal_flags", "has_nulls", "config_signal",
           "signal_table", "signal_summary", "without_signal"]

#: What the null of EIS is, in one sentence that the report prints and the README quotes. It
#: describes the closed form of :mod:`embstab.measures.null` (checked against it in the tests):
#: with P, P̃ the projections on the two tables' spans, Σ the anchors' weighting and Π the
#: shuffle, the random parts average to d/n of their traces, leaving c + d/n − 2cd/n.
EIS_NULL = (
    "The null of EIS is its value between the old table and the new one with the new table's rows "
    "shuffled among its words (its anchor shuffled with them), averaged exactly over all shuffles. "
    "For n rows in d dimensions it is about c + d/n − 2cd/n, where c is the share of the anchors' "
    "weighted spectrum that the tables' own spans hold: about 2d/n for tables whose spans have "
    "nothing to do with their anchors (c ≈ d/n), about 1 − d/n for a pair that is its own anchor "
    "(c = 1, at the anchors' dimension), and between the two for tables that share part of their "
    "anchors' span, so each pair's null is computed rather than read off a formula."
)

#: The measures :func:`~embstab.selection.recommend` turns to, in this order, when the one asked for
#: shows no signal: the registered measures by their ``fallback_rank`` (the two the paper finds best,
#: then the span and shape measures; the scale-dependent PIP loss and Frobenius distance have none),
#: as registered when the selection is imported.
FALLBACK_ORDER: tuple[str, ...] = fallback_order()


def null_column(measure: str) -> str:
    """The column holding ``measure``'s null.

    Parameters
    ----------
    measure : str
        Registry name of the measure.

    Returns
    -------
    str
        ``eis`` → ``eis_null``.
    """
    return measure + NULL_SUFFIX


def signal_column(measure: str) -> str:
    """The column saying whether ``measure``'s value is clearly apart from its null.

    Parameters
    ----------
    measure : str
        Registry name of the measure.

    Returns
    -------
    str
        ``eis`` → ``eis_signal``.
    """
    return measure + SIGNAL_SUFFIX


def signal_flags(df: pd.DataFrame, measure: str) -> pd.Series:
    """Each row's signal flag for ``measure`` (nullable boolean; NA where no null is recorded).

    Parameters
    ----------
    df : pandas.DataFrame
        A results table.
    measure : str
        Registry name of the measure.

    Returns
    -------
    pandas.Series
        ``boolean`` dtype, aligned with ``df``; all NA when the table has no signal column.
    """
    column = signal_column(measure)
    if column not in df.columns:
        return pd.Series(pd.NA, index=df.index, dtype="boolean")
    return df[column].astype("boolean")


def has_nulls(df: pd.DataFrame, measure: str) -> bool:
    """Whether any row of ``df`` records ``measure``'s null and signal.

    Parameters
    ----------
    df : pandas.DataFrame
        A results table.
    measure : str
        Registry name of the measure.

    Returns
    -------
    bool
    """
    return bool(signal_flags(df, measure).notna().any())


def config_signal(df: pd.DataFrame, measure: str, keys: list[str] | None = None) -> pd.DataFrame:
    """Per configuration: its pairs, those with a null, those with signal, and the verdict.

    Parameters
    ----------
    df : pandas.DataFrame
        A validated results table (one row per pair and task; the measure belongs to the pair).
    measure : str
        Registry name of the measure.
    keys : list of str, optional
        The configuration columns (default ``algo, dim, bitrate``).

    Returns
    -------
    pandas.DataFrame
        ``keys`` plus ``pairs``, ``checked`` (pairs with a null), ``with_signal``, ``null`` (mean null
        of the checked pairs) and ``signal``: True when more than half of the checked pairs show
        signal, False when not, NA when none is checked. Configurations in order of appearance.
    """
    keys = list(keys or ["algo", "dim", "bitrate"])
    pairs = df.drop_duplicates(list(CONFIG_COLUMNS))
    flags = signal_flags(pairs, measure)
    null = pd.to_numeric(pairs[null_column(measure)], errors="coerce") if null_column(measure) in pairs.columns \
        else pd.Series(float("nan"), index=pairs.index)
    frame = pairs[keys].assign(_checked=flags.notna().astype(int), _signal=flags.fillna(False).astype(int),
                               _null=null.where(flags.notna()))
    out = frame.groupby(keys, sort=False).agg(pairs=("_checked", "size"), checked=("_checked", "sum"),
                                              with_signal=("_signal", "sum"), null=("_null", "mean")).reset_index()
    verdict = pd.Series(pd.NA, index=out.index, dtype="boolean")
    checked = out["checked"] > 0
    verdict[checked] = (2 * out.loc[checked, "with_signal"] > out.loc[checked, "checked"]).to_numpy()
    out["signal"] = verdict
    return out


def signal_table(results: pd.DataFrame | str, by: list[str] | None = None) -> pd.DataFrame:
    """Each measure against its null: pairs, pairs with signal, mean value and mean null.

    Parameters
    ----------
    results : pandas.DataFrame or path
        A results table (any form :func:`~embstab.selection.as_results` accepts).
    by : list of str, optional
        Also split by these columns (e.g. ``["algo", "dim"]``); default: one row per measure.

    Returns
    -------
    pandas.DataFrame
        ``measure``, the ``by`` columns, ``pairs``, ``checked`` (pairs with a null), ``with_signal``,
        ``value`` (mean over the pairs) and ``null`` (mean over the checked pairs); only measures
        with a recorded null.
    """
    df = as_results(results)
    pairs = df.drop_duplicates(list(CONFIG_COLUMNS))
    by = list(by or [])
    rows = []
    for measure in measure_columns(pairs):
        if not has_nulls(pairs, measure):
            continue
        flags = signal_flags(pairs, measure)
        part = pairs.assign(_checked=flags.notna().astype(int), _signal=flags.fillna(False).astype(int),
                            _null=pd.to_numeric(pairs[null_column(measure)], errors="coerce"))
        grouped = part.groupby(by, sort=True) if by else [((), part)]
        for key, g in grouped:
            key = key if isinstance(key, tuple) else (key,)
            rows.append({"measure": measure, **dict(zip(by, key)), "pairs": len(g), "checked": int(g["_checked"].sum()),
                         "with_signal": int(g["_signal"].sum()), "value": float(g[measure].mean()),
                         "null": float(g["_null"].mean())})
    return pd.DataFrame(rows, columns=["measure", *by, "pairs", "checked", "with_signal", "value", "null"])


def signal_summary(results: pd.DataFrame | str) -> dict[str, tuple[int, int]]:
    """Per measure with a recorded null: (pairs with signal, pairs with a null).

    Parameters
    ----------
    results : pandas.DataFrame or path
        A results table.

    Returns
    -------
    dict of str to (int, int)
        In registry order.
    """
    table = signal_table(results)
    return {r.measure: (int(r.with_signal), int(r.checked)) for r in table.itertuples()}


def without_signal(results: pd.DataFrame | str) -> list[str]:
    """The measures whose value is clearly apart from its null on at most half of the checked pairs.

    Parameters
    ----------
    results : pandas.DataFrame or path
        A results table.

    Returns
    -------
    list of str
        In registry order; empty when no measure records a null.
    """
    return [m for m, (hits, checked) in signal_summary(results).items() if checked and 2 * hits <= checked]

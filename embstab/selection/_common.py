"""Helpers shared by the analyses: measure selection and order-preserving grouping."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pandas as pd

from embstab.errors import lookup
from embstab.measures import REGISTRY
from embstab.selection.errors import ResultsError
from embstab.selection.results import measure_columns


def resolve_measures(df: pd.DataFrame, measures: Sequence[str] | str | None) -> list[str]:
    """The measure columns to analyse; checks that requested ones exist in ``df``."""
    present = measure_columns(df)
    if measures is None:
        if not present:
            raise ResultsError("the results table has no measure column; expected one of "
                               + ", ".join(REGISTRY))
        return present
    if isinstance(measures, str):
        measures = [measures]
    for name in measures:
        lookup(REGISTRY, name, "measure")
        if name not in df.columns:
            raise ResultsError(f"the results table has no column for measure {name!r}; "
                               f"it has: {', '.join(present) or 'none'}")
    return list(measures)


def groups(df: pd.DataFrame, keys: list[str]) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """Iterate over groups in order of first appearance, rows kept in table order.

    The reference scripts break ties by the first index within a group, so the row order inside
    each group must be the table order (``groupby(sort=False)`` guarantees that).
    """
    for key, part in df.groupby(keys, sort=False):
        yield (key if isinstance(key, tuple) else (key,)), part


def order_by(table: pd.DataFrame, column: str, order: Sequence[str]) -> pd.DataFrame:
    """Sort rows by ``algo`` then by the given order of ``column`` (stable otherwise)."""
    rank = {name: i for i, name in enumerate(order)}
    return table.sort_values(["algo", column], key=lambda s: s.map(rank) if s.name == column
                             else s, kind="stable").reset_index(drop=True)

"""Spearman rank correlation between each stability measure and downstream disagreement.

Beside each ρ, :func:`spearman_table` can give what the measure adds beyond memory: its ρ
controlling for memory (a partial Spearman ρ) and, as the reference, memory's own ρ. Every ρ comes
with a seeded bootstrap interval over the rows, except in cells of fewer than
:data:`MIN_INTERVAL_ROWS` rows, where a resampled interval looks decisive and means nothing.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from embstab._numbers import is_integer, is_real
from embstab.errors import ConfigError
from embstab.selection._common import groups, order_by, resolve_measures
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results, measure_distance, ordered_tasks

__all__ = ["CorrelationTable", "spearman_table", "bootstrap_interval", "partial_spearman", "best_measures",
           "with_intervals", "N_BOOT", "MIN_INTERVAL_ROWS", "MEMORY_ROW", "CONTROLS", "TOO_FEW_ROWS"]


#: Bootstrap resamples behind each interval.
N_BOOT = 2000
#: The fewest rows a ρ gets an interval from: resampling 3 or 6 rows gives intervals such as
#: ``[1.00, 1.00]`` that look decisive and mean nothing.
MIN_INTERVAL_ROWS = 8
#: What a cell with fewer rows says in place of its interval.
TOO_FEW_ROWS = "too few rows for an interval"
#: The ``measure`` of the reference row of a table controlled for memory: memory's own ρ.
MEMORY_ROW = "memory"
#: What :func:`spearman_table` can control for.
CONTROLS = ("memory",)


def _ranks(a: np.ndarray) -> np.ndarray:
    # average ranks along the last axis (ties shared), centred, as Spearman's ρ defines them
    r = stats.rankdata(a, axis=-1)
    return r - r.mean(axis=-1, keepdims=True)


def _pearson(a: np.ndarray, b: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray) -> np.ndarray:
    """Correlation of centred rows along the last axis; NaN where a side is (numerically) constant
    relative to its scale before any residualising."""
    aa, bb = (a * a).sum(axis=-1), (b * b).sum(axis=-1)
    ok = (aa > 1e-12 * scale_a) & (bb > 1e-12 * scale_b)  # a residual of rounding is no ranking
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, (a * b).sum(axis=-1) / np.sqrt(np.where(ok, aa * bb, 1.0)), np.nan)


def _resampled_ranks(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Centred average ranks of ``values[idx]`` along the last axis, without sorting each resample.

    A resample holds the original values only, so each one's average rank is the count of drawn
    values below it plus half of its own draws (plus one half): counting draws per distinct value
    replaces a sort per resample, which made the bootstrap most of a report's time.
    """
    distinct, dense = np.unique(values, return_inverse=True)
    m, (b, n) = len(distinct), idx.shape
    counts = np.bincount((np.arange(b)[:, None] * m + dense[idx]).ravel(), minlength=b * m).reshape(b, m)
    below = np.cumsum(counts, axis=1) - counts
    average = below + (counts + 1) / 2.0
    return np.take_along_axis(average, dense[idx], axis=1) - (n + 1) / 2.0


def _rho(x: np.ndarray, y: np.ndarray, z: np.ndarray | None = None) -> np.ndarray:
    """Spearman ρ along the last axis, controlling for ``z`` when given (NaN where a side is constant)."""
    return _rho_of_ranks(_ranks(x), _ranks(y), None if z is None else _ranks(z))


def _rho_of_ranks(rx: np.ndarray, ry: np.ndarray, rz: np.ndarray | None) -> np.ndarray:
    """Spearman ρ from centred ranks, controlling for ``rz`` when given.

    Controlling for z: the ranks of x and of y, each minus its least-squares line in the ranks
    of z, correlated. Where z is constant there is nothing to control for and the plain ρ remains.
    """
    sx, sy = (rx * rx).sum(axis=-1), (ry * ry).sum(axis=-1)
    if rz is not None:
        zz = (rz * rz).sum(axis=-1, keepdims=True)
        safe = np.where(zz > 0, zz, 1.0)  # a constant z has centred ranks 0: nothing is removed
        rx = rx - (rx * rz).sum(axis=-1, keepdims=True) / safe * rz
        ry = ry - (ry * rz).sum(axis=-1, keepdims=True) / safe * rz
    return _pearson(rx, ry, sx, sy)


def partial_spearman(x: np.ndarray, y: np.ndarray, control: np.ndarray) -> float:
    """Spearman ρ between ``x`` and ``y`` controlling for ``control`` (a partial rank correlation).

    The ranks of ``x`` and of ``y`` are each regressed on the ranks of ``control``, and the
    residuals correlated: ``(ρxy − ρxz ρyz) / √((1 − ρxz²)(1 − ρyz²))``. A monotone transform of
    ``control`` (memory or its logarithm) gives the same value.

    Parameters
    ----------
    x, y : array of shape (n,)
        Paired values.
    control : array of shape (n,)
        The values to control for.

    Returns
    -------
    float
        The partial ρ; NaN when ``x`` or ``y`` is constant or wholly ranked by ``control``, the
        plain ρ when ``control`` is constant.

    Raises
    ------
    ConfigError
        If the three arrays are not one-dimensional of the same length.
    """
    x, y, z = (np.asarray(a, dtype=float) for a in (x, y, control))
    if not (x.ndim == y.ndim == z.ndim == 1 and len(x) == len(y) == len(z)):
        raise ConfigError(f"x, y and control must be 1-D of one length, got shapes {x.shape}, {y.shape}, {z.shape}")
    return float(_rho(x, y, z)) if len(x) >= 3 else np.nan


def _check_interval(n_boot: Any, level: Any, at_least: int) -> None:
    """Refuse resample counts and coverages that give no interval (or a meaningless one)."""
    if not is_integer(n_boot) or n_boot < at_least:
        raise ConfigError(f"n_boot must be an integer >= {at_least}, got {n_boot!r}")
    if not is_real(level) or not 0 < level < 1:
        raise ConfigError(f"level must be a coverage in (0, 1), e.g. 0.95, got {level!r}")


def bootstrap_interval(x: np.ndarray, y: np.ndarray, *, n_boot: int = N_BOOT, level: float = 0.95,
                       seed: int = 0, control: np.ndarray | None = None) -> tuple[float, float]:
    """Percentile bootstrap interval of Spearman's ρ, resampling rows (pairs) with replacement.

    Parameters
    ----------
    x, y : array of shape (n,)
        Paired values.
    control : array of shape (n,), optional
        Values to control for: the interval is then that of :func:`partial_spearman`, each resample
        taking the same rows of all three (the same seed draws the same resamples as without it).
    n_boot : int
        Resamples.
    level : float
        Coverage of the interval.
    seed : int
        Seed of the resampling (a local generator).

    Returns
    -------
    (float, float)
        The interval; NaN when fewer than 3 rows, or when most resamples have a constant side.
    """
    _check_interval(n_boot, level, at_least=1)
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    z = None if control is None else np.asarray(control, dtype=float)
    if len(x) < 3:
        return np.nan, np.nan
    rng = np.random.default_rng(seed)
    rhos = np.empty(n_boot)
    for start in range(0, n_boot, 256):  # bounded memory: 256 resamples at a time
        idx = rng.integers(0, len(x), size=(min(256, n_boot - start), len(x)))
        rhos[start:start + len(idx)] = _rho_of_ranks(_resampled_ranks(x, idx), _resampled_ranks(y, idx),
                                                     None if z is None else _resampled_ranks(z, idx))
    finite = rhos[np.isfinite(rhos)]
    if len(finite) < n_boot / 2:
        return np.nan, np.nan
    tail = (1 - level) / 2
    return float(np.quantile(finite, tail)), float(np.quantile(finite, 1 - tail))


def spearman_table(df: pd.DataFrame, measures: Sequence[str] | None = None, *, within: str | None = None,
                   control: str | None = None, n_boot: int = N_BOOT, level: float = 0.95,
                   seed: int = 0) -> pd.DataFrame:
    """Spearman ρ between each measure (as a distance) and the disagreement, per task, with its interval.

    Follows the paper's correlation table: for every (measure, task), ρ is computed over **all**
    rows of an algorithm pooled (all seeds and memory budgets), with k-NN and eigenspace overlap
    turned into distances (``1 - value``) so that a positive ρ always means "the measure ranks
    unstable pairs as unstable". Each ρ comes with a percentile bootstrap interval over the rows
    (seeded): a ρ whose interval holds 0 does not show that the measure predicts anything, and two
    measures rank apart only where their intervals do not overlap. A cell of fewer than
    :data:`MIN_INTERVAL_ROWS` rows gets no interval.

    A ρ pooled over dimensions can measure the dimension rather than the instability (several
    measures move with d/n whatever the pair); ``within="dim"`` (or ``"bitrate"``) gives ρ inside
    each dimension (bit width) instead.

    A ρ also says little until it says what the measure adds beyond memory, which alone ranks
    the rows well (fewer bits, more flips). ``control="memory"`` adds, per measure, its **ρ
    controlling for memory**: a partial Spearman ρ (:func:`partial_spearman`), the ranks of the
    measure and of the disagreement each regressed on the ranks of memory and the residuals
    correlated, with its bootstrap interval (the same resamples as the plain ρ); and one
    reference row, ``measure == "memory"`` (:data:`MEMORY_ROW`), holding memory's own ρ with the
    disagreement, memory read as a distance (less memory, less stable). Memory, not dimension and
    bit width apart, is what is controlled for because a recommendation chooses among the
    configurations that fit one budget (64 dims × 1 bit against 16 dims × 4 bits): controlling
    for both would remove every difference between configurations and leave only the seeds, and
    ρ inside each dimension × bit-width cell would rank a few seeds. Ranks make the control
    indifferent to the scale of memory (bits or their logarithm) and to rows that lie off a
    straight trend in log memory (1-bit tables). A measure whose partial ρ holds 0 ranks the rows
    no better than their memory does.

    Parameters
    ----------
    df : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention (or a path / published-format table).
    measures : sequence of str, optional
        Registry names to evaluate; default every measure column present.
    within : str, optional
        A column (``"dim"``, ``"bitrate"``) to compute ρ inside each of its values.
    control : {"memory"}, optional
        Also give each measure's ρ controlling for memory, and memory's own ρ.
    n_boot : int, default 2000
        Bootstrap resamples per interval (0: no interval).
    level : float, default 0.95
        Coverage of the intervals.
    seed : int, default 0
        Seed of the bootstrap.

    Returns
    -------
    pandas.DataFrame
        Tidy table with columns ``algo, measure, task, spearman, ci_low, ci_high, n_rows`` (and
        the ``within`` column after ``task``); with ``control``, also ``partial_spearman,
        partial_low, partial_high`` (NaN on the memory row) and the memory row after each
        algorithm's measures. ρ is NaN when either side is constant; the interval is NaN below
        :data:`MIN_INTERVAL_ROWS` rows.

    Raises
    ------
    ConfigError
        If ``control`` is not one of :data:`CONTROLS`, or the interval settings give no interval.
    ResultsError
        If the table has no ``within`` column.

    Examples
    --------
    >>> from embstab.selection import from_published_csv, spearman_table, wide
    >>> table = spearman_table(from_published_csv("w2v_cbow_optimal_no_emb_norm_top_10000.csv"), control="memory")
    >>> wide(table, "partial_spearman").round(2)  # doctest: +SKIP
    """
    _check_interval(n_boot, level, at_least=0)
    if control is not None and control not in CONTROLS:
        raise ConfigError(f"control must be one of {', '.join(CONTROLS)} (or None), got {control!r}")
    df = as_results(df)
    names = resolve_measures(df, measures)
    keys = ["algo", "task"] + ([within] if within else [])
    if within and within not in df.columns:
        raise ResultsError(f"the results table has no column {within!r} to compute ρ within")

    def interval(x, y, z=None):
        if not n_boot or len(x) < MIN_INTERVAL_ROWS:
            return np.nan, np.nan
        return bootstrap_interval(x, y, n_boot=n_boot, level=level, seed=seed, control=z)

    rows = []
    for key, part in groups(df, keys):
        di = part["disagreement"].to_numpy(dtype=float)
        memory = np.log2(part["memory"].to_numpy(dtype=float)) if control else None
        label = {"algo": key[0], "task": key[1], **({within: key[2]} if within else {})}
        for name in names:
            ok = part[name].notna().to_numpy()
            dist = measure_distance(part[name].to_numpy()[ok], name)
            row = {**label, "measure": name, "spearman": np.nan, "ci_low": np.nan, "ci_high": np.nan}
            if control:
                row.update(partial_spearman=np.nan, partial_low=np.nan, partial_high=np.nan)
            if ok.sum() >= 2:
                row["spearman"] = float(_rho(dist, di[ok]))
                row["ci_low"], row["ci_high"] = interval(dist, di[ok])
            if control and ok.sum() >= 3:
                row["partial_spearman"] = float(_rho(dist, di[ok], memory[ok]))
                row["partial_low"], row["partial_high"] = interval(dist, di[ok], memory[ok])
            rows.append({**row, "n_rows": int(ok.sum())})
        if control:
            # the reference: how well memory alone (less memory, less stable) ranks the same rows
            own = -memory
            rho = float(_rho(own, di)) if len(di) >= 2 else np.nan
            low, high = interval(own, di)
            rows.append({**label, "measure": MEMORY_ROW, "spearman": rho, "ci_low": low, "ci_high": high,
                         "partial_spearman": np.nan, "partial_low": np.nan, "partial_high": np.nan,
                         "n_rows": len(di)})
    columns = ["algo", "measure", "task", *([within] if within else []), "spearman", "ci_low", "ci_high",
               *(["partial_spearman", "partial_low", "partial_high"] if control else []), "n_rows"]
    return order_by(pd.DataFrame(rows, columns=columns), "measure", [*names, MEMORY_ROW])


#: Columns of a :func:`spearman_table` that are not a ``within`` column.
_TABLE_COLUMNS = ("algo", "measure", "task", "spearman", "ci_low", "ci_high", "partial_spearman", "partial_low",
                  "partial_high", "n_rows")
#: Labels of a measure's two rows in :func:`with_intervals` of a table controlled for memory.
PLAIN, CONTROLLED = "ρ", "ρ controlling for memory"


def with_intervals(table: pd.DataFrame, *, index: str = "measure", digits: int = 2) -> pd.DataFrame:
    """A :func:`spearman_table` laid out as text: each cell ``ρ [low, high]``, one column per task.

    One row per measure, after the algorithm when the table holds several and the ``within``
    value (dimension, bit width) when it has one, so that no algorithm or cell hides another's.
    A table controlled for memory gives each measure a second row, its ρ controlling for memory,
    and memory's own ρ as the last row of each algorithm (and ``within`` value). A cell of fewer
    than :data:`MIN_INTERVAL_ROWS` rows shows its ρ and ``(too few rows)`` instead of an interval.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`spearman_table`.
    index : str, default "measure"
        The row label column.
    digits : int, default 2
        Decimals shown.

    Returns
    -------
    pandas.DataFrame
        Strings, indexed by ``[algo,] [within,] index`` (and, controlled for memory, a last level:
        :data:`PLAIN` or :data:`CONTROLLED`), columns in task order.

    Raises
    ------
    ResultsError
        If the table lacks ``index``, ``task`` or ``spearman``.
    """
    for col in (index, "task", "spearman"):
        if col not in table.columns:
            raise ResultsError(f"cannot lay out: the table has no column {col!r}")
    controlled = "partial_spearman" in table.columns
    within = [c for c in table.columns if c not in _TABLE_COLUMNS and c != index]
    levels = (["algo"] if "algo" in table.columns and table["algo"].nunique() > 1 else []) + within + [index]

    def cell(rho, low, high, n) -> str:
        if not np.isfinite(rho):
            return "n/a"
        if np.isfinite(n) and n < MIN_INTERVAL_ROWS:
            return f"{rho:.{digits}f} (too few rows)"
        if not np.isfinite(low):
            return f"{rho:.{digits}f}"
        return f"{rho:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"

    cells: dict[tuple, dict[str, str]] = {}
    n_rows = table["n_rows"] if "n_rows" in table.columns else pd.Series(np.nan, index=table.index)
    # rows of one algorithm and within value together, measures in the table's order
    order = table.assign(_n=n_rows).sort_values(levels[:-1], key=_appearance, kind="stable") if levels[:-1] \
        else table.assign(_n=n_rows)
    for r in order.to_dict("records"):
        key = tuple(r[c] for c in levels)
        shown = [(PLAIN, cell(r["spearman"], r.get("ci_low", np.nan), r.get("ci_high", np.nan), r["_n"]))]
        if controlled and r[index] != MEMORY_ROW:
            shown.append((CONTROLLED, cell(r["partial_spearman"], r["partial_low"], r["partial_high"], r["_n"])))
        for label, text in shown:
            cells.setdefault(key + ((label,) if controlled else ()), {})[r["task"]] = text
    out = pd.DataFrame.from_dict(cells, orient="index")
    out.index = pd.MultiIndex.from_tuples(list(cells), names=levels + ([None] if controlled else [])) \
        if len(levels) > 1 or controlled else pd.Index([k[0] for k in cells], name=index)
    out.columns.name = "task"
    return out[ordered_tasks(table["task"])].fillna("")


def _appearance(column: pd.Series) -> pd.Series:
    """Sort key: each value's position of first appearance (keeps the analysis' order, not the alphabet)."""
    first = {v: i for i, v in enumerate(dict.fromkeys(column))}
    return column.map(first)


def best_measures(table: pd.DataFrame) -> pd.DataFrame:
    """Per task, the measure whose ρ interval lies above every other measure's, if any does.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`spearman_table` (pooled: one row per algo, measure and task). Memory's
        reference row (:data:`MEMORY_ROW`) is not a measure and never named.

    Returns
    -------
    pandas.DataFrame
        Columns ``algo, task, best`` and ``note``: ``best`` is None where no interval separates
        (the note then says which measures cannot be told apart, or that no ρ is above 0).
    """
    rows = []
    for (algo, task), part in groups(table[table["measure"] != MEMORY_ROW], ["algo", "task"]):
        part = part[np.isfinite(part["spearman"])]
        if part.empty:
            rows.append({"algo": algo, "task": task, "best": None, "note": "no ρ could be computed"})
            continue
        top = part.loc[part["spearman"].idxmax()]
        others = part.drop(index=top.name)
        if not np.isfinite(top["ci_low"]) or top["ci_low"] <= 0:
            rows.append({"algo": algo, "task": task, "best": None,
                         "note": f"no measure's interval lies above 0 (highest: {top['measure']})"})
        elif len(others) and not (top["ci_low"] > others["ci_high"]).all():
            tied = [top["measure"], *others.loc[~(top["ci_low"] > others["ci_high"]), "measure"]]
            rows.append({"algo": algo, "task": task, "best": None,
                         "note": f"the intervals of {', '.join(tied)} overlap: no measure is clearly best"})
        else:
            rows.append({"algo": algo, "task": task, "best": top["measure"],
                         "note": f"{top['measure']}'s interval lies above every other measure's"})
    out = pd.DataFrame(rows, columns=["algo", "task", "best", "note"])
    # a string column would turn None into NaN (truthy): keep None where no measure is best
    out["best"] = pd.Series([r["best"] for r in rows], index=out.index, dtype=object)
    return out


@dataclass(frozen=True)
class CorrelationTable:
    """A :func:`spearman_table` to look at: printed as ρ with intervals, shown in a notebook, drawn.

    ``CorrelationTable(spearman_table(results, control="memory"))`` prints as
    :func:`with_intervals` lays it out and draws each measure's ρ with its interval against the
    null ρ = 0 (a measure that ranks the rows no better than chance), beside memory's own ρ when
    the table was controlled for memory.

    Attributes
    ----------
    table : pandas.DataFrame
        Output of :func:`spearman_table`.
    level : float
        The coverage its intervals were computed at (``spearman_table``'s ``level``).

    Raises
    ------
    ResultsError
        If ``table`` lacks ``measure``, ``task`` or ``spearman``.
    """

    table: pd.DataFrame
    level: float = 0.95

    def __post_init__(self):
        missing = [c for c in ("measure", "task", "spearman") if c not in self.table.columns]
        if missing:
            raise ResultsError(f"not a spearman_table: no column {', '.join(map(repr, missing))}")

    def to_frame(self) -> pd.DataFrame:
        """The tidy table.

        Returns
        -------
        pandas.DataFrame
            A copy of :attr:`table`.
        """
        return self.table.copy()

    def __str__(self) -> str:
        return with_intervals(self.table).to_string()

    def _repr_html_(self) -> str:
        controlled = "partial_spearman" in self.table.columns
        head = (f"<p><b>CorrelationTable</b>: Spearman ρ of each measure (as a distance) with the disagreement, "
                f"{self.level:.0%} bootstrap intervals"
                + (f"; each measure also controlling for memory, and memory's own ρ ({html.escape(MEMORY_ROW)})"
                   if controlled else "") + "</p>")
        return head + with_intervals(self.table).to_html()  # to_html escapes every cell and label

    def _series(self) -> list[tuple[str, pd.DataFrame]]:
        """The table's rows per series (task, with the algorithm and ``within`` value where they vary)."""
        keys = [c for c in self.table.columns if c not in _TABLE_COLUMNS]
        keys = (["algo"] if "algo" in self.table.columns and self.table["algo"].nunique() > 1 else []) + keys
        order = {t: i for i, t in enumerate(ordered_tasks(self.table["task"]))}
        out = []
        for key, part in self.table.groupby([*keys, "task"], sort=False):
            names = dict(zip([*keys, "task"], key))
            label = ", ".join([*(f"{names[k]}" if k == "algo" else f"{k}={names[k]}" for k in keys),
                               str(names["task"])])
            out.append(((tuple(names[k] for k in keys), order[names["task"]]), label, part))
        return [(label, part) for _, label, part in sorted(out, key=lambda t: t[0])]

    def plot(self, ax=None):
        """Draw each measure's ρ with its interval, one colour per task, against the null ρ = 0.

        Measures run down the y axis in the table's order (memory's own ρ last when the table was
        controlled for memory); each task (per algorithm and ``within`` value where those vary) is a
        colour, its points side by side within a measure's band. A table controlled for memory adds
        each measure's ρ controlling for memory as a hollow square beside it. A ρ that could not be
        computed is left out; one without an interval (too few rows) is a point without a bar.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Axes to draw on; default a new figure's.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from embstab.selection.plots import axes_or_new, colors, interval_points  # noqa: PLC0415

        measures = list(dict.fromkeys(self.table["measure"]))
        ax = axes_or_new(ax, figsize=(6.0, 1.2 + 0.45 * len(measures)))
        series = self._series()
        controlled = "partial_spearman" in self.table.columns
        step = 0.8 / max(len(series), 1)
        place = {m: float(i) for i, m in enumerate(measures)}
        for j, ((label, part), color) in enumerate(zip(series, colors(len(series)))):
            offset = (j - (len(series) - 1) / 2) * step
            y = part["measure"].map(place).to_numpy(dtype=np.float64) + offset
            rho = part["spearman"].to_numpy(dtype=np.float64)
            shown = np.isfinite(rho)
            interval_points(ax, rho[shown], y[shown], part["ci_low"].to_numpy(dtype=np.float64)[shown],
                            part["ci_high"].to_numpy(dtype=np.float64)[shown], horizontal=True,
                            color=color, label=label)
            if controlled:
                rho = part["partial_spearman"].to_numpy(dtype=np.float64)
                shown = np.isfinite(rho)
                interval_points(ax, rho[shown], y[shown] + step / 3,
                                part["partial_low"].to_numpy(dtype=np.float64)[shown],
                                part["partial_high"].to_numpy(dtype=np.float64)[shown], horizontal=True,
                                fmt="s", color=color, mfc="none")
        if controlled:  # one legend entry for the hollow squares, whatever their colour
            ax.plot([], [], "s", mfc="none", mec="0.3", label=CONTROLLED)
        ax.axvline(0.0, color="0.3", lw=0.8, ls="--", label="null: ρ = 0")
        ax.set_yticks(list(place.values()), measures)
        ax.set_ylim(len(measures) - 0.5, -0.5)  # the first measure on top
        ax.set_xlim(-1.05, 1.05)
        ax.set_xlabel(f"Spearman ρ with the disagreement, {self.level:.0%} interval")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside: the points fill the width
        return ax

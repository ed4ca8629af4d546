"""The linear-log stability–memory trend: disagreement falls linearly in log2(memory)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from embstab.errors import lookup
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results

__all__ = ["TrendFit", "VARIANTS", "fit_trend"]

#: variant → (column whose log2 is the regressor, extra column that splits the intercepts)
VARIANTS: dict[str, tuple[str, str | None]] = {
    "memory": ("memory", None),
    "precision": ("bitrate", "dim"),
    "dimension": ("dim", "bitrate"),
}


@dataclass(frozen=True)
class TrendFit:
    """A fitted linear-log trend ``disagreement = slope · log2(x) + intercept[group]``.

    Attributes
    ----------
    variant : {"memory", "precision", "dimension"}
        What x is: memory (dim·bitrate), bit width, or dimension.
    slope : float
        Percentage points of disagreement per doubling of x (negative when more memory helps).
    intercepts : pandas.DataFrame
        One row per group (``algo, task`` plus ``dim`` or ``bitrate`` for the precision and
        dimension variants) with columns ``intercept`` and ``n_rows``.
    threshold : float or None
        Rows with memory < threshold were used; None means all rows.
    n_rows : int
        Rows used in the fit.
    r_squared : float
        Share of the variance of the disagreement that the fit explains.
    """

    variant: str
    slope: float
    intercepts: pd.DataFrame = field(repr=False)
    threshold: float | None
    n_rows: int
    r_squared: float

    @property
    def group_columns(self) -> list[str]:
        """The columns that identify an intercept."""
        extra = VARIANTS[self.variant][1]
        return ["algo", "task"] + ([extra] if extra else [])

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        """Predicted disagreement (%) for rows with the group columns and ``dim``/``bitrate``.

        Parameters
        ----------
        rows : pandas.DataFrame
            Needs ``algo, task`` (and ``dim``, ``bitrate``); ``memory`` is derived if absent.

        Returns
        -------
        numpy.ndarray
            One prediction per row.

        Raises
        ------
        ResultsError
            If a row's group has no fitted intercept.
        """
        rows = rows.copy()
        if "memory" not in rows.columns:
            from embstab.compress.memory import memory_bits  # noqa: PLC0415 - the one formula, loaded on use

            rows["memory"] = memory_bits(rows["dim"], rows["bitrate"])
        keys = self.group_columns
        missing = [c for c in keys + [VARIANTS[self.variant][0]] if c not in rows.columns]
        if missing:
            raise ResultsError(f"cannot predict: rows lack column(s) {', '.join(missing)}")
        merged = rows[keys].merge(self.intercepts[keys + ["intercept"]], on=keys, how="left")
        if merged["intercept"].isna().any():
            bad = merged[merged["intercept"].isna()].iloc[0]
            raise ResultsError("no fitted intercept for "
                               + ", ".join(f"{k}={bad[k]!r}" for k in keys))
        x = np.log2(rows[VARIANTS[self.variant][0]].to_numpy(dtype=np.float64))
        return self.slope * x + merged["intercept"].to_numpy()


def fit_trend(df: pd.DataFrame,
              variant: Literal["memory", "precision", "dimension"] = "memory",
              threshold: float | None = 1000) -> TrendFit:
    """Fit the pooled linear-log trend of disagreement against memory, precision or dimension.

    Port of the reference ``fit_trend`` analysis: ordinary least squares over all rows with
    memory < ``threshold`` (all seeds and tasks pooled) with **one shared slope** and one
    intercept per group, solved by the normal equations (XᵀX)⁻¹Xᵀy:

    - ``"memory"``:    DI = m · log2(dim · bitrate) + c[algo, task]
    - ``"precision"``: DI = m · log2(bitrate)       + c[algo, task, dim]
    - ``"dimension"``: DI = m · log2(dim)           + c[algo, task, bitrate]

    Parameters
    ----------
    df : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention (or a path / published-format table); rows near
        chance are left out unless it comes from ``as_results(..., keep_near_chance=True)``.
    variant : {"memory", "precision", "dimension"}, default "memory"
        Which regressor and grouping to use.
    threshold : float or None, default 1000
        Keep rows with memory strictly below this many bits per word, where the trend is linear
        in log2; None keeps all rows.

    Returns
    -------
    TrendFit
        Slope, intercepts per group and fit diagnostics.

    Raises
    ------
    ResultsError
        If the variant is unknown, no row is below the threshold, or the slope is not identified
        (no group has two different values of the regressor).
    """
    lookup(VARIANTS, variant, "trend variant")
    df = as_results(df)
    if threshold is not None:
        if not np.isfinite(threshold) or threshold <= 0:
            raise ResultsError(f"threshold must be a positive number of bits, got {threshold!r}")
        df = df[df["memory"] < threshold]
        if df.empty:
            raise ResultsError(f"no row has memory < {threshold} bits per word to fit the trend")
    x_col, extra = VARIANTS[variant]
    keys = ["algo", "task"] + ([extra] if extra else [])
    codes, uniques = pd.MultiIndex.from_frame(df[keys]).factorize()
    n, k = len(df), len(uniques)
    design = np.zeros((n, 1 + k))
    design[:, 0] = np.log2(df[x_col].to_numpy(dtype=np.float64))
    design[np.arange(n), 1 + codes] = 1.0
    y = df["disagreement"].to_numpy(dtype=np.float64)
    gram = design.T @ design
    if np.linalg.matrix_rank(gram) < gram.shape[0]:
        raise ResultsError(f"the {variant} trend's slope is not identified: within every "
                           f"({', '.join(keys)}) group log2({x_col}) takes a single value")
    coef = np.linalg.solve(gram, design.T @ y)
    resid = y - design @ coef
    ss_tot = float(((y - y.mean()) ** 2).sum())
    intercepts = pd.DataFrame(list(uniques), columns=keys)
    intercepts["intercept"] = coef[1:]
    intercepts["n_rows"] = np.bincount(codes, minlength=k)
    return TrendFit(variant=variant, slope=float(coef[0]), intercepts=intercepts,
                    threshold=threshold, n_rows=n,
                    r_squared=float(1.0 - (resid @ resid) / ss_tot) if ss_tot > 0 else float("nan"))

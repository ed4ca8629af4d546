"""Figures of a study's results, drawn on matplotlib's Agg canvas and returned as PNG bytes.

Figures are built with :class:`matplotlib.figure.Figure` directly rather than through pyplot, so
rendering never touches global pyplot state or the user's interactive backend.
"""

from __future__ import annotations

import base64
import io
import math

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from embstab.measures import REGISTRY
from embstab.selection import TrendFit, measure_distance
from embstab.selection.plots import bit_colors, interval_points, memory_axes
from embstab.selection.results import ordered_tasks

__all__ = ["disagreement_vs_memory", "measure_vs_disagreement", "to_png", "to_base64_png"]

_PANEL = (3.4, 2.8)  # inches per task panel


def _grid(n_panels: int, max_cols: int = 3) -> tuple[Figure, list]:
    cols = min(n_panels, max_cols)
    rows = math.ceil(n_panels / cols)
    fig = Figure(figsize=(_PANEL[0] * cols, _PANEL[1] * rows + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def disagreement_vs_memory(df: pd.DataFrame, trend: TrendFit | None = None, unit: str = "bits per word") -> Figure:
    """Disagreement against memory, one panel per task, with the fitted linear-log trend.

    Points are configurations (mean over seeds, colour = bits per entry, a bar spans the seeds);
    the trend is solid over the memory range it was fitted on and dashed beyond.

    Parameters
    ----------
    df : pandas.DataFrame
        Results table in the shared convention.
    trend : TrendFit, optional
        A memory-variant fit (:func:`embstab.selection.fit_trend`) to overlay.
    unit : str
        What the memory counts (the x-axis label): "bits per word", "bits per entity row" ...

    Returns
    -------
    matplotlib.figure.Figure
    """
    tasks = ordered_tasks(df["task"])
    fig, axes = _grid(len(tasks))
    bitrates = sorted(df["bitrate"].unique())
    colors = list(bit_colors(bitrates).values())
    algos = list(dict.fromkeys(df["algo"]))
    markers = "osD^v<>p*h"
    for ax, task in zip(axes, tasks):
        part = df[df["task"] == task]
        stats = (part.groupby(["algo", "dim", "bitrate", "memory"], sort=False)["disagreement"]
                 .agg(["mean", "min", "max"]).reset_index())
        for b, color in zip(bitrates, colors):
            for a_idx, algo in enumerate(algos):
                sel = stats[(stats["bitrate"] == b) & (stats["algo"] == algo)]
                if sel.empty:
                    continue
                interval_points(ax, sel["memory"], sel["mean"], sel["min"], sel["max"],
                                fmt=markers[a_idx % len(markers)], color=color,
                                label=f"{b}-bit" if a_idx == 0 else None)
        if trend is not None:
            _draw_trend(ax, trend, part, task)
        memory_axes(ax, unit)
        ax.set_title(task)
    axes[0].legend(fontsize=7, title="precision", title_fontsize=7)
    title = "Downstream disagreement vs memory"
    if trend is not None:
        title += f" (trend: {trend.slope:+.2f} points per doubling)"
    if len(algos) > 1:
        # on its own line: with two or three panels one line is wider than the figure
        shapes = dict(zip(markers, "●■◆▲▼◀▶⬟★⬢"))  # the marker codes as the shapes they draw
        title += "\nmarkers: " + ", ".join(f"{shapes[markers[i % len(markers)]]} {a}"
                                            for i, a in enumerate(algos))
    fig.suptitle(title, fontsize=10)
    return fig


def _draw_trend(ax, trend: TrendFit, part: pd.DataFrame, task: str) -> None:
    for algo in dict.fromkeys(part["algo"]):
        row = trend.intercepts[(trend.intercepts["algo"] == algo)
                               & (trend.intercepts["task"] == task)]
        if row.empty:
            continue
        c = float(row["intercept"].iloc[0])
        lo, hi = part["memory"].min(), part["memory"].max()
        edge = min(hi, trend.threshold) if trend.threshold is not None else hi
        xs = np.geomspace(lo, edge, 50)
        ax.plot(xs, trend.slope * np.log2(xs) + c, color="crimson", lw=1.4,
                label="trend" if algo == part["algo"].iloc[0] else None)
        if edge < hi:
            xs = np.geomspace(edge, hi, 50)
            ax.plot(xs, trend.slope * np.log2(xs) + c, color="crimson", lw=1.0, ls="--")


def measure_vs_disagreement(df: pd.DataFrame, measure: str,
                            spearman: pd.DataFrame | None = None) -> Figure:
    """Scatter of a measure (as a distance) against the disagreement, one panel per task.

    Parameters
    ----------
    df : pandas.DataFrame
        Results table in the shared convention.
    measure : str
        Registry name of a measure column of ``df``.
    spearman : pandas.DataFrame, optional
        Output of :func:`embstab.selection.spearman_table`, to print ρ in each panel title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    tasks = ordered_tasks(df["task"])
    fig, axes = _grid(len(tasks))
    info = REGISTRY[measure]
    label = f"1 − {measure}" if info.larger_is_more_stable else measure
    if info.larger_is_more_stable and info.range[1] != 1.0:
        label = f"{info.range[1]:g} − {measure}"
    bitrates = sorted(df["bitrate"].unique())
    colors = bit_colors(bitrates)
    for ax, task in zip(axes, tasks):
        part = df[(df["task"] == task) & df[measure].notna()]
        x = measure_distance(part[measure].to_numpy(), measure)
        ax.scatter(x, part["disagreement"], s=12, c=[colors[b] for b in part["bitrate"]],
                   edgecolors="none", alpha=0.85)
        title = task
        if spearman is not None:
            rho = spearman[(spearman["measure"] == measure) & (spearman["task"] == task)]
            if len(rho) == 1 and np.isfinite(rho["spearman"].iloc[0]):
                title += f"  (Spearman ρ = {rho['spearman'].iloc[0]:.2f})"
        ax.set_title(title, fontsize=9)
        if np.all(x > 0) and x.max() / max(x.min(), 1e-300) > 100:
            ax.set_xscale("log")  # PIP and friends span orders of magnitude
        ax.set_xlabel(label)
        ax.set_ylabel("disagreement (%)")
        ax.grid(True, alpha=0.3)
    handles = [axes[0].scatter([], [], s=12, color=colors[b], label=f"{b}-bit") for b in bitrates]
    axes[0].legend(handles=handles, fontsize=7, title="precision", title_fontsize=7)
    fig.suptitle(f"{measure} vs downstream disagreement ({info.direction})")
    return fig


def to_png(fig: Figure, dpi: int = 100) -> bytes:
    """Render a figure to PNG bytes.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    dpi : int, default 100
        Resolution in dots per inch.

    Returns
    -------
    bytes
        The PNG file's content.
    """
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def to_base64_png(fig: Figure, dpi: int = 100) -> str:
    """Render a figure to a base64 string, for an ``<img src="data:image/png;base64,...">``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    dpi : int, default 100
        Resolution in dots per inch.

    Returns
    -------
    str
        The PNG, base64-encoded as ASCII.
    """
    return base64.b64encode(to_png(fig, dpi=dpi)).decode("ascii")

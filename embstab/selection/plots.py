"""The drawing pieces shared by the result objects' ``.plot()`` and the HTML report's figures.

A disagreement drawn against memory looks the same wherever it is drawn: memory on a log2 axis,
disagreement in % from 0, one viridis colour per bit width, a point with its interval as a bar.
matplotlib is imported on use only, so importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["axes_or_new", "bit_colors", "colors", "interval_points", "memory_axes"]


def axes_or_new(ax=None, figsize: tuple[float, float] = (5.0, 3.6)):
    """``ax``, or the axes of a new pyplot figure (so that a notebook shows it).

    Parameters
    ----------
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    figsize : (float, float), default (5.0, 3.6)
        Size in inches of the new figure.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt  # noqa: PLC0415 - loaded on use; headless, pyplot falls back to Agg

    return plt.subplots(figsize=figsize, layout="constrained")[1]


def colors(n: int) -> list:
    """``n`` colours along viridis (its bright yellow end left out: it vanishes on white).

    Parameters
    ----------
    n : int
        How many.

    Returns
    -------
    list of tuple
        RGBA colours, darkest first.
    """
    from matplotlib import colormaps  # noqa: PLC0415 - loaded on use

    cmap = colormaps["viridis"]
    return [cmap(v) for v in np.linspace(0.0, 0.9, max(n, 1))][:n]


def bit_colors(bitrates: Sequence[int]) -> dict:
    """One colour per bit width, the fewest bits darkest.

    Parameters
    ----------
    bitrates : sequence of int
        Bit widths (repeats allowed).

    Returns
    -------
    dict of int to tuple
        Colour of each distinct bit width.
    """
    distinct = sorted({int(b) for b in bitrates})
    return dict(zip(distinct, colors(len(distinct))))


def interval_points(ax, x, y, low, high, *, fmt: str = "o", horizontal: bool = False, **kwargs):
    """Points with a bar from ``low`` to ``high`` each (a bar that is NaN is not drawn).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Axes to draw on.
    x, y : array-like
        The points.
    low, high : array-like
        Each point's interval, on ``y`` (on ``x`` when ``horizontal``); a point outside its own
        interval gets no bar on that side.
    fmt : str, default "o"
        Marker format, as for :meth:`matplotlib.axes.Axes.errorbar`.
    horizontal : bool, default False
        The intervals are of ``x`` (a value per category on the y axis), not of ``y``.
    **kwargs
        Passed to :meth:`~matplotlib.axes.Axes.errorbar` (``color``, ``label`` ...); the defaults
        are ``ms=4``, ``lw=0.8``, ``capsize=0``.

    Returns
    -------
    matplotlib.container.ErrorbarContainer
        Its ``lines[0]`` holds the points.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    value = x if horizontal else y
    below = np.clip(value - np.asarray(low, dtype=np.float64), 0, None)
    above = np.clip(np.asarray(high, dtype=np.float64) - value, 0, None)
    for key, default in (("ms", 4), ("lw", 0.8), ("capsize", 0)):
        kwargs.setdefault(key, default)
    bars = {"xerr" if horizontal else "yerr": [below, above]}
    return ax.errorbar(x, y, fmt=fmt, **bars, **kwargs)


def memory_axes(ax, unit: str = "bits per word") -> None:
    """Style axes of disagreement against memory: log2 memory, disagreement (%) from 0, a light grid.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Axes with the points already drawn.
    unit : str, default "bits per word"
        What the memory counts (the x-axis label).
    """
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)  # disagreement is a percentage; a dashed trend may dip below zero
    ax.set_xlabel(f"memory ({unit})")
    ax.set_ylabel("disagreement (%)")
    ax.grid(True, alpha=0.3)

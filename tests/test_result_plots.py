"""Result objects draw themselves: .plot() on a recommendation, a predictor's validation and a ρ table.

Every figure is checked against the data it draws: as many points as rows, the pick, the budget
and the null where they belong, a legend entry per task. Drawn on Agg, never on a screen.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from embstab.selection import ResultsError, from_published_csv, spearman_table, validate_predictor  # noqa: E402
from embstab.selection.correlation import CONTROLLED, MEMORY_ROW, CorrelationTable  # noqa: E402
from embstab.selection.plots import interval_points  # noqa: E402
from embstab.selection.recommend import recommend  # noqa: E402
from embstab.selection.results import ordered_tasks  # noqa: E402

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"


@pytest.fixture(scope="module")
def cbow() -> pd.DataFrame:
    return from_published_csv(PUBLISHED)


def _axes():
    fig = Figure()
    FigureCanvasAgg(fig)
    return fig.subplots()


def _points(ax) -> list[tuple[np.ndarray, np.ndarray, object]]:
    """Each error-bar series' points (x, y) and its marker face colour."""
    out = []
    for container in ax.containers:
        line = container.lines[0]
        out.append((np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float),
                    line.get_markerfacecolor()))
    return out


def _line(ax, prefix: str):
    found = [line for line in ax.lines if line.get_label().startswith(prefix)]
    assert len(found) == 1, [line.get_label() for line in ax.lines]
    return found[0]


def test_recommendation_plot_draws_every_ranked_candidate_the_pick_and_the_budget(cbow):
    # one configuration's task left unmeasured: it is placed by its prediction, drawn hollow
    df = cbow[~((cbow["dim"] == 50) & (cbow["bitrate"] == 8) & (cbow["task"] == "sst"))]
    rec = recommend(df, 400, task="sst")
    ax = _axes()
    assert rec.plot(ax=ax) is ax
    ranked = rec.candidates[rec.candidates["ranked"]]
    points = _points(ax)
    xs = np.concatenate([x for x, _, _ in points])
    ys = np.concatenate([y for _, y, _ in points])
    assert len(xs) == len(ranked)
    assert sorted(zip(xs, ys)) == pytest.approx(sorted(zip(ranked["memory"].astype(float), ranked["disagreement"])))
    hollow = sum(len(x) for x, _, face in points if isinstance(face, str) and face == "none")
    assert hollow == int((ranked["source"] != "measured").sum()) == 1
    # one legend entry per (bit width, source) group
    labels = set(ax.get_legend_handles_labels()[1])
    groups = {f"{b}-bit, {s}" for b, s in ranked[["bitrate", "source"]].itertuples(index=False)}
    assert groups <= labels
    pick = ranked[(ranked["dim"] == rec.dim) & (ranked["bitrate"] == rec.bitrate)].iloc[0]
    star = _line(ax, "shipped:")
    assert list(star.get_xdata()) == [rec.memory] and list(star.get_ydata()) == pytest.approx([pick["disagreement"]])
    assert f"dim={rec.dim} {rec.bitrate}-bit" in star.get_label()
    assert list(_line(ax, "budget").get_xdata()) == [400, 400]
    assert len(_line(ax, "ties with the best").get_xdata()) == rec.n_ties > 1
    assert ax.get_xscale() == "log" and ax.get_ylim()[0] == 0


def test_recommendation_plot_without_a_tie_draws_no_ring():
    rows = [{"algo": "a", "seed": s, "dim": d, "bitrate": 4, "task": "t", "disagreement": v + 0.1 * s}
            for d, v in ((16, 9.0), (32, 5.0), (64, 1.0)) for s in range(3)]
    rec = recommend(pd.DataFrame(rows), 1000)
    ax = _axes()
    rec.plot(ax=ax)
    assert rec.n_ties == 1 and not any(line.get_label() == "ties with the best" for line in ax.lines)
    assert sum(len(x) for x, _, _ in _points(ax)) == 3


def test_validation_plot_draws_predicted_against_measured_per_task(cbow):
    sub = cbow[cbow["task"].isin(["sst", "mr"])]
    validation = validate_predictor(sub, by="seed")
    # a few rows outside the calibration have no prediction: they are not drawn
    rows = validation.rows.copy()
    rows.loc[rows.index[:5], "in_calibration"] = False
    validation = dataclasses.replace(validation, rows=rows)
    ax = _axes()
    assert validation.plot(ax=ax) is ax
    inside = rows[rows["in_calibration"]]
    points = _points(ax)
    assert sum(len(x) for x, _, _ in points) == len(inside)
    assert sorted(np.concatenate([x for x, _, _ in points])) == pytest.approx(sorted(inside["disagreement"]))
    assert sorted(np.concatenate([y for _, y, _ in points])) == pytest.approx(sorted(inside["predicted"]))
    # each point's bar spans its interval
    bars = np.concatenate([c.lines[2][0].get_segments() for c in ax.containers])
    assert sorted(b[0][1] for b in bars) == pytest.approx(sorted(np.minimum(inside["lower"], inside["predicted"])))
    assert sorted(b[1][1] for b in bars) == pytest.approx(sorted(np.maximum(inside["upper"], inside["predicted"])))
    labels = ax.get_legend_handles_labels()[1]
    assert [label for label in labels if label in ("sst", "mr")] == ordered_tasks(inside["task"])
    diagonal = _line(ax, "predicted = measured")
    assert list(diagonal.get_xdata()) == list(diagonal.get_ydata())
    assert f"coverage {validation.coverage:.0%}" in ax.get_title()
    # its page shows the notes on what could not be validated, escaped
    page = dataclasses.replace(validation, notes=("<algo>: one seed",))._repr_html_()
    assert "<p>&lt;algo&gt;: one seed</p>" in page


def test_correlation_plot_draws_each_rho_with_its_interval_and_the_null(cbow):
    sub = cbow[cbow["task"].isin(["sst", "mr", "subj"])]
    table = spearman_table(sub, control="memory", n_boot=100)
    table.loc[0, "spearman"] = np.nan  # a ρ that could not be computed is left out
    corr = CorrelationTable(table)
    ax = _axes()
    assert corr.plot(ax=ax) is ax
    plain = [c for c in ax.containers if c.lines[0].get_marker() == "o"]
    squares = [c for c in ax.containers if c.lines[0].get_marker() == "s"]
    assert sum(len(c.lines[0].get_xdata()) for c in plain) == int(np.isfinite(table["spearman"]).sum())
    assert sum(len(c.lines[0].get_xdata()) for c in squares) == int(np.isfinite(table["partial_spearman"]).sum())
    drawn = sorted(np.concatenate([c.lines[0].get_xdata() for c in plain]))
    assert drawn == pytest.approx(sorted(table["spearman"].dropna()))
    # the bars span the bootstrap intervals, along x
    bars = np.concatenate([c.lines[2][0].get_segments() for c in plain])
    finite = table[np.isfinite(table["spearman"])]
    assert sorted(b[0][0] for b in bars) == pytest.approx(sorted(finite["ci_low"]))
    assert sorted(b[1][0] for b in bars) == pytest.approx(sorted(finite["ci_high"]))
    null = _line(ax, "null")
    assert list(null.get_xdata()) == [0, 0]
    measures = list(dict.fromkeys(table["measure"]))
    assert [t.get_text() for t in ax.get_yticklabels()] == measures and measures[-1] == MEMORY_ROW
    labels = ax.get_legend_handles_labels()[1]
    assert [label for label in labels if label in ("sst", "mr", "subj")] == ["sst", "mr", "subj"]
    assert CONTROLLED in labels


def test_correlation_plot_within_dimension_labels_each_series(cbow):
    table = spearman_table(cbow[cbow["task"] == "sst"], within="dim", n_boot=0)
    ax = _axes()
    CorrelationTable(table).plot(ax=ax)
    labels = [label for label in ax.get_legend_handles_labels()[1] if label.startswith("dim=")]
    assert labels == [f"dim={d}, sst" for d in sorted(table["dim"].unique())]
    assert not any(c.lines[0].get_marker() == "s" for c in ax.containers)  # not controlled: no squares


def test_correlation_table_shows_escaped_html_and_refuses_other_frames(cbow):
    table = spearman_table(cbow[cbow["task"] == "sst"], n_boot=0)
    table["task"] = "<b>sst</b>"
    corr = CorrelationTable(table)
    page = corr._repr_html_()
    assert "&lt;b&gt;sst&lt;/b&gt;" in page and "<b>sst</b>" not in page
    assert str(corr).splitlines()[0].split()[-1] == "<b>sst</b>"
    assert corr.to_frame().equals(table) and corr.to_frame() is not table
    with pytest.raises(ResultsError, match="spearman"):
        CorrelationTable(table.drop(columns="spearman"))


def test_plot_without_axes_draws_on_a_new_pyplot_figure():
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [{"algo": "a", "seed": s, "dim": d, "bitrate": 4, "task": "t", "disagreement": v + 0.1 * s}
            for d, v in ((16, 9.0), (32, 5.0)) for s in range(3)]
    before = set(plt.get_fignums())
    ax = recommend(pd.DataFrame(rows), 1000).plot()
    try:
        assert ax.figure.number not in before and ax.figure.number in plt.get_fignums()
    finally:
        plt.close(ax.figure)


def test_interval_points_clip_a_point_outside_its_interval():
    ax = _axes()
    bars = interval_points(ax, [1.0, 2.0], [5.0, 3.0], [4.0, 3.5], [6.0, 4.0]).lines[2][0].get_segments()
    # the second point lies below its interval: no bar below it, its bar reaches the top
    assert [tuple(s[:, 1]) for s in bars] == [(4.0, 6.0), (3.0, 4.0)]

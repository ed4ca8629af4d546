"""What a measure adds beyond memory: the ρ controlling for memory, memory's own ρ, small cells
without an interval, every algorithm labelled in the within tables, and one description of EIS's null."""

from __future__ import annotations

import html
import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from embstab.errors import ConfigError
from embstab.selection import (
    best_measures,
    bootstrap_interval,
    from_published_csv,
    partial_spearman,
    spearman_table,
    with_intervals,
)
from embstab.selection.correlation import CONTROLLED, MEMORY_ROW, MIN_INTERVAL_ROWS, PLAIN
from embstab.selection.signal import EIS_NULL

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests" / "data" / "w2v_cbow_published.csv"


def _grid(algo: str, beyond: float, seeds=(1, 2, 3), rng=None) -> list[dict]:
    """Rows whose disagreement falls with memory plus a part of its own; the measure tracks memory
    and, with weight ``beyond``, that own part."""
    rng = rng if rng is not None else np.random.default_rng(0)
    rows = []
    for s, d, b in itertools.product(seeds, (8, 16, 32, 64), (1, 2, 4, 8, 32)):
        mem = d * b
        own = rng.normal()
        rows.append({"algo": algo, "seed": s, "dim": d, "bitrate": b, "task": "lp",
                     "disagreement": 60.0 - 5.0 * np.log2(mem) + 3.0 * own,
                     "eis": 1.0 / np.log2(2 + mem) + 0.02 * (beyond * own + (1 - beyond) * rng.normal())})
    return rows


def test_partial_rho_is_near_zero_when_disagreement_follows_memory_only():
    table = spearman_table(pd.DataFrame(_grid("DistMult", beyond=0.0)), control="memory", n_boot=500)
    eis = table[table["measure"] == "eis"].iloc[0]
    assert eis["spearman"] > 0.7  # pooled, the measure looks good: it follows memory
    assert abs(eis["partial_spearman"]) < 0.2 and eis["partial_low"] < 0 < eis["partial_high"]
    memory = table[table["measure"] == MEMORY_ROW].iloc[0]
    assert memory["spearman"] > 0.7 and np.isnan(memory["partial_spearman"])


def test_partial_rho_stays_high_where_the_measure_sees_beyond_memory():
    table = spearman_table(pd.DataFrame(_grid("DistMult", beyond=1.0)), control="memory", n_boot=500)
    eis = table[table["measure"] == "eis"].iloc[0]
    assert eis["partial_spearman"] > 0.6 and eis["partial_low"] > 0.3


def test_partial_rho_is_the_partial_correlation_of_ranks():
    rng = np.random.default_rng(3)
    z = rng.integers(1, 6, size=60).astype(float)  # ties, as memory has
    x = z + rng.normal(size=60)
    y = z + x + rng.normal(size=60)
    r = stats.spearmanr(np.c_[x, y, z]).statistic
    expected = (r[0, 1] - r[0, 2] * r[1, 2]) / np.sqrt((1 - r[0, 2] ** 2) * (1 - r[1, 2] ** 2))
    assert partial_spearman(x, y, z) == pytest.approx(expected, abs=1e-12)
    assert partial_spearman(x, y, np.log2(z)) == pytest.approx(expected, abs=1e-12)  # ranks: log or not
    # a constant control removes nothing: the plain ρ remains
    assert partial_spearman(x, y, np.ones(60)) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    # a measure wholly ranked by the control has nothing left to correlate
    assert np.isnan(partial_spearman(2 * z, y, z))
    with pytest.raises(ConfigError, match="1-D of one length"):
        partial_spearman(x, y, z[:10])


def test_partial_interval_holds_the_estimate_and_is_seeded():
    rows = pd.DataFrame(_grid("DistMult", beyond=0.5))
    a = spearman_table(rows, control="memory", n_boot=400, seed=7)
    b = spearman_table(rows, control="memory", n_boot=400, seed=7)
    c = spearman_table(rows, control="memory", n_boot=400, seed=8)
    pd.testing.assert_frame_equal(a, b)
    assert not a["partial_low"].equals(c["partial_low"])
    for r in a[a["measure"] != MEMORY_ROW].itertuples():
        assert r.partial_low <= r.partial_spearman <= r.partial_high
        assert r.ci_low <= r.spearman <= r.ci_high
    x, y, z = rows["eis"].to_numpy(), rows["disagreement"].to_numpy(), rows["dim"] * rows["bitrate"]
    assert bootstrap_interval(x, y, control=z, seed=1) == bootstrap_interval(x, y, control=z, seed=1)


def test_memory_row_is_memorys_own_rho_and_never_the_best_measure():
    df = from_published_csv(PUBLISHED)
    table = spearman_table(df, control="memory", n_boot=0)
    plain = spearman_table(df, n_boot=0)
    # the measures' own ρ is unchanged by the control
    pd.testing.assert_frame_equal(table[table["measure"] != MEMORY_ROW][plain.columns].reset_index(drop=True), plain)
    for r in table[table["measure"] == MEMORY_ROW].itertuples():
        part = df[df["task"] == r.task]
        assert r.spearman == pytest.approx(stats.spearmanr(-part["memory"], part["disagreement"]).statistic, abs=1e-12)
    # memory ranks the published rows better than PIP loss; it is still no measure to name
    assert (best_measures(table)["best"].dropna() != MEMORY_ROW).all()
    with pytest.raises(ConfigError, match="control must be one of memory"):
        spearman_table(df, control="dim")


def test_small_cells_have_no_interval_and_say_so():
    df = pd.DataFrame(_grid("DistMult", beyond=0.5, seeds=(1,)))  # 4 rows per bit width
    inside = spearman_table(df, within="bitrate", control="memory", n_boot=200)
    assert (inside["n_rows"] < MIN_INTERVAL_ROWS).all()
    assert inside[["ci_low", "ci_high", "partial_low", "partial_high"]].isna().all().all()
    assert inside["spearman"].notna().any()
    shown = with_intervals(inside)
    cells = shown.to_numpy().ravel()
    assert all("[" not in c for c in cells)
    assert all(c.endswith("(too few rows)") for c in cells if c != "n/a")
    # 20 rows pooled are enough for an interval
    pooled = with_intervals(spearman_table(df, control="memory", n_boot=200))
    assert pooled.loc[("eis", PLAIN), "lp"].count("[") == 1


def test_within_tables_label_every_algorithm():
    rng = np.random.default_rng(1)
    df = pd.DataFrame(_grid("DistMult", beyond=1.0, rng=rng) + _grid("TransE", beyond=0.0, rng=rng))
    inside = spearman_table(df, within="dim", control="memory", n_boot=100)
    shown = with_intervals(inside)
    assert shown.index.names[:3] == ["algo", "dim", "measure"]
    assert set(shown.index.get_level_values("algo")) == {"DistMult", "TransE"}
    # each algorithm has its own numbers, not the first algorithm's repeated
    for dim in (8, 16, 32, 64):
        rows = inside[(inside["dim"] == dim) & (inside["measure"] == "eis")].set_index("algo")
        assert shown.loc[("DistMult", dim, "eis", CONTROLLED), "lp"].startswith(f"{rows.loc['DistMult', 'partial_spearman']:.2f}")
        assert shown.loc[("TransE", dim, "eis", CONTROLLED), "lp"].startswith(f"{rows.loc['TransE', 'partial_spearman']:.2f}")


def test_study_cli_prints_every_algorithm_in_its_within_tables(capsys):
    from embstab.cli.study import _correlations

    rng = np.random.default_rng(2)
    _correlations(pd.DataFrame(_grid("DistMult", beyond=1.0, rng=rng) + _grid("TransE", beyond=0.0, rng=rng)))
    out = capsys.readouterr().out
    within = out.split("within each dimension", 1)[1].split("within each bit width", 1)[0]
    assert "DistMult" in within and "TransE" in within and CONTROLLED in within
    assert "memory" in out.split("within each dimension", 1)[0]


# --- the null of EIS: one description, true of the computed null -------------------------------

def _words(n):
    return [f"w{i}" for i in range(n)]


def test_eis_null_description_matches_the_computed_null():
    # c + d/n − 2cd/n, c the share of the anchors' weighted spectrum the tables' spans hold
    import embstab
    from embstab import Embedding

    rng = np.random.default_rng(0)
    n, k, alpha = 400, 24, 3
    ea = rng.normal(size=(n, k))
    eb = ea + 0.3 * rng.normal(size=(n, k))
    anchors = (Embedding(_words(n), ea), Embedding(_words(n), eb))

    def share(x, e):
        u = np.linalg.qr(x)[0]
        v, r, _ = np.linalg.svd(e, full_matrices=False)
        w = r ** (2 * alpha)
        return float(((u.T @ v) ** 2 @ w).sum() / w.sum()), float(w.sum())

    def null(x, y):
        table = embstab.compare(Embedding(_words(n), x), Embedding(_words(n), y), anchors=anchors, measures=["eis"])
        return float(table["null"].iloc[0])

    cases = {"own anchor": (ea, eb), "unrelated": tuple(rng.normal(size=(2, n, 6))),
             "part of the anchor's span": (ea @ (m := rng.normal(size=(k, 6))), eb @ m)}
    for name, (x, y) in cases.items():
        (ca, wa), (cb, wb) = share(x, ea), share(y, eb)
        c, d = (ca * wa + cb * wb) / (wa + wb), x.shape[1]
        assert null(x, y) == pytest.approx(c + d / n - 2 * c * d / n, rel=0.05, abs=1e-3), name
    assert null(ea, eb) == pytest.approx(1 - k / n, abs=0.01)  # its own anchor
    unrelated = cases["unrelated"]
    assert null(*unrelated) == pytest.approx(2 * 6 / n, rel=0.2)
    assert "2d/n" in EIS_NULL and "1 − d/n" in EIS_NULL and "c + d/n − 2cd/n" in EIS_NULL


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_eis_null_is_described_once_in_the_same_words_everywhere():
    readme = _flat((ROOT / "README.md").read_text(encoding="utf-8"))
    assert readme.count(_flat(EIS_NULL)) == 1
    # no other description of the EIS null's level survives in the package or the READMEs
    for path in [ROOT / "README.md", ROOT / "pipelines" / "README.md", *(ROOT / "embstab").rglob("*.py")]:
        text = path.read_text(encoding="utf-8").replace(EIS_NULL, "")
        assert not re.search(r"null of EIS[^.]*(about|≈) ?2d/n", _flat(text)), path
    from embstab.report.builder import _null_section

    rows = pd.DataFrame(_grid("DistMult", beyond=1.0)).assign(eis_null=0.5, eis_signal=True)
    document = _null_section(rows).render()
    assert _flat(document).count(_flat(html.escape(EIS_NULL))) == 1  # the page escapes its text


# --- the README's answer table comes from code -------------------------------------------------

README_MEASURES = {"eis": "EIS", "knn": "k-NN", "semantic_displacement": "semantic displacement",
                   "eigenspace_overlap": "eigenspace overlap", "pip_loss": "PIP loss"}
README_TASKS = {"sst": "SST-2", "mr": "MR", "subj": "Subj", "mpqa": "MPQA", "ner": "NER"}


def cbow_markdown() -> list[str]:
    """The README's word-embedding table, computed from the published CBOW copy in ``tests/data``."""
    shown = with_intervals(spearman_table(from_published_csv(PUBLISHED), control="memory"))
    lines = ["| measure | " + " | ".join(README_TASKS.values()) + " |", "|---" * (1 + len(README_TASKS)) + "|"]
    for name in [*README_MEASURES, MEMORY_ROW]:
        for label in (PLAIN, CONTROLLED):
            if (name, label) not in shown.index:
                continue
            title = "memory alone" if name == MEMORY_ROW else README_MEASURES[name]
            if label == CONTROLLED:
                title += " controlling for memory"
            cells = [shown.loc[(name, label), t].replace("-", "−") for t in README_TASKS]
            lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return lines


def test_readme_cbow_table_is_the_computed_one():
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    expected = cbow_markdown()
    start = readme.index(expected[0])
    assert readme[start:start + len(expected)] == expected


def cbow_summary() -> str:
    """The README's sentence on what EIS and k-NN add beyond memory on the published CBOW table."""
    table = spearman_table(from_published_csv(PUBLISHED), control="memory")

    def span(name, column):
        values = table.loc[table["measure"] == name, column]
        return f"{values.min():.2f}–{values.max():.2f}"

    lows = table.loc[table["measure"].isin(["eis", "knn"]), "partial_low"]
    verdict = "no interval holds 0" if (lows > 0).all() else "some intervals hold 0"
    return (f"Memory alone ranks these rows with ρ {span(MEMORY_ROW, 'spearman')}; controlling for memory, EIS "
            f"keeps {span('eis', 'partial_spearman')} and k-NN {span('knn', 'partial_spearman')} ({verdict}):")


def test_readme_cbow_summary_is_the_computed_one():
    readme = _flat((ROOT / "README.md").read_text(encoding="utf-8"))
    assert cbow_summary() in readme

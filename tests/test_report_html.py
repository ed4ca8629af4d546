"""The HTML report: self-contained, every image decodes, tables carry the analyses' numbers."""

from __future__ import annotations

import argparse
import base64
import html
import io
import itertools
import os
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from embstab.cli import report as report_cli
from embstab.report import build_report, write_report
from embstab.report.plots import disagreement_vs_memory, measure_vs_disagreement, to_png
from embstab.selection import ResultsError, fit_trend, from_published_csv

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"


class Page(HTMLParser):
    """Collects what a browser would fetch or show: images, links, headings, table cells."""

    def __init__(self):
        super().__init__()
        self.images, self.links, self.h2, self.cells = [], [], [], []
        self._tag = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._tag = tag
        if tag == "img":
            self.images.append(attrs)
        if tag in ("a", "link", "script"):
            self.links.append(attrs.get("href") or attrs.get("src"))

    def handle_data(self, data):
        if self._tag == "h2":
            self.h2.append(data)
        if self._tag == "td" and data.strip():
            self.cells.append(data.strip())

    def handle_endtag(self, tag):
        self._tag = None


@pytest.fixture(scope="module")
def page() -> tuple[str, Page]:
    document = build_report(PUBLISHED, progress=False)
    parsed = Page()
    parsed.feed(document)
    return document, parsed


def decode(img_attrs: dict) -> Image.Image:
    src = img_attrs["src"]
    assert src.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1], validate=True)))


def test_report_is_self_contained_and_images_decode(page):
    document, parsed = page
    assert document.startswith("<!DOCTYPE html>") and document.rstrip().endswith("</html>")
    # One memory plot plus one plot per measure, all inline PNGs that decode to real pictures.
    assert len(parsed.images) == 1 + 5
    for attrs in parsed.images:
        img = decode(attrs)
        assert img.format == "PNG" and img.width > 600 and img.height > 300
        assert np.asarray(img.convert("L")).std() > 10  # not a blank canvas
        assert attrs["alt"]
    # Nothing to fetch: the only links are in-page anchors.
    assert parsed.links and all(link.startswith("#") for link in parsed.links)


def test_report_sections_and_numbers(page):
    document, parsed = page
    assert parsed.h2 == ["Recommendations by memory budget", "Disagreement vs memory",
                         "Correlation with downstream disagreement",
                         "Correlation within one dimension and within one bit width",
                         "Pairwise selection error and robustness",
                         "Choosing dimension and precision under a memory budget",
                         "Choosing by predicted disagreement, on a seed the calibration never saw",
                         "Each measure vs disagreement"]
    # The spec's CBOW numbers appear in the tables (Spearman of EIS on MR, oracle gap of PIP).
    # each ρ comes with its bootstrap interval: "0.86 [low, high]"
    assert any(c.startswith("0.86 [") for c in parsed.cells) and "3.63" in parsed.cells
    # beside each ρ, the ρ controlling for memory, and memory's own ρ
    correlation = document.split('id="correlation"', 1)[1].split("</section>", 1)[0]
    assert correlation.count("<th>ρ controlling for memory</th>") == 5 and "<th>memory</th>" in correlation
    slope = fit_trend(from_published_csv(PUBLISHED)).slope
    assert f"{slope:.3f}" in parsed.cells
    assert "highest_precision" in document and "lowest_precision" in document


def test_report_compares_predicted_measure_and_random_picks(page):
    from embstab.selection import prediction_gap

    document, _ = page
    section = document.split('id="predicted-gap"', 1)[1].split("</section>", 1)[0]
    for selector in ("predicted", "eis", "random"):
        assert f"<th>{selector}</th>" in section
    # the last row: each selector's mean gap over every budget, task and held-out seed
    gaps = prediction_gap(from_published_csv(PUBLISHED)).groupby("selector", sort=False)["gap"].mean()
    last = section.split("<td>all budgets</td>", 1)[1].split("</tr>", 1)[0]
    cells = [c.split("</td>")[0] for c in last.split("<td>")[1:]]
    assert cells[1:] == [f"{gaps[s]:.2f}" for s in ("predicted", "eis", "random")]


def test_write_report_is_atomic_and_cli_writes_it(tmp_path, capsys):
    # A slice of the study (one task, two measures) keeps this test quick.
    small = from_published_csv(PUBLISHED).query("task == 'sst'")
    small = small[["algo", "seed", "dim", "bitrate", "memory", "task", "disagreement", "eis",
                   "knn"]]
    results = tmp_path / "small.parquet"
    small.to_parquet(results, index=False)
    out = write_report(results, tmp_path / "sub" / "r.html", progress=False, budgets=[400])
    assert out.read_text().count("<img ") == 3
    assert [p.name for p in out.parent.iterdir()] == ["r.html"]  # no temporary left behind

    parser = argparse.ArgumentParser(prog="embstab")
    report_cli.register(parser.add_subparsers(dest="command"))
    target = tmp_path / "cli.html"
    args = parser.parse_args(["report", str(results), "-o", str(target), "--measure", "knn",
                              "--budget", "400", "--budget", "800", "--title", "T & <b>"])
    assert args.func(args) == 0
    text = target.read_text()
    assert "<title>T &amp; &lt;b&gt;</title>" in text  # user text is escaped
    assert "(requested: knn)" in text  # --measure reaches the recommendation section
    assert str(target) in capsys.readouterr().err


def test_small_study_still_renders_with_notes():
    # Two seeds, one task, every memory at or above the trend threshold: no trend below it; the
    # recommendations (whose predictions come from the calibrated predictor, not the trend) are
    # there, and the report says why its trend section is empty.
    rows = [{"algo": "a", "seed": s, "dim": d, "bitrate": b, "task": "rt", "disagreement":
             10.0 / (d * b) ** 0.2 + s, "eis": 1.0 / (d * b)}
            for s, d, b in itertools.product((1, 2), (64, 128), (16, 32))]
    document = build_report(pd.DataFrame(rows), progress=False)
    assert "no row has memory &lt; 1000 bits per word to fit the trend" in document
    recommendations = document.split('id="recommend"', 1)[1].split("</section>", 1)[0]
    assert "No recommendation" not in recommendations and recommendations.count("<tr") == 4  # header + 3 budgets
    assert document.count("<img ") == 2
    with pytest.raises(ResultsError, match="no measure column"):
        build_report(pd.DataFrame(rows).drop(columns="eis"), progress=False)
    # A study interrupted after its first configuration: nothing to compare yet, still a page.
    first = pd.DataFrame(rows).query("dim == 64 and bitrate == 16")
    document = build_report(first, progress=False)
    assert "Not computed: no pair of configurations to compare" in document
    assert "Not computed: no memory budget has two or more configurations" in document


def test_plot_functions_return_figures_with_one_panel_per_task():
    df = from_published_csv(PUBLISHED)
    fig = disagreement_vs_memory(df, fit_trend(df))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["sst", "mr", "subj", "mpqa", "ner"]
    assert all(ax.get_xscale() == "log" for ax in visible)
    fig = measure_vs_disagreement(df, "knn")
    assert fig.axes[0].get_xlabel() == "1 − knn"
    assert to_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


HOSTILE = "<script>alert(1)</script>"


def _browser():
    """A headless Chromium driven through Selenium and the system chromedriver (Debian packages)."""
    import shutil

    webdriver = pytest.importorskip("selenium.webdriver")
    binary = next((shutil.which(b) for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the browser test: scripts/fetch_data.sh installs chromium and chromium-driver")
        pytest.skip("no chromium/chromedriver here (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,2000",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.webdriver.chrome.service import Service

    return webdriver.Chrome(service=Service(driver_path), options=options)


def test_report_in_a_real_browser_renders_every_plot_and_escapes_names(tmp_path):
    small = from_published_csv(PUBLISHED).query("task in ['sst', 'ner']")[
        ["algo", "seed", "dim", "bitrate", "task", "disagreement", "eis", "knn"]].copy()
    small.loc[small["algo"] == small["algo"].iloc[0], "algo"] = HOSTILE  # a user-supplied name
    page = write_report(small, tmp_path / "r.html", title=f"study {HOSTILE}", progress=False)
    driver = _browser()
    try:
        driver.get(page.as_uri())
        assert driver.execute_script("return document.readyState") == "complete"
        # the hostile strings are text on the page, and no script from them ran
        assert f"study {HOSTILE}" in driver.find_element("tag name", "h1").text
        assert HOSTILE in driver.find_element("tag name", "body").text
        assert driver.execute_script("return document.querySelectorAll('script').length") == 0
        images = driver.find_elements("tag name", "img")
        # the memory trend plus one plot per measure at least
        assert len(images) >= 3
        for img in images:
            loaded = driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img)
            assert loaded and loaded > 100, img.get_attribute("alt")
            assert img.is_displayed()
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        png = driver.get_screenshot_as_png()
        # a laptop's window: nothing runs past the right edge; a table wider than the page scrolls
        # inside its own box, and the recommendations fit theirs (their notes wrap, not cut off)
        driver.set_window_size(1280, 900)
        layout = driver.execute_script("""
            const right = e => e.getBoundingClientRect().right;
            const outside = Array.from(document.body.querySelectorAll('*')).filter(e => !e.closest('.table-box'));
            return {inner: window.innerWidth, scroll: document.documentElement.scrollWidth,
                    widest: Math.max(...outside.map(right)),
                    boxes: Array.from(document.querySelectorAll('table')).map(t => [
                        t.closest('section') ? t.closest('section').id : '', right(t.parentElement),
                        getComputedStyle(t.parentElement).overflowX, right(t)]),
                    notes: Array.from(document.querySelectorAll('#recommend td:last-child')).map(
                        td => [td.getBoundingClientRect().height, parseFloat(getComputedStyle(td).lineHeight)])};
        """)
    finally:
        driver.quit()
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    assert (pixels < 128).mean() > 0.01  # text, tables and plots put ink on the page
    assert layout["inner"] <= 1280 and layout["scroll"] <= layout["inner"], layout
    assert layout["widest"] <= layout["inner"], layout
    assert layout["boxes"] and all(box <= layout["inner"] and overflow == "auto"
                                   for _, box, overflow, _ in layout["boxes"]), layout["boxes"]
    recommend = [(box, table) for section, box, _, table in layout["boxes"] if section == "recommend"]
    assert recommend and all(table <= box + 0.5 for box, table in recommend), recommend
    # the tie notes name configurations at length: they wrap over several lines of their cell
    assert max(height / line for height, line in layout["notes"]) >= 3, layout["notes"]


def _kind_rows(kind: str, algo: str, task: str, width: int = 1) -> list[dict]:
    """Rows of one kind whose disagreement falls with memory and whose EIS follows it exactly, while
    PIP runs backwards (so the per-kind Spearman table has known signs: EIS 1, PIP near -1)."""
    rows = []
    for s, d, b in itertools.product((1, 2), (8, 16), (1, 4, 32)):
        mem = width * d * b
        rows.append({"algo": algo, "seed": s, "dim": d, "bitrate": b, "memory": mem, "task": task, "kind": kind,
                     "disagreement": 40.0 / np.log2(2 + mem) + 0.01 * s, "quality": 50.0,
                     "eis": 1.0 / np.log2(2 + mem) + 1e-4 * s, "pip_loss": float(mem) + s})
    return rows


def test_report_has_a_section_per_kind_in_its_memory_unit():
    # a complex KG model stores two entries per dimension: its memory is its own, not dim x bits
    df = pd.DataFrame(_kind_rows("word", "w2v_cbow", "rt_sentiment")
                      + _kind_rows("kg", "ComplEx", "link_prediction", width=2))
    document = build_report(df, progress=False)
    parsed = Page()
    parsed.feed(document)
    assert "Knowledge-graph embeddings (entity tables)" in parsed.h2 and "Word embeddings" in parsed.h2
    # memory plot + one per kind + one per measure
    assert len(parsed.images) == 1 + 2 + 2
    alts = [img["alt"] for img in parsed.images]
    assert "downstream disagreement against memory for knowledge-graph embeddings (entity tables)" in alts
    for kind in ("word", "kg"):
        section = document.split(f'id="kind-{kind}"', 1)[1].split("</section>", 1)[0]
        # EIS ranks every row of the kind as the disagreement does; PIP ranks them backwards
        rows = {r.split("</th>", 1)[0].rsplit(">", 1)[-1]: r for r in section.split('valign="top">')[1:]}
        eis, pip = ([c.split("</td>")[0].strip() for c in rows[m].split("<td>")[1:]] for m in ("eis", "pip_loss"))
        assert eis[0].startswith("1.00 [") and float(pip[0].split(" ")[0]) < -0.9
    assert "bits per entity row" in document and "bits per word" in document
    # recommendations per kind: the table names each row's kind
    recs = document.split('id="recommend"', 1)[1].split("</section>", 1)[0]
    assert "<th>kind</th>" in recs and "<td>kg</td>" in recs and "<td>word</td>" in recs


def test_recommend_keeps_kinds_apart():
    from embstab.selection import recommend

    df = pd.DataFrame(_kind_rows("word", "w2v_cbow", "rt_sentiment")
                      + _kind_rows("kg", "ComplEx", "link_prediction", width=2))
    with pytest.raises(ResultsError, match="several kinds"):
        recommend(df, 64)
    with pytest.raises(ResultsError, match="no results of kind 'contextual'"):
        recommend(df, 64, kind="contextual")
    rec = recommend(df, 64, kind="kg")
    assert (rec.kind, rec.unit, rec.algo) == ("kg", "bits per entity row", "ComplEx")
    assert rec.memory <= 64 and rec.memory == 2 * rec.dim * rec.bitrate
    assert "64 bits per entity row" in str(rec)
    assert recommend(df, 64, algo="w2v_cbow").unit == "bits per word"


def _two_algorithms(seeds=(1, 2)) -> pd.DataFrame:
    """A KG-like study of two algorithms whose measures differ, each with a null."""
    rng = np.random.default_rng(4)
    rows = []
    for algo, slope in (("DistMult", 5.0), ("TransE", 3.0)):
        for s, d, b in itertools.product(seeds, (16, 64), (1, 2, 4, 8, 32)):
            mem = d * b
            noise = rng.normal()
            rows.append({"algo": algo, "seed": s, "dim": d, "bitrate": b, "task": "link_prediction", "kind": "kg",
                         "disagreement": 60.0 - slope * np.log2(mem) + 2.0 * noise, "quality": 50.0,
                         "eis": 1.0 / np.log2(2 + mem) + 0.01 * noise, "eis_null": 0.5, "eis_signal": True})
    return pd.DataFrame(rows)


def test_within_tables_show_every_algorithm_labelled_and_small_cells_say_so():
    from embstab.selection.signal import EIS_NULL

    document = build_report(_two_algorithms(), progress=False)
    within = document.split('id="within"', 1)[1].split("</section>", 1)[0]
    assert "Within each dimension" in within and "Within each bit width" in within
    for part in within.split("Within each ")[1:]:
        assert "<th>algo</th>" in part
        assert 'valign="top">DistMult</th>' in part and 'valign="top">TransE</th>' in part
    # 4 rows per bit width (2 dims x 2 seeds): ρ without an interval, and the reason
    bits = within.split("Within each bit width", 1)[1]
    assert "(too few rows)" in bits and "too few rows" in bits.split("</table>", 1)[1]
    assert "(too few rows)" not in within.split("Within each bit width", 1)[0]  # 10 rows per dimension
    # the null of EIS, described once
    assert document.count(html.escape(EIS_NULL)) == 1 and "2d/n" not in document.replace(html.escape(EIS_NULL), "")


def test_report_says_when_a_measure_only_repeats_a_baseline_and_names_units(page):
    from embstab.selection import BASELINES, oracle_decisions

    document, _ = page
    section = document.split('id="oracle"', 1)[1].split("</section>", 1)[0]
    # which measures pick, in every decision, what a bit-width rule picks: computed here apart
    decisions = oracle_decisions(from_published_csv(PUBLISHED))
    picks = decisions.pivot_table(index=["task", "memory", "seed"], columns="selector", values="bitrate")
    repeats = {m: b for m in picks.columns if m not in BASELINES for b in BASELINES if (picks[m] == picks[b]).all()}
    assert repeats == {"pip_loss": "lowest_precision"}  # in the published CBOW table
    assert section.count("<th>pip_loss (= lowest_precision)</th>") == 2  # mean and worst-case tables
    assert "pip_loss picks exactly what &#x27;always the lowest precision&#x27; picks, at every budget, task and seed" \
        in section
    assert "<th>eis</th>" in section and "eis (=" not in section
    # numbers carry their unit or reference
    recs = document.split('id="recommend"', 1)[1].split("</section>", 1)[0]
    assert "<th>budget (bits per word)</th>" in recs and "<th>memory (bits per word)</th>" in recs
    assert "percentage points of disagreement" in section
    assert "<th>intercept (%)</th>" in document and "a random order gets about 0.5 wrong" in document
    predicted = document.split('id="predicted-gap"', 1)[1].split("</section>", 1)[0]
    assert "<th>budget (bits per word)</th>" in predicted and "percentage points of disagreement" in predicted

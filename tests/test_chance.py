"""Chance levels of the downstream tasks, and rows near chance left out of the analyses by default."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pandas as pd
import pytest

from embstab.data.tasks import ClassificationData, TaggingData
from embstab.downstream.api import chance_level
from embstab.selection import (
    NEAR_CHANCE_MARGIN,
    ResultsError,
    as_results,
    chance_table,
    fit_trend,
    near_chance,
    near_chance_left_out,
    oracle_gap,
    recommend,
    selection_error,
    spearman_table,
)
from embstab.study.results import ResultDB
from embstab.study.steps import assemble_row
from embstab.train.study import run_downstream

# --------------------------------------------------------------------------------------------
# chance levels against literal references


def _classification(train_y, test_y, n_labels):
    x = lambda ys: [["w"] for _ in ys]  # noqa: E731
    return ClassificationData("toy", [f"l{i}" for i in range(n_labels)], x(train_y), np.array(train_y),
                              [], np.zeros(0, np.int64), x(test_y), np.array(test_y))


def _tagging(tags, train_y, test_y, outside=None):
    x = lambda ys: [["w"] * len(y) for y in ys]  # noqa: E731
    arr = lambda ys: [np.array(y) for y in ys]  # noqa: E731
    return TaggingData("toy", tags, x(train_y), arr(train_y), [], [], x(test_y), arr(test_y), outside)


def test_classification_chance_is_the_best_constant_prediction_on_test():
    # label 0 is the training majority but 1 of the 4 test labels: the best constant answer is 1 (75 %),
    # not the training majority (25 %)
    data = _classification([0, 0, 1], [0, 1, 1, 1], 2)
    assert chance_level(data) == 75.0
    assert data.majority_rate() == 75.0
    assert chance_level(_classification([2, 2, 0, 1, 2], [2, 2, 0, 1, 2, 2, 1, 2], 3)) == 62.5
    # a balanced binary test split is at 50 % whatever the training labels
    assert chance_level(_classification([1, 1, 1], [0, 1, 0, 1], 2)) == 50.0


def test_tagging_chance_in_the_tagging_metric():
    # token accuracy: the training majority tag B is 3 of the 5 test tokens
    assert chance_level(_tagging(["A", "B", "C"], [[0, 1, 1], [1, 2]], [[1, 0], [1, 1, 2]])) == 60.0
    # entity F1 with the outside tag the most frequent: the all-outside tagger finds nothing
    assert chance_level(_tagging(["O", "X"], [[0, 0, 1], [0]], [[0, 1, 1]], outside="O")) == 0.0
    # entity F1 when a non-outside tag is the most frequent: 3 of 4 predictions right, every entity found
    assert chance_level(_tagging(["O", "X"], [[1, 1, 0]], [[1, 0, 1, 1]], outside="O")) == pytest.approx(600 / 7)


def test_random_ranking_mrr_literals_and_bad_input():
    from embstab.kg.disagreement import random_ranking_mrr

    assert random_ranking_mrr([1]) == 1.0
    assert random_ranking_mrr([2]) == 0.75  # rank 1 or 2, each with probability 1/2
    assert random_ranking_mrr([1, 2, 3]) == pytest.approx((1 + 0.75 + 11 / 18) / 3)
    with pytest.raises(ValueError, match="at least one"):
        random_ranking_mrr([3, 0])
    with pytest.raises(ValueError, match="at least one"):
        random_ranking_mrr([])


def test_link_prediction_chance_matches_random_rankings_on_a_tiny_graph():
    """The chance MRR link prediction records equals a Monte-Carlo of uniformly random rankings of
    each filtered query's candidates (Nations: 14 entities, so a random ranking scores well)."""
    pytest.importorskip("pykeen")
    from embstab.kg import link_prediction_disagreement, load_graph, train

    graph = load_graph("nations")
    model = train(graph, "TransE", dim=4, epochs=1, seed=0, progress=False)
    recorded = link_prediction_disagreement(model, model, graph).settings["chance_mrr"]

    known = {tuple(t) for s in ("train", "valid", "test") for t in graph.split(s).tolist()}
    rng = np.random.default_rng(0)
    reciprocal = []
    for side in ("tail", "head"):
        for h, r, t in graph.test.tolist():
            target = t if side == "tail" else h
            candidates = [e for e in range(graph.n_entities)
                          if e == target or ((h, r, e) if side == "tail" else (e, r, t)) not in known]
            # random scores rank the candidates uniformly at random: the target's rank is 1 + the
            # number of candidates that score above it
            scores = rng.random((400, len(candidates)))
            rank = 1 + (scores > scores[:, [candidates.index(target)]]).sum(axis=1)
            reciprocal.append(np.mean(1.0 / rank))
    assert 0.05 < recorded < 1
    assert recorded == pytest.approx(float(np.mean(reciprocal)), abs=0.01)


class _Result:
    def __init__(self, chance):
        self.disagreement, self.quality_new, self.quality_old, self.n_test = 10.0, 61.0, 60.0, 100
        self.settings = {} if chance is None else {"chance": chance}


class _Store:
    def __init__(self):
        self.json = {}

    def has_json(self, kind, key):
        return (kind, key) in self.json

    def get_json(self, kind, key):
        return self.json[(kind, key)]

    def put_json(self, kind, key, value, config):
        self.json[(kind, key)] = value

    def get_embedding(self, kind, key):
        return kind


@pytest.mark.parametrize("chance", [58.5, None])
def test_word_rows_carry_the_disagreement_results_chance(chance):
    steps = type("S", (), {"disagreement": staticmethod(lambda *a, **k: _Result(chance))})()
    value = run_downstream(_Store(), steps, "k", {"task": "rt_sentiment", "model": "linear", "seed": 0}, "p")
    row = assemble_row({"dim": 8, "bitrate": 4}, {"n_words": 10, "eis": 0.1}, value)
    assert row["chance"] == chance and row["quality"] == 61.0 and row["quality_old"] == 60.0


# --------------------------------------------------------------------------------------------
# near-chance rows in the analyses


def _table() -> pd.DataFrame:
    """Two tasks over a 3 x 3 grid and two seeds: 'good' well above chance; 'weak' at chance for the
    1-bit rows only (where the measure and the disagreement disagree most), 'old' with unknown chance."""
    rng = np.random.default_rng(0)
    rows = []
    for task in ("good", "weak", "old"):
        for seed in (0, 1):
            for dim in (8, 16, 32):
                for bits in (1, 4, 32):
                    memory = dim * bits
                    eis = 1.0 / memory + 0.001 * rng.random()
                    near = task == "weak" and bits == 1
                    rows.append({"algo": "x", "seed": seed, "dim": dim, "bitrate": bits, "task": task,
                                 # at chance the disagreement is noise: unrelated to the measure
                                 "disagreement": 3 * rng.random() if near else 100 * eis + 0.01 * rng.random(),
                                 "quality": 52.0 if near else 80.0, "quality_old": 80.0,
                                 "chance": np.nan if task == "old" else 50.0, "eis": eis})
    # a row of unknown chance with a quality that would be near any plausible chance level stays
    rows[-1]["quality"] = 1.0
    return pd.DataFrame(rows)


def test_near_chance_flags_either_model_and_never_unknown_chance():
    df = pd.DataFrame({"quality": [54.9, 80, 80, 55.0, 1.0], "quality_old": [80, 54.9, 80, 80, 1.0],
                       "chance": [50.0, 50.0, 50.0, 50.0, np.nan]})
    assert near_chance(df).tolist() == [True, True, False, False, False]
    assert NEAR_CHANCE_MARGIN == 5.0
    assert not near_chance(df.drop(columns="chance")).any()


def test_analyses_leave_near_chance_rows_out_by_default_and_keep_them_on_request():
    df = _table()
    n_near = 6  # 'weak' task, 1-bit rows, 3 dims x 2 seeds
    left = as_results(df)
    assert len(left) == len(df) - n_near and near_chance_left_out(left) == n_near
    kept = as_results(df, keep_near_chance=True)
    assert len(kept) == len(df) and near_chance_left_out(kept) == 0 and kept["near_chance"].sum() == n_near
    # an analysis given the raw table leaves them out; given the kept table, it keeps them
    rho = spearman_table(df, n_boot=0).set_index("task")
    rho_all = spearman_table(kept, n_boot=0).set_index("task")
    assert rho.loc["weak", "n_rows"] == 12 and rho_all.loc["weak", "n_rows"] == 18
    assert rho.loc["old", "n_rows"] == 18  # unknown chance: kept
    assert rho.loc["weak", "spearman"] > 0.9 > rho_all.loc["weak", "spearman"]
    assert rho.loc["good", "spearman"] == rho_all.loc["good", "spearman"]
    # the other analyses read the same filter
    assert fit_trend(df, threshold=None).n_rows == len(df) - n_near
    assert fit_trend(kept, threshold=None).n_rows == len(df)
    # the one budget with two configurations (32 bits: 8 x 4 and 32 x 1) loses its 1-bit row
    gap = oracle_gap(df).set_index(["selector", "task"])
    gap_all = oracle_gap(kept).set_index(["selector", "task"])
    assert ("eis", "weak") not in gap.index and gap_all.loc[("eis", "weak"), "n_decisions"] == 2
    sel = selection_error(df).set_index(["measure", "task"])
    sel_all = selection_error(kept).set_index(["measure", "task"])
    assert sel.loc[("eis", "weak"), "selection_error"] == 0.0 < sel_all.loc[("eis", "weak"), "selection_error"]


def test_recommend_excludes_configurations_only_seen_near_chance():
    df = _table()
    # make the 8-d 1-bit pair flip the fewest predictions, and near chance on every task
    best = (df["dim"] == 8) & (df["bitrate"] == 1)
    df.loc[best, "disagreement"] = 0.0
    df.loc[best, "quality"] = 50.0
    df.loc[best & (df["task"] == "old"), "chance"] = 50.0
    n_near = int(near_chance(df).sum())
    rec = recommend(df, 200, "eis")
    assert (rec.dim, rec.bitrate) != (8, 1) and rec.near_chance_left_out == n_near
    assert f"{n_near} result row(s) left out" in str(rec)
    kept = recommend(as_results(df, keep_near_chance=True), 200, "eis")
    assert (kept.dim, kept.bitrate) == (8, 1) and kept.near_chance_left_out == 0
    assert "left out" not in str(kept)


def test_recommend_for_a_task_whose_rows_are_all_near_chance_says_so():
    # the task exists; only its rows were left out (the message used to say it had no results)
    df = _table()
    df.loc[df["task"] == "weak", "quality"] = 50.0
    with pytest.raises(ResultsError, match="all 18 rows of task 'weak' have a downstream model near its chance"):
        recommend(df, 200, "eis", task="weak")
    with pytest.raises(ResultsError, match="no results for task 'nope'"):
        recommend(df, 200, "eis", task="nope")
    assert recommend(as_results(df, keep_near_chance=True), 200, "eis", task="weak").dim > 0


def test_every_row_near_chance_is_an_error_naming_the_option():
    df = _table()
    df["quality"] = 50.0
    df["chance"] = 50.0
    with pytest.raises(ResultsError, match="keep_near_chance=True"):
        spearman_table(df)
    assert len(spearman_table(as_results(df, keep_near_chance=True), n_boot=0)) == 3


def test_chance_table_per_task():
    table = chance_table(_table()).set_index("task")
    assert table.loc["weak", "near_chance"] == 6 and table.loc["weak", "left_out"] == 6
    assert table.loc["good", "near_chance"] == 0 and table.loc["good", "chance"] == 50.0
    assert math.isnan(table.loc["old", "chance"]) and table.loc["old", "near_chance"] == 0
    assert table.loc["weak", "quality_min"] == 52.0 and table.loc["weak", "quality_max"] == 80.0
    assert chance_table(_table(), keep_near_chance=True)["left_out"].eq(0).all()


# --------------------------------------------------------------------------------------------
# results database, report and command lines


def _row(chance) -> dict:
    return {"algo": "w2v_cbow", "seed": 0, "dim": 8, "bitrate": 4, "memory": 32, "task": "t", "model": "linear",
            "disagreement": 1.0, "quality": 70.0, "quality_old": 71.0, "chance": chance,
            "measures": {"eis": 0.1}, "extra": {}}


def test_results_database_stores_chance_and_reads_older_rows_as_unknown(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    # the tables as a release before chance levels (and the recipe/transform/kind axes) wrote them
    con.executescript("""
    CREATE TABLE studies (name TEXT NOT NULL, fingerprint TEXT NOT NULL, definition TEXT NOT NULL,
        created REAL NOT NULL, PRIMARY KEY (name, fingerprint));
    CREATE TABLE plan (name TEXT NOT NULL, fingerprint TEXT NOT NULL, row_id TEXT NOT NULL,
        PRIMARY KEY (name, fingerprint, row_id));
    CREATE TABLE failures (row_id TEXT PRIMARY KEY, stage TEXT, error TEXT NOT NULL, traceback TEXT,
        attempts INTEGER NOT NULL, failed REAL NOT NULL);
    CREATE TABLE results (row_id TEXT PRIMARY KEY, algo TEXT, seed INTEGER, dim INTEGER, bitrate INTEGER,
        memory INTEGER, task TEXT, model TEXT, disagreement REAL, quality REAL, quality_old REAL,
        measures TEXT NOT NULL, extra TEXT NOT NULL, finished REAL NOT NULL);
    INSERT INTO results VALUES ('r1', 'w2v_cbow', 1, 8, 4, 32, 't', 'linear', 1.0, 50.0, 50.0, '{"eis": 0.1}', '{}', 0);
    """)
    con.commit()
    con.close()
    # read-only (study status): no migration, the column is still there, unknown
    with ResultDB(path, readonly=True) as db:
        old = db.results()
    assert old["chance"].dtype == np.float64 and old["chance"].isna().all()
    with ResultDB(path) as db:
        assert db.results()["chance"].isna().all()
        db.add_result("r2", {**_row(50.0), "seed": 2})
        db.add_result("r3", {**_row(None), "seed": 3})
        df = db.results()
    assert df.set_index("row_id")["chance"].to_dict() == pytest.approx({"r1": np.nan, "r2": 50.0, "r3": np.nan},
                                                                       nan_ok=True)
    # old rows (unknown chance, quality 50) are kept; the new one at 70 % against 50 % also
    assert len(as_results(df.drop(columns="row_id"))) == 3


def test_report_shows_quality_against_chance(tmp_path):
    from embstab.report import build_report

    html = build_report(_table(), progress=False)
    assert 'id="chance"' in html and "Downstream quality against chance" in html
    assert "left out of every analysis" in html
    allnear = _table().assign(quality=50.0, chance=50.0)
    html = build_report(allnear, progress=False)
    assert 'id="no-analysis"' in html and "keep_near_chance=True" in html and "<img " not in html
    html = build_report(allnear, progress=False, keep_near_chance=True)
    assert 'id="no-analysis"' not in html and "kept in the analyses below" in html and "<img " in html


def test_recommend_cli_says_how_many_rows_it_left_out(tmp_path, capsys):
    from embstab import cli

    path = tmp_path / "r.csv"
    _table().to_csv(path, index=False)
    assert cli.main(["recommend", str(path), "--budget", "200", "--top", "0"]) == 0
    out = capsys.readouterr().out
    assert "6 result row(s) left out" in out and "--keep-near-chance" in out
    assert cli.main(["recommend", str(path), "--budget", "200", "--top", "0", "--keep-near-chance"]) == 0
    out = capsys.readouterr().out
    assert "left out" not in out and "6 result row(s) near chance kept" in out
    assert cli.main(["recommend", str(path), "--budget", "200", "--json"]) == 0
    assert '"near_chance_left_out": 6' in capsys.readouterr().out


def test_study_summary_prints_quality_chance_and_rows_near_chance(capsys):
    from embstab.cli.study import _qualities

    _qualities(_table())
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] in (["good"], ["weak"], ["old"])}
    assert set(lines) == {"good", "weak", "old"}
    assert "50.0" in lines["weak"] and "6/18 rows" in lines["weak"]
    assert "0/18 rows" in lines["good"] and "unknown" in lines["old"]

"""The calibrated disagreement predictor: fit, predict inside the calibration only, save/load, held-out
validation on the published CBOW table (the acceptance figures), `embstab predict`."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from embstab import Embedding
from embstab.cli import main
from embstab.errors import ConfigError, DataFormatError, UnknownNameError
from embstab.selection import (DisagreementPredictor, PairPrediction, PredictorValidation, ResultsError, as_results,
                               fit_predictor, from_published_csv, load_predictor, predict_pair, validate_predictor)
from embstab.selection.calibration import MEASURE_TOLERANCE, MODELS

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"
TASKS = ["sst", "mr", "subj", "mpqa", "ner"]


@pytest.fixture(scope="module")
def cbow() -> pd.DataFrame:
    return from_published_csv(PUBLISHED)


@pytest.fixture(scope="module")
def predictor(cbow) -> DisagreementPredictor:
    return fit_predictor(cbow)


@pytest.fixture(scope="module")
def by_seed(cbow) -> PredictorValidation:
    return validate_predictor(cbow, by="seed")


@pytest.fixture(scope="module")
def by_dim(cbow) -> PredictorValidation:
    return validate_predictor(cbow, by="dim")


# --- fit and predict -----------------------------------------------------------------------------

def test_fit_predict_round_trip(cbow, predictor):
    assert set(predictor.groups) == {("word", "w2v_cbow", t) for t in TASKS}
    assert all(g.model in MODELS and g.n_rows == 108 and g.n_seeds == 3 and g.cv_by == "seed"
               for g in predictor.groups.values())
    out = predictor.predict(cbow.drop(columns=["disagreement"]))
    assert out["in_calibration"].all() and (out["calibration_note"] == "").all()
    assert ((out["lower"] <= out["predicted"]) & (out["predicted"] <= out["upper"])).all()
    assert out[["predicted", "lower", "upper"]].stack().between(0, 100).all()
    # in sample the fit follows the measured disagreement closely
    err = (out["predicted"] - cbow["disagreement"]).abs()
    assert err.mean() < 1.0 and np.corrcoef(out["predicted"], cbow["disagreement"])[0, 1] > 0.9
    # the measures carry the prediction: every chosen model reads at least one of them
    assert all(g.used_measures for g in predictor.groups.values())


def test_predict_keeps_the_index_and_columns(cbow, predictor):
    rows = cbow.drop(columns=["disagreement"]).sample(20, random_state=1)
    rows.index = [f"pair{i}" for i in range(20)]
    out = predictor.predict(rows)
    assert list(out.index) == list(rows.index)
    assert list(out.columns[: len(rows.columns)]) == list(rows.columns)
    assert {"predicted", "lower", "upper", "in_calibration"} <= set(out.columns)
    pd.testing.assert_frame_equal(out[rows.columns], rows)
    # one row predicted alone gets the same answer as among others
    alone = predictor.predict(rows.iloc[[3]])
    assert alone["predicted"].iloc[0] == pytest.approx(out["predicted"].iloc[3])


def test_unseen_algorithm_task_and_kind_are_outside(cbow, predictor):
    rows = cbow[cbow["task"] == "sst"].head(3).drop(columns=["disagreement"])
    glove = predictor.predict(rows.assign(algo="glove"))
    assert not glove["in_calibration"].any() and glove[["predicted", "lower", "upper"]].isna().all().all()
    assert glove["calibration_note"].str.contains("no calibration for algo 'glove'").all()
    pos = predictor.predict(rows.assign(task="pos"))
    assert not pos["in_calibration"].any() and pos["calibration_note"].str.contains("task 'pos'").all()
    kg = predictor.predict(rows.assign(kind="kg"))
    assert not kg["in_calibration"].any() and kg["calibration_note"].str.contains("kg embeddings").all()


def test_a_cbow_calibration_claims_no_glove_row(cbow, predictor):
    # the same measure values under another algorithm's name: calibrations do not transfer
    out = predictor.predict(cbow.assign(algo="glove").drop(columns=["disagreement"]))
    assert not out["in_calibration"].any() and out["predicted"].isna().all()


def test_measure_dimension_and_bits_outside_the_calibrated_range(cbow, predictor):
    group = predictor.groups[("word", "w2v_cbow", "sst")]
    lo, hi = group.ranges["eis"]
    row = cbow[(cbow["task"] == "sst")].iloc[[0]].drop(columns=["disagreement"])
    span = hi - lo
    inside = predictor.predict(row.assign(eis=hi + 0.5 * MEASURE_TOLERANCE * span))
    outside = predictor.predict(row.assign(eis=hi + 2 * MEASURE_TOLERANCE * span))
    assert inside["in_calibration"].all() and not outside["in_calibration"].any()
    assert "eis distance" in outside["calibration_note"].iloc[0]
    assert not predictor.predict(row.assign(eis=np.nan))["in_calibration"].any()
    assert not predictor.predict(row.drop(columns=["eis"]))["in_calibration"].any()
    big = predictor.predict(row.assign(dim=1600))
    assert not big["in_calibration"].any() and "dim 1600" in big["calibration_note"].iloc[0]
    assert not predictor.predict(row.assign(bitrate=64))["in_calibration"].any()
    # an interior bit width the table never had (3 bits) lies inside the calibrated range
    assert predictor.predict(row.assign(bitrate=3))["in_calibration"].all()


def test_predict_needs_the_configuration_columns(predictor):
    with pytest.raises(ResultsError, match="lack column.*bitrate"):
        predictor.predict(pd.DataFrame({"algo": ["w2v_cbow"], "dim": [25], "task": ["sst"]}))


def test_save_load_gives_identical_predictions(cbow, predictor, tmp_path):
    path = tmp_path / "predictor.json"
    predictor.save(path)
    text = path.read_text()
    data = json.loads(text)  # plain JSON: parameters, no code
    assert data["format"] == "embstab-disagreement-predictor" and len(data["groups"]) == 5
    assert all("params" in g and "halfwidth" in g for g in data["groups"])
    loaded = DisagreementPredictor.load(path)
    assert loaded == predictor
    rows = pd.concat([cbow.drop(columns=["disagreement"]), cbow.head(5).assign(algo="glove")], ignore_index=True)
    pd.testing.assert_frame_equal(loaded.predict(rows), predictor.predict(rows))
    assert load_predictor(path).to_frame().equals(predictor.to_frame())
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(DataFormatError, match="not a saved disagreement predictor"):
        load_predictor(bad)
    bad.write_text(text.replace('"model":"', '"model":"x'))
    with pytest.raises(DataFormatError, match="malformed"):
        load_predictor(bad)


def test_result_objects_describe_themselves(predictor, by_seed):
    table = predictor.to_frame()
    assert list(table["task"]) == TASKS and {"model", "cv_mae", "cv_coverage", "n_rows"} <= set(table.columns)
    assert "DisagreementPredictor(level=0.9, groups=5" in repr(predictor)
    assert "<table" in predictor._repr_html_() and "w2v_cbow" in str(predictor)
    assert "ratio" in repr(by_seed) and "<table" in by_seed._repr_html_()
    assert json.loads(json.dumps(by_seed.to_dict()))["by"] == "seed"


def test_parameters_are_checked(cbow):
    with pytest.raises(ConfigError, match="level must be"):
        fit_predictor(cbow, level=1.5)
    with pytest.raises(ConfigError, match="by must be"):
        validate_predictor(cbow, by="task")
    with pytest.raises(ResultsError, match="no column for measure 'linear_cka'"):
        fit_predictor(cbow, measures=["linear_cka"])


# --- held-out validation: the acceptance figures -------------------------------------------------

def test_leave_one_seed_out_meets_the_targets_on_cbow(by_seed):
    table = by_seed.to_frame().set_index("task")
    assert list(table.index) == TASKS and (table["n_predicted"] == 108).all()
    # 90 % intervals cover 85-96 % of the held-out rows
    assert 0.85 <= by_seed.coverage <= 0.96
    assert table["coverage"].between(0.8, 0.99).all()
    # averaged over the tasks, within 1.05x the seed-noise floor
    assert by_seed.mae <= 1.05 * by_seed.reference_mae
    assert by_seed.ratio == pytest.approx(table["mae"].mean() / table["reference_mae"].mean())


def test_the_seed_noise_floor_is_the_configuration_mean_over_the_other_seeds(cbow, by_seed):
    # the published figures of this reference, and one row recomputed by hand
    floor = by_seed.to_frame().set_index("task")["reference_mae"]
    assert floor.round(2).to_dict() == {"sst": 1.16, "mr": 1.79, "subj": 0.73, "mpqa": 0.96, "ner": 0.41}
    row = by_seed.rows.iloc[7]
    others = cbow[(cbow["task"] == row["task"]) & (cbow["dim"] == row["dim"]) & (cbow["bitrate"] == row["bitrate"])
                  & (cbow["seed"] != row["held_out"])]
    assert row["reference"] == pytest.approx(others["disagreement"].mean())


def test_held_out_dimensions_beat_the_memory_trend(cbow, by_dim):
    assert sorted(by_dim.rows["held_out"].unique()) == [50, 100, 200, 400]  # the interior dimensions
    assert 0.85 <= by_dim.coverage <= 0.97
    assert by_dim.mae <= 0.75 * by_dim.reference_mae
    # a handful of held-out rows have an EIS beyond every other dimension's: they are not claimed
    assert by_dim.rows["in_calibration"].mean() > 0.95
    # the reference is a line in log2 memory through the same training rows
    row = by_dim.rows.iloc[11]
    train = cbow[(cbow["task"] == row["task"]) & (cbow["dim"] != row["held_out"])]
    slope, intercept = np.polyfit(np.log2(train["memory"]), train["disagreement"], 1)
    assert row["reference"] == pytest.approx(slope * np.log2(row["dim"] * row["bitrate"]) + intercept)


def test_nothing_of_the_held_out_group_reaches_its_fit(cbow, by_seed):
    held = 1235
    changed = cbow.copy()
    # the held-out seed's disagreement (and its measures' noise) changed beyond recognition
    changed.loc[changed["seed"] == held, "disagreement"] += 40.0
    again = validate_predictor(changed, by="seed")
    mine = (by_seed.rows["held_out"] == held).to_numpy()
    for col in ("predicted", "lower", "upper"):
        np.testing.assert_array_equal(again.rows.loc[mine, col].to_numpy(), by_seed.rows.loc[mine, col].to_numpy())
    assert not np.allclose(again.rows.loc[mine, "disagreement"], by_seed.rows.loc[mine, "disagreement"])
    # and the held-out predictions are exactly those of a fit on the other seeds alone
    alone = fit_predictor(cbow[cbow["seed"] != held]).predict(cbow[cbow["seed"] == held].drop(columns="disagreement"))
    np.testing.assert_allclose(by_seed.rows.loc[mine, "predicted"].to_numpy(), alone["predicted"].to_numpy())


def test_validation_needs_something_to_hold_out(cbow):
    one_seed = cbow[cbow["seed"] == 1234]
    with pytest.raises(ResultsError, match="one seed"):
        validate_predictor(one_seed, by="seed")
    # one seed: the groups are cross-validated by dimension instead
    assert {g.cv_by for g in fit_predictor(one_seed).groups.values()} == {"dim"}


def test_fit_with_validation_keeps_the_figures(cbow, tmp_path):
    from embstab.selection import fit_validated_predictor

    p = fit_validated_predictor(cbow[cbow["task"].isin(["subj", "ner"])])
    table = p.to_frame()
    assert {"coverage", "mae", "reference_mae"} <= set(table.columns) and table["coverage"].notna().all()
    p.save(tmp_path / "p.json")
    assert load_predictor(tmp_path / "p.json").to_frame()["coverage"].tolist() == table["coverage"].tolist()


def test_predicted_rows_of_a_calibrated_study_never_calibrate(cbow, predictor):
    marked = cbow.assign(disagreement_source="measured")
    fake = marked["dim"] == 100
    marked.loc[fake, "disagreement_source"] = "predicted"
    marked.loc[fake, "disagreement"] = 99.0
    alone = fit_predictor(cbow[cbow["dim"] != 100])
    assert fit_predictor(marked) == alone
    from embstab.selection import recommend

    rec = recommend(marked.assign(disagreement=np.where(fake, 0.0, marked["disagreement"])), 400)
    # 100-d rows "flipping nothing" are predictions of someone else's: they are placed by this predictor
    cells = rec.per_task[rec.per_task["dim"] == 100]
    assert (cells["source"] == "predicted").all() and (cells["disagreement"] > 1).all()


# --- a study's database --------------------------------------------------------------------------

def test_results_read_from_a_study_database(tmp_path):
    from embstab.study.results import ResultDB

    path = tmp_path / "results.sqlite"
    with ResultDB(path) as db:
        for i, (dim, bits, seed) in enumerate([(8, 4, 0), (8, 4, 1), (16, 32, 0)]):
            db.add_result(f"r{i}", {"algo": "TransE", "seed": seed, "dim": dim, "bitrate": bits, "memory": dim * bits,
                                    "task": "link_prediction", "model": "transe", "disagreement": 10.0 + i,
                                    "quality": 70.0, "quality_old": 71.0, "chance": 5.0,
                                    "measures": {"eis": 0.1 * (i + 1), "knn": 0.5},
                                    "nulls": {"eis": {"value": 0.5, "signal": i > 0}}, "extra": {"hits_at_10": 0.3}})
        stored = db.results().drop(columns="row_id")
    read = as_results(path)
    expected = as_results(stored)[read.columns]
    key = ["seed", "dim"]
    pd.testing.assert_frame_equal(read.sort_values(key).reset_index(drop=True),
                                  expected.sort_values(key).reset_index(drop=True), check_dtype=False)
    assert read["eis_signal"].tolist().count(True) == 2 and "hits_at_10" in read.columns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]  # read without writing beside it
    not_db = tmp_path / "x.sqlite"
    not_db.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(ResultsError, match="x.sqlite"):
        as_results(not_db)


# --- one pair: predict_pair and `embstab predict` -------------------------------------------------

WORDS = [f"w{i}" for i in range(200)]


def _pair(rng, dim: int, noise: float) -> tuple[Embedding, Embedding]:
    base = rng.normal(size=(len(WORDS), dim))
    return Embedding(WORDS, base), Embedding(WORDS, base + noise * rng.normal(size=base.shape))


def _truth(knn: float, task: str) -> float:
    return 100 * (1 - knn) * (0.3 if task == "t1" else 0.2)


@pytest.fixture(scope="module")
def toy_results() -> pd.DataFrame:
    """A small calibration: pairs of 8-32 dims whose disagreement is a known function of their k-NN."""
    from embstab.measures.compare import compare

    rng = np.random.default_rng(0)
    rows = []
    for dim in (8, 16, 32):
        for bits in (1, 4, 32):
            for seed in range(3):
                a, b = _pair(rng, dim, 0.1 + 0.05 * seed + {1: 0.4, 4: 0.2, 32: 0.0}[bits])
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = compare(a, b, measures=["eis", "knn"], null_samples=0).set_index("measure")["value"]
                for task in ("t1", "t2"):
                    rows.append({"algo": "toy", "seed": seed, "dim": dim, "bitrate": bits, "task": task,
                                 "eis": m["eis"], "knn": m["knn"],
                                 "disagreement": _truth(m["knn"], task) + rng.normal(0, 0.3)})
    return pd.DataFrame(rows)


def test_predict_pair_predicts_each_task_within_its_interval(toy_results, tmp_path):
    a, b = _pair(np.random.default_rng(5), 16, 0.3)
    result = predict_pair(a, b, toy_results, algo="toy", bits=4)
    assert isinstance(result, PairPrediction) and result.dim == 16 and result.validated_by == "seed"
    table = result.to_frame().set_index("task")
    assert list(table.index) == ["t1", "t2"] and table["in_calibration"].all()
    for task in ("t1", "t2"):
        truth = _truth(result.measures["knn"], task)
        assert table.at[task, "lower"] <= truth <= table.at[task, "upper"]
        assert table.at[task, "coverage"] > 0.7 and table.at[task, "mae"] < 2
    assert "t1" in str(result) and json.loads(json.dumps(result.to_dict()))["predictions"][0]["task"] == "t1"


def test_predict_pair_measures_the_pair_as_a_study_row_does(toy_results):
    # the words a study compares: shared with the anchors too, in the new member's frequency order
    from embstab.measures.compare import compare
    from embstab.study.steps import measure_pair

    rng = np.random.default_rng(8)
    a, b = _pair(rng, 16, 0.3)
    b = Embedding(b.words[::-1], b.vectors[::-1])  # the new member ranks the words the other way round
    anchor_old, anchor_new = _pair(rng, 32, 0.2)
    anchor_new = Embedding(anchor_new.words[3:], anchor_new.vectors[3:])  # a few words the anchors lack
    top = len(WORDS) // 2
    result = predict_pair(a, b, toy_results, algo="toy", bits=4, anchors=(anchor_old, anchor_new), top_n=top)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = measure_pair(a, b, anchor_old, anchor_new, {"names": ["eis", "knn"], "top_n": top, "params": {}})
    assert result.measures == pytest.approx({m: study[m] for m in result.measures}, rel=1e-12)
    plain = compare(a, b, anchors=(anchor_old, anchor_new), measures=["eis"], top_n=top, null_samples=0)
    assert plain.set_index("measure").at["eis", "value"] != pytest.approx(result.measures["eis"], rel=1e-6)


def test_cli_predict_on_two_small_embeddings(toy_results, tmp_path, capsys):
    from embstab.io import save

    a, b = _pair(np.random.default_rng(5), 16, 0.3)
    save(a, tmp_path / "old.txt")
    save(b, tmp_path / "new.txt")
    toy_results.to_csv(tmp_path / "cal.csv", index=False)
    args = [str(tmp_path / "old.txt"), str(tmp_path / "new.txt"), "--calibration", str(tmp_path / "cal.csv")]
    assert main(["predict", *args, "--bits", "4"]) == 0
    out = capsys.readouterr().out
    assert "toy, dim=16, 4-bit" in out and "one seed held out" in out
    assert out.count("%  [") == 2 and "coverage" in out and "MAE" in out
    assert main(["predict", *args, "--algo", "toy", "--task", "t2", "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["task"] for p in data["predictions"]] == ["t2"] and data["bitrate"] == 32
    # a saved predictor is used as it is
    fit_predictor(toy_results).save(tmp_path / "toy.json")
    assert main(["predict", *args, "--calibration", str(tmp_path / "toy.json"), "--bits", "4"]) == 0
    assert "t1" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--algo", "glove"], "no calibration for algo 'glove' (calibrated: toy)"),
    (["--task", "ner"], "no calibration for task 'ner'"),
    (["--bits", "4", "--kind", "kg"], "no calibration"),
])
def test_cli_predict_refuses_a_pair_outside_the_calibration_in_one_line(toy_results, tmp_path, capsys, extra,
                                                                          message):
    from embstab.io import save

    a, b = _pair(np.random.default_rng(5), 16, 0.3)
    save(a, tmp_path / "old.txt")
    save(b, tmp_path / "new.txt")
    toy_results.to_csv(tmp_path / "cal.csv", index=False)
    code = main(["predict", str(tmp_path / "old.txt"), str(tmp_path / "new.txt"), "--calibration",
                 str(tmp_path / "cal.csv"), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("embstab predict: error: the pair is outside the calibration") and message in err[0]


def test_a_pair_whose_measures_lie_outside_is_refused(toy_results, tmp_path, capsys):
    from embstab.io import save

    # an unrelated partner: its k-NN overlap is far below any calibrated pair's
    a, b = _pair(np.random.default_rng(6), 16, 5.0)
    with pytest.raises(ConfigError, match="outside the calibration.*(eis|knn) distance"):
        predict_pair(a, b, toy_results, algo="toy")
    save(a, tmp_path / "old.txt")
    save(b, tmp_path / "new.txt")
    # a 64-d pair: beyond the calibrated 8-32 dims
    c, d = _pair(np.random.default_rng(7), 64, 0.2)
    with pytest.raises(ConfigError, match="dim 64 is outside the calibrated 8–32"):
        predict_pair(c, d, toy_results, algo="toy")


def test_a_configuration_the_calibration_never_measured_is_said_and_checked_as_such(toy_results, tmp_path):
    # dims 8, 16, 32 and 1, 4, 32 bits were measured; 24 dims or 2 bits lie between them
    a, b = _pair(np.random.default_rng(5), 24, 0.3)
    between = predict_pair(a, b, toy_results, algo="toy", bits=4)
    table = between.to_frame()
    assert table["in_calibration"].all() and table["interpolated"].all()
    assert (table["unseen"] == "dim 24 (calibrated: 8, 16, 32)").all()
    # the figures beside it come from holding dimensions out, not seeds
    assert between.validated_by == "dim" and table["coverage"].notna().all()
    assert "never measured by the calibration: dim 24" in str(between) and "one dimension held out" in str(between)
    c, d = _pair(np.random.default_rng(5), 16, 0.3)
    measured_dim = predict_pair(c, d, toy_results, algo="toy", bits=2).to_frame()
    assert measured_dim["interpolated"].all() and measured_dim["unseen"].str.startswith("2-bit entries").all()
    seen = predict_pair(c, d, toy_results, algo="toy", bits=4)
    assert not seen.to_frame()["interpolated"].any() and seen.validated_by == "seed"
    assert "never measured" not in str(seen)
    # predict() says it too, and a saved predictor keeps what it measured
    rows = pd.DataFrame({"algo": "toy", "task": "t1", "dim": [16, 24], "bitrate": 4,
                         "eis": toy_results["eis"].median(), "knn": toy_results["knn"].median()})
    fitted = fit_predictor(toy_results)
    fitted.save(tmp_path / "toy.json")
    for p in (fitted, load_predictor(tmp_path / "toy.json")):
        assert p.predict(rows)["interpolated"].tolist() == [False, True]
    # a saved predictor carries its check by seed only, and the output says that it does not speak for dim 24
    from embstab.selection.validation import fit_validated_predictor

    fit_validated_predictor(toy_results).save(tmp_path / "checked.json")
    from_file = predict_pair(a, b, tmp_path / "checked.json", algo="toy", bits=4)
    assert from_file.validated_by == "seed" and "held seeds out, not dimensions" in str(from_file)


def test_a_pair_is_measured_with_the_calibrations_recorded_settings(toy_results, tmp_path, capsys):
    # a study's export records its top_n and measure parameters; the pair is measured with them
    from embstab.io import save
    from embstab.measures.compare import compare

    a, b = _pair(np.random.default_rng(5), 16, 0.3)
    recorded = toy_results.copy()
    recorded.attrs["measure_settings"] = {"top_n": 150, "params": {"knn": {"k": 3, "n_queries": 100},
                                                                   "pip_loss": {"alpha": 1.0}}}
    recorded.to_parquet(tmp_path / "cal.parquet", index=False)
    theirs = compare(a, b, measures=["knn"], top_n=150, rank_by="new", params={"knn": {"k": 3, "n_queries": 100}},
                     null_samples=0).set_index("measure").at["knn", "value"]
    plain = compare(a, b, measures=["knn"], top_n=150, rank_by="new", null_samples=0).set_index("measure")
    assert theirs != pytest.approx(plain.at["knn", "value"])  # the settings matter for this pair
    result = predict_pair(a, b, tmp_path / "cal.parquet", algo="toy", bits=4)
    assert result.measures["knn"] == pytest.approx(theirs, rel=1e-12)
    assert result.measured_with == {"top_n": 150, "params": {"knn": {"k": 3, "n_queries": 100}},
                                    "source": "calibration"}
    said = "measured as the calibration's study measured its rows: top_n 150; knn k=3, n_queries=100"
    assert said in str(result) and said.replace("'", "&#x27;") in result._repr_html_()
    # a saved predictor keeps the settings; asked for others, the output says they differ
    fit_predictor(recorded).save(tmp_path / "cal.json")
    again = predict_pair(a, b, tmp_path / "cal.json", algo="toy", bits=4, params={"knn": {"k": 5}})
    assert again.measured_with["source"] == "given" and again.measured_with["params"]["knn"] == {"k": 5,
                                                                                                 "n_queries": 100}
    assert "the calibration's study used top_n 150; knn k=3" in str(again) and "off its scale" in str(again)
    # a CSV records nothing: the defaults, and the output says so; --param sets them from the shell
    save(a, tmp_path / "old.txt")
    save(b, tmp_path / "new.txt")
    toy_results.to_csv(tmp_path / "cal.csv", index=False)
    args = ["predict", str(tmp_path / "old.txt"), str(tmp_path / "new.txt"), "--calibration", str(tmp_path / "cal.csv"),
            "--bits", "4"]
    assert main(args) == 0
    assert "does not record how its rows were measured" in capsys.readouterr().out
    assert main([*args, "--top-n", "150", "--param", "knn.k=3", "--param", "knn.n_queries=100", "--output",
                 "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measures"]["knn"] == pytest.approx(theirs, rel=1e-12) and data["measured_with"]["source"] == "given"
    assert main([*args, "--param", "knn=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MEASURE.NAME=VALUE" in err[0] and "'knn=3'" in err[0]


# --- a knowledge-graph study: two algorithms, one scale ------------------------------------------
# tests/data/kg_umls_results.csv: the rows of `embstab study pipelines/kg.yaml` (UMLS; TransE and
# DistMult trained to convergence on two versions of the graph; 16/32/64 dims x 1/2/4/8/32 bits x 3
# seeds; link-prediction and triple-classification disagreement), with their measures and nulls.
KG = Path(__file__).resolve().parent / "data" / "kg_umls_results.csv"
# the same study file run again on seeds 3, 4 and 5 (its `training.seeds` changed, nothing else)
KG_NEW_SEEDS = Path(__file__).resolve().parent / "data" / "kg_umls_seeds345_results.csv"


@pytest.fixture(scope="module")
def umls() -> pd.DataFrame:
    return as_results(KG)


def test_kg_calibration_is_per_algorithm_and_its_intervals_hold_on_held_out_seeds(umls):
    v = validate_predictor(umls, by="seed")
    assert len(v.to_frame()) == 4 and 0.85 <= v.coverage <= 0.96
    # a TransE row is outside a DistMult-only calibration
    distmult = fit_predictor(umls[umls["algo"] == "DistMult"])
    transe = umls[umls["algo"] == "TransE"].drop(columns="disagreement")
    assert not distmult.predict(transe)["in_calibration"].any()
    # the saturating shape of link prediction (1- and 2-bit tables far off the rest) needs the
    # monotone candidate or a bit-width term: the memory line is never chosen
    models = {g.model for g in fit_predictor(umls).groups.values()}
    assert models <= {"linear", "loglinear", "monotone", "isotonic", "ensemble"} and "monotone" in models


def test_a_umls_calibration_holds_on_another_runs_seeds(umls):
    # fitted on seeds 0-2, asked about seeds 3-5 of a separate run, from their measures alone
    new = as_results(KG_NEW_SEEDS)
    assert not set(new["seed"]) & set(umls["seed"])
    answer = fit_predictor(umls).predict(new.drop(columns="disagreement"))
    inside = answer["in_calibration"].to_numpy()
    assert inside.mean() > 0.9  # the rest: measure values outside the calibrated range, said so
    assert answer.loc[~inside, "calibration_note"].str.contains("outside the calibrated").all()
    got, said = new[inside], answer[inside]
    assert 0.85 <= got["disagreement"].between(said["lower"], said["upper"]).mean() <= 0.97
    # as close as the calibration's own mean of each configuration, which knows its disagreement
    own_mean = umls.groupby(["algo", "dim", "bitrate", "task"])["disagreement"].mean()
    reference = own_mean.reindex(pd.MultiIndex.from_frame(got[["algo", "dim", "bitrate", "task"]])).to_numpy()
    error = (said["predicted"] - got["disagreement"]).abs().mean()
    assert error <= 1.1 * np.abs(reference - got["disagreement"].to_numpy()).mean()


def test_kg_choosing_across_algorithms_by_predictions_beats_raw_eis(umls):
    from embstab.selection import prediction_gap

    gaps = prediction_gap(umls, across_algorithms=True)
    assert set(gaps["kind"]) == {"kg"} and gaps["n_candidates"].max() == 30  # both algorithms in one decision
    mean = gaps.groupby("selector")["gap"].mean()
    assert mean["predicted"] < mean["eis"] < mean["random"]
    # at 64 bits per entity row raw EIS, pooled over dimensions and algorithms, misses by many points
    at64 = gaps[gaps["budget"] == 64].groupby("selector")["gap"].mean()
    assert at64["eis"] > 10 and at64["predicted"] < 0.5 * at64["eis"]


def test_kg_held_out_choice_scored_by_the_configuration_means(umls):
    # the check: calibrated on the other seeds, each pick scored by its configuration's mean
    # over seeds; across both algorithms the pick costs about a point on average, under 3 anywhere
    from embstab.selection import prediction_gap

    gaps = prediction_gap(umls, across_algorithms=True, truth="mean")
    by_budget = gaps.groupby(["budget", "selector"])["gap"].mean().unstack()
    assert by_budget["predicted"].mean() < 1.1 and by_budget["predicted"].max() < 3.0
    assert by_budget["predicted"].mean() < by_budget["eis"].mean() < by_budget["random"].mean()
    seed_scored = prediction_gap(umls, across_algorithms=True).groupby("selector")["gap"].mean()
    assert seed_scored["predicted"] != pytest.approx(by_budget["predicted"].mean())  # a different score
    with pytest.raises(UnknownNameError, match="truth"):
        prediction_gap(umls, truth="median")


def test_kg_held_out_choice_of_one_configuration_for_every_task(umls):
    # as recommend ships it: one configuration per budget, ranked by the mean over the tasks
    from embstab.selection import prediction_gap

    # one configuration lacks one task's row on seed 1: it cannot be that seed's pick for any task
    lacking = ((umls["algo"] == "DistMult") & (umls["dim"] == 64) & (umls["bitrate"] == 4)
               & (umls["task"] == "triple_classification") & (umls["seed"] == 1))
    gaps = prediction_gap(umls[~lacking], [64, 256, 1024], across_algorithms=True, truth="mean", per_task=False)
    picks = gaps[gaps["selector"] != "random"].groupby(["budget", "held_out_seed", "selector"])
    assert (picks[["algo", "dim", "bitrate"]].nunique() == 1).all().all()  # the same pick for both tasks
    assert set(gaps["task"]) == {"link_prediction", "triple_classification"}
    seed1 = gaps[(gaps["held_out_seed"] == 1) & (gaps["selector"] != "random")]
    assert not ((seed1["algo"] == "DistMult") & (seed1["dim"] == 64) & (seed1["bitrate"] == 4)).any()
    assert gaps.groupby(["budget", "held_out_seed"])["n_candidates"].nunique().eq(1).all()  # one set for all tasks
    by_budget = gaps.groupby(["budget", "selector"])["gap"].mean().unstack()
    assert (by_budget["predicted"] <= by_budget["eis"]).all() and by_budget["predicted"].max() < 3.0
    at64 = by_budget.loc[64]
    assert at64["predicted"] < 3.0 and 10.0 < at64["eis"] < at64["random"]


def test_rows_outside_a_calibrated_studys_calibration_are_dropped_for_that_reason():
    from embstab.selection.results import validate_results

    rows = [{"algo": "a", "seed": s, "dim": d, "bitrate": 4, "task": "t", "quality": 80.0, "eis": 0.1 * d,
             "disagreement": np.nan if (s, d) == (0, 8) else 5.0 + s, "disagreement_source": src}
            for s, d, src in [(0, 4, "measured"), (0, 8, "uncalibrated"), (1, 4, "predicted"), (1, 8, "measured")]]
    with pytest.warns(UserWarning, match=r"dropping 1 row\(s\) .*\(1 outside the study's calibration\)"):
        out = validate_results(pd.DataFrame(rows))
    assert len(out) == 3


def test_validation_with_one_seed_per_configuration_still_reports_the_error(cbow):
    # a calibrated study measures most configurations on one seed only: no seed-noise floor there,
    # but the predictor's own held-out error is still known
    one_seed = cbow[(cbow["dim"] * 7 + cbow["bitrate"] + cbow["seed"]) % 3 == 0]
    table = validate_predictor(one_seed, by="seed").to_frame()
    assert table["mae"].notna().all() and (table["mae"] > 0).all()


def test_an_ensemble_predicts_the_mean_of_its_members_and_survives_a_round_trip(cbow, tmp_path):
    from embstab.selection.calibration import ENSEMBLE, _apply_model, _fit_model

    group = cbow[cbow["task"] == "subj"].reset_index(drop=True)
    measures = ["eis", "knn"]
    params = _fit_model("ensemble", group, measures)
    members = [np.clip(_apply_model(m, _fit_model(m, group, measures), group, measures), 0, 100) for m in ENSEMBLE]
    assert np.allclose(_apply_model("ensemble", params, group, measures), np.mean(members, axis=0))
    p = fit_predictor(cbow)
    p.save(tmp_path / "p.json")
    rows = cbow.drop(columns="disagreement")
    assert load_predictor(tmp_path / "p.json").predict(rows).equals(p.predict(rows))


def test_a_store_folder_reads_as_its_database_and_devices_are_refused(tmp_path, cbow):
    import shutil
    import sqlite3

    from embstab.selection import read_results

    store = tmp_path / "store"
    store.mkdir()
    with pytest.raises(ResultsError, match="without a results.sqlite"):
        read_results(store)
    with pytest.raises(ResultsError, match="not a regular file"):
        read_results("/dev/zero")
    db = store / "results.sqlite"
    with sqlite3.connect(db) as conn:  # an empty study database: read as one, not as a CSV
        conn.execute("CREATE TABLE results (row_id TEXT, disagreement REAL)")
    with pytest.raises(ResultsError) as by_folder:
        read_results(store)
    with pytest.raises(ResultsError) as by_file:
        read_results(db)
    for err in (by_folder, by_file):  # read as the study database it is, not as a CSV
        assert "missing column(s) algo" in str(err.value) and "CSV table" not in str(err.value)
    shutil.rmtree(store)

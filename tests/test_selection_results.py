"""Results tables: the published-CSV importer, format detection and validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from embstab.errors import UnknownNameError
import pytest

from embstab.errors import EmbstabError
from embstab.selection import (
    ResultsError,
    as_results,
    from_published_csv,
    measure_columns,
    measure_distance,
    read_results,
    validate_results,
    wide,
)

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"
SHARED_COLUMNS = ["algo", "seed", "dim", "bitrate", "memory", "task", "disagreement", "quality"]


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    return pd.read_csv(PUBLISHED)


def test_published_csv_becomes_long_tidy_rows(raw):
    df = from_published_csv(PUBLISHED)
    assert len(df) == 108 * 5
    assert list(df.columns[:8]) == SHARED_COLUMNS
    assert measure_columns(df) == ["eis", "knn", "semantic_displacement", "pip_loss",
                                   "eigenspace_overlap"]
    assert list(dict.fromkeys(df["task"])) == ["sst", "mr", "subj", "mpqa", "ner"]
    assert (df["memory"] == df["dim"] * df["bitrate"]).all()
    # Values are carried over unchanged, row for row, per task.
    ner = df[df["task"] == "ner"].reset_index(drop=True)
    np.testing.assert_array_equal(ner["disagreement"], raw["rnn_no_crf_ner"])
    np.testing.assert_array_equal(ner["quality"], raw["rnn_no_crf_ner_quality"])
    np.testing.assert_array_equal(ner["eis"], raw["anchor_eigen_overlap_3.0_top_10000"])
    sst = df[df["task"] == "sst"].reset_index(drop=True)
    np.testing.assert_array_equal(sst["disagreement"], raw["la_sst_no_emb_norm"])
    np.testing.assert_array_equal(sst["pip_loss"], raw["pip"])


def test_pip_top_10000_column_of_the_glove_files_is_recognised(raw):
    renamed = raw.rename(columns={"pip": "pip_top_10000"})
    df = from_published_csv(renamed)
    assert "pip_loss" in df.columns
    both = raw.assign(pip_top_10000=raw["pip"])
    with pytest.raises(ResultsError, match="pip_top_10000"):
        from_published_csv(both)


def test_published_csv_errors_name_the_problem(raw, tmp_path):
    with pytest.raises(ResultsError, match="bitrate"):
        from_published_csv(raw.drop(columns=["bitrate"]))
    no_tasks = raw.drop(columns=[c for c in raw.columns if c.startswith(("la_", "rnn_"))])
    with pytest.raises(ResultsError, match="no disagreement column"):
        from_published_csv(no_tasks)
    bad_space = raw.copy()
    bad_space.loc[3, "space"] = 7
    path = tmp_path / "bad.csv"
    bad_space.to_csv(path, index=False)
    with pytest.raises(ResultsError, match=r"bad\.csv.*'memory' must equal dim \* bitrate"):
        from_published_csv(path)


def test_read_results_detects_both_formats(tmp_path):
    tidy = from_published_csv(PUBLISHED)
    pd.testing.assert_frame_equal(read_results(PUBLISHED), tidy)
    csv, parquet = tmp_path / "r.csv", tmp_path / "r.parquet"
    tidy.to_csv(csv, index=False)
    tidy.to_parquet(parquet, index=False)
    pd.testing.assert_frame_equal(read_results(csv), tidy)
    pd.testing.assert_frame_equal(read_results(parquet), tidy)
    pd.testing.assert_frame_equal(as_results(tidy), tidy)
    pd.testing.assert_frame_equal(as_results(pd.read_csv(PUBLISHED)), tidy)


def test_read_results_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_results(tmp_path / "missing.csv")
    garbage = tmp_path / "g.parquet"
    garbage.write_text("not parquet")
    with pytest.raises(ResultsError, match="cannot read as a Parquet table"):
        read_results(garbage)
    other = tmp_path / "other.csv"
    pd.DataFrame({"a": [1], "b": [2]}).to_csv(other, index=False)
    with pytest.raises(ResultsError, match=r"other\.csv: missing column\(s\) algo"):
        read_results(other)


def _tidy(**overrides) -> pd.DataFrame:
    base = {"algo": ["a", "a"], "seed": [1, 1], "dim": [10, 20], "bitrate": [32, 32],
            "task": ["t", "t"], "disagreement": [5.0, 4.0], "eis": [0.1, 0.05]}
    base.update(overrides)
    return pd.DataFrame(base)


def test_validate_results_fills_memory_and_checks_keys():
    df = validate_results(_tidy())
    assert list(df["memory"]) == [320, 640]
    with pytest.raises(ResultsError, match="repeat a .* key, e.g. algo=a, seed=1, dim=10"):
        validate_results(_tidy(dim=[10, 10]))
    with pytest.raises(ResultsError, match="'dim' must hold positive integers; row 1"):
        validate_results(_tidy(dim=[10, 2.5]))
    with pytest.raises(ResultsError, match="'eis' must be numeric"):
        validate_results(_tidy(eis=[0.1, "x"]))
    with pytest.raises(ResultsError, match="missing column"):
        validate_results(_tidy().drop(columns=["task"]))
    assert issubclass(ResultsError, EmbstabError)


def test_validate_results_drops_failed_rows_with_a_warning():
    with pytest.warns(UserWarning, match="dropping 1 row"):
        df = validate_results(_tidy(disagreement=[5.0, np.nan]))
    assert len(df) == 1
    with pytest.raises(ResultsError, match="no rows"), pytest.warns(UserWarning):
        validate_results(_tidy(disagreement=[np.nan, np.nan]))


def test_measure_distance_follows_the_registry():
    np.testing.assert_allclose(measure_distance([0.25, 0.9], "knn"), [0.75, 0.1])
    np.testing.assert_allclose(measure_distance([0.25, 0.9], "eis"), [0.25, 0.9])
    with pytest.raises(UnknownNameError, match="unknown measure"):
        measure_distance([1.0], "nope")


def test_wide_keeps_measure_and_task_order():
    table = pd.DataFrame({"algo": "a", "measure": ["z", "z", "b", "b"],
                          "task": ["ner", "sst", "ner", "sst"], "v": [1.0, 2.0, 3.0, 4.0]})
    out = wide(table, "v")
    assert list(out.index) == ["z", "b"] and list(out.columns) == ["sst", "ner"]
    assert out.loc["b", "sst"] == 4.0
    with pytest.raises(ResultsError, match="no column 'x'"):
        wide(table, "x")


def test_several_models_on_one_task_become_separate_tasks():
    df = pd.concat([_tidy(model="linear"), _tidy(model="rnn"),
                    _tidy(task=["u", "u"], model="linear")], ignore_index=True)
    out = validate_results(df)
    assert sorted(out["task"].unique()) == ["t:linear", "t:rnn", "u"]
    # One model per task: task names stay as they are.
    assert list(validate_results(_tidy(model="linear"))["task"].unique()) == ["t"]

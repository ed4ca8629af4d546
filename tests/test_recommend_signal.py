"""recommend's predictions never read a measure that sits at its null: it turns to the next measure
with signal and says so, or says that its pick has no signal (the measured disagreement still ranks)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from embstab.cli import main
from embstab.selection import BudgetError, recommend
from embstab.selection.signal import FALLBACK_ORDER, config_signal, signal_table, without_signal

DIMS, BITS, SEEDS = (16, 64, 256), (1, 4, 32), (0, 1)


def _table(eis_signal, knn_signal=True, with_nulls=True) -> pd.DataFrame:
    """Results where EIS and k-NN rank the configurations differently.

    EIS is smallest for the 16-d tables (its null, about 2d/n, shrinks with the dimension), so
    ranking by raw EIS picks a 16-d table; k-NN and the disagreement favour the 256-d ones.
    ``eis_signal`` / ``knn_signal``: a bool for every row, or a function of (dim, bits).
    """
    def flag(rule, dim, bits):
        return rule(dim, bits) if callable(rule) else rule

    rows = []
    for dim in DIMS:
        for bits in BITS:
            for seed in SEEDS:
                eis_null = 2 * dim / 4965
                knn_null = 5 / 4964
                rows.append({
                    "algo": "TransE", "seed": seed, "dim": dim, "bitrate": bits, "memory": dim * bits,
                    "task": "link_prediction",
                    "disagreement": 70 - 5 * np.log2(dim * bits) + 0.1 * seed,
                    "eis": eis_null * (1.0 if not flag(eis_signal, dim, bits) else 0.2) + 1e-4 * seed,
                    "knn": 0.1 + 0.002 * dim + 0.01 * bits + 1e-3 * seed,
                    **({"eis_null": eis_null, "eis_signal": flag(eis_signal, dim, bits),
                        "knn_null": knn_null, "knn_signal": flag(knn_signal, dim, bits)} if with_nulls else {}),
                })
    return pd.DataFrame(rows)


def test_eis_at_its_null_everywhere_switches_to_knn_and_says_so():
    rec = recommend(_table(eis_signal=False), 1024, measure="eis")
    assert rec.requested_measure == "eis" and rec.measure == "knn"
    # the pick comes from the measured disagreement: the most memory that fits here
    assert (rec.dim, rec.bitrate) == (256, 4)
    # raw EIS would pick a 16-d table (its value is smallest there only because its null is); without
    # nulls the measured disagreement still decides, not the raw value
    assert recommend(_table(eis_signal=False, with_nulls=False), 1024, measure="eis").dim == 256
    assert rec.signal_checked and rec.n_ranked == rec.n_candidates == 7
    assert rec.measure_null == pytest.approx(5 / 4964)
    assert "\n" not in rec.signal_note
    assert rec.signal_note.startswith("eis shows no signal on the configurations that fit")
    assert "the predictions read knn instead" in rec.signal_note and "order: eis, knn" in rec.signal_note
    text = str(rec)
    assert text.splitlines()[0] == rec.signal_note
    assert "leaning on knn" in text
    assert rec.to_dict()["measure"] == "knn" and rec.to_dict()["requested_measure"] == "eis"
    # by default the predictor may read every measure with signal: here knn alone
    from embstab.selection import fit_predictor

    groups = fit_predictor(_table(eis_signal=False)).groups.values()
    assert [g.measures for g in groups] == [("knn",)]
    assert [g.measures for g in fit_predictor(_table(eis_signal=True)).groups.values()] == [("eis", "knn")]


def test_a_pick_without_signal_says_so():
    rec = recommend(_table(eis_signal=False, knn_signal=False), 1024)
    assert (rec.dim, rec.bitrate) == (256, 4) and rec.measure == ""
    assert "a pick without signal" in rec.signal_note and "\n" not in rec.signal_note
    assert "dimension and bits alone" in str(rec)
    assert rec.predicted_disagreement  # predicted from dimension and bit width
    assert all(m in ("memory", "linear", "loglinear") for m in rec.models.values())


def test_no_fallback_fails_instead_of_switching():
    with pytest.raises(BudgetError, match="fallback to other measures is off"):
        recommend(_table(eis_signal=False), 1024, measure="eis", fallback=False)


def test_a_measure_with_signal_on_most_configurations_is_read():
    # EIS has signal except on the 16-d tables
    rec = recommend(_table(eis_signal=lambda dim, bits: dim > 16), 1024, measure="eis")
    assert rec.measure == "eis" and rec.signal_note == "" and rec.n_ranked == rec.n_candidates == 7


def test_signal_on_a_configuration_is_the_majority_of_its_seeds():
    table = _table(eis_signal=True)
    # one of the two seeds of the 256-d 4-bit table at its null: no majority, so no signal there
    pick = (table["dim"] == 256) & (table["bitrate"] == 4) & (table["seed"] == 0)
    table.loc[pick, "eis_signal"] = False
    verdict = config_signal(table, "eis").set_index(["dim", "bitrate"])
    assert not verdict.at[(256, 4), "signal"] and verdict.at[(256, 4), "with_signal"] == 1
    assert verdict.at[(256, 1), "signal"]


def test_results_without_nulls_say_the_signal_was_not_checked():
    rec = recommend(_table(eis_signal=False, with_nulls=False), 1024, measure="eis")
    assert rec.measure == "eis" and not rec.signal_checked and rec.measure_null is None
    assert "record no null for eis" in rec.signal_note
    assert "record no null for their measures" in recommend(_table(eis_signal=False, with_nulls=False), 1024).signal_note


def test_a_single_configuration_needs_no_ranking():
    rec = recommend(_table(eis_signal=False, knn_signal=False), 16)
    assert (rec.dim, rec.bitrate) == (16, 1) and rec.n_candidates == 1 and rec.tie_note == ""


def test_signal_table_and_measures_without_signal():
    table = _table(eis_signal=False)
    assert without_signal(table) == ["eis"]
    by_dim = signal_table(table, by=["dim"]).set_index(["measure", "dim"])
    assert by_dim.at[("eis", 64), "with_signal"] == 0 and by_dim.at[("eis", 64), "pairs"] == 6
    assert by_dim.at[("knn", 64), "with_signal"] == 6
    assert by_dim.at[("eis", 64), "null"] == pytest.approx(128 / 4965)
    assert without_signal(_table(eis_signal=False, with_nulls=False)) == []


def test_cli_switches_and_says_when_nothing_has_signal(tmp_path, capsys):
    path = tmp_path / "results.csv"
    _table(eis_signal=False).to_csv(path, index=False)  # the CSV round trip reads the flags back
    assert main(["recommend", str(path), "--budget", "1024", "--measure", "eis"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("eis shows no signal on the configurations that fit")
    assert "Best 5 of 7 configurations by disagreement" in out
    path_none = tmp_path / "none.csv"
    _table(eis_signal=False, knn_signal=False).to_csv(path_none, index=False)
    assert main(["recommend", str(path_none), "--budget", "1024"]) == 0
    assert "a pick without signal" in capsys.readouterr().out
    assert main(["recommend", str(path), "--budget", "1024", "--measure", "eis", "--no-fallback"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fallback to other measures is off" in err and "Traceback" not in err


def test_fallback_order_leaves_out_the_scale_dependent_measures():
    assert "pip_loss" not in FALLBACK_ORDER and "fro_distance" not in FALLBACK_ORDER
    assert FALLBACK_ORDER[:2] == ("eis", "knn")


def test_report_shows_each_measure_against_its_null():
    from embstab.report import build_report

    switched = build_report(_table(eis_signal=False), progress=False)
    assert 'id="nulls"' in switched and "Pairs with signal: eis 0/18; knn 18/18." in switched
    assert "No signal: eis sits at the level of unrelated tables" in switched
    assert "the predictions read knn instead" in switched
    undecided = build_report(_table(eis_signal=False, knn_signal=False), progress=False)
    assert "a pick without signal" in undecided
    unchecked = build_report(_table(eis_signal=False, with_nulls=False), progress=False)
    assert 'id="nulls"' not in unchecked and "No signal" not in unchecked

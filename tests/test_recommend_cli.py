"""`embstab recommend RESULTS --budget BITS`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import embstab.cli as cli
from embstab.cli import recommend as recommend_cli
from embstab.selection import BudgetError, recommend

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="embstab")
    recommend_cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_text_output(capsys):
    args = parse(["recommend", str(PUBLISHED), "--budget", "400"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    rec = recommend(PUBLISHED, 400)
    assert f"ship w2v_cbow with dim={rec.dim} at {rec.bitrate}-bit precision ({rec.memory} bits per word)" in out
    assert rec.tie_note and rec.tie_note in out  # several configurations tie with the best at 400 bits
    assert "Best 5 of 15 configurations by disagreement" in out
    for task in ("sst", "mr", "subj", "mpqa", "ner"):
        lo, hi = rec.predicted_interval[task]
        assert f"\n  {task:<12} predicted {rec.predicted_disagreement[task]:6.2f} % [{lo:.2f}, {hi:.2f}]" in out
    # the candidates list shows each one's interval and whether it ties with the best
    assert " tie " in out and "measured" in out


def test_json_output(capsys):
    args = parse(["recommend", str(PUBLISHED), "--budget", "400", "--measure", "knn", "--json",
                  "--task", "sst"])
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measure"] == "knn" and data["memory"] <= 400
    assert list(data["predicted_disagreement"]) == ["sst"]
    low, high = data["predicted_interval"]["sst"]
    assert low <= data["predicted_disagreement"]["sst"] <= high


def test_bad_budget_raises_an_embstab_error():
    args = parse(["recommend", str(PUBLISHED), "--budget", "10"])
    with pytest.raises(BudgetError, match="no configuration fits in 10 bits"):
        args.func(args)


def test_unknown_measure_is_rejected_by_argparse(capsys):
    with pytest.raises(SystemExit):
        parse(["recommend", str(PUBLISHED), "--budget", "400", "--measure", "nope"])
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_main_turns_errors_into_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    assert cli.main(["recommend", str(PUBLISHED), "--budget", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("embstab recommend: error: no configuration fits")
    assert cli.main(["recommend", str(tmp_path / "none.csv"), "--budget", "400"]) == 2
    assert "none.csv" in capsys.readouterr().err
    assert cli.main(["recommend", str(PUBLISHED), "--budget", "800", "--threshold", "1000"]) == 0
    rec = recommend(PUBLISHED, 800)
    assert f"dim={rec.dim} at {rec.bitrate}-bit" in capsys.readouterr().out
    assert cli.main(["recommend", str(PUBLISHED), "--budget", "800", "--no-ties"]) == 0
    best = rec.candidates.iloc[0]
    assert (best["dim"], best["bitrate"]) != (rec.dim, rec.bitrate)  # 800 bits: a cheaper tie ships by default
    assert f"dim={best['dim']} at {best['bitrate']}-bit" in capsys.readouterr().out

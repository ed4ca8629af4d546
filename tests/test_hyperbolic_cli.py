"""The ``embstab hyperbolic`` sub-command (embed / eval)."""

from __future__ import annotations

import argparse
import json

import pytest

from embstab.cli import hyperbolic as cli
from embstab.errors import EmbstabError
from embstab.hyperbolic import load_embedding

from _graphs import graph_path


def _run(argv):
    parser = argparse.ArgumentParser(prog="embstab")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture()
def tree(tmp_path):
    p = tmp_path / "t.edges"
    p.write_text(graph_path("smalltree").read_text())
    return p


def test_embed_comb_then_eval(tree, tmp_path, capsys):
    out = tmp_path / "t.hyp"
    assert _run(["hyperbolic", "embed", str(tree), "--method", "comb", "--bits", "256",
                 "--precision-bits", "256", "-o", str(out), "--quiet"]) == 0
    assert "scale 34.2575" in capsys.readouterr().err  # (stdout may be the output file)
    emb = load_embedding(out)
    assert emb.multiprecision and emb.precision_bits == 256
    assert _run(["hyperbolic", "eval", str(tree), str(out), "--json", "--quiet"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["map"] == 1.0 and res["d_avg"] == pytest.approx(0.00898, abs=5e-6)


def test_embed_default_precision_follows_tau(tree, tmp_path, capsys):
    out = tmp_path / "e.hyp"
    _run(["hyperbolic", "embed", str(tree), "--eps", "0.01", "-o", str(out), "--quiet"])
    emb = load_embedding(out)
    assert emb.precision_bits >= emb.metadata["bits_needed"] > 256


@pytest.mark.parametrize("method,extra", [("hmds", ["--dim", "5"]),
                                          ("sgd", ["--dim", "3", "--epochs", "5"])])
def test_embed_hmds_and_sgd(tree, tmp_path, capsys, method, extra):
    out = tmp_path / f"{method}.hyp"
    assert _run(["hyperbolic", "embed", str(tree), "--method", method, "-o", str(out),
                 "--quiet", *extra]) == 0
    _run(["hyperbolic", "eval", str(tree), str(out), "--rows", "10", "--quiet"])
    text = capsys.readouterr().out
    assert "MAP" in text and "10 sampled rows" in text


def test_errors_are_embstab_errors(tree, tmp_path):
    with pytest.raises(EmbstabError, match="no such edge-list file"):
        _run(["hyperbolic", "embed", str(tmp_path / "none.edges"), "-o", str(tmp_path / "x")])
    with pytest.raises(EmbstabError, match="too low"):
        _run(["hyperbolic", "embed", str(tree), "--eps", "0.01", "--precision-bits", "64",
              "-o", str(tmp_path / "x"), "--quiet"])
    bad = tmp_path / "bad.hyp"
    bad.write_text("nonsense\n")
    with pytest.raises(EmbstabError, match="not an embstab hyperbolic embedding"):
        _run(["hyperbolic", "eval", str(tree), str(bad)])


def test_main_entry_point_when_registered(tree, tmp_path, capsys):
    from embstab.cli import main

    rc = main(["hyperbolic", "embed", str(tree), "--precision-bits", "8", "--eps", "0.1",
               "-o", str(tmp_path / "x.hyp"), "--quiet"])
    assert rc == 2 and "too low" in capsys.readouterr().err


def test_embed_forest_flag(tmp_path, capsys):
    p = tmp_path / "f.edges"
    p.write_text("0 1\n1 2\n3 4\n")
    out = tmp_path / "f.hyp"
    assert _run(["hyperbolic", "embed", str(p), "--forest", "-o", str(out), "--quiet"]) == 0
    assert "2 components" in capsys.readouterr().err
    _run(["hyperbolic", "eval", str(p), str(out), "--json", "--quiet"])
    assert json.loads(capsys.readouterr().out)["map"] == 1.0


def test_compare_reads_two_hyperbolic_files(tree, tmp_path, capsys):
    from embstab.cli import main

    a, b = tmp_path / "a.hyp", tmp_path / "b.hyp"
    for out, seed in ((a, "0"), (b, "1")):
        assert _run(["hyperbolic", "embed", str(tree), "--method", "sgd", "--dim", "3", "--epochs", "5",
                     "--seed", seed, "-o", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--output", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    values = {m["measure"]: m["value"] for m in res["measures"]}
    assert set(values) >= {"hyperbolic_knn", "hyperbolic_map"} and 0 <= values["hyperbolic_knn"] <= 1
    assert main(["compare", str(a), str(tree)]) == 2  # one hyperbolic file, one not: one line
    assert "compare two of a kind" in capsys.readouterr().err

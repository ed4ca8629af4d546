"""One pair order everywhere: OLD first, and the pair protocol (clips, rotation) taken from OLD."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from embstab import Embedding, Pair, cli


def _positional_metavars(parser: argparse.ArgumentParser) -> list[str]:
    return [a.metavar or a.dest for a in parser._actions
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


@pytest.mark.parametrize("path", [("compare",), ("downstream",), ("kg", "downstream"),
                                  ("contextual", "disagreement")])
def test_every_pair_command_takes_old_then_new(path):
    p = _subparser(cli.build_parser(), *path)
    assert _positional_metavars(p) == ["OLD", "NEW"]
    text = p.format_help()
    assert "OLD" in text and "NEW" in text
    # no leftover names of the old A/B convention in the options or the help
    assert not any(o.startswith(("--anchor-a", "--anchor-b", "--quantize-b")) for a in p._actions
                   for o in a.option_strings if a.help != argparse.SUPPRESS)


def test_compress_like_names_the_old_member():
    p = _subparser(cli.build_parser(), "compress")
    like = next(a for a in p._actions if "--like" in a.option_strings)
    assert like.metavar == "OLD"


def _pair(n: int = 60, dim: int = 8) -> tuple[Embedding, Embedding]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(n)]
    old = Embedding(words, rng.normal(size=(n, dim)).astype(np.float32), name="old")
    # a new member with a wider spread: its own clip would differ from old's
    new = Embedding(words, 3.0 * rng.normal(size=(n, dim)).astype(np.float32), name="new")
    return old, new


def test_compress_pair_takes_a_pair_or_two_members():
    from embstab.compress import compress_pair

    old, new = _pair()
    plain = compress_pair(old, new, 4)
    paired = compress_pair(Pair(old, new), 4)
    for x, y in zip(plain, paired):
        assert x.words == y.words and np.array_equal(x.vectors, y.vectors)
    stochastic = compress_pair(Pair(old, new), 4, "stochastic", 7)
    again = compress_pair(old, new, 4, rounding="stochastic", seed=7)
    assert np.array_equal(stochastic[1].vectors, again[1].vectors)
    # keywords stay where they are, positionals after the Pair shift to their names
    for call in (compress_pair(Pair(old, new), bits=4, rounding="stochastic", seed=7),
                 compress_pair(Pair(old, new), 4, seed=7, rounding="stochastic"),
                 compress_pair(Pair(old, new), 4, "stochastic", seed=7)):
        assert np.array_equal(call[1].vectors, again[1].vectors)
    # the clip is old's: swapping the members changes the result
    swapped = compress_pair(Pair(new, old), 4)
    assert plain[0].metadata["compression"]["clip"] != swapped[0].metadata["compression"]["clip"]
    with pytest.raises(TypeError, match="too many positional"):
        compress_pair(Pair(old, new), 4, "nearest", 0, "extra")
    with pytest.raises(TypeError, match="old and its new member"):
        compress_pair(old)


def test_pair_unpacks_old_first_and_maps():
    p = Pair("a_old", "b_new")
    old, new = p
    assert (old, new) == ("a_old", "b_new") and p.old == "a_old"
    assert p.map(str.upper) == Pair("A_OLD", "B_NEW")


@pytest.fixture(scope="module")
def kg_folders(tmp_path_factory):
    pytest.importorskip("pykeen")
    root = tmp_path_factory.mktemp("kg_pair")
    base = ["kg", "train", "--graph", "nations", "--dim", "6", "--no-progress"]
    # two models of different training: their tables, so their own 4-bit clips, differ
    assert cli.main(base + ["--epochs", "2", "--seed", "0", "-o", str(root / "old")]) == 0
    assert cli.main(base + ["--epochs", "6", "--seed", "1", "--version", "remove", "--share", "0.1",
                            "-o", str(root / "new")]) == 0
    return root / "old", root / "new"


def test_downstream_quantizes_both_kg_models_with_the_old_clips(kg_folders, capsys):
    from embstab.kg import link_prediction_disagreement, load_graph, load_kg_model, quantize_model

    old_dir, new_dir = kg_folders
    graph = load_graph("nations")
    old, new = load_kg_model(old_dir, graph), load_kg_model(new_dir, graph)
    old_clips, new_clips = quantize_model(old, 4).clips, quantize_model(new, 4).clips
    assert all(old_clips[k] != pytest.approx(new_clips[k]) for k in old_clips)  # the case where order matters

    assert cli.main(["downstream", str(old_dir), str(new_dir), "--task", "link_prediction:nations", "--bits", "4",
                     "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["clips"] == pytest.approx(old_clips)
    assert all(doc["clips"][k] != pytest.approx(new_clips[k]) for k in new_clips)
    # the same numbers as quantizing by hand, the new model with the old one's clips
    by_hand = link_prediction_disagreement(quantize_model(old, 4), quantize_model(new, 4, clips=old_clips), graph)
    assert doc["disagreement"] == pytest.approx(by_hand.disagreement)
    assert doc["mrr_old"] == pytest.approx(by_hand.metrics_old.mrr)
    assert doc["mrr_new"] == pytest.approx(by_hand.metrics_new.mrr)

    # the other order takes the other model's clips: the first positional is the old one
    assert cli.main(["kg", "downstream", str(new_dir), str(old_dir), "--graph", "nations", "--bits", "4",
                     "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["clips"] == pytest.approx(new_clips)


def test_kg_functions_take_a_pair(kg_folders):
    from embstab.kg import kg_disagreement, load_graph, load_kg_model, quantize_pair

    graph = load_graph("nations")
    old, new = (load_kg_model(f, graph) for f in kg_folders)
    qo, qn = quantize_pair(Pair(old, new), 4)
    assert qo.clips == qn.clips == quantize_pair(old, new, 4)[0].clips
    a = kg_disagreement(old, new, graph, "triple_classification", bits=4)
    b = kg_disagreement(Pair(old, new), graph, "triple_classification", bits=4)
    c = kg_disagreement(Pair(old, new), graph=graph, task="triple_classification", bits=4)
    assert a.to_dict() == b.to_dict() == c.to_dict() and a.accuracy_old == b.accuracy_old


def test_compare_measures_are_symmetric_and_the_order_picks_the_words():
    import embstab

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(300)]
    x = rng.normal(size=(300, 10))
    old = Embedding(words, x, name="old")
    new = Embedding(words[::-1], (x + 0.3 * rng.normal(size=(300, 10)))[::-1], name="new")  # other frequency order
    anchor_old = Embedding(words, rng.normal(size=(300, 20)), name="anchor_old")
    anchor_new = Embedding(words, anchor_old.vectors + 0.1 * rng.normal(size=(300, 20)), name="anchor_new")
    forward = embstab.compare(old, new, anchors=(anchor_old, anchor_new), top_n=None, null_samples=0)
    backward = embstab.compare(*Pair(new, old), anchors=(anchor_new, anchor_old), top_n=None, null_samples=0)
    assert list(forward.measure) == list(backward.measure)
    assert list(forward.value) == pytest.approx(list(backward.value), rel=1e-7, abs=1e-10)
    assert (forward.attrs["old"], forward.attrs["new"]) == ("old", "new")
    paired = embstab.compare(Pair(old, new), anchors=(anchor_old, anchor_new), top_n=None, null_samples=0)
    assert list(paired.value) == list(forward.value)
    with pytest.raises(TypeError, match="by keyword"):
        embstab.compare(Pair(old, new), "self")
    # with a top_n the old member's frequency order picks the words, unless rank_by says otherwise
    by_old = embstab.compare(old, new, anchors=None, measures=["pip_loss"], top_n=50, null_samples=0)
    by_new = embstab.compare(old, new, anchors=None, measures=["pip_loss"], top_n=50, rank_by="new", null_samples=0)
    assert by_old.value[0] == pytest.approx(embstab.compare(
        old.subset(words[:50]), new.subset(words[:50]), anchors=None, measures=["pip_loss"], top_n=None,
        null_samples=0).value[0])
    assert by_old.value[0] != pytest.approx(by_new.value[0])
    with pytest.raises(ValueError, match="rank_by must be 'old' or 'new'"):
        embstab.compare(old, new, rank_by="first")

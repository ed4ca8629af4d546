import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import embstab
from embstab import Embedding, ShapeError, VocabularyError, measures
from embstab.errors import ConfigError, UnknownNameError
from embstab.measures.compare import Anchors


def pair(n=300, d=10, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n)]
    x = rng.normal(size=(n, d))
    a = Embedding(words, x, name="new")
    b = Embedding(words[::-1], (x + 0.3 * rng.normal(size=(n, d)))[::-1], name="old")  # other row order
    ea = Embedding(words, rng.normal(size=(n, 2 * d)), name="anchor_new")
    eb = Embedding(words, ea.vectors + 0.1 * rng.normal(size=(n, 2 * d)), name="anchor_old")
    return a, b, ea, eb


def test_compare_matches_measures_on_aligned_rows():
    a, b, ea, eb = pair()
    df = embstab.compare(a, b, anchors=(ea, eb), top_n=200)
    assert list(df.columns) == ["measure", "value", "distance", "direction", "null", "signal"]
    assert list(df.measure) == list(measures.DEFAULT_MEASURES)
    words = a.words[:200]  # rank_by="a": a's frequency order
    x, y = a.subset(words).vectors, b.subset(words).vectors
    got = df.set_index("measure")["value"]
    assert got["eis"] == pytest.approx(measures.eis(x, y, ea.subset(words).vectors, eb.subset(words).vectors))
    assert got["pip_loss"] == pytest.approx(measures.pip_loss(x, y))
    assert df.set_index("measure").loc["knn", "distance"] == pytest.approx(1 - got["knn"])
    assert df.attrs["n_words"] == 200


def test_rank_by_picks_the_other_frequency_order():
    a, b, _, _ = pair()
    va = embstab.compare(a, b, measures=["pip_loss"], top_n=50, rank_by="a").value[0]
    vb = embstab.compare(a, b, measures=["pip_loss"], top_n=50, rank_by="b").value[0]
    words_b = b.words[:50]
    assert vb == pytest.approx(measures.pip_loss(a.subset(words_b).vectors, b.subset(words_b).vectors))
    assert va != pytest.approx(vb)


def test_clear_errors():
    a, b, ea, eb = pair()
    with pytest.raises(VocabularyError, match="share only 300 words"):
        embstab.compare(a, b, top_n=1000)
    with pytest.raises(VocabularyError, match="share no words"):
        embstab.compare(a, Embedding(["zz"], np.ones((1, 10))))
    with pytest.raises(ShapeError, match="EIS needs anchors"):
        embstab.compare(a, b, anchors=None, measures=["eis"], top_n=100)
    small_anchor = ea.top(50)
    with pytest.raises(VocabularyError, match="share only 50 words"), \
            pytest.warns(UserWarning, match="anchors hold only 50 of the 300 words"):
        embstab.compare(a, b, anchors=(small_anchor, eb), top_n=100)


def test_python_and_cli_agree_and_say_which_anchors(tmp_path, capsys):
    from embstab import cli

    a, b, _, _ = pair()
    df = embstab.compare(a, b, top_n=200)  # default: the pair is its own anchor, as on the command line
    assert df.attrs["anchors"] == "self" and "eis" in set(df.measure)
    a.save(tmp_path / "a.txt"), b.save(tmp_path / "b.txt")
    assert cli.main(["compare", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--top-n", "200",
                     "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["anchors"] == "self"
    from_cli = {m["measure"]: m["value"] for m in out["measures"]}
    for row in df.itertuples():
        assert from_cli[row.measure] == pytest.approx(row.value, rel=1e-9)
    assert "eis" not in set(embstab.compare(a, b, anchors=None, top_n=200).measure)


def test_warnings_for_degenerate_comparisons(tmp_path, capsys):
    from embstab import cli

    a, b, _, _ = pair()
    with pytest.warns(UserWarning, match="only 8 compared words for 10 dimensions"):
        embstab.compare(a, b, top_n=8, measures=["pip_loss"])
    narrow = a.with_vectors(a.vectors[:, :4])
    with pytest.warns(UserWarning, match="left out semantic_displacement"):
        df = embstab.compare(narrow, b, top_n=200)
    assert "semantic_displacement" not in set(df.measure)
    narrow.save(tmp_path / "n.txt"), b.save(tmp_path / "b.txt")
    assert cli.main(["compare", str(tmp_path / "n.txt"), str(tmp_path / "b.txt"), "--top-n", "200"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["embstab compare: warning: left out semantic_displacement (needs equal dimensions; the "
                   "embeddings are 4-d and 10-d)"]


def test_compare_many_reuses_anchor_factors(monkeypatch):
    a, b, ea, eb = pair()
    calls = []
    cmp = sys.modules["embstab.measures.compare"]
    real = cmp._factor_set

    monkeypatch.setattr(cmp, "_factor_set", lambda anchors, *args: calls.append(len(anchors)) or real(anchors, *args))
    pairs = {f"d{d}": (a.with_vectors(a.vectors[:, :d]), b.with_vectors(b.vectors[:, :d])) for d in (2, 4, 6, 8)}
    df = embstab.compare_many(pairs, anchors=(ea, eb), top_n=200)
    assert calls == [2]  # the two anchors factored once, not per pair
    assert set(df.pair) == set(pairs) and len(df) == 4 * 5
    single = embstab.compare(*pairs["d4"], anchors=(ea, eb), top_n=200)
    pd.testing.assert_series_equal(df[df.pair == "d4"].value.reset_index(drop=True), single.value)


def test_real_glove_vs_minilm():
    from embstab.data.pretrained import glove_6b_50d, minilm_l6_input

    g, m = glove_6b_50d(top_n=20000), minilm_l6_input()
    with pytest.warns(UserWarning, match="left out semantic_displacement"):
        df = embstab.compare(g, m, anchors="self", top_n=2000).set_index("measure")
    assert set(df.index) == {"eis", "knn", "pip_loss", "eigenspace_overlap"}  # SD needs equal dims: skipped
    # unrelated models: neighbourhoods overlap a little, far from identical
    assert 0.05 < df.loc["knn", "value"] < 0.8
    assert 0 < df.loc["eis", "value"] < 1
    same = embstab.compare(g, g, anchors="self", top_n=2000).set_index("measure")
    assert same.loc["knn", "value"] == 1.0 and same.loc["eis", "value"] == pytest.approx(0, abs=1e-12)


def test_cli_compare_json_and_help(tmp_path):
    a, b, ea, eb = pair()
    paths = {}
    for e in (a, b, ea, eb):
        paths[e.name] = tmp_path / f"{e.name}.txt"
        e.save(paths[e.name])
    out = subprocess.run([sys.executable, "-m", "embstab", "compare", str(paths["old"]), str(paths["new"]),
                          "--anchor-old", str(paths["anchor_old"]), "--anchor-new", str(paths["anchor_new"]),
                          "--top-n", "200", "--output", "json"], capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    direct = embstab.compare(b, a, anchors=(eb, ea), top_n=200)
    assert data["n_words"] == 200 and (data["old"], data["new"]) == ("old", "new")
    assert [m["value"] for m in data["measures"]] == pytest.approx(list(direct.value), rel=1e-9)
    helptext = subprocess.run([sys.executable, "-m", "embstab", "compare", "--help"], capture_output=True,
                              text=True).stdout
    assert "--anchor-old" in helptext and "larger = less stable" in helptext


def test_default_top_n_is_a_ceiling_and_an_explicit_one_is_exact():
    # the README's `embstab.compare(old, new)` on a pair sharing fewer than 10,000 words
    a, b, _, _ = pair()
    df = embstab.compare(a, b, null_samples=0)
    assert df.attrs["n_words"] == 300
    with pytest.raises(VocabularyError, match="top_n=10000 was asked but 'new' and 'old' share only 300 words;"):
        embstab.compare(a, b, top_n=10000)  # (no "with the anchors": the pair is its own)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"null_samples": -1}, ConfigError, "null_samples must be an integer from 0 to 10000"),
    ({"null_samples": 1.5}, ConfigError, "null_samples must be an integer from 0 to 10000"),
    ({"null_samples": 10**9}, ConfigError, "null_samples must be an integer from 0 to 10000 .*got 1000000000"),
    ({"params": {"knnn": {"k": 10}}}, UnknownNameError, "did you mean 'knn'"),
    ({"params": {"knn": {"kk": 1}}}, ConfigError, "knn has no parameter 'kk' \\(did you mean 'k'\\?\\)"),
    ({"params": {"knn": 10}}, ConfigError, "params must map measure names to dicts"),
    ({"anchors": "mine"}, ShapeError, "anchors must be a pair of embeddings"),
    ({"device": "tpu"}, ConfigError, "device must be 'cpu', 'cuda'"),
    ({"rank_by": "c"}, ConfigError, "rank_by must be 'old' or 'new'"),
])
def test_bad_arguments_are_named(kwargs, error, message):
    a, b, _, _ = pair()
    with pytest.raises(error, match=message):
        embstab.compare(a, b, **kwargs)


def test_anchors_given_as_arrays_or_one_embedding_are_refused():
    a, b, ea, eb = pair()
    with pytest.raises(ConfigError, match="wrap them in embstab.Embedding"):
        embstab.compare(a, b, anchors=(ea.vectors, eb.vectors))
    with pytest.raises(ConfigError, match="got Embedding"):
        embstab.compare(a, b, anchors=ea)


def test_one_measure_by_name_and_unused_params_are_said():
    a, b, _, _ = pair()
    assert embstab.compare(a, b, measures="knn", null_samples=0).measure.tolist() == ["knn"]
    with pytest.warns(UserWarning, match="params for linear_cka are not used"):
        embstab.compare(a, b, measures=["knn"], params={"linear_cka": {}}, null_samples=0)


def test_one_anchors_object_serves_numpy_and_torch():
    a, b, ea, eb = pair()
    shared = Anchors(ea, eb)
    on_torch = embstab.compare(a, b, anchors=shared, device="cpu", null_samples=0)
    on_numpy = embstab.compare(a, b, anchors=shared, null_samples=0)
    np.testing.assert_allclose(on_torch.value, on_numpy.value, rtol=1e-9)


@pytest.mark.parametrize("n, d", [(50, 50), (30, 40)])
def test_span_measures_have_no_signal_when_the_spans_are_the_whole_space(n, d):
    # both column spans are all of R^n: EIS and its null are round-off, which an unguarded
    # signal test read as a clear difference for some seeds
    for seed in range(10):
        rng = np.random.default_rng(seed)
        words = [f"w{i}" for i in range(n)]
        x = rng.normal(size=(n, d))
        a, b = Embedding(words, x, name="a"), Embedding(words, x + 1e-4 * rng.normal(size=(n, d)), name="b")
        with pytest.warns(UserWarning, match=f"only {n} compared words for {d} dimensions"):
            df = embstab.compare(a, b).set_index("measure")
        assert not df.loc["eis", "signal"] and not df.loc["eigenspace_overlap", "signal"], seed


def test_too_few_words_for_knn_and_repeated_measures():
    a, b, _, _ = pair()
    with pytest.raises(VocabularyError, match="share only 4 compared words: k-NN with k=5 needs at least 6"):
        embstab.compare(a, b, top_n=4, measures=["knn"])
    assert embstab.compare(a, b, measures=["knn", "knn"], null_samples=0).measure.tolist() == ["knn"]


def test_cli_tells_a_file_from_its_compressed_copy(tmp_path):
    # a compressed copy keeps its source's name: the report used to read "old a ... vs new a"
    from embstab.cli import main as cli_main

    a, _, _, _ = pair()
    a.save(tmp_path / "a.txt")
    assert cli_main(["compress", str(tmp_path / "a.txt"), str(tmp_path / "a4.esq"), "--bits", "4", "--quiet"]) == 0
    assert embstab.load(tmp_path / "a4.esq").name == embstab.load(tmp_path / "a.txt").name
    out = subprocess.run([sys.executable, "-m", "embstab", "compare", str(tmp_path / "a.txt"), str(tmp_path / "a4.esq"),
                          "--output", "json", "--null-samples", "0"], capture_output=True, text=True, timeout=300)
    data = json.loads(out.stdout)
    assert (data["old"], data["new"]) == (str(tmp_path / "a.txt"), str(tmp_path / "a4.esq"))

"""Every measure beside its null: the value for an unrelated partner (the other side's rows shuffled),
and whether a pair is clearly apart from it. Unrelated tables show no signal, related ones do, at
any seed; the nulls agree with the closed forms known for EIS, k-NN and the eigenspace overlap."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import embstab
from embstab.cli import main
from embstab.measures import REGISTRY
from embstab.measures.null import NULL_FOLD, NullLevel, has_signal

WORD_MEASURES = ["eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap", "weighted_eigenspace_overlap",
                 "fro_distance", "linear_cka", "procrustes_distance"]


def _pair(seed: int, n: int = 1500, d: int = 20, noise: float | None = 0.3):
    """Two tables of the same words: related (b = a + noise) or, with ``noise=None``, unrelated."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n)]
    x = rng.normal(size=(n, d)) * np.linspace(3, 0.5, d)  # a spectrum that is not flat
    y = rng.normal(size=(n, d)) * np.linspace(3, 0.5, d) if noise is None else x + noise * rng.normal(size=(n, d))
    return embstab.Embedding(words, x, name="a"), embstab.Embedding(words, y, name="b")


@pytest.mark.parametrize("seed", [11, 2024, 77_777, 31_337, 5])
def test_unrelated_tables_show_no_signal_and_related_ones_do(seed):
    a, unrelated = _pair(seed, noise=None)
    df = embstab.compare(a, unrelated, measures=WORD_MEASURES, top_n=None, null_seed=seed)
    assert not df["signal"].any(), df
    a, related = _pair(seed, noise=0.3)
    df = embstab.compare(a, related, measures=WORD_MEASURES, top_n=None, null_seed=seed)
    assert df["signal"].all(), df


def test_nulls_match_the_closed_forms():
    n, d, k = 3000, 30, 5
    a, b = _pair(3, n=n, d=d)
    df = embstab.compare(a, b, top_n=None, params={"knn": {"k": k, "n_queries": 1000}}).set_index("measure")
    assert df.loc["eis", "null"] == pytest.approx(1 - d / n, abs=3e-3)  # the pair is its own anchor
    assert df.loc["knn", "null"] == pytest.approx(k / (n - 1), abs=2e-3)
    assert df.loc["eigenspace_overlap", "null"] == pytest.approx(d / n, rel=0.15)


def test_eis_null_with_larger_flat_anchors_is_d_over_anchor_dim():
    """Anchors E, Ẽ of k flat (isotropic) columns, each side the first d columns of its anchor:
    (EEᵀ)^α is then about n^α times the projector onto E's span, P lies inside that span and P̃ is
    unrelated to it, so each anchor contributes about d to the numerator and k to the trace: EIS
    of unrelated sides ≈ 2d / 2k. A row-shuffled partner gives that level, and so does a pair
    drawn unrelated from the start."""
    n, d, k = 3000, 16, 128
    rng = np.random.default_rng(8)
    words = [f"w{i}" for i in range(n)]
    big_a, big_b = rng.normal(size=(n, k)), rng.normal(size=(n, k))
    a = embstab.Embedding(words, big_a[:, :d], name="a")
    b = embstab.Embedding(words, big_b[:, :d], name="b")  # unrelated to a
    df = embstab.compare(a, b, anchors=(embstab.Embedding(words, big_a), embstab.Embedding(words, big_b)),
                         measures=["eis"], top_n=None).set_index("measure")
    assert df.loc["eis", "null"] == pytest.approx(d / k, rel=0.2)
    assert df.loc["eis", "value"] == pytest.approx(df.loc["eis", "null"], rel=0.1)
    assert not df.loc["eis", "signal"]


def test_the_null_is_seeded_and_can_be_skipped():
    a, b = _pair(4)
    first = embstab.compare(a, b, top_n=None, null_seed=7)
    again = embstab.compare(a, b, top_n=None, null_seed=7)
    other = embstab.compare(a, b, top_n=None, null_seed=8)
    assert first["null"].tolist() == again["null"].tolist()
    assert first["null"].tolist() != other["null"].tolist()
    assert first["value"].tolist() == other["value"].tolist()  # the pair's own values do not move
    skipped = embstab.compare(a, b, top_n=None, null_samples=0)
    assert skipped["null"].isna().all() and skipped["signal"].isna().all()
    assert skipped["value"].tolist() == first["value"].tolist()


def test_torch_tensors_give_the_numpy_nulls():
    pytest.importorskip("torch")
    a, b = _pair(6, n=600, d=12)
    ref = embstab.compare(a, b, top_n=None)
    out = embstab.compare(a, b, top_n=None, device="cpu")
    np.testing.assert_allclose(out["null"], ref["null"], rtol=1e-9)
    assert out["signal"].tolist() == ref["signal"].tolist()


@pytest.mark.parametrize("name", WORD_MEASURES)
def test_signal_rule_per_direction(name):
    info = REGISTRY[name]
    low = info.range[0]
    null = NullLevel(value=low + 0.4, spread=0.01, samples=3)
    far = low + 0.4 * NULL_FOLD * 1.1 if info.larger_is_more_stable else low + 0.4 / NULL_FOLD / 1.1
    near = low + 0.4 * 1.3 if info.larger_is_more_stable else low + 0.4 / 1.3
    wrong_side = low + 0.2 if info.larger_is_more_stable else low + 0.8
    assert has_signal(info, far, null)
    assert not has_signal(info, near, null)  # apart from the noise, but not twice as far
    assert not has_signal(info, wrong_side, null)
    assert not has_signal(info, far, NullLevel(null.value, spread=abs(far - null.value), samples=3))  # in the noise
    assert not has_signal(info, math.nan, null)


def test_cli_json_carries_null_and_signal(tmp_path, capsys):
    for label, noise in (("related", 0.3), ("unrelated", None)):
        a, b = _pair(9, noise=noise)
        a.save(tmp_path / f"{label}_a.txt")
        b.save(tmp_path / f"{label}_b.txt")
        assert main(["compare", str(tmp_path / f"{label}_a.txt"), str(tmp_path / f"{label}_b.txt"),
                     "--measures", "eis", "knn", "--output", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert {m["measure"] for m in out["measures"]} == {"eis", "knn"}
        for m in out["measures"]:
            assert isinstance(m["null"], float) and m["signal"] is (label == "related")


def test_cli_table_names_the_measures_without_signal(tmp_path, capsys):
    a, b = _pair(10, noise=None)
    a.save(tmp_path / "a.txt")
    b.save(tmp_path / "b.txt")
    assert main(["compare", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--measures", "eis", "knn"]) == 0
    out = capsys.readouterr().out
    assert "null" in out and "signal" in out
    assert "no signal: eis, knn are at the level of an unrelated partner" in out
    assert main(["compare", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--null-samples", "0",
                 "--output", "json"]) == 0
    assert all(m["null"] is None and m["signal"] is None for m in json.loads(capsys.readouterr().out)["measures"])


def _offset_pair(seed: int, n: int = 200, d: int = 6, k: int = 12):
    """A related pair with its own larger anchors, every table shifted off the origin (a mean row, as
    trained embeddings have), so the all-ones direction that shuffles keep matters."""
    rng = np.random.default_rng(seed)
    ea = rng.normal(size=(n, k)) * np.linspace(3, 0.3, k) + 1.5
    eb = ea + 0.3 * rng.normal(size=(n, k))
    x, y = ea[:, :d] + 0.2 * rng.normal(size=(n, d)), eb[:, :d] + 0.2 * rng.normal(size=(n, d))
    return x, y, ea, eb


@pytest.mark.parametrize("name", ["eis", "eigenspace_overlap", "pip_loss", "knn"])
def test_closed_form_nulls_are_the_average_over_shuffles(name):
    from embstab.measures import shared_products
    from embstab.measures.eis import anchor_factors
    from embstab.measures.null import CLOSED_FORM_MEASURES, closed_form_null, null_levels

    assert name in CLOSED_FORM_MEASURES
    x, y, ea, eb = _offset_pair(21)
    info = REGISTRY[name]
    pair = (anchor_factors(ea, 3.0, cache=False), anchor_factors(eb, 3.0, cache=False)) if info.needs_anchors else None
    params = {"k": 3, "n_queries": None} if name == "knn" else {}
    with shared_products():
        closed = closed_form_null(info, x, y, anchors=pair, params=params)
        sampled, = null_levels([info], x, y, samples=400, seed=3, anchors=[pair], params=[params],
                               method="permutation")
    assert closed.method == "closed form" and closed.samples == 0
    assert sampled.method == "permutation" and sampled.samples == 400
    # the closed form is the exact average: within 4 standard errors of 400 shuffles' mean
    assert abs(closed.value - sampled.value) < 4 * sampled.spread / np.sqrt(400) + 1e-12
    # its spread approximates theirs (k-NN takes its queries as independent: somewhat lower)
    low = 0.6 if name == "knn" else 0.8
    assert low * sampled.spread < closed.spread < 1.25 * sampled.spread


def test_knn_on_tied_rows_is_shuffled_not_closed_form():
    a, b = _pair(12, n=400, d=4)
    tied_a = embstab.Embedding(a.words, np.sign(a.vectors), name="a1")  # 1-bit rows: 16 directions
    tied_b = embstab.Embedding(b.words, np.sign(b.vectors), name="b1")
    levels = embstab.compare(tied_a, tied_b, measures=["knn"], top_n=None).attrs["null_levels"]
    assert levels["knn"]["method"] == "permutation" and levels["knn"]["samples"] == 3
    levels = embstab.compare(a, b, measures=["knn"], top_n=None).attrs["null_levels"]
    assert levels["knn"]["method"] == "closed form"


def test_permutation_method_shuffles_every_measure():
    a, b = _pair(13, n=400, d=8)
    auto = embstab.compare(a, b, top_n=None)
    shuffled = embstab.compare(a, b, top_n=None, null_method="permutation", null_samples=5)
    methods = {m: v["method"] for m, v in auto.attrs["null_levels"].items()}
    assert methods == {"eis": "closed form", "knn": "closed form", "semantic_displacement": "permutation",
                       "pip_loss": "closed form", "eigenspace_overlap": "closed form"}
    assert {v["method"] for v in shuffled.attrs["null_levels"].values()} == {"permutation"}
    assert auto["signal"].tolist() == shuffled["signal"].tolist()
    with pytest.raises(ValueError, match="'auto' or 'permutation'"):
        embstab.compare(a, b, top_n=None, null_method="exact")

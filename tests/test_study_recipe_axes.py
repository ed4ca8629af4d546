"""Training recipes and compression transforms as axes of a study, of the trainers and of compress."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
import yaml

from embstab import Embedding, compare
from embstab.compress import compress_pair, parse_transform, transform_quantize_pair
from embstab.compress.transforms import TransformError
from embstab.data import load_corpus
from embstab.errors import EmbstabError, UnknownNameError
from embstab.recipes.ocs import ocs_split
from embstab.recipes.training import TRAINING_RECIPES, training_recipe
from embstab.report import build_report
from embstab.study import ResultDB, parse_study, plan_study, run_study
from embstab.study.plan import study_rows
from embstab.study.schema import StudyDefinitionError
from embstab.train import train_embedding

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"


@pytest.fixture(scope="module")
def lee():
    return load_corpus("gensim_lee")


# --- trainers ------------------------------------------------------------------------------------


def test_fp32_recipe_is_the_plain_trainer(lee):
    plain = train_embedding(lee, algo="mc", dim=8, seed=3, epochs=2, progress=False)
    named = train_embedding(lee, algo="mc", dim=8, seed=3, epochs=2, progress=False, recipe="fp32")
    assert np.array_equal(plain.vectors, named.vectors)
    assert named.metadata["recipe"] == "fp32"


@pytest.mark.parametrize("recipe", ["bf16-nearest", "bf16-stochastic", "bf16-kahan", "fp16-stochastic"])
def test_sixteen_bit_recipes_store_tables_on_the_format_grid(lee, recipe):
    import torch

    emb = train_embedding(lee, algo="mc", dim=8, seed=3, epochs=1, min_count=10, progress=False, recipe=recipe)
    again = train_embedding(lee, algo="mc", dim=8, seed=3, epochs=1, min_count=10, progress=False, recipe=recipe)
    assert np.array_equal(emb.vectors, again.vectors)  # the seed reproduces stochastic rounding too
    # MC returns U + V, a sum of two on-grid factors; check the factors themselves on the grid
    from embstab.train.factorize import fit_observed_entries

    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, 50, 400), rng.integers(0, 50, 400)
    fit = fit_observed_entries(rows, cols, rng.standard_normal(400), np.ones(400), 50, 4, epochs=2,
                               progress=False, recipe=recipe)
    dtype = torch.bfloat16 if recipe.startswith("bf16") else torch.float16
    u = torch.from_numpy(fit["u"])
    assert torch.equal(u.to(dtype).float(), u)


def test_recipes_differ_as_the_core_predicts(lee):
    """Nearest rounding of small updates loses them; stochastic and Kahan keep the fp32 loss."""
    losses = {r: train_embedding(lee, algo="mc", dim=16, seed=0, epochs=3, min_count=8, progress=False,
                                 recipe=r).metadata["final_loss"]
              for r in ("fp32", "bf16-nearest", "bf16-stochastic", "bf16-kahan")}
    excess = {r: losses[r] - losses["fp32"] for r in losses}
    assert excess["bf16-nearest"] > 0.002 * losses["fp32"]
    # measured: nearest +0.49 %, stochastic +0.005 %, Kahan +0.002 % (3 epochs, Lee corpus)
    assert excess["bf16-nearest"] > 10 * max(abs(excess["bf16-stochastic"]), abs(excess["bf16-kahan"]))


def test_swalp_returns_the_average_of_the_second_half(lee):
    emb = train_embedding(lee, algo="glove", dim=8, seed=1, epochs=4, progress=False, recipe="swalp")
    assert emb.metadata["recipe"] == "swalp"
    assert np.isfinite(emb.vectors).all()
    # an average of block-float iterates is (almost surely) off the 8-bit grid of any single row
    from embstab.recipes.swalp import swalp_formats
    from embstab.lowprec import quantize
    import torch

    v = torch.from_numpy(emb.vectors.astype(np.float32))
    assert not torch.equal(quantize(v, swalp_formats(8)["channel"]), v)


def test_bad_recipes_are_refused_with_one_line(lee):
    with pytest.raises(UnknownNameError, match="bf17-kahan"):
        train_embedding(lee, algo="mc", dim=8, epochs=1, progress=False, recipe="bf17-kahan")
    with pytest.raises(EmbstabError, match="needs a torch trainer"):
        train_embedding(lee, algo="w2v_cbow", dim=8, epochs=1, progress=False, recipe="bf16-kahan")
    assert set(TRAINING_RECIPES) >= {"fp32", "bf16-nearest", "bf16-stochastic", "bf16-kahan", "swalp"}
    assert training_recipe(None).is_reference


# --- transforms ----------------------------------------------------------------------------------


def _outlier_pair(n=3000, d=48, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    A[:, [2, 11]] *= 12  # outliers that sit in dimensions, where rotation and OCS help
    return A, A + 0.02 * rng.standard_normal((n, d))


def _rel(X, Y):
    return float(np.sum((X - Y) ** 2) / np.sum(X ** 2))


def test_rotation_and_ocs_cut_error_on_outlier_dimensions():
    A, B = _outlier_pair()
    err = {t: _rel(A, transform_quantize_pair(A, B, 4, t, seed=0).old)
           for t in ("none", "hadamard", "orthogonal", "ocs:0.05", "hadamard+ocs:0.05")}
    assert err["hadamard"] < err["none"] / 3
    assert err["orthogonal"] < err["none"] / 3
    assert err["ocs:0.05"] < err["none"]
    # at 32 bits nothing is rounded: every transform gives back the old member exactly
    for t in ("hadamard", "ocs:0.05"):
        assert _rel(A, transform_quantize_pair(A, B, 32, t, seed=0).old) < 1e-12


def test_transform_memory_is_what_is_stored():
    A, B = _outlier_pair(n=1000, d=40)
    assert transform_quantize_pair(A, B, 4, "none").bits_per_word == 160
    assert transform_quantize_pair(A, B, 4, "ocs:0.05").bits_per_word == (40 + 2) * 4
    tt = transform_quantize_pair(A, B, 4, "tt:4")
    assert tt.bits_per_word == pytest.approx(max(tt.details["tt_parameters"]) / 1000 * 4)


def test_ocs_splits_are_chosen_on_old_and_applied_to_new():
    A, B = _outlier_pair(n=500, d=20)
    split = ocs_split(A, 0.1)
    from embstab.compress.transforms import _half_splits

    assert np.array_equal(_half_splits(split.splits, A), split.values)
    res = transform_quantize_pair(A, B, 32, "ocs:0.1")
    assert _rel(B, res.new) < 1e-6  # merged back exactly (up to old's clip)
    assert res.details["dimensions_split"] == 2


def test_same_seed_same_rotation_for_both_members():
    A, B = _outlier_pair(n=800, d=32)
    old_e = Embedding([f"w{i}" for i in range(800)], A.astype(np.float32))
    new_e = Embedding([f"w{i}" for i in range(800)], B.astype(np.float32))
    o1, n1 = compress_pair(old_e, new_e, 4, seed=5, transform="hadamard")
    o2, n2 = compress_pair(old_e, new_e, 4, seed=5, transform="hadamard")
    assert np.array_equal(o1.vectors, o2.vectors) and np.array_equal(n1.vectors, n2.vectors)
    assert n1.metadata["compression"]["transform"] == "hadamard"
    # a transformed pair stays comparable: the near-identical pair stays near-identical
    assert compare(o1, n1, measures=["knn"], top_n=None).set_index("measure").loc["knn", "value"] > 0.8


@pytest.mark.parametrize("bad, error", [
    ("foo", UnknownNameError), ("ocs", TransformError), ("ocs:1.5", TransformError), ("tt:0", TransformError),
    ("hadamard+orthogonal", TransformError), ("tt:4+hadamard", TransformError), ("hadamard:3", TransformError),
])
def test_bad_transforms_are_refused(bad, error):
    with pytest.raises(error):
        parse_transform(bad)


def test_transform_with_a_number_format_is_refused():
    e = Embedding(["a", "b", "c"], np.eye(3, dtype=np.float32))
    with pytest.raises(TransformError, match="uniform"):
        compress_pair(e, e, 4, format="fp8", transform="hadamard")


# --- study axes ----------------------------------------------------------------------------------


def _quick(name):
    return yaml.safe_load((PIPELINES / name).read_text())


def test_axes_multiply_rows_and_anchors_stay_fp32(tmp_path):
    spec = parse_study(_quick("recipes_quick.yaml"))
    assert spec.training.recipes[0] == "fp32"
    assert spec.n_rows() == 5 * 2 * 1 * 1 * 1
    rows = list(study_rows(spec))
    assert {r.variant.recipe for r in rows} == set(spec.training.recipes)
    for row in rows:
        anchor = row.config["measures"]["anchor"]
        assert "recipe" not in anchor["old"] and "transform" not in anchor  # fp32, no transform
        assert (row.config["measures"]["pair"]["old"].get("recipe", "fp32")) == row.columns["recipe"]


def test_default_axes_keep_older_fingerprints():
    data = _quick("recipes_quick.yaml")
    plain = dict(data, training={k: v for k, v in data["training"].items() if k != "recipes"})
    explicit = dict(plain, training={**plain["training"], "recipes": ["fp32"]},
                    compression={**plain["compression"], "transforms": ["none"]})
    assert parse_study(plain).fingerprint() == parse_study(explicit).fingerprint()
    assert "recipes" not in parse_study(plain).to_dict()["training"]


@pytest.mark.parametrize("change, key", [
    ({"training": {"algorithms": ["w2v_cbow"], "dimensions": [8], "seeds": [1], "recipes": ["bf16-kahan"]}},
     "training.recipes"),
    ({"training": {"algorithms": ["mc"], "dimensions": [8], "seeds": [1], "recipes": ["bf32"]}},
     "training.recipes[0]"),
    ({"compression": {"bit_widths": [4], "transforms": ["ocs:2"]}}, "compression.transforms[0]"),
    ({"compression": {"bit_widths": [4], "transforms": ["hadamard", "hadamard"]}}, "compression.transforms[1]"),
])
def test_bad_axes_name_their_key(change, key):
    data = {**_quick("recipes_quick.yaml"), **change}
    with pytest.raises(StudyDefinitionError, match=key.replace("[", r"\[").replace("]", r"\]")):
        parse_study(data)


def test_recipe_study_runs_and_reports_per_recipe(tmp_path):
    data = _quick("recipes_quick.yaml")
    data["training"]["recipes"] = ["fp32", "bf16-nearest", "bf16-kahan"]
    data["training"]["seeds"] = [1234]
    spec = parse_study(data)
    run = run_study(spec, tmp_path / "store", tmp_path / "r.sqlite", progress=False, export=False)
    df = run.results
    assert sorted(df["recipe"]) == ["bf16-kahan", "bf16-nearest", "fp32"]
    assert df["transform"].eq("none").all()
    # the fp32 and bf16 trainings are different artifacts: their measures differ
    assert df["knn"].nunique() == 3
    # the tiny study's sentiment models stay near chance: keep those rows to report on them
    html = build_report(df, progress=False, keep_near_chance=True)
    assert "Training recipes and compression transforms" in html
    assert "mc/bf16-kahan" in html


def test_transform_study_records_true_memory(tmp_path):
    data = _quick("compression_recipes_quick.yaml")
    data["training"]["dimensions"] = [16]
    data["compression"] = {"bit_widths": [4], "transforms": ["none", "ocs:0.05", "tt:4"]}
    spec = parse_study(data)
    run = run_study(spec, tmp_path / "store", tmp_path / "r.sqlite", progress=False, export=False)
    mem = run.results.set_index("transform")["memory"]
    assert mem["none"] == 16 * 4
    assert mem["ocs:0.05"] == (16 + 1) * 4
    assert 0 < mem["tt:4"] < 16 * 4


def test_older_results_database_gains_the_axis_columns(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
    CREATE TABLE results (row_id TEXT PRIMARY KEY, algo TEXT, seed INTEGER, dim INTEGER, bitrate INTEGER,
        memory INTEGER, task TEXT, model TEXT, disagreement REAL, quality REAL, quality_old REAL,
        measures TEXT NOT NULL, extra TEXT NOT NULL, finished REAL NOT NULL);
    INSERT INTO results VALUES ('r1', 'w2v_cbow', 1, 8, 4, 32, 't', 'linear', 1.0, 50.0, 50.0, '{"eis": 0.1}', '{}', 0);
    """)
    con.commit()
    con.close()
    with ResultDB(path) as db:
        df = db.results()
    assert df.loc[0, "recipe"] == "fp32" and df.loc[0, "transform"] == "none"
    assert df.loc[0, "memory"] == 32


def test_pipeline_files_parse_and_plan(tmp_path):
    from embstab.study import ArtifactStore
    from embstab.study.steps import default_steps

    for name in ("recipes.yaml", "recipes_quick.yaml", "compression_recipes.yaml",
                 "compression_recipes_quick.yaml"):
        spec = parse_study(_quick(name), source=name)
        plan = plan_study(spec, ArtifactStore(tmp_path / name), default_steps())
        assert len(plan.rows) == spec.n_rows()


# --- command line --------------------------------------------------------------------------------


def test_cli_train_recipe_and_compress_transforms(tmp_path, capsys):
    from embstab import cli, load

    out = tmp_path / "k.npz"
    assert cli.main(["train", "--corpus", "gensim_lee", "--algo", "mc", "--dim", "8", "--epochs", "1",
                     "--recipe", "bf16-kahan", "--no-progress", "-o", str(out)]) == 0
    assert load(out).metadata["recipe"] == "bf16-kahan"
    assert cli.main(["train", "--corpus", "gensim_lee", "--dim", "8", "--recipe", "bf16-kahan",
                     "-o", str(tmp_path / "w.npz")]) == 2
    assert "needs --algo glove or mc" in capsys.readouterr().err

    q = tmp_path / "q.npz"
    assert cli.main(["compress", str(out), str(q), "--bits", "4", "--rotate", "hadamard", "--ocs", "0.1",
                     "--output-format", "npz"]) == 0
    assert "hadamard+ocs:0.1" in capsys.readouterr().err
    emb, qe = load(out), load(q)
    assert qe.shape == emb.shape and qe.metadata["compression"]["transform"] == "hadamard+ocs:0.1"
    assert qe.metadata["compression"]["memory_bits_per_word"] == (8 + 1) * 4
    assert cli.main(["compress", str(out), str(tmp_path / "t.npz"), "--bits", "4", "--tt-ranks", "2",
                     "--ocs", "0.1"]) == 2
    assert "--tt-ranks stands alone" in capsys.readouterr().err
    assert cli.main(["compress", str(out), str(tmp_path / "t.npz"), "--format", "fp8", "--rotate", "hadamard"]) == 2

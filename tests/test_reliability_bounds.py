"""Reliability bounds: every count, rate and file field a user gives is checked before any work, in
one line naming the flag, key, file or line (exit 2 on the command line, one embstab exception in
Python), with no numpy warning printed first.

Classes: counts without an upper bound (null shuffles, threads, working precision, learning rates);
hyperbolic geometry validated on read (points on their manifold, node labels parsed once, the same
nodes in another order aligned); degenerate inputs that say what they dropped (zero rows, all-zero
members, plans that cannot run); and warnings (Dask's port warning, numpy's before a refusal).
"""

from __future__ import annotations

import json
import socket
import warnings
from pathlib import Path

import mpmath
import numpy as np
import pytest

import embstab
from embstab._limits import MAX_LEARNING_RATE, check_learning_rate, check_threads
from embstab._resources import usable_cores
from embstab.cli import main
from embstab.errors import ConfigError, EmbeddingFormatError, ShapeError
from embstab.hyperbolic import HyperbolicEmbedding, ProductEmbedding, load_embedding, save_embedding
from embstab.hyperbolic.errors import HyperbolicError, PrecisionError
from embstab.hyperbolic.manifolds import Lorentz
from embstab.hyperbolic.tau import MAX_PRECISION_BITS
from embstab.measures.null import MAX_NULL_SAMPLES, check_null_samples, permutation_null
from embstab.measures.registry import get_measure

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"
CORES = usable_cores()


def _one_line(capsys, argv: list[str], *words: str) -> str:
    """Run the CLI in-process: exit 2, one stderr line naming ``words``, and no warning of numpy's."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    for word in words:
        assert word in err[0], err[0]
    numpy_warnings = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not numpy_warnings, numpy_warnings
    return err[0]


def _pair(tmp_path: Path, n: int = 60, d: int = 8) -> tuple[str, str]:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(n)]
    x = rng.normal(size=(n, d))
    embstab.Embedding(words, x, name="old").save(tmp_path / "old.npz")
    embstab.Embedding(words, x + 0.1 * rng.normal(size=x.shape), name="new").save(tmp_path / "new.npz")
    return str(tmp_path / "old.npz"), str(tmp_path / "new.npz")


# ------------------------------------------------------------------------- A. counts and rates
def test_null_samples_have_a_ceiling_on_the_command_line(tmp_path, capsys):
    old, new = _pair(tmp_path)
    line = _one_line(capsys, ["compare", old, new, "--null-samples", "1000000000"], "--null-samples",
                     str(MAX_NULL_SAMPLES))
    assert "1000000000" in line


def test_null_samples_have_a_ceiling_in_python(tmp_path):
    a, b = (embstab.load(p) for p in _pair(tmp_path))
    with pytest.raises(ConfigError, match=r"null_samples must be an integer from 0 to 10000.*1000000000"):
        embstab.compare(a, b, null_samples=10**9)
    with pytest.raises(ConfigError, match="samples must be an integer from 1 to 10000"):
        permutation_null([get_measure("knn")], a.vectors, b.vectors, samples=MAX_NULL_SAMPLES + 1)
    assert check_null_samples(MAX_NULL_SAMPLES) == MAX_NULL_SAMPLES
    assert check_null_samples(0) == 0
    df = embstab.compare(a, b, measures=["semantic_displacement"], null_samples=2)
    assert df.attrs["null_levels"]["semantic_displacement"]["samples"] == 2  # small counts still run


@pytest.mark.parametrize("argv", [
    ["kg", "train", "--graph", "umls", "-o", "{d}/out", "--threads", "1000000000"],
    ["contextual", "features", "{d}/model", "--text", "{d}/texts.txt", "-o", "{d}/out.npz", "--threads",
     "1000000000"],
    ["contextual", "pretrain", "--corpus", "gensim_lee", "-o", "{d}/model", "--threads", "1000000000"],
], ids=["kg-train", "contextual-features", "contextual-pretrain"])
def test_threads_are_bounded_by_the_usable_cores_on_the_command_line(argv, tmp_path, capsys):
    line = _one_line(capsys, [a.replace("{d}", str(tmp_path)) for a in argv], "--threads",
                     f"{CORES} usable core")
    assert "1000000000" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "model").exists()  # refused before any work


def test_threads_are_bounded_in_python():
    from embstab.contextual.features import sentence_features, token_features, word_type_embedding
    from embstab.kg.training import train

    # refused first: neither the (missing) graph nor the (missing) model is looked at
    with pytest.raises(ConfigError, match=f"threads={10**9} is more than the {CORES} usable core"):
        train(None, threads=10**9)
    for fn in (sentence_features, word_type_embedding, token_features):
        with pytest.raises(ConfigError, match="usable core"):
            fn(None, ["a text"], threads=10**9)
        with pytest.raises(ConfigError, match="batch_size must be an integer of at least 1"):
            fn(None, ["a text"], batch_size=0)
    for bad in (0, -1, True, 1.5, CORES + 1):
        with pytest.raises(ConfigError, match="threads"):
            check_threads(bad)
    assert check_threads(CORES) == CORES


@pytest.mark.parametrize("argv", [
    ["kg", "train", "--graph", "umls", "-o", "{d}/out", "--lr", "1e308"],
    ["contextual", "pretrain", "--corpus", "gensim_lee", "-o", "{d}/model", "--lr", "1e308"],
    ["contextual", "pretrain", "--corpus", "gensim_lee", "-o", "{d}/model", "--lr", "nan"],
    ["downstream", "{d}/a.txt", "{d}/b.txt", "--task", "rt_sentiment", "--lr", "1e308"],
    ["kg", "train", "--graph", "umls", "-o", "{d}/out", "--lr", "0"],
], ids=["kg-train", "contextual-pretrain", "contextual-pretrain-nan", "downstream", "kg-train-zero"])
def test_learning_rates_are_finite_and_in_range_on_the_command_line(argv, tmp_path, capsys):
    _one_line(capsys, [a.replace("{d}", str(tmp_path)) for a in argv], "--lr")


def test_learning_rates_are_bounded_in_python():
    from embstab.hyperbolic import fit_sgd
    from embstab.kg.training import train

    with pytest.raises(ConfigError, match=r"lr must be a finite number from 1e-08 to 10, got 1e\+308"):
        train(None, lr=1e308)
    with pytest.raises(HyperbolicError, match="lr must be a finite number"):
        fit_sgd(np.array([[0.0, 1.0], [1.0, 0.0]]), 2, lr=1e308, progress=False)
    for bad in (float("nan"), float("inf"), 0.0, -1e-3, MAX_LEARNING_RATE * 2, True, "0.1"):
        with pytest.raises(ConfigError, match="lr must be a finite number"):
            check_learning_rate(bad)
    assert check_learning_rate(MAX_LEARNING_RATE) == MAX_LEARNING_RATE


def _hyperbolic_file(path: Path, n: int = 8, multiprecision: bool = False, **kwargs) -> Path:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, 2)) * 0.2
    if multiprecision:
        emb = HyperbolicEmbedding([[mpmath.mpf(v) for v in row] for row in x], precision_bits=80, **kwargs)
    else:
        emb = HyperbolicEmbedding(x, **kwargs)
    save_embedding(emb, path)
    return path


def _edit(path: Path, out: Path, line: int, new: str | None = None, replace: tuple[str, str] | None = None) -> Path:
    """A copy of ``path`` with its 1-based ``line`` replaced (or a substring of it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = new if new is not None else lines[line - 1].replace(*replace)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.mark.parametrize("bits", ["-5", "1", "1000000000", str(MAX_PRECISION_BITS + 1), "2.5", "true"])
@pytest.mark.parametrize("multiprecision", [False, True], ids=["float64", "multiprecision"])
def test_header_precision_bits_obeys_the_flags_rule(tmp_path, capsys, bits, multiprecision):
    good = _hyperbolic_file(tmp_path / "good.hyp", multiprecision=multiprecision)
    held = "80" if multiprecision else "53"
    bad = _edit(good, tmp_path / "bad.hyp", 2, replace=(f'"precision_bits": {held}', f'"precision_bits": {bits}'))
    with pytest.raises(EmbeddingFormatError, match=r"bad.hyp, line 2: bad header: precision_bits="):
        load_embedding(bad)
    _one_line(capsys, ["compare", str(good), str(bad)], "bad.hyp, line 2", "precision_bits", str(MAX_PRECISION_BITS))
    # the flag and the Python function apply the same bounds
    with pytest.raises(PrecisionError, match=f"precision={MAX_PRECISION_BITS + 1} is not a number of bits"):
        embstab.hyperbolic.embed(np.ones((3, 3)) - np.eye(3), "hmds", precision=MAX_PRECISION_BITS + 1)


# ------------------------------------------------------------------- B. hyperbolic files on read
def test_poincare_points_on_or_outside_the_ball_are_refused(tmp_path, capsys):
    good = _hyperbolic_file(tmp_path / "good.hyp")
    for value, norm, name in (("1.0", "1,", "on.hyp"), ("1.5", "1.5,", "out.hyp")):
        bad = _edit(good, tmp_path / name, 5, new=f"2\t{value}\t0.0")
        with pytest.raises(EmbeddingFormatError, match=rf"{name}, line 5: node 2: the point has norm {norm}"):
            load_embedding(bad)
        _one_line(capsys, ["compare", str(good), str(bad)], f"{name}, line 5", "Poincaré ball")
    mp_good = _hyperbolic_file(tmp_path / "mp.hyp", multiprecision=True)
    mp_bad = _edit(mp_good, tmp_path / "mp_out.hyp", 4, new="1\t1.0\t0.0000000000000000000001")
    with pytest.raises(EmbeddingFormatError, match=r"mp_out.hyp, line 4: .*at 80 bits, on or outside the unit ball"):
        load_embedding(mp_bad)


def test_a_point_outside_the_ball_is_refused_by_compare_in_python():
    inside = HyperbolicEmbedding(np.array([[0.1, 0.0], [0.0, 0.2], [0.3, 0.1], [0.0, -0.4]]))
    outside = HyperbolicEmbedding(np.array([[0.1, 0.0], [0.0, 2.0], [0.3, 0.1], [0.0, -0.4]]))
    with pytest.raises(ShapeError, match=r"the new embedding: node 1 \(row 2\): the point has norm 2"):
        embstab.compare(inside, outside)


def test_lorentz_rows_off_the_hyperboloid_beyond_the_tolerance_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(2)
    rows = Lorentz().from_poincare(rng.normal(size=(6, 2)) * 0.3)
    good = tmp_path / "lorentz.hyp"
    save_embedding(HyperbolicEmbedding(rows, manifold="lorentz"), good)
    # within the documented tolerance (1e-9 relative to x0²): round-off of a re-written file is accepted
    near = rows.copy()
    near[2, 0] *= 1 + 1e-12
    save_embedding(HyperbolicEmbedding(near, manifold="lorentz"), tmp_path / "near.hyp")
    assert len(load_embedding(tmp_path / "near.hyp")) == 6
    off = rows.copy()
    off[2, 0] *= 1.001
    save_embedding(HyperbolicEmbedding(off, manifold="lorentz"), tmp_path / "off.hyp")
    with pytest.raises(EmbeddingFormatError,
                       match=r"off.hyp, line 5: node 2: <x, x>_L = .* not 1 within the tolerance"):
        load_embedding(tmp_path / "off.hyp")
    lower = _edit(good, tmp_path / "lower.hyp", 3, new="0\t-1.0\t0.0\t0.0")
    with pytest.raises(EmbeddingFormatError, match=r"lower.hyp, line 3: node 0: x0 = -1 is not positive"):
        load_embedding(lower)
    far = _edit(good, tmp_path / "far.hyp", 3, new="0\t1e200\t1e200\t0.0")
    _one_line(capsys, ["compare", str(good), str(far)], "far.hyp, line 3", "overflows")


def test_a_product_factor_off_its_manifold_is_refused(tmp_path):
    rng = np.random.default_rng(3)
    angle = rng.uniform(0, 6, size=5)
    emb = ProductEmbedding([rng.normal(size=(5, 2)) * 0.2, np.c_[np.cos(angle), np.sin(angle)]], "H2,S1")
    save_embedding(emb, tmp_path / "prod.hyp")
    assert len(load_embedding(tmp_path / "prod.hyp")) == 5
    lines = (tmp_path / "prod.hyp").read_text().splitlines()
    fields = lines[3].split("\t")
    fields[3] = "2.0"  # the circle's first coordinate
    lines[3] = "\t".join(fields)
    (tmp_path / "bad.hyp").write_text("\n".join(lines) + "\n")
    with pytest.raises(EmbeddingFormatError,
                       match=r"bad.hyp, line 4: node 1: factor S1: .*not a point of the unit sphere"):
        load_embedding(tmp_path / "bad.hyp")


@pytest.mark.parametrize("label, problem", [
    ("01", "not an integer as embstab writes one"),
    ("--1", "not an integer as embstab writes one"),
    ("+1", "not an integer as embstab writes one"),
    ("-0", "not an integer as embstab writes one"),
    ("1", "node 1 is listed twice (first on line 4)"),
    ("", "empty node label"),
])
def test_node_labels_are_parsed_once(tmp_path, capsys, label, problem):
    good = _hyperbolic_file(tmp_path / "good.hyp")
    coords = (tmp_path / "good.hyp").read_text().splitlines()[5].split("\t", 1)[1]
    bad = _edit(good, tmp_path / "bad.hyp", 6, new=f"{label}\t{coords}")
    with pytest.raises(EmbeddingFormatError) as info:
        load_embedding(bad)
    assert "bad.hyp, line 6" in str(info.value) and problem in str(info.value)
    _one_line(capsys, ["compare", str(good), str(bad)], "bad.hyp, line 6", problem)


def test_text_and_integer_labels_read_back_as_written(tmp_path):
    x = np.random.default_rng(4).normal(size=(4, 2)) * 0.2
    save_embedding(HyperbolicEmbedding(x, nodes=["dog.n.01", "-3", "cat", "1.5"]), tmp_path / "mixed.hyp")
    # text labels stay text (a node array mixing text and integers holds them all as text, as given)
    assert load_embedding(tmp_path / "mixed.hyp").nodes.tolist() == ["dog.n.01", "-3", "cat", "1.5"]
    save_embedding(HyperbolicEmbedding(x, nodes=[10, 0, -7, 3]), tmp_path / "ints.hyp")
    assert load_embedding(tmp_path / "ints.hyp").nodes.tolist() == [10, 0, -7, 3]


def test_the_same_nodes_in_another_order_are_aligned(tmp_path, capsys):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(12, 2)) * 0.3
    y = x + 0.02 * rng.normal(size=x.shape)
    order = rng.permutation(12)
    a = HyperbolicEmbedding(x)
    b = HyperbolicEmbedding(y)
    b_shuffled = HyperbolicEmbedding(y[order], nodes=order)
    same = embstab.compare(a, b)
    shuffled = embstab.compare(a, b_shuffled)
    np.testing.assert_allclose(shuffled["value"].to_numpy(), same["value"].to_numpy(), rtol=0, atol=1e-12)
    assert same["value"].iloc[0] < 1.0 or same["value"].iloc[2] > 0  # the pair differs: the check can fail
    save_embedding(a, tmp_path / "a.hyp")
    save_embedding(b_shuffled, tmp_path / "b.hyp")
    assert main(["compare", str(tmp_path / "a.hyp"), str(tmp_path / "b.hyp"), "--output", "json"]) == 0
    assert '"n_nodes": 12' in capsys.readouterr().out
    other = HyperbolicEmbedding(y, nodes=list(range(1, 13)))
    with pytest.raises(ShapeError, match=r"different nodes: 1 node\(s\) only in the old one \(e.g. '0'\), 1 only in "
                                         r"the new one \(e.g. '12'\)"):
        embstab.compare(a, other)
    twice = HyperbolicEmbedding(y, nodes=[0] * 2 + list(range(2, 12)))
    with pytest.raises(ShapeError, match="the new embedding lists node '0' twice"):
        embstab.compare(a, twice)


# ------------------------------------------------------------------- C. degenerate inputs
def _zero_pair(share_zero: float = 1 / 3):
    rng = np.random.default_rng(6)
    words = [f"w{i}" for i in range(90)]
    x = rng.normal(size=(90, 6))
    y = x + 0.1 * rng.normal(size=x.shape)
    x[: int(90 * share_zero)] = 0.0
    return embstab.Embedding(words, x, name="old"), embstab.Embedding(words, y, name="new")


def test_skipped_zero_rows_are_said_once_and_recorded():
    a, b = _zero_pair()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = embstab.compare(a, b, measures=["semantic_displacement", "knn"])
    said = [str(w.message) for w in caught if "zero vector" in str(w.message)]
    assert len(said) == 1, said
    assert "30 of the 90 compared words have a zero vector (30 in old ('old')" in said[0]
    assert "semantic displacement skips them and averages over the other 60" in said[0]
    assert df.attrs["zero_rows"] == {"old": 30, "new": 0}
    assert embstab.compare(*_zero_pair(0.0), measures=["knn"]).attrs["zero_rows"] == {"old": 0, "new": 0}


def test_the_cli_says_which_zero_rows_it_skipped(tmp_path, capsys):
    a, b = _zero_pair()
    a.save(tmp_path / "old.npz")
    b.save(tmp_path / "new.npz")
    assert main(["compare", str(tmp_path / "old.npz"), str(tmp_path / "new.npz")]) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "zero vector" in line]
    assert len(err) == 1 and err[0].startswith("embstab compare: warning: 30 of the 90 compared words")
    assert main(["compare", str(tmp_path / "old.npz"), str(tmp_path / "new.npz"), "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["zero_rows"] == {"old": 30, "new": 0}


@pytest.mark.parametrize("side", ["old", "new"])
def test_an_all_zero_member_is_named_not_called_an_anchor(tmp_path, capsys, side):
    a, b = _zero_pair(0.0)
    zero = embstab.Embedding(a.words, np.zeros_like(a.vectors), name="blank")
    pair = (zero, b) if side == "old" else (a, zero)
    with pytest.raises(ShapeError) as info:
        embstab.compare(*pair)
    assert f"the {side} embedding 'blank' is all zeros on the 90 compared words" in str(info.value)
    assert "anchor" not in str(info.value)
    for e, name in zip(pair, ("old.npz", "new.npz")):
        e.save(tmp_path / name)
    line = _one_line(capsys, ["compare", str(tmp_path / "old.npz"), str(tmp_path / "new.npz")], "all zeros", side)
    assert "anchor" not in line


def test_unusable_magnitudes_name_the_embedding_and_print_no_numpy_warning(tmp_path, capsys):
    a, b = _zero_pair(0.0)
    tiny = embstab.Embedding(a.words, a.vectors * 1e-300, name="tiny")
    with pytest.raises(ShapeError, match="EIS cannot use the new embedding 'tiny', its own anchor .*underflow"):
        embstab.compare(a, tiny)
    huge = embstab.Embedding(a.words, a.vectors * 1e160, name="huge")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy overflow warning before the refusal fails the test
        with pytest.raises(ShapeError, match="the new embedding 'huge' has entries up to .*overflow float64"):
            embstab.compare(a, huge, measures=["pip_loss"])
    a.save(tmp_path / "a.npz")
    huge.save(tmp_path / "huge.npz")
    _one_line(capsys, ["compare", str(tmp_path / "a.npz"), str(tmp_path / "huge.npz"), "--measures", "pip_loss"],
              "'huge'", "overflow")


def _study(tmp_path: Path, name: str, old: str, new: str, extra: tuple[str, str] | None = None) -> Path:
    text = (PIPELINES / name).read_text(encoding="utf-8").replace(old, new)
    if extra:
        text = text.replace(*extra)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_hyperbolic_dimension_above_n_minus_1_is_refused_at_planning(tmp_path, capsys):
    from embstab.study.schema import StudyDefinitionError, load_study

    bad = _study(tmp_path, "hyperbolic_quick.yaml", "dimensions: [4, 8]", "dimensions: [4, 100000]")
    with pytest.raises(StudyDefinitionError, match=r"training.dimensions\[1\].*100000 is more than n - 1 = 76"):
        load_study(bad)
    _one_line(capsys, ["study", str(bad), "--store", str(tmp_path / "store"), "--no-report"],
              "training.dimensions[1]", "n - 1 = 76")
    load_study(_study(tmp_path, "hyperbolic_quick.yaml", "dimensions: [4, 8]", "dimensions: [4, 76]"))


def test_a_contextual_hidden_size_too_big_to_train_is_refused_at_planning(tmp_path, monkeypatch):
    import embstab._resources
    from embstab.contextual.study import TRAINING, training_bytes
    from embstab.study.schema import StudyDefinitionError, load_study

    monkeypatch.setattr(embstab._resources, "available_memory", lambda: 8 * 2**30)  # a laptop, whatever runs this
    bad = _study(tmp_path, "contextual_quick.yaml", "dimensions: [32, 64]", "dimensions: [32, 100000]",
                 ("names: [eis, knn, semantic_displacement, pip_loss, eigenspace_overlap]", "names: [knn]"))
    with pytest.raises(StudyDefinitionError, match=r"training.dimensions\[1\].*hidden size 100000.*more than the "
                                                   r"8.0 GiB of memory available"):
        load_study(bad)
    load_study(_study(tmp_path, "contextual_quick.yaml", "dimensions: [32, 64]", "dimensions: [32, 256]"))
    defaults = {k: s.default for k, s in TRAINING.items()}
    assert training_bytes(128, defaults)[1] < training_bytes(1024, defaults)[1] < 8 * 2**30


# ------------------------------------------------------------------- D. warnings
def test_a_local_cluster_says_nothing_when_port_8787_is_taken():
    from embstab.study.executors import make_client

    holder = socket.socket()
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:
        pass  # another program holds it already: the situation under test
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            client, cluster = make_client("threads", 1)
            try:
                assert client.submit(sum, [1, 2]).result() == 3
            finally:
                client.close()
                cluster.close()
        port = [str(w.message) for w in caught if "already in use" in str(w.message)]
        assert not port, port
    finally:
        holder.close()


def test_a_hyperbolic_study_keeps_float32_rounded_points_inside_the_ball():
    from embstab.hyperbolic.study import _inside_ball

    # float64 points within float32's round-off of the boundary: rounding to float32 puts one on it
    x = np.array([[1 - 1e-9, 0.0], [0.6, 0.8 - 1e-9], [0.1, 0.2]])
    rounded = x.astype(np.float32).astype(np.float64)
    assert np.sqrt(np.sum(rounded * rounded, axis=1)).max() >= 1.0
    kept = _inside_ball(rounded, 24)
    norms = np.sqrt(np.sum(kept * kept, axis=1))
    assert norms.max() < 1.0
    np.testing.assert_array_equal(kept[2], rounded[2])  # points inside are left alone
    assert HyperbolicEmbedding(kept).invalid_row() is None
    assert HyperbolicEmbedding(rounded).invalid_row()[0] in (0, 1)


# ------------------------------------------------------------------- edge lists and Python-level rates
def test_an_edge_list_label_is_parsed_once(tmp_path):
    from embstab.hyperbolic.errors import GraphError
    from embstab.hyperbolic.graph import load_edgelist

    good = tmp_path / "g.edges"
    good.write_text("0 1\n1 2\n-3 2\n")
    assert sorted(load_edgelist(good).labels.tolist()) == [-3, 0, 1, 2]
    text = tmp_path / "t.edges"
    text.write_text("dog.n.01 animal.n.01\n")
    assert sorted(load_edgelist(text).labels.tolist()) == ["animal.n.01", "dog.n.01"]
    bad = tmp_path / "b.edges"
    bad.write_text("0 1\n01 2\n")  # `01` and `1` would both be node 1
    with pytest.raises(GraphError, match=r"b.edges, line 2: .*'01'"):
        load_edgelist(bad)


def test_python_learning_rates_follow_the_flags_rule():
    from embstab.downstream import disagreement
    from embstab.embedding import Embedding
    from embstab.errors import ConfigError

    emb = Embedding(["a", "b", "c"], np.eye(3))
    for lr in (1e308, float("nan"), 0.0, -1.0):
        with pytest.raises(ConfigError, match="lr"):
            disagreement(emb, emb, task="rt_subjectivity", model="linear", lr=lr)

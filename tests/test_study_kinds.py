"""Study kinds: every registered kind passes the kind contract (``tests/_kind_contract.py``: it plans,
runs a tiny study, resumes without recomputing, reproduces its rows, and its rows carry the kind);
kind-specific schema errors name the key; word studies keep their names."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may reach a hub

from _kind_contract import (NEVER, broken, check_plans_its_grid, check_rejects,  # noqa: E402
                            check_report_and_recommend, check_reproduces, check_resumes, check_rows, run_tiny)

from embstab.study import ArtifactStore, load_study, parse_study, plan_study  # noqa: E402
from embstab.study.kinds import KINDS, get_kind  # noqa: E402
from embstab.study.plan import study_rows  # noqa: E402
from embstab.study.steps import default_steps  # noqa: E402

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"

WORD = {
    "name": "kinds_word",
    "corpus": {"name": "gensim_lee", "fraction": 0.1, "seed": 0},
    "training": {"algorithms": ["w2v_cbow"], "dimensions": [8, 16], "seeds": [1], "epochs": 2, "min_count": 3},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["eis", "knn", "pip_loss"], "top_n": 300, "params": {"knn": {"n_queries": 100}}},
    "downstream": [{"task": "rt_sentiment", "options": {"limit": 300, "epochs": 2}}],
}
KG = {
    "name": "kinds_kg", "kind": "kg",
    "graph": {"name": "nations", "share": 0.1, "lost": "protect"},
    "training": {"algorithms": ["TransE"], "dimensions": [4, 8], "seeds": [0], "epochs": 3, "batch_size": 512},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["eis", "knn", "pip_loss"], "top_n": 14, "params": {"knn": {"k": 3}}},
    "downstream": [{"task": "link_prediction"}, {"task": "triple_classification"}],
}
CONTEXTUAL = {
    "name": "kinds_contextual", "kind": "contextual",
    "corpus": {"name": "gensim_lee", "fraction": 0.1, "seed": 0, "max_docs": 120},
    "training": {"algorithms": ["bert"], "dimensions": [16, 32], "seeds": [0], "layers": 1, "heads": 2,
                 "max_length": 64, "steps": 4, "batch_size": 8, "vocab_size": 800, "heldout_fraction": 0.05,
                 "sample_docs": 40, "min_count": 3, "max_occurrences": 10},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["eis", "knn", "pip_loss"], "top_n": 200, "params": {"knn": {"n_queries": 50}}},
    "downstream": [{"task": "rt_subjectivity", "options": {"limit": 200, "epochs": 2}}],
}
HYPERBOLIC = {
    "name": "kinds_hyperbolic", "kind": "hyperbolic",
    "graph": {"name": "les_miserables", "remove": 0.1, "seed": 0},
    "training": {"algorithms": ["hmds"], "dimensions": [4, 8], "seeds": [0]},
    "compression": {"bit_widths": [4, 32]},
    "measures": {"names": ["hyperbolic_knn", "hyperbolic_map", "distortion_avg"]},
    "downstream": [{"task": "reconstruction"}],
}
#: The tiny study of each kind of the package's registry (a new kind adds its own here).
TINY = {"word": WORD, "kg": KG, "contextual": CONTEXTUAL, "hyperbolic": HYPERBOLIC}
#: The trainer each kind calls: broken on a resumed run, which must not train anything.
TRAINERS = {"kg": ("embstab.kg.training", "train"), "contextual": ("embstab.contextual.pretrain", "train_mlm"),
            "hyperbolic": ("embstab.hyperbolic", "embed")}
#: The contract runs over the registry, not over a list of its own.
REGISTERED = list(KINDS)
_broken = broken


def test_registry_covers_every_tiny_definition():
    assert set(REGISTERED) == set(TINY) == {"word", "kg", "contextual", "hyperbolic"}
    assert set(TRAINERS) | {"word"} == set(REGISTERED)
    assert get_kind("kg").source_key == "graph" and get_kind("word").source_key == "corpus"
    with pytest.raises(KeyError, match="study kind"):
        get_kind("hyperbolic_nope")


def test_registry_is_one_module_per_kind_and_feeds_the_report_labels():
    import importlib

    from embstab.selection import KIND_LABELS, kind_label
    from embstab.study.kinds import KIND_MODULES

    kinds = [importlib.import_module(m).KIND for m in KIND_MODULES]
    assert list(KINDS) == [k.name for k in kinds] and list(KINDS)[0] == "word"
    assert all(KINDS[k.name] is k for k in kinds)
    # the report's labels are a view of the registry
    assert set(KIND_LABELS) == set(KINDS)
    for k in kinds:
        assert (KIND_LABELS[k.name].title, KIND_LABELS[k.name].unit) == (k.label, k.memory_unit)
        assert k.memory_unit.startswith("bits per")
    assert kind_label("nope").unit == "bits per row"


def test_a_registered_kind_is_parsed_and_planned_without_naming_it_anywhere(tmp_path):
    from embstab.study.kinds import register_kind, unregister_kind

    with pytest.raises(ValueError, match="already registered"):
        register_kind(dataclasses.replace(get_kind("kg")))
    twin = register_kind(dataclasses.replace(get_kind("word"), name="word_twin", memory_unit="bits per twin"))
    try:
        spec = parse_study({**WORD, "kind": "word_twin"})
        assert spec.kind == "word_twin" and spec.study_kind is twin
        assert spec.to_dict()["kind"] == "word_twin" and spec.fingerprint() != parse_study(WORD).fingerprint()
        plan = plan_study(spec, ArtifactStore(tmp_path), NEVER)
        assert {m["kind"] for m in plan.all_rows.values()} == {"word_twin"}
        from embstab.selection import kind_label

        assert kind_label("word_twin").unit == "bits per twin"
    finally:
        assert unregister_kind("word_twin") is twin  # leave the registry as it was
    assert "word_twin" not in KINDS


def test_importing_selection_imports_no_kind():
    import subprocess
    import sys

    code = ("import sys, embstab.selection, embstab.report; "
            "print(sorted(m for m in sys.modules if m.endswith('.study') or m == 'embstab.study.kinds'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("kind", REGISTERED)
def test_every_kind_plans_its_grid(kind, tmp_path):
    check_plans_its_grid(kind, TINY[kind], tmp_path)


@pytest.fixture(scope="module", params=REGISTERED)
def finished(request, tmp_path_factory):
    kind = request.param
    root = tmp_path_factory.mktemp(f"kind_{kind}")
    spec, run = run_tiny(TINY[kind], root)
    return kind, spec, root, run


def test_tiny_study_of_each_kind_completes_with_rows_of_its_kind(finished):
    kind, spec, _, run = finished
    check_rows(kind, spec, run)
    df = run.results
    if kind == "kg":  # quality is the filtered MRR; Hits@10 of both models is kept beside it
        lp = df[df["task"] == "link_prediction"]
        assert set(lp["quality_metric"]) == {"filtered MRR (%)"}
        # 1/rank <= 1 within the top 10 and < 0.1 beyond it: MRR <= Hits@10 + 0.1 (1 - Hits@10)
        assert lp["hits_at_10"].between(0, 100).all()
        assert (lp["quality"] <= lp["hits_at_10"] + 0.1 * (100 - lp["hits_at_10"]) + 1e-9).all()
        assert lp["top_k_overlap"].between(0, 1).all()


def test_each_kind_resumes_without_recomputing(finished, monkeypatch):
    """A fresh results database over the same store: every row is rebuilt from stored artifacts,
    the same values, with the trainer broken (so nothing was trained again)."""
    kind, spec, root, run = finished
    steps = default_steps()
    if kind == "word":
        steps = dataclasses.replace(steps, train_embedding=_broken)
    else:
        module, name = TRAINERS[kind]
        monkeypatch.setattr(f"{module}.{name}", _broken)
    check_resumes(spec, root, run, steps)


@pytest.mark.parametrize("finished", ["kg"], indirect=True)
def test_kg_rows_are_the_quantized_models_disagreement(finished):
    """Cross-check one KG row against embstab.kg directly: same graph pair, same training, the
    pair quantized to 1 bit with the old model's clips, scored with the quantized tables."""
    _, _, _, run = finished
    from embstab.kg import (link_prediction_disagreement, load_graph, quantize_pair, train,
                            triple_classification_disagreement, version_pair)

    pair = version_pair(load_graph("nations"), "remove", 0.1, 0, lost="protect")
    models = [train(g, "TransE", 4, epochs=3, seed=0, batch_size=512, evaluate_on=None, progress=False)
              for g in (pair.old, pair.new)]
    q_old, q_new = quantize_pair(*models, 1)
    lp = link_prediction_disagreement(q_old, q_new, pair.old)
    tc = triple_classification_disagreement(q_old, q_new, pair.old, seed=0)
    rows = run.results.query("dim == 4 and bitrate == 1").set_index("task")
    assert rows.loc["link_prediction", "disagreement"] == pytest.approx(lp.disagreement, abs=1e-9)
    assert rows.loc["link_prediction", "quality"] == pytest.approx(100 * lp.metrics_new.mrr, abs=1e-9)
    assert rows.loc["link_prediction", "quality_old"] == pytest.approx(100 * lp.metrics_old.mrr, abs=1e-9)
    assert rows.loc["triple_classification", "disagreement"] == pytest.approx(tc.disagreement, abs=1e-9)
    # chance: a random ranking's filtered MRR over the same queries; the more frequent test label
    assert rows.loc["link_prediction", "chance"] == pytest.approx(100 * lp.settings["chance_mrr"], abs=1e-9)
    n_pos, n_neg = tc.settings["n_positives"], tc.settings["n_negatives"]
    assert rows.loc["triple_classification", "chance"] == pytest.approx(100 * max(n_pos, n_neg) / (n_pos + n_neg))
    # at 1 bit the quantized scores differ from the full-precision model's
    full = link_prediction_disagreement(models[0], models[1], pair.old)
    assert full.metrics_new.mrr != pytest.approx(lp.metrics_new.mrr, abs=1e-12)


def test_report_and_recommend_read_each_kind(finished):
    kind, spec, _, run = finished
    check_report_and_recommend(kind, spec, run)


# --------------------------------------------------------------------------------------------
# schema: kind-specific values are rejected with the dotted key


@pytest.mark.parametrize("base, path, value, key, words", [
    (KG, "kind", "kgg", "kind", "did you mean 'kg'"),
    (KG, "training.algorithms", ["w2v_cbow"], "training.algorithms[0]", "PyKEEN"),
    (KG, "training.algorithms", ["TransE", "transe_nope"], "training.algorithms[1]", "PyKEEN"),
    (KG, "graph.name", "fb15k_nope", "graph.name", "unknown graph"),
    (KG, "graph.change", "shuffle", "graph.change", "choose from"),
    (KG, "graph.share", 1.5, "graph.share", "(0.0, 1.0)"),
    (KG, "downstream", [{"task": "rt_sentiment"}], "downstream[0].task", "kg study has no downstream task"),
    (KG, "downstream", [{"task": "link_prediction", "model": "linear"}], "downstream[0].model", "filtered_top1"),
    (KG, "downstream", [{"task": "link_prediction", "options": {"kk": 3}}], "downstream[0].options.kk",
     "did you mean 'k'"),
    (KG, "downstream", [{"task": "link_prediction", "options": {"split": "train"}}],
     "downstream[0].options.split", "choose from test, valid"),
    (KG, "training.min_count", 3, "training.min_count", "unknown key"),
    (KG, "training.epochs", 0, "training.epochs", ">= 1"),
    (KG, "training.recipes", ["bf16-kahan"], "training.recipes", "fp32 only"),
    (KG, "compression.transforms", ["hadamard"], "compression.transforms", "word studies"),
    (KG, "corpus", {"name": "gensim_lee"}, "corpus", "from 'graph'"),
    (CONTEXTUAL, "training.algorithms", ["TransE"], "training.algorithms[0]", "choose from bert"),
    (CONTEXTUAL, "training.dimensions", [16, 33], "training.dimensions[1]", "multiple of the 2 attention heads"),
    (CONTEXTUAL, "training.layer", 5, "training.layer", "does not exist"),
    (CONTEXTUAL, "training.subword", "last", "training.subword", "choose from first, mean"),
    (CONTEXTUAL, "downstream", [{"task": "brown_pos"}], "downstream[0].task", "contextual study has no downstream"),
    (CONTEXTUAL, "downstream", [{"task": "rt_sentiment", "model": "cnn"}], "downstream[0].model", "linear, mlp"),
    (CONTEXTUAL, "downstream", [{"task": "rt_sentiment", "options": {"pooling": "median"}}],
     "downstream[0].options.pooling", "choose from mean, cls, max, mean_sqrt_len"),
    (CONTEXTUAL, "graph", {"name": "nations"}, "graph", "from 'corpus'"),
    (HYPERBOLIC, "training.algorithms", ["combinatorial"], "training.algorithms[0]", "more precision than"),
    (HYPERBOLIC, "training.algorithms", ["hmds", "sgdd"], "training.algorithms[1]", "did you mean 'sgd'"),
    (HYPERBOLIC, "graph.name", "karate", "graph.name", "did you mean 'karate_club'"),
    (HYPERBOLIC, "graph.remove", 0.0, "graph.remove", "(0.0, 1.0)"),
    (HYPERBOLIC, "graph.share", 0.1, "graph.share", "unknown key"),
    (HYPERBOLIC, "compression.bit_widths", [1, 32], "compression.bit_widths[0]", "at least 2"),
    (HYPERBOLIC, "measures.names", ["eis"], "measures.names[0]", "unknown value"),
    (HYPERBOLIC, "downstream", [{"task": "link_prediction"}], "downstream[0].task", "hyperbolic study has no downstream"),
    (HYPERBOLIC, "training.recipes", ["bf16-kahan"], "training.recipes", "fp32 only"),
    (HYPERBOLIC, "corpus", {"name": "gensim_lee"}, "corpus", "from 'graph'"),
    (WORD, "training.algorithms", ["TransE"], "training.algorithms[0]", "unknown value"),
    (WORD, "downstream", [{"task": "link_prediction"}], "downstream[0].task", "word study has no downstream task"),
])
def test_kind_specific_values_are_rejected_with_their_key(base, path, value, key, words):
    check_rejects(base, path, value, key, words)


def test_word_studies_keep_their_fingerprints_and_configurations():
    """Adding kinds changes no word study: the fingerprint computed before kinds existed, and
    configurations without a 'kind' key (so artifacts and row ids are the same)."""
    quick = load_study(PIPELINES / "quick.yaml")
    assert quick.kind == "word" and "kind" not in quick.to_dict()
    assert quick.fingerprint() == "3ac09523da72cc0c"
    for row in study_rows(quick):
        cfg = row.config
        assert row.kind == row.columns["kind"] == "word"
        assert "kind" not in cfg["measures"]["pair"]["new"] and cfg["measures"]["pair"]["new"]["corpus"]["stage"] == "corpus"


@pytest.mark.parametrize("name", ["kg_quick.yaml", "kg.yaml", "contextual_quick.yaml", "contextual.yaml",
                                  "contextual_minilm_quick.yaml", "contextual_minilm.yaml", "hyperbolic_quick.yaml"])
def test_pipeline_files_parse(name):
    spec = load_study(PIPELINES / name)
    assert spec.kind in ("kg", "contextual", "hyperbolic") and spec.n_rows() > 0
    assert np.all(np.diff(sorted(spec.compression.bit_widths)) > 0)


def test_each_kind_reproduces_in_a_fresh_store(finished, tmp_path):
    """Deterministic under the seeds: a second store computes every row again, to the same values."""
    _, spec, _, run = finished
    check_reproduces(spec, run, tmp_path)


def test_corpus_vocabulary_is_a_function_of_its_inputs_and_splits_kept_words_as_minilm():
    from collections import Counter

    from embstab.contextual import load_tokenizer
    from embstab.contextual.pretrained import minilm_dir
    from embstab.data import load_corpus
    from embstab.contextual.study import corpus_vocabulary

    docs = load_corpus("gensim_lee")[:100]
    base = load_tokenizer(minilm_dir())
    tok = corpus_vocabulary(base, docs, 600)
    assert tok.to_str() == corpus_vocabulary(load_tokenizer(minilm_dir()), docs, 600).to_str()
    vocab = tok.get_vocab()
    assert len(vocab) <= 600 and [p for p, i in sorted(vocab.items(), key=lambda x: x[1])][:5] == \
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    counts = Counter(w for d in docs for w in d)
    frequent = sorted(counts, key=lambda w: (-counts[w], w))[:100]
    assert all(tok.encode(w).tokens == base.encode(w).tokens for w in frequent)
    # every word of the corpus still splits into known pieces (its characters are kept)
    assert all("[UNK]" not in tok.encode(w).tokens for w in counts if "[UNK]" not in base.encode(w).tokens)


@pytest.mark.parametrize("finished", ["hyperbolic"], indirect=True)
def test_hyperbolic_rows_are_the_fixed_point_embeddings_reconstruction(finished):
    """Cross-check one hyperbolic row against embstab.hyperbolic directly: same graph pair, same
    h-MDS members, 4-bit fixed-point coordinates decoded into the ball."""
    _, _, _, run = finished
    from embstab.hyperbolic import embed
    from embstab.hyperbolic.embedding import HyperbolicEmbedding
    from embstab.hyperbolic.metrics import evaluate
    from embstab.hyperbolic.stability import perturb_graph, quantize_coordinates
    from embstab.hyperbolic.study import decode_fixed_point, load_graph, nearest_neighbours
    from embstab.lowprec import FixedFormat

    old_graph = load_graph("les_miserables")
    new_graph = perturb_graph(old_graph, 0.1, 0)
    members = []
    for graph in (old_graph, new_graph):
        e = embed(graph, "hmds", dim=4)
        q = quantize_coordinates(e, FixedFormat(4, 3))
        members.append(HyperbolicEmbedding(decode_fixed_point(q.poincare64(check=False), 4), scale=e.scale,
                                           nodes=list(e.nodes)))
    old, new = members
    assert np.linalg.norm(new.poincare64(), axis=1).max() < 1  # every decoded point inside the ball
    row = run.results.query("dim == 4 and bitrate == 4").iloc[0]
    assert row["disagreement"] == pytest.approx(100 * np.mean(nearest_neighbours(new) != nearest_neighbours(old)))
    assert row["quality"] == pytest.approx(100 * evaluate(new_graph, new, progress=False).map)
    assert row["quality_old"] == pytest.approx(100 * evaluate(old_graph, old, progress=False).map)
    assert row["memory"] == 16 and 0 < row["chance"] < row["quality"]


def test_nearest_neighbours_and_the_fixed_point_decoding_rule():
    from embstab.hyperbolic.embedding import HyperbolicEmbedding
    from embstab.hyperbolic.study import decode_fixed_point, nearest_neighbours

    line = HyperbolicEmbedding(np.array([[0.0, 0.0], [0.1, 0.0], [0.5, 0.0], [0.55, 0.0]]), nodes=list("abcd"))
    assert nearest_neighbours(line).tolist() == [1, 0, 3, 2]
    decoded = decode_fixed_point(np.array([[0.875, 0.875], [0.5, 0.0]]), 4)
    assert np.linalg.norm(decoded[0]) == pytest.approx(1 - 2 ** -3) and decoded[0, 0] == pytest.approx(decoded[0, 1])
    assert decoded[1].tolist() == [0.5, 0.0]  # inside the ball: as stored

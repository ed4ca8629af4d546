"""Study kinds: every registered kind plans, runs a tiny study, resumes without recomputing, and its
rows carry the kind; kind-specific schema errors name the key; word studies keep their names."""

from __future__ import annotations

import copy
import dataclasses
import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may reach a hub

from embstab.study import ArtifactStore, Steps, StudyDefinitionError, load_study, parse_study, plan_study, run_study  # noqa: E402
from embstab.study.kinds import KINDS, get_kind  # noqa: E402
from embstab.study.plan import row_configs  # noqa: E402
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
TINY = {"word": WORD, "kg": KG, "contextual": CONTEXTUAL}
#: The trainer each kind calls: broken on a resumed run, which must not train anything.
TRAINERS = {"kg": ("embstab.kg.training", "train"), "contextual": ("embstab.contextual.pretrain", "train_mlm")}


def _broken(*args, **kwargs):
    raise AssertionError("a resumed study must not train again")


def test_registry_covers_every_tiny_definition():
    assert set(KINDS) == set(TINY) == {"word", "kg", "contextual"}
    assert get_kind("kg").source_key == "graph" and get_kind("word").source_key == "corpus"
    with pytest.raises(KeyError, match="study kind"):
        get_kind("hyperbolic_nope")


@pytest.mark.parametrize("kind", sorted(TINY))
def test_every_kind_plans_its_grid(kind, tmp_path):
    spec = parse_study(TINY[kind])
    assert spec.kind == kind
    never = Steps(*[_broken] * 6)
    plan = plan_study(spec, ArtifactStore(tmp_path), never)
    counts = plan.stage_counts()
    # one source pair; 2 sides x 2 dims trainings; 2 dims x 2 bits pairs (the 32-bit top pair is the anchor)
    assert counts[get_kind(kind).source_stage] == 1
    assert counts["train"] == 4 and counts["compress"] == 4 and counts["measures"] == 4
    assert counts["row"] == len(plan.all_rows) == spec.n_rows() == 4 * len(spec.downstream)
    assert {m["kind"] for m in plan.all_rows.values()} == {kind}
    # the definition round-trips through plain data (what StudyRun.save writes) with its fingerprint
    again = parse_study(spec.to_dict())
    assert again == spec and again.fingerprint() == spec.fingerprint()
    if kind != "word":  # a kind's configurations never collide with a word study's
        assert all(cfg["measures"]["pair"]["new"]["kind"] == kind for _, _, cfg in row_configs(spec))


@pytest.fixture(scope="module", params=sorted(TINY))
def finished(request, tmp_path_factory):
    kind = request.param
    root = tmp_path_factory.mktemp(f"kind_{kind}")
    spec = parse_study(TINY[kind])
    run = run_study(spec, root / "store", root / "results.sqlite", progress=False)
    return kind, spec, root, run


def test_tiny_study_of_each_kind_completes_with_rows_of_its_kind(finished):
    kind, spec, _, run = finished
    assert run.n_failed == 0, run.failures[["stage", "error"]].to_string()
    assert run.complete and len(run.results) == spec.n_rows()
    df = run.results
    assert set(df["kind"]) == {kind}
    for name in spec.measures.names:
        assert df[name].notna().all()
        # every kind's rows carry the measure's null and whether the value is apart from it
        assert df[f"{name}_null"].notna().all() and df[f"{name}_signal"].notna().all()
    assert df["disagreement"].between(0, 100).all() and df["quality"].between(0, 100).all()
    assert df["chance"].between(0, 100).all()  # every row states its task's chance level
    # memory: the stored row's entries times the bits (KG: bits per entity row; contextual: per vector)
    assert (df["memory"] == df["dim"] * df["bitrate"]).all()
    # 1-bit members keep fewer of their own neighbourhoods than full-precision ones
    by_bits = df.groupby("bitrate")["agreement_uncompressed"].mean()
    assert by_bits[1] < by_bits[32]
    if kind == "kg":  # quality is the filtered MRR; Hits@10 of both models is kept beside it
        lp = df[df["task"] == "link_prediction"]
        assert set(lp["quality_metric"]) == {"filtered MRR (%)"}
        # 1/rank <= 1 within the top 10 and < 0.1 beyond it: MRR <= Hits@10 + 0.1 (1 - Hits@10)
        assert lp["hits_at_10"].between(0, 100).all()
        assert (lp["quality"] <= lp["hits_at_10"] + 0.1 * (100 - lp["hits_at_10"]) + 1e-9).all()
        assert lp["top_k_overlap"].between(0, 1).all()
    with sqlite3.connect(run.db_path) as conn:
        assert {r[0] for r in conn.execute("SELECT kind FROM results")} == {kind}


def test_each_kind_resumes_without_recomputing(finished, monkeypatch):
    """A fresh results database over the same store: every row is rebuilt from stored artifacts,
    the same values, with the trainer broken (so nothing was trained again)."""
    kind, spec, root, run = finished
    again = run_study(spec, root / "store", run.db_path, steps=Steps(*[_broken] * 6), progress=False)
    assert again.n_skipped == spec.n_rows() and again.n_new == 0  # same database: nothing planned
    steps = default_steps()
    if kind == "word":
        steps = dataclasses.replace(steps, train_embedding=_broken)
    else:
        module, name = TRAINERS[kind]
        monkeypatch.setattr(f"{module}.{name}", _broken)
    resumed = run_study(spec, root / "store", root / "fresh.sqlite", steps=steps, progress=False)
    assert resumed.n_failed == 0 and resumed.n_new == spec.n_rows()
    pd.testing.assert_frame_equal(resumed.results, run.results)
    pd.testing.assert_frame_equal(again.results, run.results)


@pytest.mark.parametrize("finished", ["kg"], indirect=True)
def test_kg_rows_are_the_quantized_models_disagreement(finished):
    """Cross-check one KG row against embstab.kg directly: same graph pair, same training, the
    pair quantized to 1 bit with the old model's clips, scored with the quantized tables."""
    _, _, _, run = finished
    from embstab.kg import (link_prediction_disagreement, load_graph, quantize_pair, train,
                            triple_classification_disagreement, version_pair)

    pair = version_pair(load_graph("nations"), "remove", 0.1, 0, lost="protect")
    models = [train(g, "TransE", 4, epochs=3, seed=0, batch_size=512, evaluate_on=None, progress=False)
              for g in (pair.a, pair.b)]
    q_old, q_new = quantize_pair(*models, 1)
    lp = link_prediction_disagreement(q_old, q_new, pair.a)
    tc = triple_classification_disagreement(q_old, q_new, pair.a, seed=0)
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
    full = link_prediction_disagreement(models[0], models[1], pair.a)
    assert full.metrics_new.mrr != pytest.approx(lp.metrics_new.mrr, abs=1e-12)


def test_report_and_recommend_read_each_kind(finished):
    kind, spec, _, run = finished
    from embstab.selection import as_results, recommend

    # the tiny studies' downstream models barely learn: keep the rows near chance to read every section
    document = run.report(keep_near_chance=True)
    assert 'id="chance"' in document
    if kind != "word":
        assert "kind-" + kind in document and document.count("<img ") == 2 + len(spec.measures.names)
    rec = recommend(as_results(run.results, keep_near_chance=True), int(run.results["memory"].max()), "eis")
    assert rec.kind == kind and rec.unit.startswith("bits per") and rec.near_chance_left_out == 0
    assert rec.unit in str(rec)


# --------------------------------------------------------------------------------------------
# schema: kind-specific values are rejected with the dotted key


def _with(base: dict, path: str, value) -> dict:
    data = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = data
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is _DROP:
        del node[last]
    else:
        node[last] = value
    return data


_DROP = object()


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
    (WORD, "training.algorithms", ["TransE"], "training.algorithms[0]", "unknown value"),
    (WORD, "downstream", [{"task": "link_prediction"}], "downstream[0].task", "unknown value"),
])
def test_kind_specific_values_are_rejected_with_their_key(base, path, value, key, words):
    with pytest.raises(StudyDefinitionError) as err:
        parse_study(_with(base, path, value), source="s.yaml")
    assert err.value.key == key, str(err.value)
    assert words in str(err.value)
    assert str(err.value).startswith(f"s.yaml: key '{key}': ")


def test_word_studies_keep_their_fingerprints_and_configurations():
    """Adding kinds changes no word study: the fingerprint computed before kinds existed, and
    configurations without a 'kind' key (so artifacts and row ids are the same)."""
    quick = load_study(PIPELINES / "quick.yaml")
    assert quick.kind == "word" and "kind" not in quick.to_dict()
    assert quick.fingerprint() == "3ac09523da72cc0c"
    for _, meta, cfg in row_configs(quick):
        assert meta["kind"] == "word"
        assert "kind" not in cfg["measures"]["pair"]["new"] and cfg["measures"]["pair"]["new"]["corpus"]["stage"] == "corpus"


@pytest.mark.parametrize("name", ["kg_quick.yaml", "kg.yaml", "contextual_quick.yaml", "contextual.yaml",
                                  "contextual_minilm_quick.yaml", "contextual_minilm.yaml"])
def test_pipeline_files_parse(name):
    spec = load_study(PIPELINES / name)
    assert spec.kind in ("kg", "contextual") and spec.n_rows() > 0
    assert np.all(np.diff(sorted(spec.compression.bit_widths)) > 0)


def test_each_kind_reproduces_in_a_fresh_store(finished, tmp_path):
    """Deterministic under the seeds: a second store computes every row again, to the same values."""
    _, spec, _, run = finished
    again = run_study(spec, tmp_path / "store", tmp_path / "results.sqlite", progress=False)
    pd.testing.assert_frame_equal(again.results, run.results)


def test_corpus_vocabulary_is_a_function_of_its_inputs_and_splits_kept_words_as_minilm():
    from collections import Counter

    from embstab.contextual import load_tokenizer
    from embstab.contextual.pretrained import minilm_dir
    from embstab.data import load_corpus
    from embstab.study.kind_contextual import corpus_vocabulary

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

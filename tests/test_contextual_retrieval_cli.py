"""``embstab contextual disagreement --task wiki_retrieval``: search results that flip between two
contextual models, or between one model's float32 vectors and the codes a vector store keeps."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from embstab.cli import main


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two untrained 2 x 128 BERTs (seeds 0 and 1) saved as model folders. The tokenizer is trained on a
    few Lee documents and texts are cut at 32 pieces, which keeps each search of 200 pairs under a second."""
    pytest.importorskip("transformers")
    from embstab.contextual import build_model, train_wordpiece
    from embstab.data import load_corpus

    tok = train_wordpiece(load_corpus("gensim_lee")[:60], vocab_size=600)
    root = tmp_path_factory.mktemp("retrieval_models")
    folders = []
    for seed in (0, 1):
        build_model("tiny", tok, seed, max_length=32).save(root / f"m{seed}")
        folders.append(str(root / f"m{seed}"))
    return folders


def _wiki_or_skip():
    from embstab.errors import DataNotFoundError

    try:
        from embstab.downstream.retrieval import load_retrieval

        return load_retrieval("wiki_retrieval", limit=200)
    except DataNotFoundError as exc:
        pytest.skip(f"wiki_vital is not installed: {exc}")


def _json(argv, capsys) -> dict:
    capsys.readouterr()
    assert main([*argv, "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_model_against_itself_and_against_its_binary_codes(models, capsys):
    data = _wiki_or_skip()
    a = models[0]
    base = ["contextual", "disagreement", a, a, "--task", "wiki_retrieval", "--limit", "200"]
    capsys.readouterr()
    assert main(base) == 0
    printed = capsys.readouterr().out
    assert "disagreement: 0.00% of queries' top-10 sets differ   [0.00, 1.83] 95% interval" in printed
    assert "(float32, 128 dims, 512 bytes per vector)" in printed and "random ranking: recall@10 5.00%" in printed
    res = _json([*base, "--new-precision", "binary", "--k", "5"], capsys)
    assert res["precision_old"] == "float32" and res["precision_new"] == "binary" and res["k"] == 5
    assert (res["bytes_per_vector_old"], res["bytes_per_vector_new"]) == (512, 16) and res["n_test"] == 200
    assert res["chance"] == pytest.approx(2.5) and res["quality_metric"] == "recall@5"

    # the same numbers from the library's pieces: the model's vectors, searched at each precision
    from embstab.contextual import load_model
    from embstab.contextual.retrieval import stored_search, text_encoder
    from embstab.downstream.retrieval import top_k_churn

    encode = text_encoder(load_model(a))
    q, d = encode(data.queries), encode(data.documents)
    old = stored_search(q, d, 5, relevant=data.relevant)
    new = stored_search(q, d, 5, relevant=data.relevant, precision="binary")
    flipped, overlap = top_k_churn(old.top_k, new.top_k)
    assert res["disagreement"] == pytest.approx(100.0 * flipped / 200) and res["overlap_at_k"] == pytest.approx(overlap)
    assert res["quality_old"] == pytest.approx(old.recall()) and res["mrr_new"] == pytest.approx(new.mrr())
    assert res["disagreement_low"] <= res["disagreement"] <= res["disagreement_high"]


def test_two_models_truncated_and_stored_at_two_precisions(models, capsys):
    _wiki_or_skip()
    a, b = models
    base = ["contextual", "disagreement", a, b, "--task", "wiki_retrieval", "--limit", "200"]
    capsys.readouterr()
    assert main([*base, "--truncate-dim", "64", "--precision", "int8", "--new-precision", "ubinary",
                 "--rescore", "4"]) == 0
    printed = capsys.readouterr().out
    assert "truncated to 64 dims" in printed and "old: bert-tiny-s0 (int8, 64 dims, 64 bytes per vector)" in printed
    assert "new: bert-tiny-s1 (ubinary, rescored x4, 64 dims, 8 bytes per vector)" in printed
    assert "MRR old: " in printed and "MRR@40 new: " in printed  # the rescored side ranks its 40 candidates
    assert "disagreement: " in printed and "disagreement: 0.00%" not in printed  # two random networks differ


@pytest.mark.parametrize("extra,message", [
    (["--task", "rt_sentiment", "--k", "5"], "--k applies to retrieval tasks (wiki_retrieval, bbc_retrieval)"),
    (["--task", "rt_sentiment", "--precision", "int8"], "--precision applies to retrieval tasks"),
    (["--task", "wiki_retrieval", "--classifier", "mlp"], "--classifier applies to trained tasks; wiki_retrieval"),
    (["--task", "wiki_retrieval", "--limit", "200", "--rescore", "2"], "rescore re-ranks binary candidates"),
    (["--task", "wiki_retrieval", "--limit", "200", "--truncate-dim", "999"],
     "truncate dim 999 exceeds the 128 dimensions of the old model"),
    (["--task", "wiki_retrieval", "--limit", "5"], "has 5 queries: at least 10 are needed"),
])
def test_options_of_the_wrong_task_or_out_of_range_are_one_line_errors(models, extra, message, capsys):
    if "wiki_retrieval" in extra and "--classifier" not in extra:
        _wiki_or_skip()
    capsys.readouterr()
    assert main(["contextual", "disagreement", models[0], models[0], *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_rescore_below_one_is_refused_by_the_parser(capsys):
    assert main(["contextual", "disagreement", "a", "b", "--task", "wiki_retrieval", "--rescore", "0.5"]) == 2
    assert "argument --rescore: expected a number >= 1, got '0.5'" in capsys.readouterr().err


def test_the_cli_names_are_the_librarys():
    from embstab.cli.contextual import RETRIEVAL_TASKS, STORE_PRECISIONS
    from embstab.compress.vectorstore import PRECISIONS
    from embstab.downstream import TASKS

    assert STORE_PRECISIONS == tuple(PRECISIONS)
    assert RETRIEVAL_TASKS == tuple(t for t, (kind, _) in TASKS.items() if kind == "retrieval")


# --- stored_search on small arrays (no model) ----------------------------------------------


def _toy(seed: int = 0, n_docs: int = 300, n_queries: int = 60, dim: int = 24):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n_docs, dim))
    q = d[:n_queries] + 0.8 * rng.normal(size=(n_queries, dim))
    return q, d, np.arange(n_queries)


def _brute(scores: np.ndarray, k: int) -> np.ndarray:
    """Top k of each row, the best first and equal scores by column (a plain sort)."""
    cols = np.arange(scores.shape[1])
    return np.array([np.lexsort((cols, -row))[:k] for row in scores])


@pytest.mark.parametrize("precision", ["int8", "uint8"])
def test_int8_and_uint8_rank_by_the_codes_sentence_transformers_makes(precision):
    st = pytest.importorskip("sentence_transformers.util.quantization")
    q, d, rel = _toy()
    res = __import__("embstab.contextual.retrieval", fromlist=["x"]).stored_search(q, d, 7, relevant=rel,
                                                                                   precision=precision)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qc = st.quantize_embeddings(q, precision, calibration_embeddings=d).astype(np.float64)
        dc = st.quantize_embeddings(d, precision, calibration_embeddings=d).astype(np.float64)
    scores = qc @ dc.T
    assert np.array_equal(res.top_k, _brute(scores, 7))
    # the relevant document's rank among all documents, ties by index as in the top k
    full = np.array([np.lexsort((np.arange(len(d)), -row)) for row in scores])
    assert np.array_equal(res.ranks, np.argmax(full == rel[:, None], axis=1) + 1)
    assert res.bytes_per_vector == 24 and res.depth is None


def test_binary_is_hamming_search_and_rescoring_is_the_vector_store_recipe():
    from embstab.compress.vectorstore import quantize_embeddings, rescore
    from embstab.contextual.retrieval import stored_search

    q, d, rel = _toy(1, dim=16)
    plain = stored_search(q, d, 5, relevant=rel, precision="binary")
    signs = lambda x: np.where(x > 0, 1.0, -1.0)
    assert np.array_equal(plain.top_k, _brute(signs(q) @ signs(d).T, 5))
    assert plain.ties_at_k > 0 and plain.bytes_per_vector == 2
    codes = quantize_embeddings(d, "ubinary")
    bits = np.unpackbits(codes, axis=1, count=16)
    ref = rescore(q, codes, bits, 5, multiplier=3)
    got = stored_search(q, d, 5, relevant=rel, precision="ubinary", rescore=3)
    assert np.array_equal(got.top_k, ref.indices) and got.depth == 15
    # a relevant document in the top 5 has its place there; one outside the 15 candidates has rank 0
    inside = (got.top_k == rel[:, None]).any(axis=1)
    assert np.all(got.ranks[inside] <= 5) and np.all((got.ranks[~inside] == 0) | (got.ranks[~inside] > 5))
    assert got.recall() == pytest.approx(100.0 * inside.mean())


@pytest.mark.slow  # MiniLM over 1,000 wiki_retrieval pairs: about 30 s on a shared core
def test_minilm_keeps_most_results_in_int8_and_loses_some_in_binary(capsys):
    _wiki_or_skip()
    base = ["contextual", "disagreement", "builtin:minilm_l6", "builtin:minilm_l6", "--task", "wiki_retrieval",
            "--limit", "1000"]
    binary = _json([*base, "--new-precision", "binary"], capsys)
    int8 = _json([*base, "--new-precision", "int8"], capsys)
    assert binary["quality_old"] > 80 and (binary["bytes_per_vector_old"], binary["bytes_per_vector_new"]) == (1536, 48)
    assert 0 < int8["disagreement"] < binary["disagreement"]
    assert binary["quality_new"] > 10 * binary["chance"]


def test_embstab_downstream_routes_two_models_to_the_same_answer(models, capsys):
    """`embstab downstream` given model folders searches their sentence features: the answer of
    `embstab contextual disagreement`, flips and qualities alike."""
    _wiki_or_skip()
    a, b = models
    common = ["--task", "wiki_retrieval", "--limit", "200", "--precision", "int8", "--new-precision", "binary"]
    direct = _json(["contextual", "disagreement", a, b, *common], capsys)
    routed = _json(["downstream", a, b, *common], capsys)
    assert routed["disagreement"] == direct["disagreement"] > 0
    assert (routed["quality_old"], routed["quality_new"]) == (direct["quality_old"], direct["quality_new"])


@pytest.mark.parametrize("extra, message", [
    (["--new-precision", "binary"], "--new-precision and int8/uint8 apply to contextual models"),
    (["--precision", "int8"], "--new-precision and int8/uint8 apply to contextual models"),
])
def test_a_word_embedding_refuses_what_only_models_have(tmp_path, extra, message, capsys):
    from embstab import Embedding
    from embstab.io import save

    path = tmp_path / "w.txt"
    save(Embedding([f"w{i}" for i in range(20)], np.random.default_rng(0).standard_normal((20, 4))), path)
    assert main(["downstream", str(path), str(path), "--task", "wiki_retrieval", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]

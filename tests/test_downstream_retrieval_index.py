"""Search through faiss indexes: flat and IVF (every list probed) equal exact search, HNSW recovers it, the binary
index equals embstab's Hamming search, an index's own flips are told apart from ties, and the CLI's --index."""

from __future__ import annotations

import sys
import zlib

import numpy as np
import pytest

from embstab import Embedding, cli
from embstab.compress.vectorstore import hamming_topk, quantize_embeddings
from embstab.downstream import MODELS, RetrievalData, disagreement
from embstab.downstream.catalog import SEARCH_INDEXES
from embstab.downstream.retrieval import INDEXES, SearchResult, index_flips, search
from embstab.errors import ConfigError, OptionalDependencyError, UnknownNameError

N_DOCS, N_QUERIES, DIM, K = 300, 60, 24, 10


@pytest.fixture(scope="module")
def faiss():
    return pytest.importorskip("faiss", reason="faiss is optional: pip install faiss-cpu")


@pytest.fixture(scope="module")
def vectors() -> tuple[np.ndarray, np.ndarray]:
    """Gaussian queries and documents: continuous scores, so no two documents tie for a query."""
    rng = np.random.default_rng(7)
    return rng.normal(size=(N_QUERIES, DIM)), rng.normal(size=(N_DOCS, DIM))


@pytest.fixture(scope="module")
def exact(vectors) -> SearchResult:
    q, d = vectors
    res = search(q, d, K)
    assert res.ties_at_k == 0  # the premise of the equalities below
    return res


def test_the_catalogue_the_cli_and_the_module_list_one_set_of_indexes():
    assert INDEXES == SEARCH_INDEXES == ("exact", "flat", "hnsw", "ivf", "binary")
    assert MODELS["search"][1]["index"] == "exact"
    parser_choices = [a.choices for a in _downstream_parser()._actions if "--index" in a.option_strings]
    assert parser_choices == [list(SEARCH_INDEXES)]


def _downstream_parser():
    import argparse

    from embstab.cli import downstream

    sub = argparse.ArgumentParser().add_subparsers()
    downstream.register(sub)
    return sub.choices["downstream"]


def test_flat_returns_the_exact_top_k(faiss, vectors, exact):
    q, d = vectors
    rel = np.arange(N_QUERIES)
    flat = search(q, d, K, index="flat", relevant=rel)
    np.testing.assert_array_equal(flat.top_k, exact.top_k)
    np.testing.assert_allclose(flat.scores, exact.scores, rtol=0, atol=1e-12)  # rescored as exact search scores
    assert flat.index == "flat" and flat.depth == K and flat.precision == "float32"
    assert index_flips(exact, flat) == (0, N_QUERIES, 1.0)
    # ranks only as deep as the index returns: the relevant document's place among the k, else 0
    full = search(q, d, K, relevant=rel)
    np.testing.assert_array_equal(flat.ranks, np.where(full.ranks <= K, full.ranks, 0))
    assert flat.recall() == full.recall()


def test_ivf_probing_every_list_returns_the_exact_top_k(faiss, vectors, exact):
    q, d = vectors
    ivf = search(q, d, K, index="ivf", nlist=7, nprobe=7)
    np.testing.assert_array_equal(ivf.top_k, exact.top_k)
    few = search(q, d, K, index="ivf", nlist=7, nprobe=1)  # one list of seven: it misses neighbours
    assert index_flips(exact, few).flipped > 0


def test_hnsw_with_a_long_candidate_list_recovers_exact_search_and_builds_the_same_graph(faiss, vectors, exact):
    q, d = vectors
    hnsw = search(q, d, K, index="hnsw", ef_search=256)
    recall = np.mean([len(np.intersect1d(a, b)) / K for a, b in zip(hnsw.top_k, exact.top_k)])
    assert recall >= 0.95
    assert index_flips(exact, hnsw).recall == pytest.approx(recall)  # no ties: the tie-aware recall is the same
    # a sparse graph searched with a short list misses neighbours: flips of the index's own
    poor = search(q, d, K, index="hnsw", hnsw_m=4, ef_search=10, ef_construction=10)
    own = index_flips(exact, poor)
    assert own.flipped > 0 and own.recall < recall
    # built with one thread whatever faiss is set to: the same vectors give the same graph
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    try:
        again = search(q, d, K, index="hnsw", hnsw_m=4, ef_search=10, ef_construction=10)
    finally:
        faiss.omp_set_num_threads(threads)
    np.testing.assert_array_equal(again.top_k, poor.top_k)
    assert faiss.omp_get_max_threads() == threads


def test_the_binary_index_equals_embstabs_hamming_search(faiss, vectors):
    q, d = vectors
    binary = search(q, d, K, index="binary")
    assert binary.precision == "binary"
    ref = hamming_topk(quantize_embeddings(q, "ubinary"), quantize_embeddings(d, "ubinary"), K + 1)
    # distances of the returned documents, from their ±1 scores (dim − 2 × distance)
    np.testing.assert_array_equal((DIM - binary.scores) / 2, ref.distances[:, :K])
    untied = ref.distances[:, K - 1] < ref.distances[:, K]
    assert untied.sum() > 5  # some queries have a clear k-th place, where the sets must agree
    np.testing.assert_array_equal(np.sort(binary.top_k[untied], 1), np.sort(ref.indices[untied, :K], 1))
    assert binary.ties_at_k == int((~untied).sum())
    assert index_flips(search(q, d, K, precision="binary"), binary).flipped == 0


def test_index_flips_excuse_ties_and_count_a_better_document_left_out():
    top = np.array([[0, 1, 2], [0, 1, 2]])
    ref = SearchResult(top, None, 0, "float32", 0.0, "exact", np.array([[0.9, 0.5, 0.4], [0.9, 0.5, 0.4]]))
    # row 0: document 7 ties with the third (0.4); row 1: it replaces the second (0.5) with a 0.4
    other = SearchResult(np.array([[0, 1, 7], [0, 7, 2]]), None, 0, "float32", 0.0, "hnsw",
                         np.array([[0.9, 0.5, 0.4], [0.9, 0.4, 0.4]]))
    assert index_flips(ref, other) == (1, 2, 1.0)
    missing = SearchResult(np.array([[0, 1, -1], [0, 1, 2]]), None, 0, "float32", 0.0, "ivf",
                           np.array([[0.9, 0.5, -np.inf], [0.9, 0.5, 0.4]]))
    assert index_flips(ref, missing) == (1, 2, pytest.approx(5 / 6))
    with pytest.raises(ConfigError, match="must be an exact search"):
        index_flips(other, ref)


def _encoder(offset: int):
    """A text encoder: a seeded Gaussian vector per text (no model, no ties)."""
    def encode(texts: list[str]) -> np.ndarray:
        return np.stack([np.random.default_rng(zlib.crc32(t.encode()) + offset).normal(size=DIM) for t in texts])
    return encode


def _task() -> RetrievalData:
    docs = [f"document number {i}" for i in range(N_DOCS)]
    return RetrievalData("toy", [f"query {i}" for i in range(N_DOCS)], docs, np.arange(N_DOCS))


@pytest.mark.parametrize("index", ["exact", "flat"])
def test_an_exhaustive_index_adds_no_flips_of_its_own(index, request):
    if index != "exact":
        request.getfixturevalue("faiss")
    data = _task()
    res = disagreement(_encoder(0), _encoder(1), data, index=index)
    s = res.settings
    assert s["index"] == index and s["index_disagreement"] == 0.0 and s["index_recall_at_k"] == 1.0
    assert s["index_disagreement_low"] == 0.0 < s["index_disagreement_high"] < 2.0
    assert res.disagreement > 50  # two unrelated encoders: the pair's flips are still there
    base = disagreement(_encoder(0), _encoder(1), data, keep_predictions=True)
    assert res.disagreement == base.disagreement and res.quality_old == base.quality_old


def test_an_approximate_index_reports_its_own_flips_beside_the_pairs(faiss):
    res = disagreement(_encoder(0), _encoder(0), _task(), index="hnsw", hnsw_m=4, ef_search=10, ef_construction=10)
    s = res.settings
    assert res.disagreement == 0.0  # one encoder, one graph: the pair agrees...
    assert s["index_disagreement"] > 0 and s["index_recall_at_k"] < 1  # ...while the index misses neighbours
    assert s["index_disagreement_low"] <= s["index_disagreement"] <= s["index_disagreement_high"]
    assert s["mrr_depth"] == K and s["precision"] == "float32"
    with pytest.raises(ConfigError, match="index 'hnsw' searches float32 vectors"):
        disagreement(_encoder(0), _encoder(0), _task(), index="hnsw", precision="binary")
    with pytest.raises(ConfigError, match="^nprobe must be a positive integer"):
        search(np.ones((2, 3)), np.ones((4, 3)), 2, index="ivf", nprobe=0)
    with pytest.raises(UnknownNameError, match="index"):
        search(np.ones((2, 3)), np.ones((4, 3)), 2, index="annoy")


def test_without_faiss_a_faiss_index_is_refused_in_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # `import faiss` now raises ImportError
    q, d = np.eye(3), np.eye(3)
    with pytest.raises(OptionalDependencyError, match="pip install faiss-cpu") as err:
        search(q, d, 1, index="hnsw")
    assert "\n" not in str(err.value) and "'hnsw'" in str(err.value)

    def never(texts):
        raise AssertionError("vectors made before the index was checked")

    with pytest.raises(OptionalDependencyError, match="pip install faiss-cpu"):
        disagreement(never, never, _task(), index="flat")
    assert search(q, d, 1).top_k.tolist() == [[0], [1], [2]]  # exact search needs no faiss


def test_the_cli_refuses_index_for_a_trained_task_in_one_line(tmp_path, capsys):
    from embstab.io import save

    emb = Embedding(["good", "bad"], np.eye(2, dtype=np.float32))
    save(emb, tmp_path / "e.npz")
    e = str(tmp_path / "e.npz")
    assert cli.main(["downstream", e, e, "--task", "rt_sentiment", "--index", "flat"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--index applies to retrieval tasks" in err and "rt_sentiment" in err and "\n" not in err
    assert cli.main(["downstream", e, e, "--task", "link_prediction:umls", "--index", "hnsw"]) == 2
    assert "--index applies to word-embedding tasks" in capsys.readouterr().err

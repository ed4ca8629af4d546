"""KG training on PyKEEN: reproducibility, exported embeddings, evaluation, saving, bad input."""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("pykeen")

import embstab  # noqa: E402
from embstab.errors import ShapeError, UnknownNameError  # noqa: E402
from embstab.kg import KnowledgeGraph, load_graph, load_kg_model, train, version_pair  # noqa: E402


@pytest.fixture(scope="module")
def nations():
    return load_graph("nations")


@pytest.fixture(scope="module")
def transe(nations):
    return train(nations, "TransE", dim=8, epochs=4, seed=1, progress=False)


def test_same_seed_reproduces_and_leaves_global_rng_alone(nations, transe):
    import torch

    torch.manual_seed(123)
    np.random.seed(5)
    random.seed(7)
    expect = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(123)
    np.random.seed(5)
    random.seed(7)
    again = train(nations, "TransE", dim=8, epochs=4, seed=1, progress=False)
    assert (torch.equal(torch.rand(3), expect[0]) and np.array_equal(np.random.rand(3), expect[1])
            and random.random() == expect[2])
    assert np.array_equal(again.entities.vectors, transe.entities.vectors)
    assert np.array_equal(again.relations.vectors, transe.relations.vectors)
    assert again.losses == transe.losses
    other = train(nations, "TransE", dim=8, epochs=4, seed=2, progress=False)
    assert not np.allclose(other.entities.vectors, transe.entities.vectors)


def test_result_shape_and_metrics(nations, transe):
    e = transe.entities
    assert e.words == list(nations.entities) and e.shape == (14, 8)
    assert list(e.counts) == list(nations.degree())
    assert transe.relations.shape == (55, 8)
    # the exported table is the model's own parameter
    assert np.array_equal(e.vectors, transe.model.entity_representations[0]._embeddings.weight.detach().numpy())
    m = transe.metrics
    assert 0 < m.hits_at_1 <= m.hits_at_3 <= m.hits_at_10 <= 1 and m.hits_at_1 <= m.mrr <= 1
    assert m.n_queries == 2 * 201 and len(transe.losses) == 4 and transe.seconds > 0


def test_complex_model_gives_real_view(nations):
    res = train(nations, "ComplEx", dim=4, epochs=1, seed=0, progress=False, evaluate_on=None)
    assert res.entities.shape == (14, 8) and res.entities.metadata["complex"] is True
    z = res.model.entity_representations[0](indices=None).detach().numpy()
    assert np.allclose(res.entities.vectors[:, :4], z.real) and np.allclose(res.entities.vectors[:, 4:], z.imag)
    assert res.metrics is None


def test_bad_input(nations, transe, tmp_path):
    with pytest.raises(UnknownNameError, match="knowledge-graph model 'TransX'"):
        train(nations, "TransX", dim=4, epochs=1)
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        train(nations, "TransE", dim=0, epochs=1)
    umls = load_graph("umls")
    with pytest.raises(ShapeError, match="model has 14 entities and 55 relations, but graph 'umls' has 135 and 46"):
        embstab.kg.evaluate(transe.model, umls)
    transe.save(tmp_path / "m")
    with pytest.raises(ShapeError, match="not those of graph 'umls'"):
        load_kg_model(tmp_path / "m", umls)


def test_save_load_and_compare(nations, transe, tmp_path):
    folder = transe.save(tmp_path / "m")
    back = load_kg_model(folder, nations)
    assert np.array_equal(back.entities.vectors, transe.entities.vectors)
    assert back.metrics == transe.metrics
    import torch

    batch = torch.as_tensor(nations.test[:5].copy())
    assert torch.equal(back.model.score_hrt(batch), transe.model.score_hrt(batch))
    loaded = embstab.load(folder / "entities.npz")
    assert loaded.words == list(nations.entities)
    other = embstab.load(train(nations, "TransE", dim=8, epochs=4, seed=9, progress=False).save(tmp_path / "o")
                         / "entities.npz")
    same = embstab.compare(loaded, loaded, measures=["pip_loss", "knn"], top_n=14).set_index("measure")["value"]
    diff = embstab.compare(loaded, other, measures=["pip_loss", "knn"], top_n=14).set_index("measure")["value"]
    assert same["pip_loss"] == pytest.approx(0.0, abs=1e-9) and same["knn"] == 1.0
    assert diff["pip_loss"] > 0.1 and diff["knn"] < 1.0


def test_version_pair_models_are_aligned(nations):
    pair = version_pair(nations, "remove", 0.1, seed=0)
    a = train(pair.old, "DistMult", dim=6, epochs=2, seed=0, progress=False, evaluate_on=None)
    b = train(pair.new, "DistMult", dim=6, epochs=2, seed=0, progress=False, evaluate_on=None)
    assert a.entities.words == b.entities.words
    assert not np.array_equal(a.entities.vectors, b.entities.vectors)  # different data, same seed
    assert isinstance(pair.new, KnowledgeGraph) and pair.new.name == "nations-0.1"


def test_training_freezes_the_heap_only_while_it_runs(nations):
    import gc

    import torch

    from embstab.kg.training import _frozen_heap

    before_threads = torch.get_num_threads()
    assert gc.get_freeze_count() == 0
    train(nations, "TransE", 4, 1, 0, progress=False, evaluate_on=None, threads=1)
    assert gc.get_freeze_count() == 0 and torch.get_num_threads() == before_threads
    with _frozen_heap():
        assert gc.get_freeze_count() > 0  # the loop's per-epoch gc.collect skips these objects
    assert gc.get_freeze_count() == 0
    gc.freeze()  # a caller that froze its own heap keeps it frozen
    try:
        n = gc.get_freeze_count()
        with _frozen_heap():
            pass
        assert gc.get_freeze_count() >= n > 0
    finally:
        gc.unfreeze()


def test_thread_count_does_not_change_the_reproducibility_contract(nations):
    a = train(nations, "DistMult", 4, 2, 3, progress=False, evaluate_on=None, threads=1)
    b = train(nations, "DistMult", 4, 2, 3, progress=False, evaluate_on=None, threads=1)
    assert np.array_equal(a.entities.vectors, b.entities.vectors) and a.settings["torch_threads"] == 1


def test_one_model_has_one_mrr_whichever_version_of_its_graph_scores_it():
    """`kg train` on a version used to filter with the version's triples and `downstream` with the
    full graph's: the left-out triples are still facts, so every version filters with all of them."""
    from embstab.kg import evaluate, load_graph, train, version_pair

    graph = load_graph("nations")
    pair = version_pair(graph, "remove", 0.1, seed=3, lost="protect")
    assert len(pair.new.train) < len(graph.train)
    np.testing.assert_array_equal(pair.new.known_triples(), graph.known_triples())
    model = train(pair.new, "DistMult", 8, 3, seed=1, evaluate_on=None, progress=False).model
    on_version, on_full = evaluate(model, pair.new), evaluate(model, graph)
    assert on_version.mrr == on_full.mrr and on_version.hits_at_10 == on_full.hits_at_10

"""KG disagreement against literal brute-force computations, and quantized scoring."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pykeen")

import torch  # noqa: E402

from embstab.compress import uniform_quantize  # noqa: E402
from embstab.errors import ShapeError  # noqa: E402
from embstab.kg import (link_prediction_disagreement, load_graph, quantize_model, quantize_pair, train,  # noqa: E402
                        triple_classification_disagreement)
from embstab.kg.disagreement import _best_threshold, corrupt  # noqa: E402


@pytest.fixture(scope="module")
def nations():
    return load_graph("nations")


@pytest.fixture(scope="module")
def pair(nations):
    a = train(nations, "TransE", dim=6, epochs=3, seed=0, progress=False)
    b = train(nations, "TransE", dim=6, epochs=3, seed=1, progress=False)
    return a, b


def _known(graph):
    return {tuple(t) for s in ("train", "valid", "test") for t in graph.split(s).tolist()}


def _brute_answers(model, graph, k=10):
    """Per query: every entity scored one triple at a time, filtered, sorted by (-score, id)."""
    known = _known(graph)
    out = []
    for side in ("tail", "head"):
        for h, r, t in graph.test.tolist():
            cands = []
            for e in range(graph.n_entities):
                tri = (h, r, e) if side == "tail" else (e, r, t)
                target = t if side == "tail" else h
                if tri in known and e != target:
                    continue
                s = float(model.score_hrt(torch.tensor([tri])).item())
                cands.append((-s, e))
            out.append([e for _, e in sorted(cands)[:k]])
    return out


def test_link_prediction_against_brute_force(nations, pair):
    a, b = pair
    res = link_prediction_disagreement(a, b, nations, keep_answers=True)
    ba, bb = _brute_answers(a.model, nations), _brute_answers(b.model, nations)
    assert res.answers_old.tolist() == [q[0] for q in ba] and res.answers_new.tolist() == [q[0] for q in bb]
    assert res.n_queries == 2 * len(nations.test)
    assert res.disagreement == pytest.approx(100.0 * np.mean([x[0] != y[0] for x, y in zip(ba, bb)]))
    overlap = np.mean([len(set(x) & set(y)) / min(10, len(x)) for x, y in zip(ba, bb)])
    assert res.top_k_overlap == pytest.approx(overlap)
    assert 0 < res.disagreement < 100
    # MRR from the evaluator agrees with realistic filtered ranks computed here
    known = _known(nations)
    rr = []
    for side in ("tail", "head"):
        for h, r, t in nations.test.tolist():
            tris = [(h, r, e) if side == "tail" else (e, r, t) for e in range(nations.n_entities)]
            s = a.model.score_hrt(torch.tensor(tris)).detach().numpy().ravel().astype(np.float64)
            target = t if side == "tail" else h
            keep = np.array([tri not in known or e == target for e, tri in enumerate(tris)])
            st = s[target]
            opt, pess = 1 + np.sum(s[keep] > st), np.sum(s[keep] >= st)
            rr.append(1.0 / ((opt + pess) / 2))
    assert res.metrics_old.mrr == pytest.approx(np.mean(rr), rel=1e-4)
    assert res.to_dict()["mrr_old"] == res.metrics_old.mrr


def test_same_model_never_disagrees(nations, pair):
    res = link_prediction_disagreement(pair[0], pair[0], nations)
    assert res.disagreement == 0.0 and res.top_k_overlap == 1.0
    tc = triple_classification_disagreement(pair[0], pair[0], nations)
    assert tc.disagreement == 0.0 and tc.accuracy_old == tc.accuracy_new


def test_threshold_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = np.round(rng.normal(size=12), 1)  # rounded: ties happen
        y = rng.random(12) < 0.5
        cands = sorted(set(s.tolist())) + [np.inf]
        accs = [np.mean((s >= c) == y) for c in cands]
        assert _best_threshold(s, y) == cands[int(np.argmax(accs))]


def test_triple_classification_against_brute_force(nations, pair):
    a, b = pair
    res = triple_classification_disagreement(a, b, nations, seed=4, keep_decisions=True)
    known = _known(nations)
    v_neg, t_neg = corrupt(nations, nations.valid, 4), corrupt(nations, nations.test, 5)
    for neg, pos in ((v_neg, nations.valid), (t_neg, nations.test)):
        assert len(neg) == len(pos)
        assert not any(tuple(x) in known for x in neg.tolist())
        assert all(int((x != p).sum()) == 1 and x[1] == p[1] for x, p in zip(neg, pos))

    def decisions(model):
        score = lambda tri: float(model.score_hrt(torch.tensor([tri])).item())  # noqa: E731
        valid = [(tuple(x), True) for x in nations.valid.tolist()] + [(tuple(x), False) for x in v_neg.tolist()]

        def best(rows):
            cands = sorted({sc for sc, _ in rows}) + [np.inf]
            return max(cands, key=lambda c: (sum((sc >= c) == lab for sc, lab in rows), -c))

        th = {r: best([(score(x), lab) for x, lab in valid if x[1] == r]) for r in {x[1] for x, _ in valid}}
        pooled = best([(score(x), lab) for x, lab in valid])  # relations without validation triples
        test = nations.test.tolist() + t_neg.tolist()
        return np.array([score(tuple(x)) >= th.get(x[1], pooled) for x in test])

    da, db = decisions(a.model), decisions(b.model)
    assert np.array_equal(res.decisions_old, da) and np.array_equal(res.decisions_new, db)
    assert res.disagreement == pytest.approx(100.0 * np.mean(da != db))
    labels = np.r_[np.ones(len(nations.test), bool), np.zeros(len(t_neg), bool)]
    assert res.accuracy_old == pytest.approx(100.0 * np.mean(da == labels)) and res.n_test == len(labels)


def test_quantized_scoring_uses_quantized_tables(nations, pair):
    a, b = pair
    q = quantize_model(a, 2)
    ent = a.model.entity_representations[0]._embeddings.weight.detach().numpy()
    rel = a.model.relation_representations[0]._embeddings.weight.detach().numpy()
    qe = uniform_quantize(ent, 2, clip=q.clips["entity0"])
    qr = uniform_quantize(rel, 2, clip=q.clips["relation0"])
    assert np.array_equal(q.entities.vectors, qe) and len(np.unique(qe)) <= 4
    # TransE (L1): score = -||h + r - t||_1, on the quantized tables, float64
    tri = nations.test[:20]
    expect = -np.abs(qe[tri[:, 0]].astype(np.float64) + qr[tri[:, 1]] - qe[tri[:, 2]]).sum(axis=1)
    got = q.model.score_hrt(torch.as_tensor(tri.copy())).detach().numpy().ravel()
    assert np.allclose(got, expect, atol=1e-5)
    # the source model is untouched, and memory is 2 bits per entry plus one clip per table
    assert np.array_equal(a.entities.vectors, ent)
    assert q.memory_bits == (14 * 6 + 55 * 6) * 2 + 2 * 32 and q.compression_ratio == pytest.approx(32 * 414 / 892)
    qa, qb = quantize_pair(a, b, 4)
    assert qb.clips == qa.clips
    res = link_prediction_disagreement(a, qa, nations)
    assert 0 < res.disagreement < 100 and res.metrics_new.mrr != res.metrics_old.mrr
    assert quantize_model(a, 32).clips["entity0"] == pytest.approx(np.abs(ent).max())


def test_model_that_does_not_fit_the_graph(pair):
    umls = load_graph("umls")
    with pytest.raises(ShapeError, match="graph 'umls' has 135 and 46"):
        link_prediction_disagreement(pair[0], pair[1], umls)
    with pytest.raises(TypeError, match="expected a trained KG model"):
        triple_classification_disagreement("model.pt", pair[0], umls)


def test_kg_disagreement_is_the_task_functions_plus_quantization(nations, pair):
    from embstab.errors import UnknownNameError
    from embstab.kg import kg_disagreement

    a, b = pair
    lp = kg_disagreement(a, b, nations, "link_prediction")
    direct = link_prediction_disagreement(a, b, nations)
    assert lp.disagreement == direct.disagreement and lp.settings["bits"] is None
    q = kg_disagreement(a, b, nations, "link_prediction", bits=2)
    qa, qb = quantize_pair(a, b, 2)
    assert q.disagreement == link_prediction_disagreement(qa, qb, nations).disagreement
    assert q.settings["bits"] == 2 and q.settings["memory_bits_old"] == qa.memory_bits
    tc = kg_disagreement(a, b, nations, "triple_classification", seed=5)
    assert tc.disagreement == triple_classification_disagreement(a, b, nations, seed=5).disagreement
    before = torch.get_num_threads()
    kg_disagreement(a, b, nations, threads=1)
    assert torch.get_num_threads() == before  # the thread setting is restored
    with pytest.raises(UnknownNameError, match="unknown knowledge-graph task 'link'"):
        kg_disagreement(a, b, nations, "link")
    with pytest.raises(TypeError, match="expected a KGTrainResult"):
        kg_disagreement(a.model, b.model, nations, bits=4)

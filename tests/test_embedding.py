import numpy as np
import pytest

import embstab
from embstab import Embedding, ShapeError, VocabularyError
from embstab.errors import ConfigError


def make(n=6, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return Embedding([f"w{i}" for i in range(n)], rng.normal(size=(n, d)), counts=np.arange(n, 0, -1), name="e")


def test_container_protocol():
    e = make()
    assert len(e) == 6 and e.dim == 3 and "w2" in e and "zz" not in e
    assert e.index("w4") == 4 and list(e) == e.words
    np.testing.assert_array_equal(e["w1"], e.vectors[1])
    with pytest.raises(VocabularyError, match="'zz' is not in the embedding 'e'"):
        e["zz"]
    with pytest.raises(ValueError):
        e.vectors[0, 0] = 1.0  # read-only view: the embedding cannot be changed behind its back


def test_subset_top_and_errors():
    e = make()
    s = e.subset(["w3", "w0"])
    assert s.words == ["w3", "w0"] and list(s.counts) == [3, 6]
    np.testing.assert_array_equal(s.vectors, e.vectors[[3, 0]])
    assert e.top(2).words == ["w0", "w1"]
    with pytest.raises(VocabularyError, match="2 of 3 words are not in the embedding"):
        e.subset(["w0", "x", "y"])
    assert e.subset(["w0", "x"], missing="skip").words == ["w0"]


def test_validation():
    with pytest.raises(ShapeError, match="2-D"):
        Embedding(["a"], np.ones(3))
    with pytest.raises(ShapeError, match="2 words but 1 vector rows"):
        Embedding(["a", "b"], np.ones((1, 3)))
    with pytest.raises(ShapeError, match="NaN or Inf"):
        Embedding(["a"], [[np.nan, 1.0]])
    with pytest.raises(VocabularyError, match="duplicate word 'a'"):
        Embedding(["a", "a"], np.ones((2, 2)))
    with pytest.warns(UserWarning):
        assert Embedding(["a", "b", "a"], np.eye(3), duplicates="first").words == ["a", "b"]


def test_normalize_center():
    e = make().with_vectors(np.vstack([np.zeros(3), np.ones((5, 3))]))
    n = e.normalize()
    np.testing.assert_allclose(np.linalg.norm(n.vectors[1:], axis=1), 1.0)
    assert not n.vectors[0].any()
    np.testing.assert_allclose(make().center().vectors.mean(axis=0), 0.0, atol=1e-15)


def test_align_to_recovers_a_rotation():
    e = make(50, 4)
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(4, 4)))
    rotated = e.with_vectors(e.vectors @ q)
    back = rotated.align_to(e)
    np.testing.assert_allclose(back.vectors, e.vectors, atol=1e-12)
    with pytest.raises(ShapeError):
        e.align_to(make(50, 5))


def test_keyedvectors_round_trip():
    e = make()
    kv = e.to_keyedvectors()
    assert kv.index_to_key == e.words and kv.get_vecattr("w0", "count") == 6
    back = Embedding.from_keyedvectors(kv)
    np.testing.assert_array_equal(back.vectors, e.vectors)
    np.testing.assert_array_equal(back.counts, e.counts)


def test_shared_vocabulary_orders_by_rank_by():
    a = Embedding(["x", "y", "z"], np.eye(3))
    b = Embedding(["z", "q", "x"], np.eye(3))
    assert embstab.shared_vocabulary(a, b) == ["x", "z"]
    assert embstab.shared_vocabulary(a, b, rank_by="b") == ["z", "x"]
    assert embstab.shared_vocabulary(a, b, top_n=1) == ["x"]


@pytest.mark.parametrize("vectors, message", [
    (np.ones((2, 3)) * (1 + 1j), "must be real numbers, got dtype complex128"),
    (np.array([["x", "y"], ["z", "w"]]), "must be numeric, got dtype <U1"),
])
def test_vectors_that_are_not_real_numbers_are_refused(vectors, message):
    # a complex matrix cast to float would lose its imaginary parts without a word
    with pytest.raises(ShapeError, match=message):
        Embedding(["a", "b"], vectors)
    with pytest.raises(ShapeError, match=message):
        Embedding(["a", "b"], np.ones((2, 3))).with_vectors(vectors)


def test_torch_tensors_with_grad_or_in_bfloat16_are_read():
    import torch

    grad = torch.arange(6.0).reshape(2, 3).requires_grad_()
    assert Embedding(["a", "b"], grad).vectors.tolist() == [[0, 1, 2], [3, 4, 5]]
    half = torch.tensor([[0.5, 1.5], [2.0, -1.0]], dtype=torch.bfloat16)
    e = Embedding(["a", "b"], half)
    assert e.vectors.dtype == np.float32 and e.vectors.tolist() == [[0.5, 1.5], [2.0, -1.0]]


def test_astype_keeps_an_embedding_in_float32_or_float64():
    e = Embedding(["a", "b"], np.ones((2, 3)))
    assert e.astype(np.float32).vectors.dtype == np.float32
    for dtype in (np.int64, np.float16, "U8"):
        with pytest.raises(ConfigError, match="float32 or float64"):
            e.astype(dtype)


def test_align_to_refuses_fewer_words_than_dimensions():
    # 2 words in 6 dimensions: infinitely many rotations fit them; the table would turn arbitrarily
    rng = np.random.default_rng(0)
    a = Embedding([f"w{i}" for i in range(10)], rng.normal(size=(10, 6)))
    b = Embedding(["w0", "w1", "x2", "x3", "x4", "x5", "x6"], rng.normal(size=(7, 6)))
    with pytest.raises(VocabularyError, match="only 2 words to align on for 6 dimensions, and 8 other words"):
        a.align_to(b)

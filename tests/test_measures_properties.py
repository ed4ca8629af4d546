"""Invariants of the measures (hypothesis), input validation, numpy/torch agreement, CUDA skip."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from embstab import ShapeError, measures
from embstab.errors import UnknownNameError

shapes = st.tuples(st.integers(0, 2**31 - 1), st.integers(25, 60), st.integers(2, 8))


def make(seed, n, d, noise=0.5):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    return rng, x, x + noise * rng.normal(size=(n, d))


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_eis_range_identity_and_invariances(args):
    seed, n, d = args
    rng, x, y = make(seed, n, d)
    ex, ey = rng.normal(size=(n, d + 3)), rng.normal(size=(n, d + 3))
    v = measures.eis(x, y, ex, ey)
    assert 0.0 <= v <= 1.0
    assert measures.eis(x, x, ex, ey) == pytest.approx(0.0, abs=1e-12)
    m = rng.normal(size=(d, d)) + d * np.eye(d)  # invertible
    assert measures.eis(x @ m, y, ex, ey) == pytest.approx(v, rel=1e-8, abs=1e-12)
    assert measures.eis(x, y, 7.5 * ex, 7.5 * ey) == pytest.approx(v, rel=1e-8, abs=1e-12)
    # symmetric under swapping (X, anchor_x) with (Y, anchor_y)
    assert measures.eis(y, x, ey, ex) == pytest.approx(v, rel=1e-8, abs=1e-12)


def test_eis_not_invariant_to_rescaling_one_anchor():
    rng, x, y = make(0, 50, 4)
    ex, ey = rng.normal(size=(50, 6)), rng.normal(size=(50, 6))
    assert measures.eis(x, y, 3 * ex, ey) != pytest.approx(measures.eis(x, y, ex, ey), rel=1e-3)


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_eigenspace_overlap_range_and_span_only(args):
    seed, n, d = args
    rng, x, y = make(seed, n, d)
    v = measures.eigenspace_overlap(x, y)
    assert 0.0 <= v <= 1.0 + 1e-12
    assert measures.eigenspace_overlap(x, x @ (rng.normal(size=(d, d)) + d * np.eye(d))) == pytest.approx(1.0)
    assert measures.eigenspace_overlap(x @ (rng.normal(size=(d, d)) + d * np.eye(d)), y) == pytest.approx(v, rel=1e-8)


def random_rotation(rng, d):
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return q


@settings(max_examples=25, deadline=None)
@given(shapes)
def test_knn_range_symmetry_rotation_and_scale(args):
    seed, n, d = args
    rng, x, y = make(seed, n, d, noise=1.0)
    v = measures.knn(x, y, k=3, n_queries=20, seed=seed % 1000)
    assert 0.0 <= v <= 1.0
    assert measures.knn(y, x, k=3, n_queries=20, seed=seed % 1000) == v
    assert measures.knn(4.0 * x @ random_rotation(rng, d), y, k=3, n_queries=20, seed=seed % 1000) == v
    assert measures.knn(x, x, k=3, n_queries=20) == 1.0


@settings(max_examples=25, deadline=None)
@given(shapes)
def test_semantic_displacement_rotation_invariant(args):
    seed, n, d = args
    rng, x, y = make(seed, n, d)
    v = measures.semantic_displacement(x, y)
    assert measures.semantic_displacement(x @ random_rotation(rng, d), y) == pytest.approx(v, rel=1e-9, abs=1e-12)
    assert measures.semantic_displacement(x, 3.0 * y @ random_rotation(rng, d)) == pytest.approx(v, rel=1e-9,
                                                                                                 abs=1e-12)


def test_knn_does_not_touch_global_rng():
    _, x, y = make(0, 40, 3)
    np.random.seed(5)
    before = np.random.random()
    np.random.seed(5)
    measures.knn(x, y, n_queries=10)
    assert np.random.random() == before


@pytest.mark.parametrize("bad, message", [
    (np.ones(5), "2-D"),
    (np.ones((0, 3)), "empty"),
    (np.array([[1.0, np.nan], [1.0, 2.0]]), "NaN"),
    (np.array([[1.0, np.inf], [1.0, 2.0]]), "NaN or Inf"),
])
def test_bad_inputs_are_named(bad, message):
    good = np.ones((2, 2))
    with pytest.raises(ShapeError, match=message):
        measures.pip_loss(bad, good)


def test_mismatched_rows_and_dims():
    with pytest.raises(ShapeError, match="row-aligned"):
        measures.pip_loss(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ShapeError, match="equal dimensions"):
        measures.semantic_displacement(np.ones((3, 2)), np.ones((3, 4)))
    with pytest.raises(ShapeError, match="anchor"):
        measures.eis(np.eye(4), np.eye(4), np.ones((3, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="n_queries"):
        measures.knn(np.eye(4), np.eye(4), k=1, n_queries=0)
    with pytest.warns(UserWarning, match="every row"):
        assert measures.knn(np.eye(4), np.eye(4), k=1, n_queries=10) == 1.0


@pytest.mark.parametrize("name", sorted(measures.measures_for("euclidean")))
def test_numpy_and_torch_agree(name):
    rng, x, y = make(11, 80, 6)
    info = measures.REGISTRY[name]
    args = (rng.normal(size=(80, 9)), rng.normal(size=(80, 9))) if info.needs_anchors else ()
    as_t = [torch.from_numpy(a) for a in (x, y, *args)]
    kwargs = {"n_queries": 50} if name == "knn" else {}
    v_np = info.func(x, y, *args, **kwargs)
    v_t = info.func(*as_t, **kwargs)
    assert v_t == pytest.approx(v_np, rel=1e-12, abs=1e-14)


def test_registry_declares_direction_and_distance():
    assert measures.REGISTRY["knn"].to_distance(0.75) == pytest.approx(0.25)
    assert measures.REGISTRY["eis"].to_distance(0.1) == 0.1
    assert not measures.REGISTRY["eis"].larger_is_more_stable
    assert measures.REGISTRY["eigenspace_overlap"].larger_is_more_stable
    with pytest.raises(UnknownNameError, match="unknown measure"):
        measures.get_measure("nope")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", sorted(measures.measures_for("euclidean")))
def test_cuda_matches_cpu_and_stays_on_device(name):
    rng, x, y = make(3, 300, 12)
    info = measures.REGISTRY[name]
    args = (rng.normal(size=(300, 20)), rng.normal(size=(300, 20))) if info.needs_anchors else ()
    cuda = [torch.from_numpy(a).cuda() for a in (x, y, *args)]
    assert info.func(*cuda) == pytest.approx(info.func(x, y, *args), rel=1e-10, abs=1e-12)


def test_cupy_path_skips_cleanly_without_gpu():
    try:
        import cupy

        available = cupy.cuda.is_available()
    except Exception:
        available = False
    if not available:
        pytest.skip("cupy or a CUDA device is not available")
    x = cupy.asarray(np.eye(5))
    assert measures.pip_loss(x, x) == pytest.approx(0.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("alpha", [3.0, 2.5])
def test_an_anchor_with_nan_or_inf_is_named_cold_and_cached(bad, alpha):
    # cold, the anchor's check runs beside its factorisation: the error must still be the anchor's
    rng = np.random.default_rng(0)
    x, y, anchor = rng.normal(size=(300, 4)), rng.normal(size=(300, 4)), rng.normal(size=(300, 6))
    measures.clear_anchor_cache()
    spoiled = anchor.copy()
    spoiled[123, 2] = bad
    with pytest.raises(ShapeError, match="anchor contains NaN or Inf"):
        measures.eis(x, y, spoiled, anchor, alpha=alpha)
    # cached, then spoiled in place: the fingerprint sees the change and the check names it
    value = measures.eis(x, y, anchor, anchor, alpha=alpha)
    assert 0.0 <= value <= 1.0
    anchor[45, 1] = bad
    with pytest.raises(ShapeError, match="anchor contains NaN or Inf"):
        measures.eis(x, y, anchor, anchor, alpha=alpha)

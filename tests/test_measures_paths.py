"""The fast paths of the measures give what the plain paths give: row-split products, Cholesky bases, anchor roots."""

import numpy as np
import pytest
import torch

from embstab import measures
from embstab.measures import _backend
from embstab.measures._backend import basis, cross, grams, shared_products, span, split_rows, split_rows_each
from embstab.measures.knn import nearest_neighbors


def pair(n=3000, d=40, seed=0, decay=True):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) / (np.sqrt(np.arange(1, d + 1)) if decay else 1.0)
    return rng, x, x + 0.3 * rng.normal(size=(n, d)) * x.std()


def projector_gap(x, w1, w2):
    u1, u2 = x @ w1, x @ w2
    return np.abs(u1 @ u1.T - u2 @ u2.T).max()


def test_split_rows_covers_every_row_once():
    x = np.arange(5000.0).reshape(-1, 1)
    parts = split_rows(lambda lo, hi: (lo, hi, float(x[lo:hi].sum())), x)
    assert parts[0][0] == 0 and parts[-1][1] == 5000
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert sum(p[2] for p in parts) == float(x.sum())


def test_split_rows_each_gives_every_job_its_rows_once(monkeypatch):
    monkeypatch.setattr(_backend, "_blas_workers", lambda: 4)
    sizes = (5000, 300, 3000)  # the middle one too short for more than one range
    xs = [np.arange(float(n)).reshape(-1, 1) for n in sizes]
    jobs = [((lambda lo, hi, x=x: (lo, hi, float(x[lo:hi].sum()))), x) for x in xs]
    results = split_rows_each(jobs)
    assert [len(parts) for parts in results] == [1, 1, 1]  # 4 workers over 3 jobs: one range each
    monkeypatch.setattr(_backend, "_blas_workers", lambda: 6)
    results = split_rows_each(jobs[:1] + jobs[2:])
    assert [len(parts) for parts in results] == [3, 3]
    for parts, x in zip(results, xs[:1] + xs[2:]):
        assert parts[0][0] == 0 and parts[-1][1] == len(x)
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
        assert sum(p[2] for p in parts) == float(x.sum())
    assert split_rows_each([]) == []


def test_gram_matrices_made_side_by_side_are_each_gram_matrix(monkeypatch):
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(3000, 60)), rng.normal(size=(3000, 45))
    got = grams(np, [a, b, a], None)
    for g, m in zip(got, (a, b, a)):
        assert np.allclose(g, m.T @ m, rtol=1e-12, atol=1e-10)
    assert got[0] is got[2]  # the same array once
    with shared_products():
        first = grams(np, [a, b], None)
        assert cross(np, b, b, None) is first[1]  # remembered as cross remembers it
        monkeypatch.setattr(_backend, "_cross_rows", lambda *args: pytest.fail("recomputed a remembered Gram matrix"))
        assert grams(np, [b, a], None)[0] is first[1]


@pytest.mark.parametrize("alpha", [3.0, 5.0, 2.0])
def test_anchors_factored_together_match_each_factored_alone(alpha, monkeypatch):
    from embstab.measures.eis import _factor_set

    rng = np.random.default_rng(int(alpha))
    e = rng.normal(size=(2000, 30)) / np.sqrt(np.arange(1, 31))
    f = e + 0.2 * rng.normal(size=e.shape)
    together = _factor_set((e, f, e), alpha, None, False, "auto")
    assert together[0] is together[2]
    for got, anchor in zip(together, (e, f)):
        alone = measures.anchor_factors(anchor, alpha=alpha, cache=False)
        assert got.weight == pytest.approx(alone.weight, rel=1e-12)
        assert got.log_scale == pytest.approx(alone.log_scale, rel=1e-12, abs=1e-12)
        assert np.allclose(got.k_mat, alone.k_mat, rtol=1e-10, atol=1e-12 * np.abs(alone.k_mat).max())
    # eis factors both anchors in one call and caches each: a later call factors nothing
    _, x, y = pair(n=2000, d=10, seed=int(alpha))
    measures.clear_anchor_cache()
    value = measures.eis(x, y, e, f, alpha=alpha)
    monkeypatch.setattr(_backend, "_cross_rows", lambda *args: pytest.fail("factored a cached anchor again"))
    assert measures.anchor_factors(f, alpha=alpha).weight == pytest.approx(together[1].weight, rel=1e-12)
    monkeypatch.undo()
    assert measures.eis(x, y, *together[:2], alpha=alpha) == pytest.approx(value, rel=1e-10)


NAMES = ("eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap")


def test_split_products_match_single_call(monkeypatch):
    rng, x, y = pair()
    e = rng.normal(size=(3000, 70))
    f = e + 0.1 * rng.normal(size=e.shape)
    assert np.allclose(cross(np, x, e, None), x.T @ e, rtol=1e-12, atol=1e-9)
    assert np.allclose(cross(np, x, x, None), x.T @ x, rtol=1e-12, atol=1e-9)
    together = {name: measures.get_measure(name).evaluate(x, y, anchors=(e, f)) for name in NAMES}
    measures.clear_anchor_cache()
    monkeypatch.setattr(_backend, "_blas_workers", lambda: 1)  # one call over all rows, BLAS as it is
    assert len(split_rows(lambda lo, hi: hi - lo, x)) == 1
    for name in NAMES:
        alone = measures.get_measure(name).evaluate(x, y, anchors=(e, f))
        assert alone == pytest.approx(together[name], rel=1e-10, abs=1e-12), name


def test_knn_split_finds_the_same_neighbours(monkeypatch):
    _, x, _ = pair(n=4000, d=16, seed=3)
    xp = _backend.namespace(x)
    queries = np.arange(0, 4000, 7, dtype=np.int64)
    split = nearest_neighbors(xp, x, queries, 5)
    monkeypatch.setattr(_backend, "_blas_workers", lambda: 1)
    alone = nearest_neighbors(xp, x, queries, 5)
    assert np.array_equal(split, alone)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    scores = unit[queries] @ unit.T
    best = np.argsort(-scores, axis=1, kind="stable")[:, :6]
    assert np.array_equal(np.sort(split, axis=1), np.sort(best, axis=1))


def test_cholesky_basis_spans_what_the_eigen_span_spans():
    _, x, _ = pair(n=2000, d=30)
    b = basis(np, x)
    assert b.method == "cholesky" and b.rank == 30
    u = x @ b.w
    assert np.allclose(u.T @ u, np.eye(30), atol=1e-10)
    assert projector_gap(x, b.w, span(np, x, method="qr").w) < 1e-10


def test_ill_conditioned_input_falls_back_to_the_span():
    rng, x, _ = pair(n=2000, d=10, decay=False)
    x[:, 0] *= 1e-5  # cond ≈ 1e5 > GRAM_MAX_COND: no certificate
    b = basis(np, x)
    assert b.method != "cholesky"
    rank_deficient = np.hstack([x, x[:, :1]])
    b = basis(np, rank_deficient)
    assert b.method != "cholesky" and b.rank == 10


def test_basis_on_torch_matches_numpy():
    _, x, y = pair(n=1500, d=20, seed=5)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    assert basis(measures._backend.namespace(tx), tx).method == "cholesky"
    assert measures.eigenspace_overlap(tx, ty) == pytest.approx(measures.eigenspace_overlap(x, y), rel=1e-10)


@pytest.mark.parametrize("alpha", [1.0, 2.0, 3.0, 5.0, 2.5])
def test_anchor_factors_match_the_power_definition(alpha):
    rng = np.random.default_rng(int(alpha * 10))
    e = rng.normal(size=(300, 12)) / np.sqrt(np.arange(1, 13))
    f = measures.anchor_factors(e, alpha=alpha, cache=False)
    # c^{2α} E K Eᵀ = (E Eᵀ)^α and c^{2α} weight = tr((E Eᵀ)^α), with c = exp(log_scale)
    lam, v = np.linalg.eigh(e @ e.T)
    lam = np.clip(lam, 0, None)
    target = (v * lam**alpha) @ v.T
    scale = np.exp(2 * alpha * f.log_scale)
    assert np.allclose(scale * (e @ f.k_mat @ e.T), target, rtol=1e-8, atol=1e-8 * np.abs(target).max())
    assert scale * f.weight == pytest.approx(np.sum(lam**alpha), rel=1e-9)
    if f.k_root is not None:
        assert np.allclose(f.k_mat, f.k_root @ f.k_root.T)
    assert f.k_mat is f.k_mat  # formed once


def test_eis_value_does_not_depend_on_the_root_form():
    rng, x, y = pair(n=1000, d=8, seed=2)
    ex, ey = rng.normal(size=(1000, 15)), rng.normal(size=(1000, 15))
    fx, fy = measures.anchor_factors(ex, cache=False), measures.anchor_factors(ey, cache=False)
    assert fx.k_root is not None
    from dataclasses import replace
    plain = (replace(fx, k_root=None, _k_mat={"k": fx.k_mat}), replace(fy, k_root=None, _k_mat={"k": fy.k_mat}))
    assert measures.eis(x, y, fx, fy) == pytest.approx(measures.eis(x, y, *plain), rel=1e-10)


@pytest.mark.parametrize("free_bytes", [2**40, 2**10], ids=["room-for-copies", "no-room"])
def test_device_paths_match_numpy(monkeypatch, free_bytes):
    """The GPU paths (inputs cast whole once per suite when memory allows, 1 GiB row blocks, device-side
    counts) give numpy's values. Run on CPU tensors presented as GPU ones, so CI checks the logic."""
    import importlib

    knn_module = importlib.import_module("embstab.measures.knn")
    rng, x, y = pair(n=4000, d=30, seed=3)
    e = rng.normal(size=(4000, 50))
    f = e + 0.1 * rng.normal(size=e.shape)
    ref = {name: measures.get_measure(name).evaluate(x, y, anchors=(e, f)) for name in NAMES}
    monkeypatch.setattr(_backend, "on_gpu", lambda a: isinstance(a, torch.Tensor))
    monkeypatch.setattr(knn_module, "on_gpu", lambda a: isinstance(a, torch.Tensor))
    monkeypatch.setattr(knn_module, "_can_certify", lambda a: False)  # GPUs scan in float64
    monkeypatch.setattr(_backend, "_device_free_bytes", lambda a: free_bytes)
    monkeypatch.setattr(_backend, "DEVICE_BLOCK_BYTES", 2**20)  # several blocks even at this size
    monkeypatch.setattr(knn_module, "DEVICE_BLOCK_BYTES", 2**20)
    stored = [torch.from_numpy(a.astype(np.float32)) for a in (x, y, e, f)]
    exact = {name: measures.get_measure(name).evaluate(*[a.double().numpy() for a in stored[:2]],
                                                        anchors=tuple(a.double().numpy() for a in stored[2:]))
             for name in NAMES}
    measures.clear_anchor_cache()
    with measures.shared_products():
        got = {name: measures.get_measure(name).evaluate(*stored[:2], anchors=tuple(stored[2:])) for name in NAMES}
        memo = _backend._MEMO.get()
        copies = [key for key in memo if key[0] == "working"]
    for name in NAMES:
        assert got[name] == pytest.approx(exact[name], rel=1e-10, abs=1e-12), name
        assert got[name] == pytest.approx(ref[name], rel=0.05, abs=0.01), name  # float32 storage moved it little
    # with room, each of the four inputs is cast once for the whole suite; without, never
    assert len(copies) == (4 if free_bytes > 2**20 else 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("library", ["torch", "numpy"])  # numpy runs the branch cupy arrays take
def test_grouped_topk_selects_what_the_plain_selection_does(seed, library):
    """The GPU selection through group maxima: the same k values (ties included) at their true columns."""
    rng = np.random.default_rng(seed)
    m, k = int(rng.integers(1, 30)), int(rng.integers(1, 9))
    c = int(rng.integers(16 * _backend.TOPK_GROUP * k, 40_000))
    scores = rng.normal(size=(m, c))
    if seed % 2:
        scores = np.round(scores * 2) / 2  # many ties, also at the k-th place
    t = torch.from_numpy(scores)
    given = t if library == "torch" else scores
    vals, idx = (torch.as_tensor(np.asarray(a)) for a in _backend._grouped_topk(_backend.namespace(given), given, k))
    assert torch.equal(torch.sort(vals, dim=1).values, torch.sort(torch.topk(t, k, dim=1).values, dim=1).values)
    assert torch.equal(torch.gather(t, 1, idx), vals) and all(len(set(row)) == k for row in idx.tolist())


def test_gpu_gram_from_column_halves(monkeypatch):
    """On a GPU a wide Gram is assembled from its halves: the same matrix, exactly symmetric off the diagonal."""
    monkeypatch.setattr(_backend, "on_gpu", lambda a: True)
    a = torch.from_numpy(np.random.default_rng(0).normal(size=(3000, _backend.GRAM_SPLIT_MIN + 7)))
    got = _backend._gram(_backend.namespace(a), a)
    h = a.shape[1] // 2
    assert torch.allclose(got, a.T @ a, rtol=1e-12, atol=1e-10)
    assert torch.equal(got[:h, h:], got[h:, :h].T)


def test_alongside_runs_beside_the_caller_and_passes_errors_on():
    import threading

    seen = []
    get = _backend.alongside(lambda v: (seen.append(threading.current_thread().name), v * 2)[1], 21)
    assert get() == 42 and seen[0].startswith("embstab-side")
    inline = _backend.alongside(lambda: threading.current_thread().name, side=False)
    assert inline() == threading.current_thread().name

    def fails():
        raise ValueError("from the side thread")

    get = _backend.alongside(fails)
    with pytest.raises(ValueError, match="from the side thread"):
        get()
    # from a thread other than the main one nothing is started: the call runs there
    box = []
    worker = threading.Thread(target=lambda: box.append(_backend.alongside(lambda: threading.current_thread().name)()))
    worker.start()
    worker.join()
    assert box == [worker.name]
    # the side thread shares the caller's products
    with shared_products():
        memo = _backend._MEMO.get()
        assert _backend.alongside(_backend._MEMO.get)() is memo
    assert _backend.alongside(_backend._MEMO.get)() is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bases_made_side_by_side_are_the_sequential_ones(seed, monkeypatch):
    _, x, y = pair(n=3000, d=25, seed=seed)
    with shared_products():
        su, sv, c = _backend.basis_overlap(np, x, y)
        assert su.method == sv.method == "cholesky"
        assert _backend.basis(np, y) is sv  # the side thread's basis is remembered
    monkeypatch.setattr(_backend, "alongside", lambda fn, *args, side=True: (lambda v: lambda: v)(fn(*args)))
    monkeypatch.setattr(_backend, "grams", lambda xp, arrays, dtype: [None] * len(arrays))  # each basis its own Gram
    ru, rv, rc = _backend.basis_overlap(np, x, y)
    assert np.allclose(su.w, ru.w, rtol=1e-12, atol=1e-14) and np.allclose(sv.w, rv.w, rtol=1e-12, atol=1e-14)
    assert np.allclose(c, rc, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_displacement_with_its_rotation_alongside_is_the_sequential_value(seed, monkeypatch):
    from embstab.measures.displacement import semantic_displacement

    _, x, y = pair(n=4000, d=60, seed=seed)
    value = semantic_displacement(x, y)
    monkeypatch.setattr(_backend, "_SIDE", None)
    import embstab.measures.displacement as displacement

    monkeypatch.setattr(displacement, "alongside", lambda fn, *args, side=True: _backend.alongside(fn, *args,
                                                                                                    side=False))
    assert semantic_displacement(x, y) == value
    per_word = semantic_displacement(x, y, average=False)
    assert abs(np.nanmean(per_word) - value) < 1e-12


def _measure_in_child(queue, x, y, e):
    queue.put((measures.eis(x, y, e, e), measures.semantic_displacement(x, y), measures.knn(x, y, n_queries=50)))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_measures_with_threads_of_its_own():
    # the parent's row and side threads are started first; a forked child inherits their pools
    # without their threads, and once waited forever for work handed to them
    import multiprocessing

    _, x, y = pair(n=3000, d=30, seed=4)
    e = np.random.default_rng(4).normal(size=(3000, 40))
    here = (measures.eis(x, y, e, e), measures.semantic_displacement(x, y), measures.knn(x, y, n_queries=50))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_measure_in_child, args=(queue, x, y, e))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung on the measures' thread pools")
    assert queue.get(timeout=5) == here


@pytest.mark.parametrize("call, message", [
    (lambda m, x, y, e: m.eis(x, y, e, e, rtol=2), "rtol must be a number in \\[0, 1\\)"),
    (lambda m, x, y, e: m.eigenspace_overlap(x, y, rtol=float("nan")), "rtol must be a number in \\[0, 1\\)"),
    (lambda m, x, y, e: m.eigenspace_overlap(x, y, rtol=-1), "rtol must be a number in \\[0, 1\\)"),
    (lambda m, x, y, e: m.weighted_eigenspace_overlap(x, y, exponent=float("nan")), "exponent must be a finite"),
    (lambda m, x, y, e: m.pip_loss(x, y, dtype=np.float32), "dtype must be 'float64' or 'float32' \\(a string\\)"),
    (lambda m, x, y, e: m.semantic_displacement(x, y, dtype="float16"), "dtype must be 'float64' or 'float32'"),
    (lambda m, x, y, e: m.knn(x, y, n_queries=2.5), "n_queries must be an integer >= 1 or None"),
    (lambda m, x, y, e: m.knn(x, y, n_queries="10"), "n_queries must be an integer >= 1 or None"),
    (lambda m, x, y, e: m.knn(x, y, seed="a"), "seed must be an integer"),
    (lambda m, x, y, e: m.knn(x, y, k=True), "k must be a positive integer"),
])
def test_bad_measure_options_are_named(call, message):
    # an rtol of 2 used to drop every direction and report identical spans (EIS 0)
    from embstab import measures
    from embstab.errors import ConfigError

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 5))
    y = x + 0.1 * rng.standard_normal(x.shape)
    with pytest.raises(ConfigError, match=message):
        call(measures, x, y, rng.standard_normal((200, 8)))

"""float32 paths are never wrong: within 1e-3 of float64 down to nearly identical pairs.

EIS is a difference of nearly equal terms; when float32 cannot resolve it, the pair is measured
again in float64 automatically. The pairs here go from clearly different to EIS ≈ 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embstab.measures import REGISTRY
from embstab.measures.eis import FLOAT32_TRUST, eis

EPSILONS = [1.0, 0.1, 0.03, 1e-2, 1e-3, 1e-4, 3e-5]


@pytest.fixture(scope="module")
def pairs():
    rng = np.random.default_rng(7)
    n, d, k = 6000, 40, 80
    x = rng.normal(size=(n, d)) @ np.diag(np.linspace(0.1, 3.0, d))
    ea = rng.normal(size=(n, k))
    eb = ea + 0.1 * rng.normal(size=(n, k))
    return x, ea, eb, [(eps, x + eps * rng.normal(size=(n, d))) for eps in EPSILONS]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_float32_eis_within_1e3_of_float64_down_to_1e10(pairs, backend):
    x, ea, eb, ys = pairs
    smallest = 1.0
    for eps, y in ys:
        ref = eis(x, y, ea, eb)
        arrays = [a.astype(np.float32) for a in (x, y, ea, eb)]
        if backend == "torch":
            arrays = [torch.from_numpy(a) for a in arrays]
        got = eis(*arrays, dtype="float32")
        # the reference is computed from the same float32-rounded inputs, so only arithmetic differs
        exact = eis(*[np.asarray(a, dtype=np.float64) for a in arrays])
        assert got == pytest.approx(exact, rel=1e-3), (eps, got, exact)
        assert exact == pytest.approx(ref, rel=1e-2 if eps > 1e-3 else 1.0)
        smallest = min(smallest, exact)
    assert smallest < 1e-9  # the sweep really reaches nearly identical pairs


def test_the_fallback_is_what_saves_the_nearly_identical_pairs(pairs, monkeypatch):
    # Without the fallback float32 loses the value entirely on the closest pair: the test above
    # would fail, so it checks the fallback and not luck.
    import importlib

    module = importlib.import_module("embstab.measures.eis")
    x, ea, eb, ys = pairs
    eps, y = ys[-1]
    arrays = [a.astype(np.float32) for a in (x, y, ea, eb)]
    exact = eis(*[a.astype(np.float64) for a in arrays])
    monkeypatch.setattr(module, "FLOAT32_TRUST", -np.inf)  # never measured again (0 would still catch num < 0)
    unguarded = eis(*arrays, dtype="float32")
    assert abs(unguarded - exact) > 0.5 * exact
    assert FLOAT32_TRUST > 0


@pytest.mark.parametrize("name", ["pip_loss", "eigenspace_overlap", "knn", "semantic_displacement",
                                  "linear_cka", "procrustes_distance"])
def test_other_measures_float32_close_to_float64(pairs, name):
    x, _, _, ys = pairs
    info = REGISTRY[name]
    for eps, y in ys[1:4]:
        a, b = x[:3000].astype(np.float32), y[:3000].astype(np.float32)
        ref = info.func(a.astype(np.float64), b.astype(np.float64))
        got = info.func(a, b, dtype="float32")
        assert got == pytest.approx(ref, rel=1e-3, abs=1e-6), (name, eps)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("route", ["gram", "qr"])
def test_float32_keeps_every_direction_float64_resolves(seed, backend, route, monkeypatch):
    """A spectrum spread wider than float32 resolves (cond(X) = 3000 at 20,000 rows: beyond
    sqrt(n·eps32) = 0.05 through the Gram matrix, which large inputs take, and n·eps32 = 2.4e-3
    through the QR) is not truncated: the rank is decided in float64, so float32 EIS and the
    eigenspace overlap stay within 1e-3 of float64 (at 100,000 rows they were off by 60x)."""
    import importlib

    from embstab.measures import _backend

    module = importlib.import_module("embstab.measures.eis")
    if route == "gram":  # as for inputs over QR_MAX_ENTRIES (n = 400,000 at d = 100)
        monkeypatch.setattr(_backend, "QR_MAX_ENTRIES", 0)
    rng = np.random.default_rng(seed)
    n, d = 20_000, 30
    x = (rng.normal(size=(n, d)) * np.geomspace(1.0, 1 / 3000, d)).astype(np.float32)
    y = (x + 0.05 * rng.normal(size=(n, d)) * x.std(axis=0)).astype(np.float32)
    e, f = rng.normal(size=(n, 40)).astype(np.float32), rng.normal(size=(n, 40)).astype(np.float32)
    s = np.linalg.svd(x.astype(np.float64), compute_uv=False)
    assert s[-1] / s[0] < n * np.finfo(np.float32).eps  # below float32's own floors: the case at stake
    arrays = [torch.from_numpy(a) for a in (x, y, e, f)] if backend == "torch" else [x, y, e, f]
    xp = _backend.namespace(arrays[0])
    assert _backend.span(xp, arrays[0], "float32").rank == d
    module.clear_anchor_cache()
    exact = eis(*[a.astype(np.float64) for a in (x, y, e, f)])
    assert eis(*arrays, dtype="float32") == pytest.approx(exact, rel=1e-3)
    overlap = REGISTRY["eigenspace_overlap"].func
    assert overlap(*arrays[:2], dtype="float32") == pytest.approx(overlap(x.astype(np.float64), y.astype(np.float64)),
                                                                   rel=1e-3)


FLOAT32_MEASURES = [name for name, info in REGISTRY.items()
                    if info.geometry == "euclidean" and not info.needs_anchors and "dtype" in info.parameters]


@pytest.mark.parametrize("name", FLOAT32_MEASURES)
def test_every_float32_distance_resolves_nearly_identical_pairs(pairs, name):
    # what a user reads is the distance (1 − overlap, 1 − CKA, ...): near 0 it is a difference of
    # nearly equal terms, which float32 alone rounds to 0; each measure must then use float64
    x, _, _, ys = pairs
    info = REGISTRY[name]
    seen = []
    for eps, y in ys:
        a, b = x[:3000].astype(np.float32), y[:3000].astype(np.float32)
        ref = info.to_distance(info.evaluate(a.astype(np.float64), b.astype(np.float64)))
        got = info.to_distance(info.evaluate(a, b, dtype="float32"))
        assert got == pytest.approx(ref, rel=1e-3, abs=1e-15), (name, eps, got, ref)
        seen.append(ref)
    assert name == "knn" or min(seen) < 1e-4 * max(seen)  # the sweep spans what float32 cannot resolve

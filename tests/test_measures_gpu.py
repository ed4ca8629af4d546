"""The measures on a CUDA device give numpy's numbers: the suite at a size where the GPU paths engage
(a float64 copy of each float32 input per suite, 1 GiB row blocks, the top-k through group maxima,
Grams from column halves), and ``embstab.compare`` with its nulls. Skipped without a CUDA device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import embstab
from embstab import measures
from embstab.measures import _backend

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

NAMES = ("eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap")


@pytest.mark.parametrize("seed", [0, 1])
def test_suite_on_cuda_equals_numpy_where_the_gpu_paths_engage(seed):
    rng = np.random.default_rng(seed)
    n, d = 20_000, _backend.GRAM_SPLIT_MIN + 16
    scale = 1 / np.sqrt(np.arange(1, d + 1))
    x = (rng.normal(size=(n, d)) * scale).astype(np.float32)
    y = (x + 0.2 * rng.normal(size=(n, d)) * scale).astype(np.float32)
    e = (rng.normal(size=(n, d)) * scale).astype(np.float32)
    f = (e + 0.1 * rng.normal(size=(n, d)) * scale).astype(np.float32)
    host = (x, y, e, f)
    cuda = tuple(torch.from_numpy(a).cuda() for a in host)
    measures.clear_anchor_cache()
    ref = {name: measures.get_measure(name).evaluate(x, y, anchors=(e, f)) for name in NAMES}
    measures.clear_anchor_cache()
    with measures.shared_products():
        got = {name: measures.get_measure(name).evaluate(*cuda[:2], anchors=cuda[2:]) for name in NAMES}
        copies = [key for key in _backend._MEMO.get() if key[0] == "working"]
    assert len(copies) == 4  # each float32 input cast once for the whole suite
    for name in NAMES:
        assert got[name] == pytest.approx(ref[name], rel=1e-9, abs=1e-12), name


def test_compare_on_cuda_gives_the_numpy_values_and_nulls():
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(3000)]
    x = rng.normal(size=(3000, 24)) * np.linspace(3, 0.5, 24)
    a = embstab.Embedding(words, x, name="a")
    b = embstab.Embedding(words, x + 0.3 * rng.normal(size=x.shape), name="b")
    ref = embstab.compare(a, b, top_n=None)
    out = embstab.compare(a, b, top_n=None, device="cuda")
    np.testing.assert_allclose(out["value"], ref["value"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(out["null"], ref["null"], rtol=1e-9, atol=1e-12)
    assert out["signal"].tolist() == ref["signal"].tolist()

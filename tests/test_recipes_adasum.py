"""Adasum: identities against float64 references, reduction rules, the simulator, and a 4-process gloo run."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from embstab.errors import UnknownNameError
from embstab.recipes import RECIPES
from embstab.recipes.adasum import (AdasumError, least_squares_grad_fn, adasum_pair, adasum_reduce, least_squares_problem,
                                    simulate_data_parallel)


def test_pair_matches_float64_formula():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1000), rng.standard_normal(1000)
    ref = (1 - a @ b / (2 * a @ a)) * a + (1 - a @ b / (2 * b @ b)) * b
    got = adasum_pair(torch.from_numpy(a).float(), torch.from_numpy(b).float())
    assert got.dtype == torch.float32
    assert np.allclose(got.double().numpy(), ref, atol=1e-5)
    big = adasum_pair(torch.from_numpy(rng.standard_normal(100_000)), torch.from_numpy(rng.standard_normal(100_000)))
    assert big.shape == (100_000,)


def test_signal_noise_interpolation():
    rng = np.random.default_rng(1)
    mu = rng.standard_normal(1000)
    for ratio, lo, hi in ((10, 0.95, 1.1), (0.1, 6.0, 8.5)):
        xi = rng.standard_normal((8, 1000)) * np.linalg.norm(mu) / ratio / np.sqrt(1000)
        gs = [torch.from_numpy(mu + x) for x in xi]
        rel = float(adasum_reduce(gs).norm() / torch.stack(gs).mean(0).norm())
        assert lo < rel < hi


def test_reduce_granularity_and_padding():
    rng = np.random.default_rng(2)
    ws = [[torch.from_numpy(rng.standard_normal((3, 4))), torch.from_numpy(rng.standard_normal(5))] for _ in range(4)]
    per_tensor = adasum_reduce(ws)
    ref0 = adasum_pair(adasum_pair(ws[0][0], ws[1][0]), adasum_pair(ws[2][0], ws[3][0]))
    assert torch.allclose(per_tensor[0], ref0)
    flat = adasum_reduce(ws, per="flat")
    assert [t.shape for t in flat] == [(3, 4), (5,)]
    row = adasum_reduce(ws, per="row")
    r1 = adasum_pair(adasum_pair(ws[0][0][1], ws[1][0][1]), adasum_pair(ws[2][0][1], ws[3][0][1]))
    assert torch.allclose(row[0][1], r1)
    three = [w[1] for w in ws[:3]]
    with pytest.raises(AdasumError, match="power-of-two"):
        adasum_reduce(three)
    assert torch.allclose(adasum_reduce(three, pad="identity"),
                          adasum_pair(adasum_pair(three[0], three[1]), three[2]))
    with pytest.raises(UnknownNameError):
        adasum_reduce(three, per="layer")


def test_simulator_reductions():
    X, y, _ = least_squares_problem(d=10, n=256, seed=0)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    w0 = [torch.zeros(10, dtype=torch.float64)]
    one = simulate_data_parallel(w0, least_squares_grad_fn(Xt, yt, 1, 16, 0), 1, 0.1, 5, reduce="adasum")
    avg = simulate_data_parallel(w0, least_squares_grad_fn(Xt, yt, 1, 16, 0), 1, 0.1, 5, reduce="average")
    assert torch.allclose(one[0], avg[0])  # one worker: every rule is the identity
    q = simulate_data_parallel(w0, least_squares_grad_fn(Xt, yt, 4, 16, 0), 4, 0.1, 5, comm_format="bf16", generator=3)
    full = simulate_data_parallel(w0, least_squares_grad_fn(Xt, yt, 4, 16, 0), 4, 0.1, 5)
    assert 0 < float((q[0] - full[0]).norm()) < 0.05 * float(full[0].norm())


@pytest.mark.slow
def test_registered_check_passes():
    res = RECIPES["adasum"].check(seed=0)
    assert res.passed, res.claims


@pytest.mark.slow  # ~10 s alone; it failed once inside the busy full suite (cause not yet pinned down)
def test_torchrun_gloo_matches_simulator(tmp_path):
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not on PATH")
    out = tmp_path / "w.npy"
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4", "--standalone",
           "-m", "embstab.recipes.adasum_demo", "--out", str(out), "--steps", "20", "--lr", "0.1"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    got = np.load(out)
    X, y, _ = least_squares_problem(d=20, n=1024, seed=0)
    ref = simulate_data_parallel([torch.zeros(20, dtype=torch.float64)],
                                 least_squares_grad_fn(torch.from_numpy(X), torch.from_numpy(y), 4, 16, 0), 4, 0.1, 20)[0]
    assert np.abs(got - ref.numpy()).max() < 1e-6
    assert np.linalg.norm(got) > 0

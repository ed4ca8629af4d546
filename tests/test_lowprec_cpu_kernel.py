"""The compiled CPU rounding kernel: bit-identical nearest rounding, exact stochastic rounding on the
CUDA kernel's counter-based stream, and the switches around it."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from embstab.lowprec import BF16, FP8_E4M3FN, FP8_E5M2, FP16, FloatFormat, native, quantize

if not native.available():
    # CI builds the kernel with the package; a missing kernel there is a failure, not a skip
    if os.environ.get("CI"):
        pytest.fail(f"the compiled CPU kernel is unavailable in CI: {native.why_unavailable()}", pytrace=False)
    pytest.skip(f"compiled CPU kernel unavailable: {native.why_unavailable()}", allow_module_level=True)

FORMATS = [BF16, FP16, FP8_E4M3FN, FP8_E5M2, FP8_E4M3FN.replace(overflow="saturate"), FloatFormat(4, 3, "finite"),
           FloatFormat(4, 3, "fnuz"), FloatFormat(5, 2, "fnuz"), FloatFormat(3, 2, "finite", subnormals=False),
           FloatFormat(2, 1), FloatFormat(2, 0, "finite"), FloatFormat(8, 0), FloatFormat(8, 7, subnormals=False),
           FloatFormat(8, 1, subnormals=False), FloatFormat(5, 23), FloatFormat(6, 9, overflow="nan"),
           FloatFormat(5, 10, overflow="saturate"), FloatFormat(7, 7, bias=126)]  # grid step 2^-133: finer than 2^-127


def _wide(n: int = 1 << 18, seed: int = 0) -> torch.Tensor:
    """Magnitudes from fp32's smallest subnormal to beyond every format's max, plus specials."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g) * torch.logspace(-46, 39, n)
    x[:7] = torch.tensor([math.inf, -math.inf, math.nan, -0.0, 0.0, 1e-45, -1e-45])
    return x


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(((a.view(torch.int32) == b.view(torch.int32)) | (a.isnan() & b.isnan())).all())


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_nearest_is_bit_identical_to_the_torch_path(fmt):
    x = _wide()
    with native.disabled():
        ref = quantize(x, fmt)
    assert _same_bits(quantize(x, fmt), ref)
    assert _same_bits(native.quantize_float32(x, fmt, "nearest"), ref)


def _mix64(seed: int, index: int) -> int:
    m = 2**64 - 1
    z = (seed + (index + 1) * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def _sr_small_reference(v: float, fmt: FloatFormat, rnd: int) -> float:
    """The subnormal-range rule in integers: with the dropped low bits ``rem`` of the fp32
    significand (``shift`` of them), round up iff the top ``shift`` bits of ``rnd`` plus ``rem``
    carry, i.e. with probability rem / 2**shift."""
    a = abs(v)
    if a == 0.0:
        return v
    qexp = fmt.emin - (fmt.man_bits if fmt.subnormals else 0)
    ulp_exp = max(math.frexp(a)[1] - 1, -126) - 23  # fp32's grid at a
    shift = qexp - ulp_exp
    s = int(a / 2.0**ulp_exp)  # exact integer significand
    if shift > 62:
        s >>= shift - 62
        shift = 62
    q = s >> shift
    rem = s - (q << shift)
    q += int(rem + (rnd >> (64 - shift)) >= 1 << shift)
    return math.copysign(q * 2.0**qexp, v)


@pytest.mark.parametrize("fmt", [BF16, FP8_E4M3FN.replace(overflow="saturate"), FloatFormat(4, 3, "finite"),
                                 FloatFormat(3, 2, "finite", subnormals=False)], ids=str)
def test_stochastic_rounding_follows_the_counter_stream(fmt):
    """Element i rounds up exactly when the top bits of splitmix64(seed, i) fall below its fraction,
    the rule the CUDA kernel applies: a seed gives the same result on CPU and GPU."""
    rng = np.random.default_rng(1)
    # normal range, the subnormal grid, and values far below it (more than 31 bits dropped)
    vals = np.concatenate([rng.standard_normal(300) * 0.3, rng.standard_normal(100) * 2.0 ** (fmt.emin - 2),
                           rng.standard_normal(60) * 2.0 ** (fmt.emin - 45), rng.standard_normal(20) * 1e-44])
    x = torch.tensor(vals, dtype=torch.float32)
    seed = 123456789
    got = native.quantize_float32(x, fmt, "stochastic", seed)
    d = 23 - fmt.man_bits
    for i, v in enumerate(x.tolist()):
        rnd = _mix64(seed, i)
        if abs(v) >= 2.0 ** fmt.emin:
            # normal range: d random bits added below the kept mantissa bits
            bits = int(np.float32(v).view(np.int32)) & 0x7FFFFFFF
            t = (bits + (rnd >> (64 - d))) & ~((1 << d) - 1)
            want = math.copysign(float(np.int32(t).view(np.float32)), v)
            want = math.copysign(min(abs(want), fmt.max), v) if fmt.overflow == "saturate" else want
        else:
            want = _sr_small_reference(v, fmt, rnd)
        assert got[i].item() == want, (i, v, got[i].item(), want)


def _grid_step(t: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    """Spacing of ``fmt``'s grid just above |t| (t on the grid), in float64."""
    e = torch.clamp(torch.floor(torch.log2(t.abs())), min=fmt.emin)
    below = t.abs() < 2.0**fmt.emin
    step = torch.exp2(e - fmt.man_bits)
    return torch.where(below & torch.tensor(not fmt.subnormals), torch.full_like(t, 2.0**fmt.emin), step)


@pytest.mark.parametrize("fmt", FORMATS[:8], ids=str)
def test_stochastic_results_are_grid_neighbours_reproducible_and_thread_independent(fmt):
    x = _wide(1 << 17, seed=3)
    x = x[x.abs() < fmt.max / 2]  # away from overflow, where policies decide instead
    a = quantize(x, fmt, "stochastic", generator=9)
    down = quantize(x, fmt, "toward_zero").double()
    assert bool(((a.double() == down) | (a.double() == down + torch.copysign(_grid_step(down, fmt), x.double()))
                 | a.isnan()).all())
    assert _same_bits(quantize(x, fmt, "stochastic", generator=9), a)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert _same_bits(quantize(x, fmt, "stochastic", generator=9), a)
    finally:
        torch.set_num_threads(threads)
    mirror = quantize(-x, fmt, "stochastic", generator=9)
    assert bool(((mirror == -a) | (mirror.isnan() & a.isnan())).all())  # SR(-x) = -SR(x) (fnuz: +0 only)


@pytest.mark.parametrize("value,fmt,step", [(1.0 + 2**-9, BF16, 2**-7), (0.3 * 2**-9, FP8_E4M3FN, 2**-9),
                                            (2**-8 + 0.7 * 2**-11, FP8_E5M2.replace(overflow="saturate"), 2**-16)],
                         ids=["bf16-normal", "e4m3-subnormal", "e5m2-normal"])
def test_stochastic_rounding_is_unbiased(value, fmt, step):
    n = 400_000
    x = torch.full((n,), value)
    out = quantize(x, fmt, "stochastic", generator=11)
    low = quantize(x[:1], fmt, "toward_zero").item()
    p = (value - low) / (step if low < 2.0 ** fmt.emin else math.ldexp(1.0, math.frexp(low)[1] - 1 - fmt.man_bits))
    up = (out > low).double().mean().item()
    assert abs(up - p) < 5 * math.sqrt(p * (1 - p) / n), (up, p)


def test_disabled_switches_to_torch_and_the_stream_changes():
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(0))
    a = quantize(x, FP8_E4M3FN, "stochastic", generator=4)
    with native.disabled():
        assert not native.available()
        b = quantize(x, FP8_E4M3FN, "stochastic", generator=4)
        assert _same_bits(quantize(x, FP8_E4M3FN, "stochastic", generator=4), b)
    assert native.available()
    assert not _same_bits(a, b)  # two exact SR streams, both reproducible under the seed


def test_kernel_handles_any_layout_and_size():
    x = torch.randn(64, 33).t()  # not contiguous
    y = quantize(x, FP8_E4M3FN)
    with native.disabled():
        assert _same_bits(y.contiguous(), quantize(x.contiguous(), FP8_E4M3FN))
    assert quantize(torch.empty(0), BF16).shape == (0,)
    big = torch.randn(300_001)  # split between threads, ragged tail
    with native.disabled():
        ref = quantize(big, FloatFormat(4, 3, "finite"))
    assert _same_bits(quantize(big, FloatFormat(4, 3, "finite")), ref)


def test_kernel_refuses_what_it_does_not_handle():
    with pytest.raises(ValueError, match="float32 CPU tensors"):
        native.quantize_float32(torch.randn(4, dtype=torch.float64), BF16, "nearest")
    with pytest.raises(ValueError, match="nearest or stochastically"):
        native.quantize_float32(torch.randn(4), BF16, "toward_zero")
    with pytest.raises(ValueError, match="within float32's range"):
        native.quantize_float32(torch.randn(4), FloatFormat(11, 10), "nearest")
    assert not native.applies(torch.randn(4, dtype=torch.float64), BF16, "nearest")
    assert native.applies(torch.randn(4), BF16, "stochastic")


def test_environment_variable_disables_the_kernel():
    code = ("from embstab.lowprec import native, quantize; import torch; "
            "print(native.available(), native.why_unavailable()); quantize(torch.randn(8), 'fp8_e4m3fn')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "EMBSTAB_NATIVE": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False disabled by EMBSTAB_NATIVE=0"


def test_a_forked_child_rounds_with_threads_of_its_own():
    """A child forked after the parent used the kernel's thread pool must not wait on the parent's
    threads. Run in a fresh interpreter with the module's own pool (``EMBSTAB_NATIVE_THREADS=pool``):
    once a parent has run an OpenMP region, torch's own parallel ops hang in a forked child
    (GNU OpenMP does not survive fork), which is not what is tested here."""
    code = textwrap.dedent("""
        import multiprocessing as mp, torch
        from embstab.lowprec import FP8_E4M3FN, quantize
        x = torch.randn(300_000)
        ref = quantize(x, FP8_E4M3FN)  # the parent's pool now exists
        with mp.get_context("fork").Pool(1) as pool:
            got = pool.apply_async(quantize, (x, FP8_E4M3FN)).get(timeout=60)
        print(torch.equal(got.view(torch.int32), ref.view(torch.int32)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         env={**os.environ, "EMBSTAB_NATIVE_THREADS": "pool"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True"


def test_a_forked_single_thread_child_rounds_after_the_parent_used_openmp():
    """The DataLoader pattern: the parent rounds on torch's OpenMP team, a forked worker sets one
    thread (as DataLoader workers do) and rounds without touching OpenMP, so it does not hang."""
    code = textwrap.dedent("""
        import multiprocessing as mp, torch
        from embstab.lowprec import FP8_E4M3FN, native, quantize
        torch.set_num_threads(2)
        x = torch.randn(300_000)
        ref = native.quantize_float32(x, FP8_E4M3FN, "stochastic", 3)  # two parts on the OpenMP team
        def child(x):
            torch.set_num_threads(1)
            return native.quantize_float32(x, FP8_E4M3FN, "stochastic", 3)
        with mp.get_context("fork").Pool(1) as pool:
            got = pool.apply_async(child, (x,)).get(timeout=60)
        print(native._gomp_parallel() is not None, torch.equal(got.view(torch.int32), ref.view(torch.int32)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "True True"


def test_openmp_team_and_thread_pool_give_the_same_bits(tmp_path):
    """Who rounds which block never changes a result: torch's OpenMP team, the module's pool and
    one thread agree bit for bit (nearest and stochastic)."""
    code = textwrap.dedent("""
        import os, torch
        from embstab.lowprec import FloatFormat, native
        torch.set_num_threads(2)
        x = torch.randn(1_000_003, generator=torch.Generator().manual_seed(0))
        fmt = FloatFormat(4, 3, "finite")
        out = [native.quantize_float32(x, fmt, m, 11).view(torch.int32) for m in ("nearest", "stochastic")]
        print(native._gomp_parallel() is not None if os.environ.get("EMBSTAB_NATIVE_THREADS") != "pool" else "pool")
        torch.save(out, os.environ["OUT"])
    """)
    results = {}
    for mode, env in (("openmp", {}), ("pool", {"EMBSTAB_NATIVE_THREADS": "pool"})):
        path = str(tmp_path / f"{mode}.pt")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                             env={**os.environ, **env, "OUT": path})
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == ("True" if mode == "openmp" else "pool")
        results[mode] = torch.load(path)
    x = torch.randn(1_000_003, generator=torch.Generator().manual_seed(0))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = [native.quantize_float32(x, FloatFormat(4, 3, "finite"), m, 11).view(torch.int32)
               for m in ("nearest", "stochastic")]
    finally:
        torch.set_num_threads(threads)
    for a, b, c in zip(results["openmp"], results["pool"], one):
        assert torch.equal(a, b) and torch.equal(a, c)

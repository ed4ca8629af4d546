"""Throughput of embstab.lowprec.quantize against torch's native casts (and QPyTorch if installed).

Run: ``python benchmarks/bench_quantize.py [--n 4000000] [--threads 2] [--repeat 5]``.

Every row rounds the same float32 tensor of N standard-normal values and reports millions of
elements per second and the ratio to torch's native ``x.to(torch.bfloat16)`` cast timed in the
same run. Before timing, each embstab variant is checked bit for bit against its reference (native
casts for nearest rounding, the eager path for the compiled one), so a fast wrong kernel cannot
appear in the table. QPyTorch (``pip install qtorch``; JIT-compiles a C++ extension on import)
is a benchmark-only extra and its rows are skipped when it is missing.

The ``x.clone()`` row is the memory floor of any float32-to-float32 operation (read 4 bytes and
write 4 bytes per element): at 4M elements a kernel near that row is bound by memory bandwidth,
not arithmetic. The "like-for-like" column divides by ``x.to(torch.bfloat16).float()`` (a float32 result, as
``quantize`` returns). Targets (2 CPU cores): the default call >= 0.8x like-for-like for nearest
rounding and >= 0.3x for stochastic, first call in a fresh process <= 2 s (printed at the end).
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import statistics
import subprocess
import sys
import time

from typing import Any

import torch

from embstab.lowprec import FloatFormat, native, quantize


#: Set by ``--cache cold``: a buffer larger than any L3 cache, rewritten before each timed call.
_EVICT: torch.Tensor | None = None


def timeit_interleaved(fns: list, repeat: int) -> list[float]:
    """Median seconds per call of each function, timed round-robin (one call of each per round).

    On a machine shared with other jobs the load drifts over a run; interleaving exposes every
    implementation to the same drift, so the ratios stay meaningful even when absolute times move.
    The median, not the best, so cache luck does not decide. With ``--cache cold`` the caches are
    flushed before every call (outside the timing); with ``warm`` (default) whatever the previous
    call left in cache stays there, which favours operations with small outputs.
    """
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            if _EVICT is not None:
                _EVICT.add_(1.0)
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    ap.add_argument("--cache", choices=("warm", "cold"), default="warm",
                    help="cold: flush the CPU caches (write 512 MB) before every timed call")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    global _EVICT
    if args.cache == "cold":
        _EVICT = torch.zeros(128 * 2**20)
    x = torch.randn(args.n, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)

    bf16_like = FloatFormat(8, 7, name="e8m7 (bf16-like)")
    fp8_like = FloatFormat(4, 3, "finite", name="e4m3 finite (fp8-like)")
    rows: list[tuple[str, str, Any]] = []

    # correctness gates
    assert torch.equal(quantize(x, bf16_like), x.to(torch.bfloat16).float())
    assert torch.equal(quantize(x, FloatFormat(4, 3, "fn", "saturate")), x.to(torch.float8_e4m3fn).float())

    rows.append(("torch native", "x.to(bfloat16)", lambda: x.to(torch.bfloat16)))
    rows.append(("torch native", "x.to(bfloat16).float()", lambda: x.to(torch.bfloat16).float()))
    rows.append(("torch native", "x.to(float8_e4m3fn).float()",
                 lambda: x.to(torch.float8_e4m3fn).float()))
    # any float32 -> new float32 tensor reads and writes 2 x 4 bytes per element: a copy is the
    # memory floor of such an operation
    rows.append(("memory floor", "x.clone()", lambda: x.clone()))

    e4m3_sat = FloatFormat(4, 3, "fn", "saturate", name="e4m3fn saturate (torch's fp8)")
    for mode in ("nearest", "stochastic"):
        rows.append(("embstab default", f"{e4m3_sat} {mode}",
                     lambda mode=mode: quantize(x, e4m3_sat, mode, generator=gen)))
    # default: what a user's call runs (the compiled C kernel where it applies); torch eager: the
    # same call with the kernel disabled; compiled: torch.compile (opt-in, same stream as eager)
    variants = [("default", False, True), ("torch eager", False, False)]
    variants += [] if args.no_compile else [("compiled", True, False)]
    for fmt in (bf16_like, fp8_like):
        for mode in ("nearest", "stochastic"):
            with native.disabled():
                eager = quantize(x, fmt, mode, generator=7)
            for label, compiled, kernel in variants:
                with contextlib.nullcontext() if kernel else native.disabled():
                    got = quantize(x, fmt, mode, generator=7, compiled=compiled)
                if mode == "nearest" or not kernel:  # the kernel's SR stream is its own
                    assert torch.equal(got, eager), f"{label} != torch eager for {fmt} {mode}"
                else:  # every SR result is its input's lower grid neighbour or the next one up:
                    # on the grid, and nothing of the grid strictly between them
                    down = quantize(x, fmt, "toward_zero").double()
                    mid = quantize((down + got.double()) / 2, fmt, "toward_zero")
                    ok = (quantize(got, fmt) == got) & ((got.double() == down) | (mid == down))
                    assert bool(ok.all()), f"{label} SR off the grid for {fmt}"

                def call(fmt=fmt, mode=mode, compiled=compiled, kernel=kernel):
                    with contextlib.nullcontext() if kernel else native.disabled():
                        return quantize(x, fmt, mode, generator=gen, compiled=compiled)

                rows.append((f"embstab {label}", f"{fmt} {mode}", call))

    try:
        from qtorch.quant import float_quantize as qt_float  # noqa: PLC0415
    except Exception as exc:  # ImportError, or the JIT build failing
        print(f"# QPyTorch not available ({type(exc).__name__}); its rows are skipped")
    else:
        for (e, m), name in (((8, 7), "e8m7"), ((4, 3), "e4m3")):
            for mode in ("nearest", "stochastic"):
                rows.append(("qtorch 0.3.0", f"{name} {mode}",
                             lambda e=e, m=m, mode=mode: qt_float(x, e, m, mode)))

    times = timeit_interleaved([r[2] for r in rows], args.repeat)
    rows = [(impl, op, t) for (impl, op, _), t in zip(rows, times, strict=True)]
    base = rows[1][2]  # like-for-like: x.to(bfloat16).float()
    qt_sr = {r[1].split()[0]: r[2] for r in rows if r[0].startswith("qtorch") and r[1].endswith("stochastic")}
    print(f"# {args.n:,} float32 elements, {args.threads} threads, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}, median of {args.repeat} interleaved rounds, "
          f"{args.cache} cache")
    print(f"{'implementation':<18} {'operation':<44} {'ms':>8} {'Melem/s':>9} {'like-for-like':>13} {'vs qtorch SR':>13}")
    for impl, op, t in rows:
        vs_qt = ""
        if op.endswith("stochastic") and not impl.startswith("qtorch"):
            key = "e8m7" if op.startswith("e8m7") else "e4m3"
            if key in qt_sr:
                vs_qt = f"{qt_sr[key] / t:.2f}x"
        print(f"{impl:<18} {op:<44} {t * 1e3:8.2f} {args.n / t / 1e6:9.1f} {base / t:12.2f}x {vs_qt:>13}")
    first = subprocess.run([sys.executable, "-c", _FIRST_CALL], capture_output=True, text=True, check=True)
    print(f"# first call in a fresh process (after import): {first.stdout.strip()}")
    print(f"# compiled CPU kernel: {'loaded' if native.available() else native.why_unavailable()}")


_FIRST_CALL = """
import time, torch
from embstab.lowprec import quantize, FloatFormat
x = torch.randn(4_000_000)
t0 = time.perf_counter(); quantize(x, "bf16"); t1 = time.perf_counter()
quantize(x, FloatFormat(4, 3, "finite"), "stochastic", generator=0); t2 = time.perf_counter()
print(f"bf16 nearest {t1 - t0:.3f} s, e4m3 finite stochastic {t2 - t1:.3f} s")
"""


if __name__ == "__main__":
    main()

"""Throughput of embstab.lowprec.quantize against torch's native casts (and QPyTorch if installed).

Run: ``python benchmarks/bench_quantize.py [--n 4000000] [--threads 2] [--repeat 5]``.

Every row rounds the same float32 tensor of N standard-normal values and reports millions of
elements per second and the ratio to torch's native ``x.to(torch.bfloat16)`` cast timed in the
same run. Before timing, each embstab variant is checked bit for bit against its reference (native
casts for nearest rounding, the eager path for the compiled one), so a fast wrong kernel cannot
appear in the table. QPyTorch (``pip install qtorch``; JIT-compiles a C++ extension on import)
is a benchmark-only extra and its rows are skipped when it is missing.

The "like-for-like" column divides by ``x.to(torch.bfloat16).float()`` (a float32 result, as
``quantize`` returns). Targets (2 CPU cores): the default call >= 0.8x like-for-like for nearest
rounding and >= 0.3x for stochastic, first call in a fresh process <= 2 s (printed at the end).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time

import torch

from embstab.lowprec import FloatFormat, quantize


#: Set by ``--cache cold``: a buffer larger than any L3 cache, rewritten before each timed call.
_EVICT: torch.Tensor | None = None


def timeit(fn, repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls after one warm-up call.

    The median, not the best: on a shared machine the 16 MB input sometimes stays in a large L3
    cache and sometimes does not, and best-of times then reflect cache luck more than the code.
    With ``--cache cold`` the caches are flushed before every call (outside the timing), so every
    implementation reads its input from memory; with ``warm`` (default) whatever the previous
    call left in cache stays there, which favours operations with small outputs (a bf16 cast
    writes half the bytes of a float32 result).
    """
    fn()
    times = []
    for _ in range(repeat):
        if _EVICT is not None:
            _EVICT.add_(1.0)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
    rows: list[tuple[str, str, float]] = []

    # correctness gates
    assert torch.equal(quantize(x, bf16_like), x.to(torch.bfloat16).float())
    assert torch.equal(quantize(x, FloatFormat(4, 3, "fn", "saturate")), x.to(torch.float8_e4m3fn).float())

    rows.append(("torch native", "x.to(bfloat16)", timeit(lambda: x.to(torch.bfloat16), args.repeat)))
    rows.append(("torch native", "x.to(bfloat16).float()", timeit(lambda: x.to(torch.bfloat16).float(), args.repeat)))
    rows.append(("torch native", "x.to(float8_e4m3fn).float()",
                 timeit(lambda: x.to(torch.float8_e4m3fn).float(), args.repeat)))

    e4m3_sat = FloatFormat(4, 3, "fn", "saturate", name="e4m3fn saturate (torch's fp8)")
    for mode in ("nearest", "stochastic"):
        rows.append(("embstab default", f"{e4m3_sat} {mode}",
                     timeit(lambda: quantize(x, e4m3_sat, mode, generator=gen), args.repeat)))
    variants = [("eager", False)] + ([] if args.no_compile else [("compiled", True)])
    for fmt in (bf16_like, fp8_like):
        for mode in ("nearest", "stochastic"):
            for label, compiled in variants:
                if compiled:  # compiled must equal eager bit for bit (same seed)
                    a = quantize(x, fmt, mode, generator=7, compiled=True)
                    b = quantize(x, fmt, mode, generator=7)
                    assert torch.equal(a, b), f"compiled != eager for {fmt} {mode}"
                t = timeit(lambda: quantize(x, fmt, mode, generator=gen, compiled=compiled), args.repeat)
                rows.append((f"embstab {label}", f"{fmt} {mode}", t))

    try:
        from qtorch.quant import float_quantize as qt_float  # noqa: PLC0415
    except Exception as exc:  # ImportError, or the JIT build failing
        print(f"# QPyTorch not available ({type(exc).__name__}); its rows are skipped")
    else:
        for (e, m), name in (((8, 7), "e8m7"), ((4, 3), "e4m3")):
            for mode in ("nearest", "stochastic"):
                rows.append(("qtorch 0.3.0", f"{name} {mode}",
                             timeit(lambda: qt_float(x, e, m, mode), args.repeat)))

    base = rows[1][2]  # like-for-like: x.to(bfloat16).float()
    qt_sr = {r[1].split()[0]: r[2] for r in rows if r[0].startswith("qtorch") and r[1].endswith("stochastic")}
    print(f"# {args.n:,} float32 elements, {args.threads} threads, torch {torch.__version__}, "
          f"{platform.processor() or platform.machine()}, median of {args.repeat}, {args.cache} cache")
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

"""Benchmark: embstab on a CUDA GPU against numpy on the CPU, and the rounding kernels against a copy.

Three parts, each printed as a table and timed in the same run as its baseline:

1. **The card's two ceilings**, measured here: a device-to-device copy (bytes read + written per
   second) and float64 / float32 matrix products (FLOP/s; TF32 off, as the measures run).
2. **Every measure at n = 400,000 words, d = 800, 800-d anchors** (float32 storage, the suite run
   cold as ``embstab.compare`` runs it), in float64 and in float32 working precision, against the
   same suite in numpy on this machine's CPU cores. Each CUDA value is checked against numpy's
   float64 value (float64: 1e-6 relative; float32: its documented trust, 1e-3) before any time is
   printed, and the suite's time is set against its flop floor (``bench_measures.floor_flops`` at
   the product rate measured in part 1).
3. **Rounding bandwidth**: ``embstab.lowprec.quantize`` on a 1 GiB float32 CUDA tensor (nearest and
   stochastic bf16, fp8 e4m3, MXFP4) against ``x.clone()`` of the same tensor, the memory floor of
   any float32-to-float32 operation (read 4 bytes, write 4 bytes per element). Target ≥ 0.8×.

4. **The products the suite is made of, alone**: XᵀE in one product, in 1 GiB blocks and in the
   host's 64 MB blocks each cast where used; a Gram as one product, from its column halves (what
   the measures do on a GPU) and through cuBLAS syrk; the k-NN scores; the float32 → float64 cast.

``--profile`` adds the CUDA kernels and CPU operators of one cold suite per precision, by total
time (to ``$OUT`` when set); ``--skip-measures`` runs parts 1 and 3 only.

Usage: ``python benchmarks/bench_gpu.py [--n 400000] [--d 800] [--repeat 5] [--profile]``;
``--device cpu`` runs parts 2 and 3 through torch on the CPU (to try the script without a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_measures import MEASURES, floor_flops  # noqa: E402

from embstab import measures  # noqa: E402
from embstab.measures import _backend  # noqa: E402
from embstab.lowprec import quantize  # noqa: E402

#: float32 working precision: the measures' documented trust (a difference below 1e-3 of its terms
#: is measured again in float64), so a float32 value within 1e-3 of float64 is correct.
TOLERANCE = {"float64": 1e-6, "float32": 1e-3}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_time(fn, device: torch.device, repeat: int = 10, inner: int = 1) -> float:
    """Median seconds per call of ``fn()`` (CUDA events on a GPU, the host clock after a sync elsewhere).

    ``inner`` calls are timed back to back: the device then runs one call while the host launches
    the next, so a call's host-side set-up is hidden when it is shorter than its device work.
    """
    fn()
    sync(device)
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 1e3 / inner)
        else:
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


# ----------------------------------------------------------------------------- part 1: ceilings
def ceilings(device: torch.device) -> dict[str, float]:
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(1 << 28 if device.type == "cuda" else 1 << 24, generator=g, device=device)
    copy = 2 * x.nbytes / device_time(x.clone, device)
    del x
    size = 8192 if device.type == "cuda" else 1024
    rates = {"copy_bytes_per_s": copy}
    for dtype in (torch.float64, torch.float32):
        a = torch.randn(size, size, generator=g, device=device, dtype=dtype)
        b = torch.randn(size, size, generator=g, device=device, dtype=dtype)
        rates[f"{dtype}".removeprefix("torch.")] = 2 * size**3 / device_time(lambda: a @ b, device, 5)
    return rates


# ----------------------------------------------------------------------------- part 2: measures
def embedding_like(g: torch.Generator, n: int, d: int, device: torch.device) -> torch.Tensor:
    """Gaussian rows with a decaying spectrum, like trained word embeddings (float32)."""
    scale = torch.arange(1, d + 1, device=device, dtype=torch.float32).rsqrt()
    return torch.randn(n, d, generator=g, device=device) * scale


def perturbed(g: torch.Generator, x: torch.Tensor, noise: float) -> torch.Tensor:
    return x + noise * x.std() * torch.randn(x.shape, generator=g, device=x.device)


def suite(arrays, dtype: str) -> tuple[dict[str, float], dict[str, float]]:
    """One cold suite: per-measure seconds and values."""
    measures.clear_anchor_cache()
    x, y, e, f = arrays
    times, values = {}, {}
    with measures.shared_products():
        for name in MEASURES:
            t0 = time.perf_counter()
            values[name] = measures.get_measure(name).evaluate(x, y, anchors=(e, f), dtype=dtype)  # a float: synced
            times[name] = time.perf_counter() - t0
    return times, values


@contextlib.contextmanager
def host_blocking():
    """The measures' GPU paths switched off: host-sized row blocks, each cast where it is used."""
    knn_module = importlib.import_module("embstab.measures.knn")
    saved = _backend.DEVICE_BLOCK_BYTES, _backend.DEVICE_COPY_SHARE, knn_module.DEVICE_BLOCK_BYTES
    _backend.DEVICE_BLOCK_BYTES, _backend.DEVICE_COPY_SHARE = _backend.BLOCK_BYTES, 0.0
    knn_module.DEVICE_BLOCK_BYTES = knn_module.BLOCK_BYTES
    try:
        yield
    finally:
        _backend.DEVICE_BLOCK_BYTES, _backend.DEVICE_COPY_SHARE, knn_module.DEVICE_BLOCK_BYTES = saved


def check(values: dict[str, float], reference: dict[str, float], dtype: str) -> dict[str, float]:
    errors = {}
    for name in MEASURES:
        ref = reference[name]
        errors[name] = abs(values[name] - ref) / max(abs(ref), 1e-12)
        if errors[name] > TOLERANCE[dtype]:
            raise SystemExit(f"{name} in {dtype} on the device is {values[name]!r}, numpy float64 says {ref!r}: "
                             f"relative error {errors[name]:.2e} > {TOLERANCE[dtype]:.0e}")
    return errors


def measures_part(n: int, d: int, device: torch.device, repeat: int, rates: dict[str, float], profile: bool) -> None:
    g = torch.Generator(device=device).manual_seed(400)
    x = embedding_like(g, n, d, device)
    y = perturbed(g, x, 0.2)
    e = embedding_like(g, n, d, device)
    f = perturbed(g, e, 0.1)
    on_device = (x, y, e, f)
    on_host = tuple(a.cpu().numpy() for a in on_device)
    sync(device)

    t0 = time.perf_counter()
    cpu_times, reference = suite(on_host, "float64")
    cpu_total = time.perf_counter() - t0
    flops = floor_flops(n, d, d, 1000)
    print(f"\n2. Measures, n = {n:,}, d = {d}, {d}-d anchors, float32 storage, cold suite "
          f"(numpy on {os.cpu_count()} CPU threads: {cpu_total:.2f} s)")
    print(f"   floor = {flops / 1e12:.2f} TFLOP at the measured product rate of the working precision")
    header = f"   {'precision':9s} {'measure':22s} {'numpy s':>9s} {'device s':>9s} {'speed-up':>9s} {'rel. err':>9s}"
    print(header)
    variants = [("float64", False), ("float32", False)]
    if device.type == "cuda":
        variants.append(("float64", True))  # the baseline: the host's blocking on the device
    for dtype, host_like in variants:
        label = dtype + ("*" if host_like else "")
        with host_blocking() if host_like else contextlib.nullcontext():
            runs = []
            for _ in range(repeat):
                times, values = suite(on_device, dtype)
                errors = check(values, reference, dtype)
                runs.append(times)
        totals = [sum(t.values()) for t in runs]
        best = runs[int(np.argmin(totals))]
        for name in MEASURES:
            print(f"   {label:9s} {name:22s} {cpu_times[name]:9.3f} {best[name]:9.4f} "
                  f"{cpu_times[name] / best[name]:8.1f}x {errors[name]:9.1e}")
        floor = flops / rates[dtype]
        print(f"   {label:9s} {'full suite (best)':22s} {cpu_total:9.3f} {min(totals):9.4f} "
              f"{cpu_total / min(totals):8.1f}x   median {statistics.median(totals):.4f} s, "
              f"floor {floor:.4f} s = {min(totals) / floor:.2f}x of floor")
    if device.type == "cuda":
        print("   * float64 with the host's row blocks (64 MB, each cast where it is used): the previous GPU path")
    if profile:
        profile_suites(on_device, device)


def profile_suites(arrays, device: torch.device) -> None:
    """Operators and kernels of one cold suite per precision, by total time: to ``$OUT`` if set."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out = os.environ.get("OUT")
    for dtype in ("float64", "float32"):
        with torch_profile(activities=activities) as prof:
            suite(arrays, dtype)
        tables = []
        for key in (("self_device_time_total", "device_time_total") if device.type == "cuda" else ()) + ("cpu_time_total",):
            try:
                tables.append(f"one cold {dtype} suite, by {key}\n"
                              + prof.key_averages().table(sort_by=key, row_limit=30, max_name_column_width=70))
            except (AttributeError, KeyError, ValueError) as exc:  # sort keys differ between torch versions
                tables.append(f"(no table by {key}: {exc})")
        text = "\n\n".join(tables)
        if out:
            with open(os.path.join(out, f"profile_{dtype}.txt"), "w") as fh:
                fh.write(text)
            print(f"   profile of one cold {dtype} suite written to $OUT/profile_{dtype}.txt")
        else:
            print(text)


# ----------------------------------------------------------------------------- part 4: products
def products_part(n: int, d: int, device: torch.device) -> None:
    """The products the suite is made of, alone, in the layouts the measures could use."""
    g = torch.Generator(device=device).manual_seed(5)
    x32, e32 = (torch.randn(n, d, generator=g, device=device) for _ in range(2))
    x, e = x32.double(), e32.double()
    y, f = x + 1e-3, e + 1e-3
    q = x[:1000]
    big = max(1, (2**30) // (16 * d))
    small = max(1, (64 * 2**20) // (16 * d))

    def blocked(rows, cast):
        def run():
            out = None
            for lo in range(0, n, rows):
                a, b = (x32[lo:lo + rows].double(), e32[lo:lo + rows].double()) if cast else (x[lo:lo + rows], e[lo:lo + rows])
                part = a.T @ b
                out = part if out is None else out + part
            return out
        return run

    rows = [("X^T E, one product", lambda: x.T @ e, 2 * n * d * d),
            ("X^T E, 1 GiB blocks", blocked(big, False), 2 * n * d * d),
            ("X^T E, 64 MB blocks, each cast", blocked(small, True), 2 * n * d * d),
            ("[X Y]^T [E F], one product", lambda: torch.cat([x, y], 1).T @ torch.cat([e, f], 1), 8 * n * d * d),
            ("X^T X, one product", lambda: x.T @ x, 2 * n * d * d),
            # embstab's own Gram: from the column halves on a GPU (3 products), the plain product elsewhere
            ("X^T X, 2x2 column blocks (3 products)", lambda: _backend._gram(_backend.namespace(x), x), 2 * n * d * d),
            ("k-NN scores (1000 x d)(d x n)", lambda: q @ x.T, 2 * 1000 * n * d),
            ("cast float32 -> float64 (X)", lambda: x32.double(), 0)]
    try:
        import cupy
        from cupy import cublas

        xc = cupy.from_dlpack(x)
        rows.insert(6, ("X^T X, cuBLAS syrk (cupy)", lambda: cublas.syrk("T", xc), 2 * n * d * d))
    except Exception as exc:  # noqa: BLE001
        print(f"   (no syrk row: {exc})")
    print(f"\n4. Products alone, n = {n:,}, d = {d} (float64 unless named; TFLOP/s count a Gram as a full product)")
    print(f"   {'product':38s} {'ms':>8s} {'TFLOP/s':>8s}")
    for label, fn, flops in rows:
        try:
            sec = device_time(fn, device, 5, inner=3)
        except Exception as exc:  # noqa: BLE001  (a variant this library lacks is reported, not fatal)
            print(f"   {label:38s} failed: {exc}")
            continue
        rate = f"{flops / sec / 1e12:8.1f}" if flops else f"{12 * x32.numel() / sec / 1e9:5.0f} GB/s"
        print(f"   {label:38s} {sec * 1e3:8.2f} {rate}")


# ----------------------------------------------------------------------------- part 3: rounding
def rounding_part(device: torch.device) -> None:
    n = 1 << 28 if device.type == "cuda" else 1 << 24
    x = torch.randn(n, generator=torch.Generator(device=device).manual_seed(1), device=device)
    copy_s = device_time(x.clone, device, inner=5)
    print(f"\n3. Rounding a float32 tensor of {n:,} elements ({x.nbytes / 2**30:.2f} GiB) on {device}")
    print(f"   {'operation (5 calls back to back)':38s} {'ms':>8s} {'GB/s':>8s} {'of copy':>8s}")
    print(f"   {'x.clone() (memory floor)':38s} {copy_s * 1e3:8.2f} {2 * x.nbytes / copy_s / 1e9:8.0f} {1.0:7.2f}x")
    gen = torch.Generator().manual_seed(2)
    rows = []
    if device.type == "cuda":
        from embstab.lowprec import gpu

        def scalar(fmt, rounding):
            def run():
                gpu.VECTOR_LOADS = False
                try:
                    return gpu.quantize_float_cuda(x, fmt, rounding, seed=3)
                finally:
                    gpu.VECTOR_LOADS = True
            return run

        rows += [("kernel bf16 nearest, 1 per thread", scalar("bf16", "nearest")),
                 ("kernel bf16 stochastic, 1 per thread", scalar("bf16", "stochastic")),
                 ("kernel bf16 nearest, 8 per thread", lambda: gpu.quantize_float_cuda(x, "bf16")),
                 ("kernel bf16 stochastic, 8 per thread", lambda: gpu.quantize_float_cuda(x, "bf16", "stochastic", 3))]
    rows += [("quantize bf16 nearest", lambda: quantize(x, "bf16")),
             ("quantize bf16 stochastic", lambda: quantize(x, "bf16", "stochastic", generator=gen)),
             ("quantize fp8_e4m3fn nearest", lambda: quantize(x, "fp8_e4m3fn")),
             ("quantize mxfp4 nearest (rows of 32)", lambda: quantize(x.view(-1, 32), "mxfp4")),
             ("torch x.to(bfloat16).float()", lambda: x.to(torch.bfloat16).float())]
    for label, fn in rows:
        s = device_time(fn, device, inner=5)
        print(f"   {label:38s} {s * 1e3:8.2f} {2 * x.nbytes / s / 1e9:8.0f} {copy_s / s:7.2f}x")
    # the kernel's nearest-even bf16 is the hardware cast, bit for bit
    assert torch.equal(quantize(x, "bf16"), x.to(torch.bfloat16).float())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=400_000, help="words (default 400,000)")
    parser.add_argument("--d", type=int, default=800, help="dimension of the pair and of the anchors (default 800)")
    parser.add_argument("--repeat", type=int, default=5, help="cold suites per precision; the fastest is kept")
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--profile", action="store_true", help="profile one cold suite per precision")
    parser.add_argument("--skip-rounding", action="store_true")
    parser.add_argument("--skip-measures", action="store_true", help="skip parts 2 and 4 (measures, products)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu: no CUDA device here (torch.cuda.is_available() is False); "
                         "try --device cpu to exercise the script")
    if device.type == "cuda":
        # the measures' float32 promises assume IEEE float32 products, not TF32
        assert not torch.backends.cuda.matmul.allow_tf32
        props = torch.cuda.get_device_properties(device)
        name = f"{props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}"
    else:
        name = platform.processor() or platform.machine()
    print(f"bench_gpu: {name}; torch {torch.__version__}, numpy {np.__version__}, python {platform.python_version()}")
    rates = ceilings(device)
    print(f"1. Ceilings: copy {rates['copy_bytes_per_s'] / 1e9:.0f} GB/s (read + write), "
          f"float64 product {rates['float64'] / 1e12:.1f} TFLOP/s, float32 {rates['float32'] / 1e12:.1f} TFLOP/s")
    if not args.skip_measures:
        measures_part(args.n, args.d, device, args.repeat, rates, args.profile)
    if not args.skip_rounding:
        rounding_part(device)
    if not args.skip_measures:
        products_part(args.n, args.d, device)


if __name__ == "__main__":
    main()

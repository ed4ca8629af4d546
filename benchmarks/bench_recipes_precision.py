"""Benchmarks of the precision recipes: 16-bit training step cost and bytes per parameter, HALP's
inner loop with int8 integer products against fp32 SVRG, and low-memory activation bytes.

Run: ``python benchmarks/bench_recipes_precision.py [--quick]``. Timings are wall-clock medians
on whatever machine runs them; ratios are measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
import torch
from torch import nn

from embstab.lowprec import FixedFormat, quantize
from embstab.recipes import sixteen_bit
from embstab.recipes.memory import check_low_memory


def _median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def bench_sixteen_bit(steps: int) -> pd.DataFrame:
    x = torch.randn(128, 256)
    rows = []
    for mode in ("fp32", "nearest", "stochastic", "kahan", "mixed"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
        base = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        if mode == "fp32":
            net, opt, bpp = model, base, 4 + 4 + 4  # fp32 weight, gradient, momentum
        else:
            rec = sixteen_bit(model, base, "bf16", mode, inplace=True)
            net, opt = rec.model, rec.optimizer

        def step(net=net, opt=opt):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()

        step()
        if mode != "fp32":
            bpp = rec.bytes_per_parameter()["total"]
        rows.append({"mode": mode, "ms_per_step": 1e3 * _median_time(step, steps), "bytes_per_param": bpp})
    df = pd.DataFrame(rows)
    df["slowdown_vs_fp32"] = df.ms_per_step / df.ms_per_step[0]
    return df


def bench_halp_inner(d: int, batch: int, repeat: int) -> pd.DataFrame:
    """One inner step's gradient-difference product X_b^T (X_b z) / b: fp32 SVRG vs HALP with int8
    codes for X and z (int32 accumulation, one float rescale)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(batch, d, generator=g)
    z = torch.randn(d, generator=g) * 1e-3
    sx = float(X.abs().max()) / 127
    sz = float(z.abs().max()) / 127
    Xq = quantize(X / sx, FixedFormat(8, 0), "nearest").to(torch.int8)
    zq = quantize(z / sz, FixedFormat(8, 0), "nearest").to(torch.int8)
    Xi, zi = Xq.to(torch.int32), zq.to(torch.int32)

    def fp32():
        return X.T @ (X @ z) / batch

    def int8():
        r = Xi @ zi  # int32 accumulation of int8 products
        return (Xi.T @ r).to(torch.float32) * (sx * sx * sz / batch)

    err = float((int8() - fp32()).norm() / fp32().norm())
    t_fp, t_i8 = _median_time(fp32, repeat), _median_time(int8, repeat)
    return pd.DataFrame([{"d": d, "batch": batch, "fp32_us": 1e6 * t_fp, "int8_us": 1e6 * t_i8,
                          "speedup_fp32_over_int8": t_fp / t_i8, "rel_error_int8": err}])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = ap.parse_args()
    torch.set_num_threads(1)
    reps = 5 if args.quick else 30
    print("== 16-bit training (MLP 256-512-10, batch 128, bf16; 1 thread) ==")
    print(bench_sixteen_bit(reps).to_string(index=False, float_format="%.3g"))
    print("\n== HALP inner product: fp32 vs int8 codes with int32 accumulation (1 thread) ==")
    print(pd.concat([bench_halp_inner(d, b, reps * 4) for d, b in ((256, 64), (1024, 64), (4096, 16))])
          .to_string(index=False, float_format="%.3g"))
    print("\n== Low-memory training: activation bytes per technique (MLP 4x2x256, batch 256) ==")
    print(check_low_memory(0).table.to_string(index=False, float_format="%.3g"))


if __name__ == "__main__":
    main()

"""Recipe benchmarks: TT-Rec lookups and Adasum communication.

1. TT lookup: rows from TT cores vs a dense ``index_select`` vs a fully cached TT table
   (microseconds per row and the ratios, measured in the same run).
2. Adasum communication: for 8 workers sending one fp32 tensor of ``d`` entries, the time of the
   Adasum tree vs a plain mean, and the bytes each scheme moves per worker (Adasum here gathers all
   deltas: ``(w-1) d`` floats in; a ring allreduce moves ``2 (w-1)/w d``).

Run: ``python benchmarks/bench_recipes_compression.py [--n 10000] [--d 64] [--batch 4096]``.
"""

from __future__ import annotations

import argparse

import time

import pandas as pd
import torch

from embstab.recipes.adasum import adasum_reduce
from embstab.recipes.tt import time_lookup


def adasum_table(sizes=(10_000, 100_000, 1_000_000), workers: int = 8, repeats: int = 3, seed: int = 0) -> pd.DataFrame:
    """Time Adasum vs mean over ``workers`` fp32 tensors and count the bytes each exchange moves."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for d in sizes:
        ts = [torch.randn(d, generator=gen) for _ in range(workers)]

        def best(fn):
            fn()
            out = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
            return min(out) * 1e3

        t_ada = best(lambda: adasum_reduce(ts))
        t_mean = best(lambda: torch.stack(ts).mean(0))
        rows.append({"d": d, "workers": workers, "adasum_ms": t_ada, "mean_ms": t_mean, "adasum_over_mean": t_ada / t_mean,
                     "allgather_MB_per_worker": (workers - 1) * d * 4 / 1e6,
                     "ring_allreduce_MB_per_worker": 2 * (workers - 1) / workers * d * 4 / 1e6})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    table = time_lookup(args.n, args.d, batch=args.batch, repeats=args.repeats, seed=args.seed)
    print(f"TT lookup, n={args.n}, d={args.d}, batch={args.batch}, {args.threads} threads, fp32")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\nAdasum vs mean, 8 workers, fp32 (reduction on one process; bytes per worker of the exchange)")
    print(adasum_table(seed=args.seed).to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()

"""TT-Rec lookup benchmark: rows from TT cores vs a dense ``index_select`` vs a fully cached TT table.

Run: ``python benchmarks/bench_recipes_compression.py [--n 10000] [--d 64] [--batch 4096]``.
Prints microseconds per row and the ratios, measured in the same run.
"""

from __future__ import annotations

import argparse

import torch

from embstab.recipes.tt import time_lookup


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


if __name__ == "__main__":
    main()

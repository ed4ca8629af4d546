"""Benchmark: what a study row's nulls cost, closed forms against shuffling every measure, in one run.

For a pair of KG-sized tables (n = 4,965 rows, as the WordNet study compares, 256-d anchors) at
d ∈ {16, 64, 256}, times ``embstab.compare`` with the study's five measures:

* ``values``: no null (``null_samples=0``), the cost of a row before nulls existed;
* ``permutation``: 3 row shuffles for every measure (``null_method="permutation"``), the baseline;
* ``auto``: closed forms for EIS, k-NN, the eigenspace overlap and PIP, 3 shuffles for semantic
  displacement (what study rows use).

It prints each cost (best of ``--repeat`` runs) as process CPU seconds, which a busy shared machine
disturbs less than wall time, the extra cost of the nulls over ``values`` and the ratio
permutation / auto of those extras, and checks that both give the same signal flags.

Usage: ``python benchmarks/bench_nulls.py [--repeat 3] [--n 4965]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import embstab  # noqa: E402

MEASURES = ["eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap"]


def _tables(n: int, d: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    words = [f"e{i}" for i in range(n)]
    spectrum = np.linspace(2.0, 0.5, k)
    anchor_a = rng.normal(size=(n, k)) * spectrum
    anchor_b = anchor_a + 0.5 * rng.normal(size=(n, k))
    a = anchor_a[:, :d] + 0.3 * rng.normal(size=(n, d))
    b = anchor_b[:, :d] + 0.3 * rng.normal(size=(n, d))
    make = embstab.Embedding
    return (make(words, a.astype(np.float32)), make(words, b.astype(np.float32)),
            (make(words, anchor_a.astype(np.float32)), make(words, anchor_b.astype(np.float32))))


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        best = min(best, time.process_time() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n", type=int, default=4965)
    args = parser.parse_args()
    print(f"n = {args.n}, anchors 256-d, measures {', '.join(MEASURES)}; best of {args.repeat}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print("CPU seconds:")
    print(f"{'d':>4} {'values':>8} {'perm':>8} {'auto':>8} {'perm extra':>11} {'auto extra':>11} "
          f"{'ratio':>6}  same signal")
    for d in (16, 64, 256):
        a, b, anchors = _tables(args.n, d, 256, seed=d)

        def run(**kw):
            return embstab.compare(a, b, anchors=anchors, measures=MEASURES, top_n=None, **kw)

        t0, _ = _best(lambda: run(null_samples=0), args.repeat)
        tp, perm = _best(lambda: run(null_method="permutation"), args.repeat)
        ta, auto = _best(lambda: run(), args.repeat)
        extra_p, extra_a = tp - t0, ta - t0
        same = perm["signal"].tolist() == auto["signal"].tolist()
        print(f"{d:>4} {t0:>8.2f} {tp:>8.2f} {ta:>8.2f} {extra_p:>11.2f} {extra_a:>11.2f} "
              f"{extra_p / max(extra_a, 1e-9):>6.1f}  {same}")


if __name__ == "__main__":
    main()

"""Benchmark: the reference analysis scripts' algorithms (baseline) against embstab.selection.

Baseline = what the reference scripts do (spec measures.md §5.4–5.5), written out literally:
for each measure, task and seed, filter the table with pandas and loop over
``itertools.combinations`` calling ``np.argmin``/``np.argmax`` on two-element lists (selection
error), and filter the table once per (memory budget, seed) to pick a configuration (oracle gap).
embstab computes all pairs of a seed with one vectorised comparison and groups the table once.

Both must give the same numbers; the script checks that before printing the table.

Cases:

1. the published word2vec CBOW table (108 pairs x 5 tasks, 5 measures);
2. a synthetic study with 4 algorithms x 5 seeds x 8 dimensions x 6 bit widths x 5 tasks
   (960 pairs, 4800 rows; 1128 pairs of configurations per seed).

Usage: ``python benchmarks/bench_selection.py [--repeat 3]``
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from embstab.measures import REGISTRY  # noqa: E402
from embstab.selection import from_published_csv, oracle_gap, selection_error, validate_results  # noqa: E402

PUBLISHED = Path(__file__).resolve().parents[1] / "tests" / "data" / "w2v_cbow_published.csv"
MEASURES = ["eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap"]


# ----------------------------------------------------------------------------- baseline algorithms
def base_selection_error(df: pd.DataFrame) -> dict:
    out = {}
    for algo in df["algo"].unique():
        for task in df["task"].unique():
            part = df[(df["algo"] == algo) & (df["task"] == task)]
            for m in MEASURES:
                larger = REGISTRY[m].larger_is_more_stable
                errs = []
                for seed in part["seed"].unique():
                    sub = part[part["seed"] == seed]
                    v, di = sub[m].to_numpy(), sub["disagreement"].to_numpy()
                    wrong = total = 0
                    for i, j in itertools.combinations(range(len(sub)), 2):
                        vote = np.argmax([v[i], v[j]]) if larger else np.argmin([v[i], v[j]])
                        truth = np.argmin([di[i], di[j]])
                        wrong += vote != truth
                        total += 1
                    errs.append(wrong / total)
                out[(algo, m, task)] = float(np.mean(errs))
    return out


def base_oracle_gap(df: pd.DataFrame) -> dict:
    out = {}
    for algo in df["algo"].unique():
        for task in df["task"].unique():
            part = df[(df["algo"] == algo) & (df["task"] == task)]
            for m in MEASURES:
                larger = REGISTRY[m].larger_is_more_stable
                diffs = []
                for space in sorted(part["memory"].unique()):
                    for seed in part["seed"].unique():
                        sub = part[(part["memory"] == space) & (part["seed"] == seed)]
                        if len(sub) < 2:
                            continue
                        k = np.argmax(sub[m].values) if larger else np.argmin(sub[m].values)
                        diffs.append(sub["disagreement"].values[k] - sub["disagreement"].min())
                out[(algo, m, task)] = float(np.mean(diffs))
    return out


# ----------------------------------------------------------------------------- data
def synthetic_study(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    dims = [16, 25, 50, 100, 200, 400, 800, 1600]
    for algo, s, d, b in itertools.product(["a", "b", "c", "d"], range(5), dims, [1, 2, 4, 8, 16, 32]):
        noise = rng.normal(0, 0.5)
        base = {"algo": algo, "seed": s, "dim": d, "bitrate": b,
                "eis": 1 / (d * b) ** 0.5 + rng.normal(0, 0.002),
                "knn": 1 - 1 / np.log2(2 * d * b) + rng.normal(0, 0.01),
                "semantic_displacement": 1 / np.log2(2 * d) + rng.normal(0, 0.01),
                "pip_loss": float(d * b) + rng.normal(0, 10),
                "eigenspace_overlap": 1 - 1 / np.log2(4 * d * b) + rng.normal(0, 0.01)}
        for t, task in enumerate(["sst", "mr", "subj", "mpqa", "ner"]):
            rows.append({**base, "task": task,
                         "disagreement": 20 - 1.2 * np.log2(d * b) + t + noise + rng.normal(0, 0.3)})
    return validate_results(pd.DataFrame(rows))


# ----------------------------------------------------------------------------- timing
def best_of(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def check_same(base: dict, ours: pd.DataFrame, value: str, label: str) -> None:
    key = "measure" if "measure" in ours.columns else "selector"
    got = {(r.algo, getattr(r, key), r.task): getattr(r, value) for r in ours.itertuples()}
    for k, v in base.items():
        if not np.isclose(got[k], v, rtol=0, atol=1e-12):
            raise SystemExit(f"{label}: mismatch at {k}: baseline {v} vs embstab {got[k]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    args = parser.parse_args()

    cases = [("CBOW published (540 rows)", from_published_csv(PUBLISHED)),
             ("synthetic 4 algos x 5 seeds (4800 rows)", synthetic_study())]
    rows = []
    for label, df in cases:
        # The baseline is slow on the large case; one run is enough to time it.
        reps = args.repeat if len(df) < 1000 else 1
        t_base, base = best_of(lambda: base_selection_error(df), reps)
        t_ours, ours = best_of(lambda: selection_error(df, MEASURES), args.repeat)
        check_same(base, ours, "selection_error", label)
        rows.append((label, "selection_error", t_base, t_ours))
        t_base, base = best_of(lambda: base_oracle_gap(df), reps)
        t_ours, ours = best_of(lambda: oracle_gap(df, MEASURES), args.repeat)
        check_same(base, ours, "mean_gap", label)
        rows.append((label, "oracle_gap", t_base, t_ours))

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible; "
          f"numpy {np.__version__}, pandas {pd.__version__}; best of {args.repeat}")
    print(f"{'case':<42} {'analysis':<16} {'baseline s':>11} {'embstab s':>10} {'ratio':>7}")
    for label, analysis, tb, to in rows:
        print(f"{label:<42} {analysis:<16} {tb:>11.3f} {to:>10.3f} {tb / to:>6.1f}x")
    print("results identical (|difference| <= 1e-12) for every algo, measure and task")


if __name__ == "__main__":
    main()

"""Benchmark: hyperbolic metric evaluation (MAP, distortion) vs a naive all-pairs loop.

Both sides score the same rows of the same embedding in one run:

* **baseline** — the textbook loop: for every pair, the Poincaré distance in mpmath at the
  embedding's working precision (``acosh(1 + 2‖u−v‖²/((1−‖u‖²)(1−‖v‖²)))``, as the original
  code does with BigFloat), graph distances by a Python BFS, MAP from a sorted ranking;
  float64 embeddings use ``math.acosh`` per pair.
* **embstab** — :func:`embstab.hyperbolic.evaluate`: fixed-point integer differences plus
  per-point log(1−‖u‖²), vectorised per row; scipy BFS.

The table reports seconds per evaluated row, the speed-up, and the largest difference between
the two results (MAP and D_avg on the same rows), so speed is never bought with accuracy.

Run: ``python benchmarks/bench_hyperbolic.py [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import deque
from pathlib import Path

import mpmath
import numpy as np

from embstab.hyperbolic import embed_combinatorial, evaluate, load_edgelist
from embstab.hyperbolic.hmds import hmds

GRAPHS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "graphs"


def naive_scores(graph, emb, rows):
    """Literal per-pair evaluation; returns (MAP, D_avg) over ``rows``."""
    n = graph.n_nodes
    adj = [graph.neighbors(i).tolist() for i in range(n)]
    aps, avgs = [], []
    prec = emb.precision_bits
    with mpmath.workprec(prec if emb.multiprecision else 53):
        if emb.multiprecision:
            pts = [list(r) for r in emb.coords]
            lam = [1 - mpmath.fsum(c * c for c in p) for p in pts]
        else:
            pts = emb.poincare64(check=False).tolist()
        for a in rows:
            dg = [-1] * n
            dg[a] = 0
            q = deque([a])
            while q:
                h = q.popleft()
                for v in adj[h]:
                    if dg[v] < 0:
                        dg[v] = dg[h] + 1
                        q.append(v)
            dh = [0.0] * n
            for v in range(n):
                if v == a:
                    continue
                if emb.multiprecision:
                    num = 2 * mpmath.fsum((x - y) ** 2 for x, y in zip(pts[a], pts[v]))
                    dh[v] = float(mpmath.acosh(1 + num / (lam[a] * lam[v]))) / emb.scale
                else:
                    u, w = pts[a], pts[v]
                    num = 2 * sum((x - y) ** 2 for x, y in zip(u, w))
                    den = (1 - sum(x * x for x in u)) * (1 - sum(x * x for x in w))
                    dh[v] = math.acosh(1 + num / den) / emb.scale
            nb = set(adj[a])
            ordered = sorted((dh[v], v) for v in range(n) if v != a)
            ap, hits = 0.0, 0
            for rank, (dist, v) in enumerate(ordered, 1):
                if v in nb:
                    # pessimistic ties: count everything tied with v as ranked before it
                    ball = sum(1 for dd, _ in ordered if dd <= dist)
                    hits_ball = sum(1 for dd, u in ordered if dd <= dist and u in nb)
                    ap += hits_ball / ball
                    hits += 1
            aps.append(ap / len(nb))
            # spec §4: pairs with d̂ ∈ {0, NaN, inf} are "bad" and left out of D_avg
            avgs.append(np.mean([abs(dh[v] - dg[v]) / dg[v] for v in range(n)
                                 if v != a and 0 < dh[v] < math.inf]))
    return float(np.mean(aps)), float(np.mean(avgs))


def bench(name, graph, emb, rows_base, rows_fast):
    t = time.perf_counter()
    base = naive_scores(graph, emb, rows_base)
    t_base = (time.perf_counter() - t) / len(rows_base)
    t = time.perf_counter()
    evaluate(graph, emb, rows=rows_fast, progress=False)
    t_fast = (time.perf_counter() - t) / len(rows_fast)
    same = evaluate(graph, emb, rows=rows_base, progress=False)
    diff = max(abs(same.map - base[0]), abs(same.d_avg - base[1]))
    bits = emb.precision_bits if emb.multiprecision else 53
    return (name, graph.n_nodes, bits, len(rows_base), t_base, t_fast, t_base / t_fast, diff)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rows, skip WordNet")
    args = ap.parse_args()
    k = 5 if args.quick else 20
    out = []
    st = load_edgelist(GRAPHS / "smalltree.edges")
    ph = load_edgelist(GRAPHS / "phylo_tree.edges")
    e = embed_combinatorial(st, bits=256, precision_bits=256)
    out.append(bench("smalltree 2-D -a 256", st, e, list(range(40)), list(range(40))))
    e = embed_combinatorial(ph, bits=256, precision_bits=256)
    out.append(bench("phylo 2-D -a 256", ph, e, list(range(k)), list(range(344))))
    e = embed_combinatorial(ph, eps=0.1, precision_bits=8192)
    out.append(bench("phylo 2-D eps0.1 8192b", ph, e, list(range(k // 2)), list(range(344))))
    e = embed_combinatorial(ph, dim=100, tau=2.0, precision_bits=256)
    out.append(bench("phylo 100-D tau2 256b", ph, e, list(range(max(2, k // 4))),
                     list(range(40))))
    e = hmds(ph, 100, scale=0.1).astype_float64(check=False)
    out.append(bench("phylo h-MDS float64", ph, e, list(range(k)), list(range(344))))
    wn = GRAPHS / "wordnet.edges"
    if wn.exists() and not args.quick:
        g = load_edgelist(wn)
        e = embed_combinatorial(g, eps=0.1, precision_bits=3200)
        out.append(bench("WordNet 2-D eps0.1 3200b", g, e, [0], list(range(0, 74374, 3719))))
    head = ("case", "n", "bits", "rows(base)", "baseline s/row", "embstab s/row", "speed-up",
            "max |Δ| MAP,D_avg")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in out:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.4f} | {r[5]:.5f} | "
              f"{r[6]:.0f}x | {r[7]:.1e} |")


if __name__ == "__main__":
    main()

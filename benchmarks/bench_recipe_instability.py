"""Does the training recipe change instability? PPMI matrix completion under each precision recipe.

Trains ``mc`` on the old member of an offline Wikipedia corpus pair with two seeds, and on the new
member with the first seed, for every recipe; prints per recipe the final loss, training time
relative to fp32 (same run), k-NN@10 across seeds, k-NN@10 and EIS against the fp32 run with the
same seed, and k-NN@10 / EIS across the corpus versions.

Run: ``python benchmarks/bench_recipe_instability.py [--words 5000 --dim 32 --epochs 40]``.
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from embstab import compare
from embstab.data import load_corpus, make_corpus_pair
from embstab.train import train_embedding

RECIPES = ("fp32", "bf16-nearest", "bf16-stochastic", "bf16-kahan", "swalp")


def _knn_eis(a, b, anchors, top_n):
    df = compare(a, b, measures=["knn", "eis"], anchors=anchors, top_n=top_n,
                 params={"knn": {"k": 10, "n_queries": 1000, "seed": 0}}).set_index("measure")["value"]
    return float(df["knn"]), float(df["eis"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="wiki_vital")
    ap.add_argument("--words", type=int, default=5000, help="vocabulary size (most frequent words)")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--seeds", type=int, nargs=2, default=(1, 2))
    args = ap.parse_args()

    docs = load_corpus(args.corpus)
    old_docs, new_docs = make_corpus_pair(docs, kind="leave_out", fraction=0.05, seed=0)
    s1, s2 = args.seeds
    common = dict(algo="mc", dim=args.dim, epochs=args.epochs, min_count=1, window=5, progress=False,
                  max_vocab=args.words)
    runs, seconds = {}, {}
    for recipe in RECIPES:
        start = time.perf_counter()
        runs[recipe] = {
            "old_s1": train_embedding(old_docs, seed=s1, recipe=recipe, **common),
            "old_s2": train_embedding(old_docs, seed=s2, recipe=recipe, **common),
            "new_s1": train_embedding(new_docs, seed=s1, recipe=recipe, **common),
        }
        seconds[recipe] = (time.perf_counter() - start) / 3
        print(f"trained {recipe}: {seconds[recipe]:.1f} s per embedding", flush=True)
    ref = runs["fp32"]
    anchors = (ref["old_s1"], ref["old_s2"])
    rows = []
    top_n = None  # every shared word: the corpus versions keep slightly different vocabularies
    for recipe, r in runs.items():
        knn_seed, eis_seed = _knn_eis(r["old_s1"], r["old_s2"], anchors, top_n)
        knn_fp32, eis_fp32 = _knn_eis(r["old_s1"], ref["old_s1"], anchors, top_n)
        knn_corpus, eis_corpus = _knn_eis(r["old_s1"], r["new_s1"], anchors, top_n)
        rows.append({"recipe": recipe, "final_loss": r["old_s1"].metadata["final_loss"],
                     "time_vs_fp32": seconds[recipe] / seconds["fp32"],
                     "knn10_cross_seed": knn_seed, "eis_cross_seed": eis_seed,
                     "knn10_vs_fp32": knn_fp32, "eis_vs_fp32": eis_fp32,
                     "knn10_cross_corpus": knn_corpus, "eis_cross_corpus": eis_corpus})
    table = pd.DataFrame(rows)
    print(f"\nmc on {args.corpus}: {args.words} words x {args.dim} d, {args.epochs} epochs, seeds {s1}/{s2}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()

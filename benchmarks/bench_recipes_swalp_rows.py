"""SWALP on embedding tables: rounding only the rows a sparse step touched vs the whole table.

Times one AdaGrad step on an ``(n, dim)`` table with a sparse gradient over the rows of a
4,096-entry mini-batch (row ids drawn from a Zipf law, as word ids in co-occurrence batches are),
under three settings: float32 (no rounding), SWALP with the whole table stochastically rounded to
8-bit block floating point after every step (:class:`embstab.lowprec.LowPrecisionOptimizer`, the
dense path), and SWALP as the trainers run it (:class:`embstab.recipes.training.RecipeOptimizer`:
only the touched rows are rounded). Then the end-to-end ``mc`` fit on a PPMI matrix of
``--words`` words, fp32 vs SWALP.

Run: ``python benchmarks/bench_recipes_swalp_rows.py [--steps 200 --sizes 3000 20000 100000]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from embstab.lowprec import LowPrecisionOptimizer
from embstab.recipes.swalp import swalp_formats
from embstab.recipes.training import training_recipe


def _grads(n: int, dim: int, steps: int, batch: int, seed: int) -> list[torch.Tensor]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        rows = np.minimum(rng.zipf(1.3, batch) - 1, n - 1)
        idx = torch.as_tensor(rows, dtype=torch.int64).unsqueeze(0)
        out.append(torch.sparse_coo_tensor(idx, torch.ones(batch, dim) * 1e-2, (n, dim), check_invariants=False))
    return out


def _time_steps(kind: str, n: int, dim: int, grads: list[torch.Tensor]) -> tuple[float, float]:
    table = torch.nn.Parameter(torch.rand(n, dim, generator=torch.Generator().manual_seed(0)) - 0.5)
    base = torch.optim.Adagrad([table], lr=0.05, initial_accumulator_value=1.0)
    if kind == "fp32":
        opt = base
    elif kind == "swalp, whole table":
        opt = LowPrecisionOptimizer(base, weight=swalp_formats(8)["channel"], update="stochastic", generator=1)
    else:
        opt = training_recipe("swalp").wrap(base, seed=1)
    touched = []
    start = time.perf_counter()
    for g in grads:
        table.grad = g
        opt.step()
        touched.append(len(g.coalesce().indices()[0]) if kind == "fp32" else 0)
    ms = 1e3 * (time.perf_counter() - start) / len(grads)
    return ms, float(np.mean(touched)) if kind == "fp32" else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[3000, 20000, 100000])
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--words", type=int, default=3000, help="vocabulary of the end-to-end mc fit (0: skip)")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one thread: the shared 2-core machine makes multi-threaded timings erratic
    rows = []
    for n in args.sizes:
        grads = _grads(n, args.dim, args.steps, args.batch, seed=n)
        row = {"rows": n, "dim": args.dim}
        for kind in ("fp32", "swalp, whole table", "swalp, touched rows"):
            ms, touched = _time_steps(kind, n, args.dim, grads)
            row[f"{kind} ms/step"] = ms
            if kind == "fp32":
                row["touched rows/step"] = touched
        row["speed-up"] = row["swalp, whole table ms/step"] / row["swalp, touched rows ms/step"]
        rows.append(row)
        print(f"done {n} rows", flush=True)
    print(f"\nAdaGrad step on an (n, {args.dim}) table, sparse gradient over a {args.batch}-entry batch "
          f"(Zipf row ids), {args.steps} steps, 1 thread")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    if args.words:
        _end_to_end(args.words, args.dim, args.epochs)


def _end_to_end(words: int, dim: int, epochs: int) -> None:
    from embstab.data import load_corpus
    from embstab.train.factorize import fit_observed_entries
    from embstab.train.vocab import build_vocab, cooccurrence, encode_corpus, ppmi

    docs = load_corpus("wiki_vital")
    vocab, _ = build_vocab(docs, min_count=1, max_vocab=words)
    ids, doc_ids = encode_corpus(docs, vocab)
    target = ppmi(cooccurrence(ids, doc_ids, len(vocab), window=5, weighting="uniform", progress=False))
    out = []
    for recipe in ("fp32", "swalp", "fp32", "swalp"):  # twice each, interleaved: the machine is shared
        start = time.perf_counter()
        fit_observed_entries(target.row, target.col, target.data, np.ones_like(target.data), len(vocab), dim,
                             epochs=epochs, biases=False, seed=1, init_scale=0.1, progress=False, threads=1,
                             recipe=recipe)
        out.append({"recipe": recipe, "seconds": time.perf_counter() - start})
    df = pd.DataFrame(out).groupby("recipe", sort=False)["seconds"].min().reset_index()
    print(f"\nmc fit on wiki_vital PPMI: {len(vocab)} words x {dim} d, {epochs} epochs, {target.nnz} entries, "
          "1 thread (best of 2)")
    print(df.to_string(index=False, float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    main()

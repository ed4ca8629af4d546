"""Compressed-file sizes per transform: the ``.esq`` bytes against the bits per word reported.

For a table (by default 3,000 x 64, Gaussian with two outlier dimensions; ``--input FILE`` takes
the first ``--n`` rows of an embedding file instead) and each transform of ``embstab compress``,
prints:

- ``bits/word``: what the transform reports (``memory_bits_per_word``);
- ``dequantized B``: the file the dequantized float32 table makes (what a transformed result
  used to be written as), measured by writing it in the same run;
- ``stored B``: the ``.esq`` file of the codes in the transformed coordinates;
- ``bound B``: ``ceil(bits/word * n / 8)`` + vocabulary + code table + a 2 KiB header allowance;
- ``knn``: k-NN overlap (k = 5, 1000 queries, fixed seed) with the uncompressed table.

Run: ``python benchmarks/bench_esq_sizes.py [--n 3000] [--d 64] [--bits 4] [--input FILE]``.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile

import numpy as np

import embstab
from embstab.compress import compress_pair
from embstab.io.compressed import write_compressed
from embstab.measures import knn

TRANSFORMS = ("none", "hadamard", "orthogonal", "ocs:0.03", "hadamard+ocs:0.03", "tt:8")
HEADER_ALLOWANCE = 2048


def _table(n: int, d: int, path: str | None, seed: int = 0) -> embstab.Embedding:
    if path:
        emb = embstab.load(path)
        return emb.subset(emb.words[:n])
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[:, [3, d - 5]] *= 8  # outlier dimensions, as trained embeddings often have
    return embstab.Embedding([f"w{i}" for i in range(n)], X.astype(np.float32), name="synthetic")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--input", default=None)
    args = ap.parse_args()
    emb = _table(args.n, args.d, args.input)
    n = len(emb)
    vocab = 4 * n + sum(len(w.encode("utf-8")) for w in emb.words)
    print(f"table: {n} x {emb.dim} ({emb.name}), {args.bits} bits, vocabulary {vocab} B")
    print(f"{'transform':<20}{'bits/word':>10}{'dequantized B':>15}{'stored B':>10}{'bound B':>10}{'ratio':>7}{'knn':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for t in TRANSFORMS:
            # the compressed old member of the pair protocol (compressing a table against itself)
            out, _ = compress_pair(emb, emb, args.bits, seed=0, transform=t)
            bpw = out.metadata["compression"]["memory_bits_per_word"]
            stored, floats = os.path.join(tmp, "s.esq"), os.path.join(tmp, "f.esq")
            out.save(stored)
            write_compressed(embstab.Embedding(out.words, out.vectors, name=out.name), floats)
            s, f = os.path.getsize(stored), os.path.getsize(floats)
            bound = math.ceil(bpw * n / 8) + vocab + 8 * 2 ** args.bits + HEADER_ALLOWANCE
            overlap = knn(emb.vectors, out.vectors, k=5, n_queries=min(1000, n) if n > 1000 else None, seed=1234)
            print(f"{t:<20}{bpw:>10.4g}{f:>15}{s:>10}{bound:>10}{f / s:>7.1f}{overlap:>7.3f}")


if __name__ == "__main__":
    main()

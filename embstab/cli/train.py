"""``embstab train --algo ... --corpus ...``: train one embedding, or the two of a corpus pair."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from embstab.cli.names import TRAIN_ALGOS, TRAINING_RECIPES
from embstab.cli.options import (add_no_clobber, add_progress, open_fraction, positive_int, seed, show_progress,
                                 worker_threads)
from embstab.errors import EmbstabError

__all__ = ["register", "read_corpus", "run"]

HELP = "train a word embedding (or a retraining pair) on a real corpus"
DESCRIPTION = """\
Train word2vec (CBOW, skip-gram), fastText, GloVe or PPMI matrix completion on a corpus and write
the embedding in frequency order. --corpus is a dataset name (`embstab data list`; "pooled" joins
all offline corpora, "a+b" joins two) or a text file with one document per line.

With --pair, two overlapping corpora are drawn from it (leave_out: each leaves out a different
--fraction of the documents; extend: the corpus without a fraction vs the whole corpus) and one
embedding is trained on each with the same seed, as when a model is retrained on updated data;
give two output paths.

--recipe trains GloVe or matrix completion with a precision recipe: bf16-nearest (the stalling
baseline), bf16-stochastic, bf16-kahan (16-bit tables, stochastically rounded or Kahan-compensated
updates), the fp16 variants, or swalp (8-bit block floating point, averaged); default fp32.

Training is deterministic: the same seed and settings give identical vectors (gensim runs with one
worker thread for this; pass --workers N to trade that for speed). An output may not be the
corpus file or the other output.

examples:
  embstab train --corpus wiki_vital --dim 100 -o wiki100.txt
  embstab train --corpus my_docs.txt --algo glove --dim 50 -o glove50.npz
  embstab train --corpus wiki_vital --pair leave_out --fraction 0.05 -o old.txt new.txt
  embstab train --corpus wiki_vital --algo mc --dim 32 --recipe bf16-kahan -o mc32_kahan.npz"""


def register(subparsers) -> None:
    """Add the ``train`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser("train", help=HELP, description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", choices=list(TRAIN_ALGOS), default="w2v_cbow", help="training algorithm (default w2v_cbow)")
    p.add_argument("--corpus", required=True, help="dataset name, NAME+NAME, 'pooled', or a text file path")
    p.add_argument("-o", "--output", nargs="+", required=True, metavar="PATH",
                   help="output file (two with --pair); the format follows the suffix (.txt word2vec text, "
                        ".bin, .npz, .kv ...)")
    p.add_argument("--pair", choices=["leave_out", "extend"], help="train a corpus pair (two outputs)")
    p.add_argument("--fraction", type=open_fraction, default=None,
                   help="with --pair: fraction of documents left out (default 0.05)")
    p.add_argument("--pair-seed", type=seed, default=0, help="seed choosing the left-out documents (default 0)")
    p.add_argument("--dim", type=positive_int, default=100, help="dimension (default 100)")
    p.add_argument("--seed", type=seed, default=0, help="training seed (default 0)")
    p.add_argument("--epochs", type=positive_int, default=5, help="epochs (default 5)")
    p.add_argument("--min-count", type=positive_int, default=5, help="drop words rarer than this (default 5)")
    p.add_argument("--window", type=positive_int, default=5, help="context window (default 5)")
    p.add_argument("--max-vocab", type=positive_int, help="keep at most this many words")
    p.add_argument("--workers", type=worker_threads, help="gensim threads (default 1: deterministic; at most the cores)")
    p.add_argument("--recipe", choices=list(TRAINING_RECIPES), default="fp32",
                   help="precision recipe of the tables while training (glove, mc; default fp32)")
    add_progress(p)
    add_no_clobber(p)
    p.set_defaults(func=run)


def read_corpus(spec: str) -> list[list[str]]:
    """Read the documents of ``--corpus``.

    Parameters
    ----------
    spec : str
        A dataset name (see ``embstab data list``; ``pooled`` or ``a+b`` join corpora), or a UTF-8
        text file with one document per line, tokenised like the bundled corpora.

    Returns
    -------
    list of list of str
        The tokenised documents; empty lines are dropped.

    Raises
    ------
    EmbstabError
        If ``spec`` is a directory or a file holding no words (an unknown dataset name is reported
        by the data loader).
    """
    from embstab.data import load_corpus, tokenize

    path = Path(spec)
    if path.is_dir():
        raise EmbstabError(f"--corpus {spec} is a directory; give a text file with one document per line")
    if path.is_file():
        # utf-8-sig: a byte-order mark is not part of the first word
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            docs = [t for t in (tokenize(line) for line in fh) if t]
        if not docs:
            raise EmbstabError(f"--corpus {spec} holds no words")
        return docs
    return load_corpus(spec)


def run(args: argparse.Namespace) -> int:
    """Run ``embstab train``: train one embedding, or one per member of a corpus pair, and save it.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    int
        The exit code (0).

    Raises
    ------
    EmbstabError
        For a recipe other than fp32 with an algorithm other than glove or mc, the wrong number of
        outputs, ``--fraction`` of 0.5 or more with ``--pair leave_out``, or an output that clashes with the
        corpus or cannot be written.
    """
    from embstab.data import make_corpus_pair
    from embstab.io import save
    from embstab.train import train_embedding

    from embstab._fs import check_outputs, check_writable

    if args.recipe != "fp32" and args.algo not in ("glove", "mc"):
        raise EmbstabError(f"--recipe {args.recipe} needs --algo glove or mc; {args.algo} trains only in fp32")
    n_out = 2 if args.pair else 1
    if len(args.output) != n_out:
        raise EmbstabError(f"give {n_out} output path(s) to -o "
                           f"({'--pair writes two embeddings' if args.pair else 'one embedding'})")
    if args.fraction is not None and not args.pair:
        raise EmbstabError("--fraction applies to a corpus pair: give --pair leave_out or --pair extend")
    args.fraction = 0.05 if args.fraction is None else args.fraction
    if args.pair == "leave_out" and args.fraction >= 0.5:
        raise EmbstabError(f"--fraction must be below 0.5 with --pair leave_out (each member leaves out its own "
                           f"share of the documents), got {args.fraction:g}")
    labelled = [(f"-o #{i + 1}" if n_out > 1 else "-o", out) for i, out in enumerate(args.output)]
    check_outputs(labelled, [("--corpus", args.corpus)])
    for label, out in labelled:
        check_writable(out, label, no_clobber=args.no_clobber)  # before training, not after minutes of it
    docs = read_corpus(args.corpus)
    corpora = make_corpus_pair(docs, kind=args.pair, fraction=args.fraction, seed=args.pair_seed) \
        if args.pair else (docs,)
    extra = {"recipe": args.recipe} if args.recipe != "fp32" else {}
    if args.max_vocab:
        extra["max_vocab"] = args.max_vocab
    if args.workers and args.algo in ("w2v_cbow", "w2v_sg", "fasttext"):
        extra["workers"] = args.workers
    for i, (part, out) in enumerate(zip(corpora, args.output)):
        emb = train_embedding(part, algo=args.algo, dim=args.dim, seed=args.seed, epochs=args.epochs,
                              min_count=args.min_count, window=args.window, progress=show_progress(args), **extra)
        emb.metadata.update({"corpus": args.corpus, "pair": args.pair, "pair_member": "ab"[i] if args.pair else None})
        save(emb, out)
        meta = emb.metadata
        print(f"{out}: {len(emb)} words x {emb.dim} dims from {len(part)} documents "
              f"({meta['corpus_tokens']} tokens); {meta['train_seconds']:.1f} s, "
              f"{meta['tokens_per_second']:,.0f} tokens/s", file=sys.stderr)  # stdout may be OUT itself
    return 0

"""``embstab downstream A B --task ... --model ...``: how many downstream predictions flip."""

from __future__ import annotations

import argparse
import json
import sys

from embstab.cli.options import add_trust_pickle, positive_float, positive_int, seed, unit_fraction
from embstab.errors import EmbstabError

HELP = "train a task model on each of two embeddings and count the predictions that differ"
DESCRIPTION = """\
Downstream instability of a pair of embeddings: the same model (same seed, data and settings) is
trained on A and on B, and the percentage of test predictions that differ is reported together
with each model's quality (accuracy, or per-token accuracy for tagging).

Tasks (real data, offline once fetched): rt_sentiment, rt_subjectivity, bbc_topic (classification:
models linear, mlp, cnn, lstm) and brown_pos (tagging: models bilstm, bilstm_crf). The linear model
(mean of the word vectors into one linear layer) is the reference and the fastest.

A and B are embedding files (any format embstab loads) or builtin:NAME pretrained embeddings.
--seed-baseline trains two models on A alone with seeds S and S+1000: the disagreement that seeds
alone cause, to read a pair's number against.

An embedding that knows less than --min-coverage of the task's tokens (default 50%) is refused:
most inputs would be random vectors, and "0% of predictions differ" would mean nothing.

examples:
  embstab downstream new.txt old.txt --task rt_sentiment --model linear
  embstab downstream new.txt old.txt --task brown_pos --model bilstm --limit 2000
  embstab downstream new.txt --seed-baseline --task bbc_topic"""


def register(subparsers) -> None:
    from embstab.downstream import MODELS, TASKS

    p = subparsers.add_parser("downstream", help=HELP, description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", metavar="A", help="first embedding (file or builtin:NAME)")
    p.add_argument("b", metavar="B", nargs="?", help="second embedding (omit with --seed-baseline)")
    p.add_argument("--task", choices=list(TASKS), default="rt_sentiment", help="task (default rt_sentiment)")
    p.add_argument("--model", choices=list(MODELS), help="model (default: linear, or bilstm for tagging)")
    p.add_argument("--seed", type=seed, default=0, help="model seed for both models (default 0)")
    p.add_argument("--seed-baseline", action="store_true", help="compare seeds S and S+1000 on A only")
    p.add_argument("--limit", type=positive_int, help="use at most N examples (tagging: sentences)")
    p.add_argument("--epochs", type=positive_int, help="maximum epochs (default per model)")
    p.add_argument("--lr", type=positive_float, help="Adam learning rate (default per model)")
    p.add_argument("--batch-size", type=positive_int, help="mini-batch size (default 32)")
    p.add_argument("--output", choices=["table", "json"], default="table")
    p.add_argument("--progress", action="store_true", help="show per-epoch progress bars")
    p.add_argument("--min-coverage", type=unit_fraction, default=None, metavar="F",
                   help="refuse an embedding that knows less than this fraction of the task's tokens "
                        "(default 0.5; 0 = never refuse)")
    add_trust_pickle(p)
    p.set_defaults(func=run)


def load_embedding(spec: str, trust_pickle: bool = False):
    """An embedding file, or ``builtin:NAME`` (see :mod:`embstab.data.pretrained`)."""
    from embstab.io import load

    return load(spec, trust_pickle=trust_pickle)


def run(args: argparse.Namespace) -> int:
    from embstab.downstream import TASKS, disagreement, seed_baseline
    from embstab.downstream.api import MIN_COVERAGE

    if (args.b is None) != args.seed_baseline:
        raise EmbstabError("give two embeddings A B, or one with --seed-baseline")
    model = args.model or ("bilstm" if TASKS[args.task][0] == "tagging" else "linear")
    kwargs = {k: v for k, v in (("epochs", args.epochs), ("lr", args.lr), ("batch_size", args.batch_size))
              if v is not None}
    kwargs["min_coverage"] = MIN_COVERAGE if args.min_coverage is None else args.min_coverage
    a = load_embedding(args.a, args.trust_pickle)
    if args.seed_baseline:
        res = seed_baseline(a, args.task, model, args.seed, limit=args.limit, progress=args.progress, **kwargs)
    else:
        res = disagreement(a, load_embedding(args.b, args.trust_pickle), args.task, model, args.seed,
                           limit=args.limit, progress=args.progress, **kwargs)
    if args.output == "json":
        json.dump(res.to_dict(), sys.stdout, indent=2, default=float)
        print()
        return 0
    s = res.settings
    unit = "tokens" if TASKS[args.task][0] == "tagging" else "test examples"
    print(f"task {res.task}, model {res.model}, seeds {res.seed}/{s['seed_b']}, {res.n_test} {unit}")
    print(f"disagreement: {res.disagreement:.2f}% of predictions differ")
    print(f"quality A: {res.quality_a:.2f}%   quality B: {res.quality_b:.2f}%"
          + (f"   (majority class: {s['majority_rate']:.2f}%)" if "majority_rate" in s else ""))
    print(f"token coverage A: {s['token_coverage_a']:.1%}   B: {s['token_coverage_b']:.1%};  "
          f"vocabulary coverage A: {s['coverage_a']:.1%}   B: {s['coverage_b']:.1%};  "
          f"training time A: {s['seconds_a']:.1f} s   B: {s['seconds_b']:.1f} s")
    return 0

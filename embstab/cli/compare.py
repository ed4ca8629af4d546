"""``embstab compare OLD NEW``: every stability measure between two embedding files."""

from __future__ import annotations

import argparse
import json
import math
import warnings
import sys

from embstab.cli.options import add_trust_pickle, non_negative_int
from embstab.embedding import DEFAULT_TOP_N
from embstab.errors import EmbstabError
from embstab.cli.names import DEFAULT_MEASURES, EUCLIDEAN_MEASURES, LARGER_IS_MORE_STABLE

__all__ = ["register", "run"]

HELP = "measure how unstable a pair of embeddings is"
DESCRIPTION = """\
Compare two embeddings of (mostly) the same vocabulary, e.g. last week's and this week's, with the
stability measures of Leszczynski et al. (MLSys 2020) and a few more. Only words present in both
are compared, the --top-n most frequent of them (by the row order of OLD, which embedding files
keep in frequency order; --rank-by new for NEW's).

OLD and NEW are embedding files, the old one first (word2vec text or binary, GloVe, fastText .vec, .npz, .npy + .vocab,
gensim KeyedVectors, embstab compressed; the format is detected) or built-in pretrained
embeddings: builtin:glove_6b_50d, builtin:minilm_l6_input.

The measures are symmetric (swapping OLD and NEW, with their anchors, gives the same values); the
order decides whose frequency order picks the words and whose rows are shuffled for the null.

EIS (eigenspace instability) needs an anchor for each side: ideally the largest, full-precision
embedding trained on the same data as OLD (--anchor-old) and as NEW (--anchor-new). Without them,
OLD and NEW serve as their own anchors.

Reading the output: 'value' is the raw measure; 'distance' turns it into "larger = less stable"
(1 - overlap for k-NN and eigenspace overlap), so rows can be read the same way. 'null' is the
value for an unrelated partner (NEW's rows shuffled among its words, with NEW's anchor; for EIS,
k-NN, the eigenspace overlap and PIP the exact average over all shuffles, otherwise a few
seeded shuffles): a measure shows 'signal' only when the pair is clearly apart from it (at
least twice as far from the uninformative end, and beyond the shuffles' noise). A value
without signal says nothing about this pair's stability."""

# word-embedding files: the measures of that geometry (the hyperbolic ones compare graph embeddings)
WORD_MEASURES = EUCLIDEAN_MEASURES
EPILOG = "measures: " + "; ".join(
    f"{name} ({'larger' if name in LARGER_IS_MORE_STABLE else 'smaller'} is more stable)" for name in WORD_MEASURES) + """

examples:
  embstab compare old.txt new.txt
  embstab compare old.txt new.txt --anchor-old old_big.txt --anchor-new new_big.txt --output json
  embstab compare builtin:glove_6b_50d builtin:minilm_l6_input --top-n 10000"""


def register(subparsers) -> None:
    """Add the ``compare`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser("compare", help=HELP, description=DESCRIPTION, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", metavar="OLD", help="the old embedding (file or builtin:NAME)")
    p.add_argument("new", metavar="NEW", help="the new embedding (file or builtin:NAME)")
    p.add_argument("--anchor-old", metavar="ANCHOR", help="anchor embedding of OLD's side (for EIS)")
    p.add_argument("--anchor-new", metavar="ANCHOR", help="anchor embedding of NEW's side (for EIS)")
    p.add_argument("--measures", nargs="+", metavar="NAME", choices=sorted(WORD_MEASURES),
                   help=f"measures to compute (default: {' '.join(DEFAULT_MEASURES)})")
    p.add_argument("--top-n", type=_top_n, default=DEFAULT_TOP_N, metavar="N",
                   help="compare the N most frequent shared words (default 10000, or all when fewer are "
                        "shared; 0 = all)")
    p.add_argument("--rank-by", choices=["old", "new"], default="old",
                   help="whose frequency order picks the top words (default old)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="compute with torch on this device (default: numpy on the CPU)")
    p.add_argument("--null-samples", type=_null_samples, default=3, metavar="K",
                   help="unrelated partners (NEW's rows shuffled) each measure without a closed-form null is also "
                        "computed on, for its null level and signal (default 3; 0 = skip every null; at most "
                        "10000)")
    p.add_argument("--output", choices=["table", "json", "csv"], default="table", help="output format")
    p.add_argument("--duplicates", choices=["error", "first"], default="error",
                   help="a word repeated in a file is an error (default) or keeps its first occurrence")
    add_trust_pickle(p)
    p.set_defaults(func=run)


def _top_n(text: str) -> int | None:
    """argparse type: N of --top-n, 0 spelling the library's None (all shared words)."""
    return non_negative_int(text) or None


def _null_samples(text: str) -> int:
    """argparse type: shuffles for the null, 0 to :data:`embstab.measures.null.MAX_NULL_SAMPLES`."""
    from embstab.errors import ConfigError  # noqa: PLC0415
    from embstab.measures.null import check_null_samples  # noqa: PLC0415

    value = non_negative_int(text)
    try:
        return check_null_samples(value, "")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _load(spec: str, duplicates: str, trust_pickle: bool = False):
    from embstab.io import load

    return load(spec, duplicates=duplicates, trust_pickle=trust_pickle)


def _emit(df, output: str, document: dict, header: list[str], footer: list[str]) -> None:
    """Print ``df`` as ``output`` asks: JSON (``document``, the rows as ``measures``), CSV, or a table between lines."""
    if output == "json":
        records = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                   for r in df.to_dict(orient="records")]  # JSON has no NaN: a skipped null is null
        json.dump({**document, "measures": records}, sys.stdout, indent=2)
        print()
    elif output == "csv":
        df.to_csv(sys.stdout, index=False)
    else:
        print("\n".join([*header, df.to_string(index=False, float_format=lambda v: f"{v:.6g}"), *footer]))


def _run_manifold(args: argparse.Namespace, formats: tuple[str | None, str | None]) -> int:
    """``embstab compare`` of two hyperbolic (or product) embeddings of the same nodes, by their distances."""
    from embstab.hyperbolic.io import load_embedding
    from embstab.measures.compare import compare

    for side, path, fmt in (("OLD", args.old, formats[0]), ("NEW", args.new, formats[1])):
        if fmt != "hyperbolic":
            raise EmbstabError(f"{side} ({path}) is not an embstab hyperbolic embedding file, but the other side is: "
                               "compare two of a kind")
    if args.anchor_old or args.anchor_new:
        raise EmbstabError("--anchor-old/--anchor-new apply to word embeddings (EIS), not to hyperbolic ones")
    a, b = load_embedding(args.old), load_embedding(args.new)
    df = compare(a, b, measures=args.measures)[["measure", "value", "distance", "direction"]]
    _emit(df, args.output, {"old": args.old, "new": args.new, "n_nodes": len(a)},
          [f"old: {args.old} vs new: {args.new} ({len(a)} nodes each), compared by their decoded distances "
           "(no null: these measures have none)"], [])
    return 0


def run(args: argparse.Namespace) -> int:
    """Handler of ``embstab compare``: load OLD and NEW (and the anchors), compute the measures on their
    most frequent shared words, print a table, JSON or CSV.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``compare``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        If only one anchor is given, ``--top-n`` exceeds the shared vocabulary, or loading or a
        measure fails on bad input.
    """
    from embstab.io import sniff_format
    from embstab.measures.compare import compare

    formats = (sniff_format(args.old), sniff_format(args.new))  # embstab.io tells the files apart
    if "hyperbolic" in formats:
        return _run_manifold(args, formats)
    if (args.anchor_old is None) != (args.anchor_new is None):
        raise EmbstabError("give both --anchor-old and --anchor-new, or neither")
    a = _load(args.old, args.duplicates, args.trust_pickle)
    b = _load(args.new, args.duplicates, args.trust_pickle)
    if a.name == b.name:  # e.g. a file and its compressed copy (which keeps its source's name): the paths differ
        a.name, b.name = args.old, args.new
    anchors = "self"
    if args.anchor_old:
        anchors = (_load(args.anchor_old, args.duplicates, args.trust_pickle),
                   _load(args.anchor_new, args.duplicates, args.trust_pickle))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        df = compare(a, b, anchors=anchors, measures=args.measures, top_n=args.top_n, rank_by=args.rank_by,
                     device=args.device, null_samples=args.null_samples)
    for w in caught:  # a caveat about this comparison: one line, in the CLI's voice
        print(f"embstab compare: warning: {w.message}", file=sys.stderr)
    n = df.attrs["n_words"]
    # sides are named by what the user typed: an embedding's own name is often "old" or "new" itself
    header = [f"old: {args.old} ({len(a)} words, {a.dim} dims) vs new: {args.new} ({len(b)} words, {b.dim} dims): "
              f"{n} shared words compared (top by {args.rank_by}'s frequency order)"]
    if anchors == "self":
        header.append("EIS anchors: the pair itself (pass --anchor-old/--anchor-new for dedicated anchors)")
    silent = df.loc[df["signal"].eq(False), "measure"].tolist()
    one = len(silent) == 1
    footer = [f"no signal: {', '.join(silent)} {'is' if one else 'are'} at the level of an unrelated partner "
              f"(null), so {'its value says' if one else 'their values say'} nothing about this pair's stability"] \
        if silent else []
    _emit(df, args.output, {"old": a.name, "new": b.name, "n_words": n, "anchors": "self" if anchors == "self" else
                            [anchors[0].name, anchors[1].name], "null_samples": args.null_samples,
                            "zero_rows": df.attrs.get("zero_rows")}, header, footer)
    return 0

"""``embstab compress IN OUT --bits B``: quantize an embedding file, optionally against an older one;
``--precision`` stores it at a vector store's precision instead."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from embstab.cli.names import EMBEDDING_FORMATS
from embstab.cli.options import add_no_clobber, add_progress, add_trust_pickle, bits, seed, show_progress

__all__ = ["KNN_WARN_BELOW", "register", "run"]

HELP = "quantize an embedding to B bits per entry (or an fp8/fp4/MX format) and save it"
DESCRIPTION = """\
Quantize the embedding IN and write it to OUT.

By default every entry is rounded onto 2^B evenly spaced levels on [-r, r], with the clip r chosen
to minimise the squared error (golden-section search). B = 32 only clips. --format picks another
number format instead, applied per row: fp8 (e4m3fn), fp8_e5m2, fp6, fp4, bf16, fp16, bfp8
(block float with one exponent per row), mxfp8_e4m3, mxfp6_e3m2, mxfp4, mxint8 ...

With --like OLD, IN is treated as the newer member of a pair: it is first rotated onto OLD
(orthogonal Procrustes on the shared words) and quantized with the clip found on OLD, so the two
can be compared on one grid (compress OLD itself with the same --bits to get the other member).

OUT is written in embstab's bit-packed format (.esq: a 4-bit 300-d embedding takes 150 bytes per
word plus the vocabulary), which `embstab.load` and every embstab command read, unless its suffix
names another format (.txt, .vec, .npz, ... as for `embstab train`) or --output-format does: then
the dequantized floats are written in that format.
OUT may be /dev/stdout or a pipe (written into, never replaced); it may not be IN or OLD.

Transforms change what is quantized (uniform --bits only): --rotate hadamard|orthogonal rotates
the vectors before quantizing and back after (it spreads outlier dimensions over all of them),
--ocs R splits the ceil(R*d) dimensions holding the largest values in half (outlier channel
splitting; with --like they are chosen on OLD), --tt-ranks R stores the table as tensor-train cores
of inner rank R quantized to B bits. --rotate and --ocs combine (rotation first). The rotation is
drawn from --seed (default 0), so compressing OLD and NEW with the same seed rotates both the same
way. The .esq file stores what the transform quantized: the rotated, split codes with the rotation's
seed and the splits, or the quantized TT cores; reading it undoes the transform. Its size is the
bits per word the summary line reports, plus the vocabulary and a header.

The summary line also gives the k-NN overlap of the result with IN (5 nearest neighbours by cosine,
at most 1000 query words drawn with a fixed seed; 1 = every neighbourhood kept; about 8 s for a
100,000 x 300 table on 2 cores). Below 0.5 a
one-line warning goes to stderr, even with --quiet: the compressed table has lost most of the
neighbourhood structure (a low TT rank usually does).

--precision stores IN the way a vector store of sentence embeddings keeps it, with
sentence-transformers' quantize_embeddings codes: int8/uint8 cut each dimension's range over IN's
rows into 256 buckets (values are clipped to them), binary/ubinary keep one bit per dimension
(x > 0). --truncate-dim D first keeps the leading D dimensions and L2-normalises the rows
(Matryoshka). --calibration FILE cuts the int8/uint8 buckets from FILE instead (quantize queries
with the documents' buckets; a single vector calibrated on itself would give all zeros). OUT holds
per dimension what the codes hold: the int8 codes -128..127, the uint8 codes 0..255, or for binary
the signs +1/-1 (whose inner products rank as Hamming distance does); an .esq file stores them as
8-bit or 1-bit codes with the int8/uint8 ranges in its metadata. The summary gives the bytes a
store keeps per vector (4d, d or d/8 rounded up) and the k-NN overlap with IN.

examples:
  embstab compress new.txt new4.esq --bits 4
  embstab compress new.txt new4.esq --bits 4 --like old.txt     # the pair protocol
  embstab compress new.txt new8.esq --format fp8 --rounding stochastic --seed 0
  embstab compress new.txt new4h.esq --bits 4 --rotate hadamard --ocs 0.03 --like old.txt
  embstab compress docs.npz docs_bin.esq --precision binary --truncate-dim 256
  embstab compress queries.npz queries8.npz --precision int8 --calibration docs.npz"""

#: Below this k-NN overlap with IN, ``compress`` warns that most neighbourhoods were lost.
KNN_WARN_BELOW = 0.5
_KNN_K, _KNN_QUERIES, _KNN_SEED = 5, 1000, 1234


def _rounding(text: str) -> str:
    """argparse type: a rounding mode of :func:`embstab.lowprec.quantize`, canonicalised."""
    from embstab.lowprec.rounding import check_rounding

    try:
        return check_rounding(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _ratio(text: str) -> float:
    """argparse type: a number in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _transform(args: argparse.Namespace) -> str:
    """The transform the flags name, in :func:`embstab.compress.parse_transform` spelling."""
    from embstab.errors import EmbstabError

    if args.tt_ranks is not None and (args.rotate or args.ocs is not None):
        raise EmbstabError("--tt-ranks stands alone: it cannot combine with --rotate or --ocs")
    if args.tt_ranks is not None:
        return f"tt:{args.tt_ranks}"
    steps = ([args.rotate] if args.rotate else []) + ([f"ocs:{args.ocs}"] if args.ocs is not None else [])
    return "+".join(steps) or "none"


def register(subparsers) -> None:
    """Add the ``compress`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    p = subparsers.add_parser("compress", help=HELP, description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="IN", help="embedding file to compress (format detected)")
    p.add_argument("output", metavar="OUT", help="where to write the result")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--bits", type=bits, default=None, metavar="B",
                     help="bits per entry for uniform quantization (1-16, or 32 = clip only)")
    how.add_argument("--precision", choices=("float32", "int8", "uint8", "binary", "ubinary"), default=None,
                     help="a vector store's precision, sentence-transformers' codes (int8/uint8 buckets "
                          "from IN's own per-dimension ranges)")
    p.add_argument("--truncate-dim", type=_positive_int, default=None, metavar="D",
                   help="with --precision: keep the leading D dimensions and L2-normalise (Matryoshka) first")
    p.add_argument("--calibration", metavar="FILE", default=None,
                   help="with --precision int8/uint8: cut the buckets from FILE's per-dimension ranges instead of "
                        "IN's (e.g. the documents' file when IN holds queries)")
    p.add_argument("--format", default="uniform", metavar="FMT",
                   help="number format: uniform (default, needs --bits) or a preset such as fp8, fp4, bfp8, mxfp4")
    p.add_argument("--like", metavar="OLD", help="align IN to OLD and use OLD's clip (the pair protocol)")
    p.add_argument("--rounding", type=_rounding, default="nearest", metavar="MODE",
                   help="rounding of the entries: nearest (default, ties to even), nearest_away, nearest_up, "
                   "toward_zero, stochastic, or stochastic:K (hardware-like, K random bits); the clip search "
                   "always rounds to nearest")
    p.add_argument("--seed", type=seed, default=None, help="seed for stochastic rounding and of --rotate (default 0)")
    p.add_argument("--rotate", choices=("hadamard", "orthogonal"), default=None,
                   help="rotate before quantizing and back after (same --seed: same rotation)")
    p.add_argument("--ocs", type=_ratio, default=None, metavar="R",
                   help="outlier channel splitting: split the ceil(R*d) largest dimensions in half, R in (0, 1)")
    p.add_argument("--tt-ranks", type=_positive_int, default=None, metavar="R",
                   help="store the table as tensor-train cores of inner rank R, quantized to --bits")
    p.add_argument("--output-format", default=None, choices=EMBEDDING_FORMATS,
                   help="file format of OUT (default: from OUT's suffix, .txt, .npz, ... as for `embstab train`; "
                        "embstab = bit-packed .esq for .esq and any other suffix)")
    add_progress(p, quiet_help="no progress bars and no summary line")
    add_trust_pickle(p)
    add_no_clobber(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler of ``embstab compress``: quantize IN (optionally aligned to and clipped like
    ``--like``, optionally through a rotation, outlier splitting or tensor-train cores), or store
    it at a vector-store ``--precision`` (optionally truncated), and write OUT.

    Outputs are checked against the inputs and for writability before any work.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options of ``compress``.

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    EmbstabError
        If neither ``--bits`` nor ``--format`` is usable, a transform is combined with a number
        format, an output would overwrite an input, or loading fails on bad input.
    """
    from embstab._fs import check_outputs, check_writable, is_special
    from embstab.compress import compress_like
    from embstab.compress.embedding import resolve_storage
    from embstab.errors import EmbstabError
    from embstab.io import format_of_path, load, save
    from embstab.io.arrays import vocab_path_for

    if args.output == "-":
        raise EmbstabError("OUT is a file to write ('-' would create a file named '-'); for standard output give "
                           "/dev/stdout with a text --output-format")
    if args.output_format is None:  # the suffix decides, as for every command that writes an embedding
        args.output_format = format_of_path(args.output, default="embstab")
    outputs = [("OUT", args.output)]
    if args.output_format == "npy":
        outputs.append(("OUT's vocabulary", vocab_path_for(args.output)))
    # before any work: an output must never be one of the inputs (paths, symlinks, hard links)
    inputs = [("IN", args.input), ("--like", args.like), ("--calibration", args.calibration)]
    inputs += [(f"{label}'s vocabulary", vocab_path_for(p)) for label, p in inputs
               if p is not None and p.lower().endswith(".npy")]  # a .npy matrix reads X.vocab too
    check_outputs(outputs, inputs)
    for label, out in outputs:
        check_writable(out, label, no_clobber=args.no_clobber)
    if args.precision is not None:
        return _run_precision(args)
    if args.truncate_dim is not None or args.calibration is not None:
        raise EmbstabError(f"{'--truncate-dim' if args.truncate_dim is not None else '--calibration'} "
                           "applies with --precision")
    fmt = None if args.format.lower() == "uniform" else args.format
    try:
        kind, _, _ = resolve_storage(args.bits, fmt, None)  # checked here to name the flag
    except ValueError as exc:
        if args.bits is None and fmt is None:
            raise EmbstabError("give --bits B for uniform quantization, or --format FMT for a number format") \
                from None
        flag = f"--format {args.format}" if fmt else f"--bits {args.bits}"
        raise EmbstabError(f"{flag}: {exc}") from None
    transform = _transform(args)
    if transform != "none" and kind != "uniform":
        raise EmbstabError(f"--rotate/--ocs/--tt-ranks apply to uniform quantization (--bits), not --format {args.format}")
    emb = load(args.input, trust_pickle=args.trust_pickle)
    like = load(args.like, trust_pickle=args.trust_pickle) if args.like else None
    result = compress_like(emb, like, args.bits, format=fmt, transform=transform, rounding=args.rounding,
                           seed=args.seed, progress=show_progress(args))
    out = result.embedding
    if args.output_format == "embstab":
        save(out, args.output, format="embstab")  # the exact codes, bit-packed
    else:
        save(out.astype("float32"), args.output, format=args.output_format)
    overlap = _knn_overlap(result.reference, out)
    if not args.quiet:
        size = "" if is_special(args.output) else f", {os.path.getsize(args.output)} bytes"
        knn_text = "" if overlap is None else f", k-NN overlap {overlap:.3f}"
        print(f"{len(out)} words x {out.dim} dims -> {result.bits_per_word:g} bits/word "
              f"({result.method}){size}{knn_text}: {args.output}", file=sys.stderr)
    if overlap is not None and overlap < KNN_WARN_BELOW:
        _warn_low_overlap(transform if transform != "none" else "compression", overlap, args, len(emb))
    return 0


def _run_precision(args: argparse.Namespace) -> int:
    """``--precision``: a vector store's codes of IN, optionally truncated first (outputs checked)."""
    from embstab._fs import is_special
    from embstab.compress import compress_for_store
    from embstab.errors import EmbstabError
    from embstab.io import load, save

    others = [flag for flag, given in (("--format", args.format.lower() != "uniform"), ("--like", args.like),
                                       ("--rotate", args.rotate), ("--ocs", args.ocs is not None),
                                       ("--tt-ranks", args.tt_ranks is not None),
                                       ("--rounding", args.rounding != "nearest"), ("--seed", args.seed is not None))
              if given]
    if others:
        raise EmbstabError(f"--precision {args.precision} stands alone: it cannot combine with {', '.join(others)}")
    buckets = args.precision.endswith("int8")
    if args.calibration is not None and not buckets:
        raise EmbstabError(f"--calibration applies to --precision int8/uint8, not {args.precision}")
    emb = load(args.input, trust_pickle=args.trust_pickle)
    if args.truncate_dim is not None and args.truncate_dim > emb.dim:
        raise EmbstabError(f"--truncate-dim {args.truncate_dim} exceeds the {emb.dim} dimensions of {args.input}")
    calibration = None if args.calibration is None else load(args.calibration, trust_pickle=args.trust_pickle)
    for label, source in (("--calibration", calibration), (args.input, None if calibration else emb)):
        if buckets and source is not None and len(source) == 1:
            raise EmbstabError(f"{label} holds one vector: {args.precision} buckets cut from its range put every "
                               "value in bucket 0; give --calibration FILE with many vectors (e.g. the documents')")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        out = compress_for_store(emb, args.precision, truncate_dim=args.truncate_dim, calibration=calibration)
    for w in caught:  # a caveat about these buckets: one line, in the CLI's voice
        caveat = str(w.message).split("; ")[0]
        print(f"embstab compress: warning: {caveat}; calibrate on more vectors with --calibration FILE",
              file=sys.stderr)
    if args.output_format == "embstab":
        save(out, args.output, format="embstab")  # the exact 8-bit or 1-bit codes
    else:
        save(out, args.output, format=args.output_format)
    overlap = _knn_overlap(emb, out)  # against IN itself: truncation and quantization both count
    if not args.quiet:
        info = out.metadata["compression"]
        cut = f", truncated from {emb.dim}" if args.truncate_dim is not None else ""
        size = "" if is_special(args.output) else f", {os.path.getsize(args.output)} bytes"
        knn_text = "" if overlap is None else f", k-NN overlap {overlap:.3f}"
        print(f"{len(out)} words x {out.dim} dims{cut} -> {args.precision}, {info['bytes_per_vector']} bytes/vector"
              f"{size}{knn_text}: {args.output}", file=sys.stderr)
    if overlap is not None and overlap < KNN_WARN_BELOW:
        _warn_low_overlap(args.precision, overlap, args, len(emb))
    return 0


def _warn_low_overlap(what: str, overlap: float, args: argparse.Namespace, n_words: int) -> None:
    """One line on stderr: the k-NN overlap against its reference points, and what decides instead."""
    from embstab._shell import command

    print(f"warning: {what} keeps only {overlap:.3f} of the k-NN neighbourhoods of {args.input} ({_KNN_K} nearest, "
          f"below {KNN_WARN_BELOW}; 1 = every neighbour kept, an unrelated table about "
          f"{_KNN_K / max(n_words - 1, 1):.2g}). Neighbourhoods are not predictions, and a study may still "
          f"recommend this setting: measure the flips with `{command('embstab', 'downstream', args.input, args.output)}"
          " --task TASK`, or estimate them with `embstab predict OLD NEW --calibration RESULTS`", file=sys.stderr)


def _knn_overlap(reference, out) -> float | None:
    """k-NN overlap of ``out`` with the uncompressed ``reference`` (None for too few rows)."""
    from embstab.measures import knn

    n = len(reference)
    if n < _KNN_K + 1:
        return None
    # float32 scores: half the time of float64 on a large table, and a summary needs no more
    return float(knn(reference.vectors, out.vectors, k=_KNN_K, n_queries=_KNN_QUERIES if n > _KNN_QUERIES else None,
                     seed=_KNN_SEED, dtype="float32"))

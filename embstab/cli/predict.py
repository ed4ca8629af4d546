"""``embstab predict OLD NEW --calibration RESULTS``: how many downstream predictions will flip."""

from __future__ import annotations

import argparse
import json

from embstab.cli.options import bits, measure_param, non_negative_int, open_fraction

__all__ = ["register", "handle"]

HELP = "predict how many downstream predictions flip between two embeddings"
DESCRIPTION = """\
Compute the stability measures of a pair of embeddings (OLD first, as `embstab compare` does) and
predict from them, the pair's dimension (read from the files) and its bits per entry (--bits) the
share of downstream predictions that flip between the two, per task, with an interval.

The prediction comes from a calibration: results that relate such measures to measured
disagreement for the same algorithm (--algo) and tasks. RESULTS is a study's results (CSV,
Parquet, its results.sqlite) or a published anchor-stability table; a model is fitted per
algorithm and task (chosen by cross-validation over seeds), its intervals are conformal, and the
fit is checked with each seed held out in turn: the command prints that check's coverage and
mean absolute error beside each task. A .json file saved by DisagreementPredictor.save is
used as it is.

The command refuses, in one line, a pair outside the calibration: an algorithm, task or kind it
never saw, or a dimension, bit width or measure value outside the calibrated range (calibrations
do not transfer across algorithms). A study measures EIS against anchors (its largest
full-precision pair); pass the same with --anchor-old/--anchor-new for comparable values.

The pair is measured as the calibration's rows were: a study's results.sqlite or Parquet export
records its measures' top_n and parameters, and they apply unless --top-n/--param say otherwise
(the output says when they differ). A CSV or published table records none: give them if its rows
were measured with other settings than the defaults.

examples:
  embstab predict old.txt new.txt --calibration embstab-study/results.sqlite --algo w2v_cbow --bits 4
  embstab predict old_q.npz new_q.npz --calibration w2v_cbow_optimal_no_emb_norm_top_10000.csv \\
      --algo w2v_cbow --bits 4 --task sst --output json
  embstab predict old.txt new.txt --calibration predictor.json --anchor-old old_big.txt --anchor-new new_big.txt
  embstab predict old.txt new.txt --calibration results.csv --top-n 5000 --param knn.k=10 --param eis.alpha=3"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    parser = subparsers.add_parser("predict", help=HELP, description=DESCRIPTION,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", metavar="OLD", help="the old embedding (file or builtin:NAME)")
    parser.add_argument("new", metavar="NEW", help="the new embedding (file or builtin:NAME)")
    parser.add_argument("--calibration", metavar="RESULTS", required=True,
                        help="results to calibrate on (.csv, .parquet, a study's results.sqlite, a published table) "
                             "or a saved predictor (.json)")
    parser.add_argument("--algo", help="the algorithm that trained the pair (default: the calibration's only one)")
    parser.add_argument("--bits", type=bits, default=32, metavar="B",
                        help="bits per entry of the pair (default: 32, full precision)")
    parser.add_argument("--task", help="only this task (default: every task calibrated for the algorithm)")
    parser.add_argument("--kind", default="word", help="kind of embedding (default: word)")
    parser.add_argument("--anchor-old", metavar="ANCHOR", help="anchor embedding of OLD's side (for EIS)")
    parser.add_argument("--anchor-new", metavar="ANCHOR", help="anchor embedding of NEW's side (for EIS)")
    parser.add_argument("--top-n", type=non_negative_int, default=None, metavar="N",
                        help="compare the N words NEW ranks first among those both members (and the anchors) "
                             "share, as a study measures its rows (default: the calibration's study's, else 10000 "
                             "or all when fewer are shared; 0 = all)")
    parser.add_argument("--param", type=measure_param, action="append", default=[], metavar="MEASURE.NAME=VALUE",
                        help="a measure parameter, over the calibration's study's (repeatable; e.g. knn.k=10)")
    parser.add_argument("--level", type=open_fraction, default=0.9, metavar="P",
                        help="coverage of the intervals when RESULTS is fitted here (default: 0.9)")
    parser.add_argument("--output", choices=["table", "json"], default="table", help="output format")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """Run ``embstab predict``: print the predicted flips per task with their intervals.

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
        When only one anchor is given, or the pair lies outside the calibration (the CLI prints
        one line and exits 2).
    """
    from embstab.errors import ConfigError  # noqa: PLC0415 - imported here so `embstab --help` stays fast
    from embstab.selection.predict_pair import predict_pair  # noqa: PLC0415

    if (args.anchor_old is None) != (args.anchor_new is None):
        raise ConfigError("give both --anchor-old and --anchor-new, or neither")
    anchors = "self" if args.anchor_old is None else (args.anchor_old, args.anchor_new)
    params: dict[str, dict] = {}
    for measure, name, value in args.param:
        params.setdefault(measure, {})[name] = value
    result = predict_pair(args.old, args.new, args.calibration, algo=args.algo, bits=args.bits, task=args.task,
                          kind=args.kind, anchors=anchors, top_n=args.top_n, params=params or None,
                          level=args.level)
    if args.output == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result)
    return 0

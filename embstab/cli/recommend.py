"""``embstab recommend RESULTS --budget BITS``: the dimension and precision to ship."""

from __future__ import annotations

import argparse
import json

from embstab.cli.options import non_negative_int, open_fraction, positive_float
from embstab.cli.names import MEASURES

__all__ = ["register", "handle"]

HELP = "recommend the dimension and precision to ship under a memory budget"
DESCRIPTION = """\
Read a study's results (CSV or Parquet in embstab's tidy format, its results.sqlite, or a
published anchor-stability CSV), keep the configurations whose memory (dim x bits per entry)
fits the budget, and rank them on one scale: the share of downstream predictions that flip.
A configuration the results measured stands at its measured disagreement (mean over seeds, with
an interval across seeds); one they did not measure, at the disagreement a calibrated model
predicts from its stability measures, dimension and bit width (fitted per algorithm and task on
the same results). Raw measure values never rank: EIS shrinks with the dimension and means
different things for different algorithms. A measured configuration ties with the
measured best one when each one's value lies inside the other's interval, and the cheapest of a
tie is shipped (the output says so); predicted values never tie.

The command then prints the flips the calibrated model predicts for its pick, per task, with the
interval, beside what was measured. Results of a knowledge-graph or contextual study count memory
per entity row or per feature vector; a table holding several kinds needs --kind. Rows whose
downstream model came within 5 points of its task's chance level (its disagreement is mostly
noise) are left out unless --keep-near-chance is given. The predictions read only measures that
show signal (a value clearly apart from the level of unrelated tables, where the results record
it); a pick without any says so.

examples:
  embstab recommend embstab-study/default.parquet --budget 400
  embstab recommend embstab-study/results.sqlite --budget 800 --task rt_sentiment --json
  embstab recommend results.csv --budget 800 --measure knn --top 10
  embstab recommend embstab-study/kg_quick.parquet --budget 32 --task link_prediction"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``recommend`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    parser = subparsers.add_parser("recommend", help=HELP, description=DESCRIPTION,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", metavar="RESULTS",
                        help="results table (.csv, .parquet, a study's results.sqlite or its store folder)")
    parser.add_argument("--budget", metavar="BITS", type=positive_float, required=True,
                        help="memory budget in bits per word (per entity row for KG results; e.g. 400 = 100 dims "
                             "at 4 bits)")
    parser.add_argument("--measure", default=None, choices=list(MEASURES),
                        help="the one measure the predictions read (default: every measure with signal); when it "
                             "shows no signal, the next one that does")
    parser.add_argument("--task", help="only rank by, and report, this task's disagreement")
    parser.add_argument("--algo", help="only consider this embedding algorithm")
    parser.add_argument("--kind",
                        help="only consider this kind of embedding (a study kind: word, kg, contextual, hyperbolic)")
    parser.add_argument("--level", type=open_fraction, default=0.9, metavar="P",
                        help="coverage of the intervals (default: 0.9)")
    parser.add_argument("--threshold", type=positive_float, default=None, metavar="BITS",
                        help="no effect: the memory trend no longer predicts the disagreement (kept for old scripts)")
    parser.add_argument("--top", type=non_negative_int, default=5, metavar="N",
                        help="also list the N best configurations that fit (default: 5; 0 = none)")
    parser.add_argument("--no-ties", action="store_true",
                        help="ship the configuration with the least disagreement even when a cheaper one ties with "
                             "it (by default the cheapest of a tie is shipped)")
    parser.add_argument("--no-fallback", action="store_true",
                        help="do not turn to another measure when --measure shows no signal on the configurations "
                             "that fit: fail instead")
    parser.add_argument("--keep-near-chance", action="store_true",
                        help="keep the rows whose downstream model is within 5 points of its task's chance "
                             "level (left out by default: their disagreement is mostly noise)")
    parser.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """Run ``embstab recommend``: print the configuration to ship under ``--budget``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    int
        The exit code (0).
    """
    from embstab.selection.recommend import recommend  # imported here so `embstab --help` stays fast
    from embstab.selection.results import as_results  # noqa: PLC0415

    results = as_results(args.results, keep_near_chance=args.keep_near_chance)
    rec = recommend(results, args.budget, measure=args.measure, task=args.task, algo=args.algo, kind=args.kind,
                    level=args.level, fallback=not args.no_fallback, ties=not args.no_ties)
    if args.json:
        print(json.dumps(rec.to_dict(), indent=2))
        return 0
    print(rec)
    kept = int(results["near_chance"].sum()) if "near_chance" in results.columns else 0
    if rec.near_chance_left_out:
        print("(--keep-near-chance keeps them)")
    elif kept:
        print(f"{kept} result row(s) near chance kept (--keep-near-chance): their disagreement is mostly noise.")
    ranked = rec.candidates[rec.candidates["ranked"]]
    if args.top > 0 and len(ranked) > 1:
        # the best is always in its own tie group: "tie" only where another configuration shares it
        label = "tie" if int(ranked["tie"].sum()) > 1 else ""
        shown = ranked.head(args.top).assign(interval=lambda t: [f"[{lo:.2f}, {hi:.2f}]" for lo, hi in
                                                                 zip(t["lower"], t["upper"])],
                                             tie=lambda t: t["tie"].map({True: label, False: ""}))
        unranked = rec.n_candidates - len(ranked)
        print(f"\nBest {len(shown)} of {len(ranked)} configurations by disagreement (% flips, mean over seeds and "
              f"tasks; predicted: {rec.level:.0%} intervals, measured: {rec.measured_interval})"
              + (f" ({unranked} more fit but lack a value for some task)" if unranked else "") + ":")
        cols = ["algo", "dim", "bitrate", "memory", "disagreement", "interval", "source", "tie",
                *([rec.measure] if rec.measure in shown.columns else [])]
        print(shown[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0

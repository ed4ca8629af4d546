"""``embstab recommend RESULTS --budget BITS``: the dimension and precision to ship."""

from __future__ import annotations

import argparse
import json

from embstab.cli.options import non_negative_int, positive_float
from embstab.cli.names import MEASURES

__all__ = ["register", "handle"]

HELP = "recommend the dimension and precision to ship under a memory budget"
DESCRIPTION = """\
Read a study's results (CSV or Parquet in embstab's tidy format, or a published
anchor-stability CSV), keep the configurations whose memory (dim x bits per entry) fits the
budget, pick the one with the best stability measure, and print the downstream disagreement
the linear-log memory trend predicts for it. Results of a knowledge-graph or contextual
study count memory per entity row or per feature vector; a table holding several kinds needs
--kind. Rows whose downstream model came within 5 points of its task's chance level
(its disagreement is mostly noise) are left out unless --keep-near-chance is given.

A measure ranks only the configurations on which it shows signal: where the results record
each pair's null (a study's do), a configuration whose value sits at the level of unrelated
tables is not ranked by it, and when the measure shows signal on fewer than half of the
configurations that fit, the next measure that does is used (eis, knn, semantic_displacement,
eigenspace_overlap, ...; one line says so), or the command says that no measure can decide.

examples:
  embstab recommend embstab-study/default.parquet --budget 400
  embstab recommend results.csv --budget 800 --measure knn --task rt_sentiment --json
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
    parser.add_argument("results", metavar="RESULTS", help="results table (.csv or .parquet)")
    parser.add_argument("--budget", metavar="BITS", type=positive_float, required=True,
                        help="memory budget in bits per word (per entity row for KG results; e.g. 400 = 100 dims "
                             "at 4 bits)")
    parser.add_argument("--measure", default="eis", choices=list(MEASURES),
                        help="stability measure that ranks the configurations (default: eis)")
    parser.add_argument("--task", help="only predict the disagreement of this task")
    parser.add_argument("--algo", help="only consider this embedding algorithm")
    parser.add_argument("--kind", help="only consider this kind of embedding (a study kind: word, kg, contextual, hyperbolic)")
    parser.add_argument("--threshold", type=positive_float, default=1000.0, metavar="BITS",
                        help="fit the trend on rows with memory below this (default: 1000)")
    parser.add_argument("--top", type=non_negative_int, default=5, metavar="N",
                        help="also list the N best configurations that fit (default: 5; 0 = none)")
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
    rec = recommend(results, args.budget, measure=args.measure, task=args.task,
                    algo=args.algo, kind=args.kind, threshold=args.threshold, fallback=not args.no_fallback)
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
        shown = ranked.head(args.top)
        unranked = rec.n_candidates - len(ranked)
        print(f"\nBest {len(shown)} of {len(ranked)} configurations by {rec.measure}"
              + (f" ({unranked} more fit but are not ranked: {rec.measure} shows no signal there)" if unranked else "")
              + ":")
        cols = ["algo", "dim", "bitrate", "memory", rec.measure, *(["null"] if rec.signal_checked else []),
                "mean_disagreement"]
        print(shown[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0

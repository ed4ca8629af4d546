"""``embstab report RESULTS -o report.html``: the study report as one self-contained HTML file."""

from __future__ import annotations

import argparse
import sys

from embstab.cli.options import add_no_clobber, positive_float
from embstab.cli.names import MEASURES

__all__ = ["register", "handle"]

HELP = "write the HTML report of a study's results"
DESCRIPTION = """\
Read a study's results (CSV or Parquet in embstab's tidy format, or a published
anchor-stability CSV) and write one self-contained HTML file: disagreement vs memory with the
fitted trend, each measure vs disagreement, the correlation, selection-error and oracle-gap
tables, and the recommended configuration for each memory budget. A study's results also get
each task's downstream quality against its chance level; rows whose model is within 5 points of
it are left out of the analyses unless --keep-near-chance. The report may not overwrite RESULTS.

examples:
  embstab report embstab-study/default.parquet -o report.html
  embstab report results.csv --measure knn --budget 400 --budget 800 -o knn.html"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` sub-command to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    parser = subparsers.add_parser("report", help=HELP, description=DESCRIPTION,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", metavar="RESULTS", help="results table (.csv or .parquet)")
    parser.add_argument("-o", "--output", metavar="HTML", default="report.html",
                        help="where to write the report (default: report.html)")
    parser.add_argument("--measure", choices=list(MEASURES),
                        help="measure used for the recommendations (default: eis when present)")
    parser.add_argument("--budget", metavar="BITS", type=positive_float, action="append",
                        help="memory budget to recommend for (repeatable; default: every memory "
                             "value in the results)")
    parser.add_argument("--threshold", type=positive_float, default=1000.0, metavar="BITS",
                        help="fit the trend on rows with memory below this (default: 1000)")
    parser.add_argument("--title", help="page title")
    parser.add_argument("--keep-near-chance", action="store_true",
                        help="keep the rows whose downstream model is within 5 points of its task's chance "
                             "level in the analyses (left out by default: their disagreement is mostly noise)")
    add_no_clobber(parser)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    """Run ``embstab report``: write the HTML report of a results table.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    int
        The exit code (0).
    """
    from embstab._fs import check_outputs, check_writable
    from embstab.report import write_report  # matplotlib is only imported when needed

    check_outputs([("-o", args.output)], [("RESULTS", args.results)])
    check_writable(args.output, "-o", create_parents=True, no_clobber=args.no_clobber)
    path = write_report(args.results, args.output, title=args.title, measure=args.measure,
                        budgets=args.budget, threshold=args.threshold, keep_near_chance=args.keep_near_chance)
    print(f"wrote {path}", file=sys.stderr)
    return 0

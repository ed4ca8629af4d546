"""``embstab recipes list|check``: the training and compression recipes and their acceptance checks."""

from __future__ import annotations

import argparse
import json

from embstab.cli.options import seed

__all__ = ["register", "handle_list", "handle_check"]

HELP = "list the training/compression recipes or run one's small-problem check"
DESCRIPTION = """\
Recipes are training and compression methods built on embstab's low-precision core (16-bit-FPU
training, SWALP, HALP, tensor-train tables, outlier splitting, Adasum, ...). Each has a small,
seeded acceptance check that reproduces the behaviour its paper claims and prints a table.

examples:
  embstab recipes list
  embstab recipes check swalp --seed 0
  embstab recipes check halp --json > halp.json"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``recipes`` sub-command (``list`` and ``check``) to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The sub-parsers of the ``embstab`` parser.
    """
    parser = subparsers.add_parser("recipes", help=HELP, description=DESCRIPTION,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="list the registered recipes").set_defaults(func=handle_list)
    check = sub.add_parser("check", help="run a recipe's small-problem acceptance check")
    check.add_argument("name", metavar="NAME", help="recipe name (see `embstab recipes list`)")
    check.add_argument("--seed", type=seed, default=0, help="random seed (default: 0)")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.set_defaults(func=handle_check)


def handle_list(args: argparse.Namespace) -> int:
    """Run ``embstab recipes list``: print one line per registered recipe.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    int
        The exit code (0).
    """
    from embstab.recipes import RECIPES

    width = max((len(n) for n in RECIPES), default=0)
    for name in sorted(RECIPES):
        print(f"{name:<{width}}  {RECIPES[name].summary}")
    return 0


def handle_check(args: argparse.Namespace) -> int:
    """Run ``embstab recipes check NAME``: run one recipe's check and print its table and claims.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed command line.

    Returns
    -------
    int
        The exit code: 0 when every claim held, 1 when one failed.
    """
    from embstab.recipes import get_recipe

    result = get_recipe(args.name).check(seed=args.seed)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=float))
    else:
        print(result.table.to_string(index=False))
        print()
        for claim, held in result.claims.items():
            print(f"[{'ok' if held else 'FAILED'}] {claim}")
    return 0 if result.passed else 1

"""The ``embstab`` command line.

Each sub-command lives in its own module under :mod:`embstab.cli` and exposes
``register(subparsers)``; :data:`COMMAND_MODULES` lists them in the order ``--help`` shows.
Any :class:`embstab.errors.EmbstabError` (bad input) becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from embstab.errors import EmbstabError

#: Sub-command modules, each with ``register(subparsers) -> None``; the handler they set as
#: ``func`` receives the parsed namespace and returns an exit code.
COMMAND_MODULES: tuple[str, ...] = ("study", "compare", "compress", "data", "train", "downstream",
                                     "recommend", "report", "hyperbolic", "recipes")

DESCRIPTION = """\
embstab measures how unstable a pair of embeddings is (e.g. last week's and this week's), which
dimension and precision to ship under a memory budget, and how many downstream predictions flip.
Run `embstab COMMAND --help` for the options of each command."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="embstab", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    from embstab import __version__

    parser.add_argument("--version", action="version", version=f"embstab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"embstab.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except EmbstabError as exc:
        print(f"embstab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"embstab {args.command}: error: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

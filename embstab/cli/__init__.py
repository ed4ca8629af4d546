"""The ``embstab`` command line.

Each sub-command lives in its own module under :mod:`embstab.cli` and exposes
``register(subparsers)``; :data:`COMMAND_MODULES` lists them in the order ``--help`` shows.
Any :class:`embstab.errors.EmbstabError` (bad input), and any operating-system error on a file,
memory error (torch's failed allocations included) or corrupt database, becomes one line on
stderr and exit code 2; argparse errors exit 2 as well. A closed output pipe (``| head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import sys
from collections.abc import Sequence

from embstab.errors import EmbstabError

__all__ = ["Parser", "build_parser", "main", "COMMAND_MODULES"]

#: Sub-command modules, each with ``register(subparsers) -> None``; the handler they set as
#: ``func`` receives the parsed namespace and returns an exit code.
COMMAND_MODULES: tuple[str, ...] = ("study", "compare", "compress", "data", "train", "downstream",
                                     "recommend", "predict", "report", "hyperbolic", "recipes", "contextual", "kg")

DESCRIPTION = """\
embstab measures how unstable a pair of embeddings is (e.g. last week's and this week's), which
dimension and precision to ship under a memory budget, and how many downstream predictions flip.
Run `embstab COMMAND --help` for the options of each command."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (the usage text is what ``--help`` is for).

    Sub-command parsers inherit the class, so every command reports option errors the same way:
    ``embstab CMD: error: argument --top-n: must be 0 or more, got -1`` and exit code 2.
    """

    def error(self, message: str):  # type: ignore[override]
        """Print ``PROG: error: MESSAGE (see `PROG --help`)`` as one line and exit with code 2.

        Parameters
        ----------
        message : str
            argparse's description of the problem.
        """
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _command_dests(args: argparse.Namespace) -> list[str]:
    """The namespace attributes naming the command and its action (``command``, ``kg_command``, ``action``)."""
    command = getattr(args, "command", None)
    return ["command", *([f"{command}_command"] if command else []), "action"]


def build_parser() -> argparse.ArgumentParser:
    """The ``embstab`` parser with every sub-command of :data:`COMMAND_MODULES`.

    Returns
    -------
    argparse.ArgumentParser
        A :class:`Parser` with ``--version`` and one sub-parser per command.
    """
    parser = Parser(prog="embstab", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    from embstab import __version__

    parser.add_argument("--version", action="version", version=f"embstab {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"embstab.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``embstab`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: the command's own, 2 for any bad input (with one line on stderr) or a missing
        command, 141 for a closed output pipe, 130 when interrupted.
    """
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or an option error (2, already printed)
        return exc.code if isinstance(exc.code, int) else 2
    prog = " ".join(["embstab", *(str(getattr(args, d)) for d in _command_dests(args) if getattr(args, d, None))])
    if extras:  # named from the sub-command that was given them, whose --help lists what it takes
        print(f"{prog}: error: unrecognized arguments: {' '.join(extras)} (see `{prog} --help`)", file=sys.stderr)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    prefix = f"{prog}: error:"  # the full command, as argparse names it: "embstab kg train: error: ..."
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader went away (`embstab ... | head`): not an error of ours; silence the final
        # flush of stdout, which would otherwise print a second BrokenPipeError
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe
    except EmbstabError as exc:
        return _fail(prefix, str(exc))
    except MemoryError:
        return _fail(prefix, OUT_OF_MEMORY)
    except RuntimeError as exc:
        # torch reports a failed allocation as RuntimeError ("DefaultCPUAllocator: can't allocate
        # memory", CUDA's OutOfMemoryError): the same condition as MemoryError, the same line
        if not _is_torch_out_of_memory(exc):
            raise
        return _fail(prefix, OUT_OF_MEMORY)
    except OSError as exc:  # missing input, unwritable output, a directory, disk full
        where = f": {exc.filename}" if exc.filename else ""
        return _fail(prefix, f"{exc.strerror or exc}{where}")
    except ImportError as exc:  # an optional package that no embstab check wrapped
        return _fail(prefix, f"{exc} (an optional package is missing; see the extras in the README)")
    except sqlite3.DatabaseError as exc:
        return _fail(prefix, f"results database: {exc}")
    except ValueError as exc:
        # library checks that the CLI did not catch first; one line, the traceback on request
        if os.environ.get("EMBSTAB_DEBUG"):
            raise
        return _fail(prefix, f"{exc} (set EMBSTAB_DEBUG=1 for the traceback)")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


#: The line for an allocation that failed (numpy's MemoryError, torch's allocator errors).
OUT_OF_MEMORY = ("out of memory: the input is too large for this machine (try --top-n, a float32 input, or a "
                 "smaller file)")


def _is_torch_out_of_memory(exc: RuntimeError) -> bool:
    text = str(exc)
    return "can't allocate memory" in text or "CUDA out of memory" in text or type(exc).__name__ == "OutOfMemoryError"


def _fail(prefix: str, message: str) -> int:
    # exactly one line: a message that spans lines (a nested error) is joined
    print(f"{prefix} {message.replace(chr(13), ' ').replace(chr(10), ' ')}", file=sys.stderr)
    return 2


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

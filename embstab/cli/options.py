"""Option types and flags shared by the sub-commands.

argparse ``type=`` functions that reject bad values with the flag's own words (argparse then
prints ``embstab CMD: error: argument --top-n: ...`` and exits 2), so no option value reaches the
library in a form that would surface as a Python-flavoured message or a traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import IO

from embstab._bits import BIT_WIDTHS, BIT_WIDTHS_TEXT

__all__ = ["positive_int", "non_negative_int", "seed", "positive_float", "unit_fraction", "open_fraction", "bits",
           "measure_param", "local_workers", "worker_threads", "learning_rate", "add_trust_pickle", "add_no_clobber",
           "add_progress", "show_progress", "add_threads", "threads_or_all", "TRUST_PICKLE_HELP", "BITS_CHOICES"]

#: Bits per entry a uniform quantizer accepts (the library's one set).
BITS_CHOICES = BIT_WIDTHS

TRUST_PICKLE_HELP = ("load embedding files that are Python pickles (gensim KeyedVectors .save() files). "
                     "RISK: unpickling runs code stored in the file, so use it only for files you made or whose "
                     "source you trust; without it such files are refused")


def _number(text: str, kind: Callable[[str], float | int], what: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1.

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    int
        The integer.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not an integer or is below 1. The message names the value; argparse prefixes the flag.
    """
    value = _number(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0.

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    int
        The integer.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not an integer or is negative. The message names the value; argparse prefixes the flag.
    """
    value = _number(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def seed(text: str) -> int:
    """argparse type: a random seed, 0 to 2**32 - 1 (what every generator embstab seeds accepts).

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    int
        The seed.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not an integer or is out of range. The message names the value; argparse prefixes the flag.
    """
    value = _number(text, int, "an integer")
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be between 0 and {2**32 - 1}, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0.

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    float
        The number.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not a finite number or is not above 0. The message names the value; argparse prefixes the flag.
    """
    value = _number(text, float, "a number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value:g}")
    return value


def unit_fraction(text: str) -> float:
    """argparse type: a number in [0, 1].

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    float
        The number.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not a finite number or is outside [0, 1]. The message names the value; argparse prefixes the flag.
    """
    value = _number(text, float, "a number")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value:g}")
    return value


def open_fraction(text: str) -> float:
    """argparse type: a number strictly between 0 and 1.

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    float
        The number.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not a finite number or is not strictly between 0 and 1. The message names the value; argparse prefixes the flag.
    """
    value = _number(text, float, "a number")
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {value:g}")
    return value


def bits(text: str) -> int:
    """argparse type: bits per entry, 1-16 or 32.

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    int
        The bit count.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not an integer in :data:`BITS_CHOICES`. The message names the value; argparse prefixes the flag.
    """
    value = _number(text, int, "an integer")
    if value not in BITS_CHOICES:
        raise argparse.ArgumentTypeError(f"must be {BIT_WIDTHS_TEXT}, got {value}")
    return value


def measure_param(text: str) -> tuple[str, str, int | float | bool | str]:
    """argparse type: one measure parameter, ``MEASURE.NAME=VALUE`` (e.g. ``knn.k=10``).

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    (str, str, value)
        The measure, the parameter and the value: an integer, a number, true/false, or the text.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not of the form ``MEASURE.NAME=VALUE``. The message names the value; argparse prefixes the flag.
    """
    target, sep, raw = text.partition("=")
    measure, dot, name = target.strip().partition(".")
    if not sep or not dot or not measure or not name or not raw.strip():
        raise argparse.ArgumentTypeError(f"must be MEASURE.NAME=VALUE (e.g. knn.k=10), got {text!r}")
    raw = raw.strip()
    value: int | float | bool | str
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                value = raw
    return measure, name, value


def local_workers(text: str) -> int:
    """argparse type: worker processes of a local cluster, 1 to what this machine runs.

    The bound is :func:`embstab._resources.max_local_workers` (one per usable core, and no more than
    the available memory holds): each worker process holds its own copy of the libraries and data,
    so 16 workers on 2 cores took 4 GB for a one-row study.

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    int
        The number of workers.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not an integer, is below 1, or is more than the machine runs (the message
        says how many cores and how much memory it has). argparse prefixes the flag.
    """
    from embstab._resources import check_local_workers  # noqa: PLC0415
    from embstab.errors import EmbstabError  # noqa: PLC0415

    value = positive_int(text)
    try:
        return check_local_workers(value)
    except EmbstabError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def worker_threads(text: str) -> int:
    """argparse type: worker threads, 1 to the number of usable cores (more only wait for a core).

    The bound is :func:`embstab._limits.check_threads`, the rule the library's functions apply to
    their ``threads`` too: ``--threads 1000000000`` is one line here, not a ``std::bad_alloc`` or
    an abort inside the OpenMP runtime.

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    int
        The number of threads.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not an integer, is below 1, or is more than the usable cores. argparse
        prefixes the flag.
    """
    from embstab._limits import check_threads  # noqa: PLC0415
    from embstab.errors import ConfigError  # noqa: PLC0415

    value = positive_int(text)
    try:
        return check_threads(value, what="")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def learning_rate(text: str) -> float:
    """argparse type: a learning rate, a finite number from 1e-8 to 10.

    The bounds are :data:`embstab._limits.MIN_LEARNING_RATE` and
    :data:`~embstab._limits.MAX_LEARNING_RATE`, which the trainers check too (``--lr 1e308``
    overflowed the optimiser into a traceback).

    Parameters
    ----------
    text : str
        The option's value as typed.

    Returns
    -------
    float
        The learning rate.

    Raises
    ------
    argparse.ArgumentTypeError
        If the text is not a finite number in range. argparse prefixes the flag.
    """
    from embstab._limits import check_learning_rate  # noqa: PLC0415
    from embstab.errors import ConfigError  # noqa: PLC0415

    value = _number(text, float, "a number")
    try:
        return check_learning_rate(value, what="")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_no_clobber(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-clobber``: refuse to replace an existing output file.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    """
    parser.add_argument("--no-clobber", action="store_true",
                        help="refuse to replace an output file that exists (devices, pipes and /dev/stdout are "
                             "still written into)")


def add_trust_pickle(parser: argparse.ArgumentParser) -> None:
    """Add ``--trust-pickle`` (off by default; the risk is stated in ``--help``).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    """
    parser.add_argument("--trust-pickle", action="store_true", help=TRUST_PICKLE_HELP)


def add_progress(parser: argparse.ArgumentParser, *, quiet_help: str = "no progress bars") -> None:
    """Add ``--progress`` and ``--quiet`` (or ``--no-progress``), the ways to override :func:`show_progress`'s default.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    quiet_help : str
        Help of ``--quiet`` (a command whose ``--quiet`` silences more than the bars says so).
    """
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--progress", action="store_true",
                       help="show progress bars (on stderr) even when stderr is not a terminal; by default they "
                            "show only on a terminal")
    group.add_argument("--quiet", "--no-progress", dest="quiet", action="store_true", help=quiet_help)


def show_progress(args: argparse.Namespace, stream: IO[str] | None = None) -> bool:
    """Whether a command draws progress bars: the one rule every command follows.

    Bars go to stderr, for a person watching a terminal: they are drawn when stderr is a terminal,
    never into a log file or a pipe, unless ``--progress`` forces them; ``--quiet`` (or
    ``--no-progress``) turns them off. Standard output carries only the command's results.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options; ``progress`` and ``quiet`` are read when present (see :func:`add_progress`).
    stream : file, optional
        Where the bars go (default: ``sys.stderr``, read when called, so a redirected stderr counts).

    Returns
    -------
    bool
        True to draw the bars.
    """
    if getattr(args, "quiet", False):
        return False
    if getattr(args, "progress", False):
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def add_threads(parser: argparse.ArgumentParser, what: str = "torch threads") -> None:
    """Add ``--threads N``; without it the command uses every usable core (:func:`threads_or_all`).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The sub-command's parser.
    what : str
        What the threads are, for the help text.
    """
    parser.add_argument("--threads", type=worker_threads, default=None, metavar="N",
                        help=f"{what}, at most the usable cores (default: every usable core of this machine, so "
                             "that the same arguments give the same files; on cores busy with other jobs --threads 1 "
                             "is much faster)")


def threads_or_all(threads: int | None, stream: IO[str] | None = None, hint: bool = True) -> int:
    """``--threads`` as given, or the number of usable cores when it was not.

    The default does not follow the load: the thread count changes the float32 rounding of a
    trained model (by about 1e-7), and the same arguments must write the same files. When other
    jobs keep the cores busy, one line on ``stream`` says that fewer threads would be faster
    (OpenMP threads spin-wait for cores they do not get: a BERT step cost 4x the CPU on 2 threads
    as on 1 with the load at 10 on 2 cores). The commands give that hint where they show progress
    (a terminal), not in logs and pipelines.

    Parameters
    ----------
    threads : int or None
        The parsed ``--threads``.
    stream : file-like, optional
        Where the note goes (default ``sys.stderr``).
    hint : bool, default True
        Whether to write the note at all.

    Returns
    -------
    int
        The thread count to run with.
    """
    from embstab._resources import idle_cores, usable_cores  # noqa: PLC0415

    if threads is not None:
        return threads
    cores, idle = usable_cores(), idle_cores()
    if hint and idle < cores:
        print(f"note: other jobs keep this machine's cores busy ({cores - idle} of {cores}); running on all {cores} "
              f"anyway so that results do not depend on the load; --threads {idle} would be faster now",
              file=sys.stderr if stream is None else stream)
    return cores

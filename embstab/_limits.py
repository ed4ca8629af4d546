"""Upper bounds of the counts and rates a user gives: worker threads and learning rates.

One rule per setting, shared by the command line's option types and the Python functions they
call, so that ``--threads 1000000000`` and ``train(..., threads=10**9)`` are refused with the same
words before anything is allocated (a billion threads ended in ``std::bad_alloc`` or an abort
inside libgomp), and a learning rate of ``1e308`` is refused before it turns the weights into
infinities.
"""

from __future__ import annotations

import math

from embstab._numbers import is_integer, is_real
from embstab.errors import ConfigError

__all__ = ["MIN_LEARNING_RATE", "MAX_LEARNING_RATE", "check_threads", "check_learning_rate"]

#: The smallest learning rate accepted: below it no weight moves by more than its float32 round-off.
MIN_LEARNING_RATE = 1e-8
#: The largest learning rate accepted. Adam, AdamW and Riemannian SGD steps of this size already
#: throw the weights far outside any useful range; past it the optimiser's arithmetic overflows.
#: (The studies' ``lr`` settings have the same bounds.)
MAX_LEARNING_RATE = 10.0


def check_threads(threads: object, what: str = "threads") -> int:
    """Refuse a thread count that is not an integer from 1 to the usable cores of this machine.

    More threads than cores only wait for a core, and an absurd count exhausts memory or the
    OpenMP runtime before any work starts.

    Parameters
    ----------
    threads : int
        The count asked for.
    what : str, default "threads"
        The name of the setting, for the message; ``""`` leaves it out (argparse names the flag).

    Returns
    -------
    int
        ``threads``, when it fits.

    Raises
    ------
    ConfigError
        If ``threads`` is not an integer, is below 1, or is more than the usable cores.
    """
    from embstab._resources import usable_cores  # noqa: PLC0415

    name = f"{what} " if what else ""
    if not is_integer(threads) or threads < 1:
        raise ConfigError(f"{name}must be an integer of at least 1, got {threads!r}")
    cores = usable_cores()
    if threads > cores:
        raise ConfigError(f"{what + '=' if what else ''}{threads} is more than the {cores} usable core(s) of this "
                          f"machine; use at most {cores}")
    return int(threads)


def check_learning_rate(lr: object, what: str = "lr") -> float:
    """Refuse a learning rate outside [:data:`MIN_LEARNING_RATE`, :data:`MAX_LEARNING_RATE`].

    Parameters
    ----------
    lr : float
        The learning rate asked for.
    what : str, default "lr"
        The name of the setting, for the message; ``""`` leaves it out (argparse names the flag).

    Returns
    -------
    float
        ``lr`` as a float, when it is in range.

    Raises
    ------
    ConfigError
        If ``lr`` is not a finite number in range.
    """
    if not is_real(lr) or not math.isfinite(lr) or not MIN_LEARNING_RATE <= lr <= MAX_LEARNING_RATE:
        raise ConfigError(f"{what + ' ' if what else ''}must be a finite number from {MIN_LEARNING_RATE:g} to "
                          f"{MAX_LEARNING_RATE:g}, got {lr!r}")
    return float(lr)

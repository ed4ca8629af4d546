"""Errors for text given to a contextual model: one type per kind of mistake."""

from __future__ import annotations

from embstab.errors import EmbstabError, ShapeError

__all__ = ["EmptyTextError", "SequenceLengthError"]


class EmptyTextError(EmbstabError, ValueError):
    """A text (a line of a file, an item of a list) is empty or only white space.

    An empty line would silently become a ``[CLS] [SEP]`` input whose features say nothing, so it
    is refused with its position instead.
    """


class SequenceLengthError(ShapeError):
    """A text has more word pieces than the model's position limit (and truncation was not asked for)."""

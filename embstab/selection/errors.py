"""Errors raised by the selection analysis for bad results tables or impossible requests."""

from __future__ import annotations

from embstab.errors import EmbstabError

__all__ = ["ResultsError", "BudgetError"]


class ResultsError(EmbstabError, ValueError):
    """A results table is malformed: missing columns, duplicate rows, unusable values."""


class BudgetError(EmbstabError, ValueError):
    """A memory budget is invalid, or no configuration in the results fits under it."""

"""Errors raised by the selection analysis for bad results tables or impossible requests."""

from __future__ import annotations

from embstab.errors import ConfigError, DataFormatError

__all__ = ["ResultsError", "BudgetError"]


class ResultsError(DataFormatError):
    """A results table is malformed: missing columns, duplicate rows, unusable values."""


class BudgetError(ConfigError):
    """A memory budget is invalid, or no configuration in the results fits under it."""

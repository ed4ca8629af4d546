"""Errors raised by :mod:`embstab.hyperbolic`.

All derive from :class:`embstab.errors.EmbstabError`, so the CLI prints them as one line.
"""

from __future__ import annotations

from embstab.errors import EmbstabError

__all__ = ["HyperbolicError", "GraphError", "PrecisionError"]


class HyperbolicError(EmbstabError):
    """Base class of the hyperbolic-embedding errors."""


class GraphError(HyperbolicError, ValueError):
    """A graph or edge-list file is malformed or unsuitable (e.g. disconnected, unknown root)."""


class PrecisionError(HyperbolicError, ValueError):
    """The working precision is too low for the requested scale τ (or for a float64 export)."""

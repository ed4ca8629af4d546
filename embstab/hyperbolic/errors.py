"""Errors raised by :mod:`embstab.hyperbolic`.

All derive from :class:`embstab.errors.EmbstabError`, so the CLI prints them as one line.
"""

from __future__ import annotations

from embstab.errors import ConfigError, EmbstabError

__all__ = ["HyperbolicError", "GraphError", "PrecisionError"]


class HyperbolicError(ConfigError):
    """Base class of the hyperbolic-embedding errors."""


class GraphError(HyperbolicError):
    """A graph or edge-list file is malformed or unsuitable (e.g. disconnected, unknown root)."""


class PrecisionError(HyperbolicError):
    """The working precision is too low for the requested scale τ (or for a float64 export)."""

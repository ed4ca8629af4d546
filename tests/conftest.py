"""Test-suite configuration shared by every module."""

from __future__ import annotations

import os

from hypothesis import settings

# CI runs the same examples every time (a property failure is then reproducible, never a coin
# toss); HYPOTHESIS_PROFILE=explore draws fresh examples to hunt for new counterexamples.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    """The slow tier (exhaustive bit patterns, full WordNet) may run past the default 10-minute
    hang guard on a slow machine; give it an hour unless a test sets its own limit."""
    import pytest

    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(3600))

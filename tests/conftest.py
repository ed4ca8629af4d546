"""Test-suite configuration shared by every module."""

from __future__ import annotations

import os

from hypothesis import settings

# CI runs the same examples every time (a property failure is then reproducible, never a coin
# toss); HYPOTHESIS_PROFILE=explore draws fresh examples to hunt for new counterexamples.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

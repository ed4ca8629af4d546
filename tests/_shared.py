"""The data in ../shared/data, beside the repository (tests only; the package never reads it).

A fresh clone has no ../shared: every test that needs a file there goes through
:func:`shared_file`, which skips with a reason naming the missing file and what it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# What each folder of ../shared/data holds, for the skip reasons.
WHAT = {
    "graphs": "a test graph of the hyperbolic-embedding paper, Sala et al. 2018",
    "anchor_stability": "the published word2vec CBOW results of the anchor-stability paper",
}


def shared_file(relative: str) -> Path:
    """The path of ``../shared/data/<relative>``, skipping the calling test when it is absent.

    Parameters
    ----------
    relative : str
        Path below ``../shared/data``, e.g. ``"graphs/wordnet.edges"``.

    Returns
    -------
    pathlib.Path
        The existing file.
    """
    path = SHARED_DATA / relative
    if not path.is_file():
        what = WHAT.get(relative.split("/", 1)[0], "shared test data")
        pytest.skip(f"needs ../shared/data/{relative} ({what}); not found at {path}")
    return path

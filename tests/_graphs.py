"""The test graphs of ../shared/data/graphs (tests only; the package never reads ../shared)."""

from pathlib import Path

import pytest

from embstab.hyperbolic import load_edgelist

GRAPHS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "graphs"


def shared_graph(name: str):
    """Load ``name``.edges, skipping the test when ../shared is not beside the repository."""
    path = GRAPHS / f"{name}.edges"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return load_edgelist(path)

"""The test graphs: tests/data/graphs when the repository carries a copy, else ../shared/data/graphs."""

from __future__ import annotations

from pathlib import Path

from embstab.hyperbolic import load_edgelist

from _shared import shared_file

# Graphs small and free enough to ship with the tests (smalltree: the balanced tree, branching 3,
# depth 3); the others are only in ../shared.
LOCAL_GRAPHS = Path(__file__).resolve().parent / "data" / "graphs"


def graph_path(name: str) -> Path:
    """The file of the test graph ``name``: the in-repository copy, else ../shared's.

    Parameters
    ----------
    name : str
        Graph name without the ``.edges`` suffix, e.g. ``"smalltree"``.

    Returns
    -------
    pathlib.Path
        An existing edge-list file; the calling test skips, naming the file, when neither exists.
    """
    local = LOCAL_GRAPHS / f"{name}.edges"
    return local if local.is_file() else shared_file(f"graphs/{name}.edges")


def load_graph(name: str):
    """Load the test graph ``name`` (see :func:`graph_path`).

    Parameters
    ----------
    name : str
        Graph name without the ``.edges`` suffix.

    Returns
    -------
    embstab.hyperbolic.Graph
    """
    return load_edgelist(graph_path(name))

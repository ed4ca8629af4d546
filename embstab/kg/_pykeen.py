"""The one place that imports PyKEEN: a clear error when it is missing, and quiet logging."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from embstab.errors import OptionalDependencyError

if TYPE_CHECKING:  # pragma: no cover
    from embstab.kg.graph import KnowledgeGraph

__all__ = ["require_pykeen", "quiet", "triples_factory"]

INSTALL_HINT = 'pip install "torch==2.13.0" "pykeen==1.11.1"'


def require_pykeen() -> Any:
    """Import and return the ``pykeen`` package, or raise :class:`OptionalDependencyError`."""
    try:
        import pykeen  # noqa: F401
        import pykeen.models  # noqa: F401
    except ImportError:
        raise OptionalDependencyError("pykeen==1.11.1", "knowledge-graph training", "kg",
                                      install=INSTALL_HINT) from None
    # PyKEEN logs a warning on every CPU evaluation about automatic batch-size search being meant for
    # CUDA, and on every training about the absence of a stopper; neither concerns the caller.
    for name in ("pykeen", "torch_max_mem"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return pykeen


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence the warnings PyKEEN's loops raise on CPU (pinned memory, no accelerator)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        warnings.filterwarnings("ignore", module="pykeen")
        warnings.filterwarnings("ignore", module="torch_max_mem")
        yield


def triples_factory(graph: KnowledgeGraph, split: str = "train"):
    """One split of ``graph`` as a PyKEEN ``CoreTriplesFactory`` over the graph's full vocabulary.

    The factory numbers entities and relations exactly as ``graph`` does, so a model trained on
    any version of the graph has one row per graph entity in the same order.
    """
    require_pykeen()
    import torch
    from pykeen.triples import TriplesFactory

    return TriplesFactory(
        mapped_triples=torch.as_tensor(graph.split(split).copy(), dtype=torch.long),
        entity_to_id={e: i for i, e in enumerate(graph.entities)},
        relation_to_id={r: i for i, r in enumerate(graph.relations)},
    )

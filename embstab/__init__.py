"""embstab: how unstable is a pair of embeddings, and what does that do downstream?

The data path, top-down: :func:`load` an :class:`Embedding` → compress it
(:mod:`embstab.compress`, on the low-precision core :mod:`embstab.lowprec`) → measure a
:class:`Pair` of old and new (:mod:`embstab.measures`, :func:`compare`) → train task models on both
(:mod:`embstab.downstream`) → choose a dimension and precision (:mod:`embstab.selection`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from embstab.embedding import Embedding, shared_vocabulary
from embstab.errors import EmbeddingFormatError, EmbstabError, ShapeError, VocabularyError
from embstab.io import load, save  # also registers the writer that Embedding.save uses
from embstab.pair import Pair

if TYPE_CHECKING:
    from embstab.measures import compare, compare_many
    from embstab.selection import Recommendation, recommend

# compare and recommend are imported on first use (PEP 562): they pull pandas and scipy, which
# `embstab --help` and the light commands do not need
# compare lives in the module of the same name, which (once imported) shadows the lazy function on
# embstab.measures: read it from its own module, whatever was imported first
_HOMES = {"compare": "embstab.measures.compare", "compare_many": "embstab.measures.compare",
          "Recommendation": "embstab.selection", "recommend": "embstab.selection"}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'embstab' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


__version__ = "0.1.0"

__all__ = [
    "Embedding",
    "EmbeddingFormatError",
    "EmbstabError",
    "Pair",
    "Recommendation",
    "ShapeError",
    "VocabularyError",
    "compare",
    "compare_many",
    "load",
    "recommend",
    "save",
    "shared_vocabulary",
    "__version__",
]

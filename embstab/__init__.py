"""embstab: how unstable is a pair of embeddings, and what does that do downstream?

The data path, top-down: :func:`load` an :class:`Embedding` → compress it
(:mod:`embstab.compress`, on the low-precision core :mod:`embstab.lowprec`) → measure a pair
(:mod:`embstab.measures`, :func:`compare`) → train task models on both
(:mod:`embstab.downstream`) → choose a dimension and precision (:mod:`embstab.selection`).
"""

from __future__ import annotations

from embstab.embedding import Embedding, shared_vocabulary
from embstab.errors import EmbeddingFormatError, EmbstabError, ShapeError, VocabularyError
from embstab.io import load, save
from embstab.measures import compare, compare_many
from embstab.selection import Recommendation, recommend

__version__ = "0.1.0"

__all__ = [
    "Embedding",
    "EmbeddingFormatError",
    "EmbstabError",
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

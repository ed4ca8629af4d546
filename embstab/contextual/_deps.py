"""The optional packages behind contextual models, imported on first use with one clear error."""

from __future__ import annotations

import importlib
from types import ModuleType

from embstab.errors import OptionalDependencyError

__all__ = ["require"]

_REQUIREMENTS = {"transformers": "transformers>=5.0", "tokenizers": "tokenizers>=0.22",
                 "huggingface_hub": "huggingface_hub>=1.31"}


def require(module: str) -> ModuleType:
    """Import ``transformers``, ``tokenizers`` or ``huggingface_hub``; raise :class:`OptionalDependencyError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise OptionalDependencyError(_REQUIREMENTS[module], "contextual models", extra="contextual") from None

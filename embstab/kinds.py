"""The registry of embedding kinds: word, knowledge-graph, contextual and hyperbolic embeddings.

Each kind lives in its own package (``embstab.train`` for words, ``embstab.kg``,
``embstab.contextual``, ``embstab.hyperbolic``) and defines itself in that package's ``study``
module, as ``KIND`` (an :class:`embstab.study.kinds.StudyKind`). :data:`KIND_MODULES` names those
modules, one line per kind; :data:`KINDS` imports them the first time it is read.

The registry sits below every layer that reads it, so none of them imports a kind: the results
tables' labels and the report's sections (a kind's ``label`` and ``memory_unit``), the study
engine (everything else of a kind) and ``recommend(kind=...)`` all ask :data:`KINDS`. A kind
defined elsewhere (a plugin, a test) enters with :func:`register_kind` and leaves with
:func:`unregister_kind`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["KINDS", "KIND_MODULES", "register_kind", "unregister_kind", "get_kind"]

#: The module of each kind (it defines ``KIND``), in the order kinds are listed; the first is the
#: default of a study file without ``kind:``. A new kind is one more line here.
KIND_MODULES: tuple[str, ...] = (
    "embstab.train.study",
    "embstab.kg.study",
    "embstab.contextual.study",
    "embstab.hyperbolic.study",
)


class _Registry(Mapping[str, Any]):
    """Kind name → kind; the modules of :data:`KIND_MODULES` are imported on first read."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        self._modules = modules
        self._kinds: dict[str, Any] = {}
        self._loaded = False
        self._lock = threading.RLock()

    def _load(self) -> dict[str, Any]:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    for module in self._modules:
                        self._put(importlib.import_module(module).KIND)
                    self._loaded = True
        return self._kinds

    def _put(self, kind: Any) -> Any:
        with self._lock:
            if self._kinds.get(kind.name, kind) is not kind:
                raise ValueError(f"a study kind named {kind.name!r} is already registered")
            self._kinds[kind.name] = kind
        return kind

    def add(self, kind: Any) -> Any:
        self._load()  # the kinds of KIND_MODULES first: they keep their order, and their names
        return self._put(kind)

    def remove(self, name: str) -> Any:
        self._load()  # a kind of KIND_MODULES removed before the first read would come back on it
        with self._lock:
            if name not in self._kinds:
                raise KeyError(f"no study kind named {name!r} is registered")
            return self._kinds.pop(name)

    def __getitem__(self, name: str) -> Any:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._load()))

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"KINDS({', '.join(self)})"


#: Every kind by name, in the order of :data:`KIND_MODULES` (``word`` first: the default), then the
#: kinds registered with :func:`register_kind`.
KINDS: Mapping[str, Any] = _Registry(KIND_MODULES)


def register_kind(kind: Any) -> Any:
    """Add ``kind`` to :data:`KINDS` (a kind defined outside :data:`KIND_MODULES`, e.g. by a plugin).

    Parameters
    ----------
    kind : StudyKind
        The kind (:class:`embstab.study.kinds.StudyKind`); registering the same object twice is
        harmless.

    Returns
    -------
    StudyKind
        ``kind``.

    Raises
    ------
    ValueError
        If another kind of that name is registered.
    """
    return KINDS.add(kind)  # type: ignore[attr-defined]  # the registry's own method


def unregister_kind(name: str) -> Any:
    """Take the kind called ``name`` out of :data:`KINDS` (undoes :func:`register_kind`).

    Parameters
    ----------
    name : str
        The kind's name.

    Returns
    -------
    StudyKind
        The kind taken out.

    Raises
    ------
    KeyError
        If no kind of that name is registered.
    """
    return KINDS.remove(name)  # type: ignore[attr-defined]  # the registry's own method


def get_kind(name: str) -> Any:
    """The registered kind called ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`KINDS` (``"word"``, ``"kg"``, ``"contextual"``...).

    Returns
    -------
    StudyKind

    Raises
    ------
    UnknownNameError
        For a name that is not registered.
    """
    from embstab.errors import lookup  # noqa: PLC0415

    return lookup(KINDS, name, "study kind")

"""Study kinds: what a study of one kind of embedding builds, trains and accepts downstream.

A kind says how the *source pair* is built (two versions of a corpus, of a graph...), how *one
member* of a pair is trained into an :class:`~embstab.Embedding`, how a pair is compressed, and
which downstream tasks it accepts. Measuring a compressed pair against its anchors (the
largest-dimension full-precision pair of each version, same seed) and assembling the result row
are shared by every kind, so rows of every kind land in one results table, one report and one
``recommend``.

Each kind lives in its own package's ``study`` module, which defines its :class:`StudyKind` as
``KIND``; :data:`KIND_MODULES` lists those modules, one line per kind. The registry :data:`KINDS`
imports them the first time it is read, and is what the schema, the plan, the runner, the report and
``recommend`` ask; none of them names a kind.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from embstab.study.settings import PLAN_VERSION, REFERENCE_RECIPE, Setting, TaskRule

if TYPE_CHECKING:
    from embstab.study.plan import Variant
    from embstab.study.schema import StudySpec

__all__ = ["StudyKind", "TaskRule", "Setting", "KINDS", "KIND_MODULES", "register_kind", "get_kind",
           "PLAN_VERSION", "REFERENCE_RECIPE"]

#: The module of each study kind (it defines ``KIND``), in the order kinds are listed; the first is
#: the default of a study file without ``kind:``. A new kind is one more line here.
KIND_MODULES: tuple[str, ...] = (
    "embstab.train.study",
    "embstab.kg.study",
    "embstab.contextual.study",
    "embstab.hyperbolic.study",
)


@dataclass(frozen=True)
class StudyKind:
    """What one kind of embedding study builds, trains and accepts downstream.

    Attributes
    ----------
    name : str
        The value of the study file's ``kind:`` key.
    label : str
        What the embeddings are, in words (report headings).
    memory_unit : str
        What one unit of the ``memory`` column is (``bits per word``, ``bits per entity row``...).
    source_key : str
        Top-level key of the study file that defines the source pair (``corpus``, ``graph``...).
    source_stage : str
        Name of the task that builds the source pair.
    parse_source : callable
        ``(validator, mapping) -> section``: the parsed ``source_key`` section (a frozen dataclass,
        held by the study as ``source_spec``).
    algorithms : callable
        ``(validator, value) -> tuple of str``: the validated ``training.algorithms``.
    training : dict
        The kind's ``training`` settings (:class:`Setting`) beside the grid's algorithms,
        dimensions and seeds.
    tasks : callable
        ``() -> {task: TaskRule}``: the downstream tasks, their models and options.
    check : callable or None
        ``(validator, spec) -> None``: cross-checks of a parsed study of this kind.
    source_config, train_config : callable
        The configurations (hashed into artifact names) of the source pair and of one member.
    run_source, run_train, run_compress, run_downstream : callable
        The task functions of the plan (module-level, so Dask can pickle them).
    geometry : str
        The geometry of the members (:func:`embstab.measures.measures_for`): which measures apply.
    recipes : bool
        Whether ``training.recipes`` (reduced-precision training) applies.
    transforms : bool
        Whether ``compression.transforms`` (rotations, outlier splitting...) applies.
    measure_pair : callable or None
        The kind's own ``measure_pair`` (as :attr:`embstab.study.steps.Steps.measure_pair`), for
        members the shared one does not compare (another geometry); None: the shared one.
    """

    name: str
    label: str
    memory_unit: str
    source_key: str
    source_stage: str
    parse_source: Callable[[Any, Any], Any]
    algorithms: Callable[[Any, Any], tuple[str, ...]]
    training: dict[str, Setting]
    tasks: Callable[[], dict[str, TaskRule]]
    check: Callable[[Any, Any], None] | None
    source_config: Callable[[StudySpec], dict[str, Any]]
    train_config: Callable[[StudySpec, str, Variant], dict[str, Any]]
    run_source: Callable[..., Any]
    run_train: Callable[..., Any]
    run_compress: Callable[..., Any]
    run_downstream: Callable[..., Any]
    geometry: str = "euclidean"
    recipes: bool = False
    transforms: bool = False
    measure_pair: Callable[..., Any] | None = None

    def measure_steps(self, steps: Any) -> Any:
        """``steps`` with this kind's ``measure_pair``, if it has one.

        Parameters
        ----------
        steps : Steps
            The study's computations.

        Returns
        -------
        Steps
            ``steps`` itself, or a copy whose ``measure_pair`` is the kind's.
        """
        if self.measure_pair is None:
            return steps
        from dataclasses import replace  # noqa: PLC0415

        return replace(steps, measure_pair=self.measure_pair)


class _Registry(Mapping[str, StudyKind]):
    """Kind name → :class:`StudyKind`; the modules of :data:`KIND_MODULES` are imported on first read."""

    def __init__(self, modules: tuple[str, ...]) -> None:
        self._modules = modules
        self._kinds: dict[str, StudyKind] = {}
        self._loaded = False
        self._lock = threading.RLock()

    def _load(self) -> dict[str, StudyKind]:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    for module in self._modules:
                        register_kind(importlib.import_module(module).KIND)
                    self._loaded = True
        return self._kinds

    def __getitem__(self, name: str) -> StudyKind:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"KINDS({', '.join(self)})"


#: Every study kind by name, in the order of :data:`KIND_MODULES` (``word`` first: the default).
KINDS: Mapping[str, StudyKind] = _Registry(KIND_MODULES)


def register_kind(kind: StudyKind) -> StudyKind:
    """Add ``kind`` to :data:`KINDS` (a kind defined outside :data:`KIND_MODULES`, e.g. by a plugin).

    Parameters
    ----------
    kind : StudyKind
        The kind; registering the same object twice is harmless.

    Returns
    -------
    StudyKind
        ``kind``.

    Raises
    ------
    ValueError
        If another kind of that name is registered.
    """
    kinds = KINDS._kinds  # type: ignore[attr-defined]  # the registry's own store
    if kinds.get(kind.name, kind) is not kind:
        raise ValueError(f"a study kind named {kind.name!r} is already registered")
    kinds[kind.name] = kind
    return kind


def get_kind(name: str) -> StudyKind:
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

"""Study kinds: what a study of one kind of embedding builds, trains and accepts downstream.

A kind says how the *source pair* is built (two versions of a corpus, of a graph...), how *one
member* of a pair is trained into an :class:`~embstab.Embedding`, how a pair is compressed, and
which downstream tasks it accepts. Measuring a compressed pair against its anchors (the
largest-dimension full-precision pair of each version, same seed) and assembling the result row
are shared by every kind, so rows of every kind land in one results table, one report and one
``recommend``.

Each kind lives in its own package's ``study`` module, which defines its :class:`StudyKind` as
``KIND``. The registry :data:`KINDS` (:mod:`embstab.kinds`, below every layer that reads it; its
:data:`KIND_MODULES` lists those modules, one line per kind) imports them the first time it is read,
and is what the schema, the plan, the runner, the report and ``recommend`` ask; none of them names
or imports a kind. A kind defined elsewhere enters with :func:`register_kind` and leaves with
:func:`unregister_kind`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from embstab.kinds import KIND_MODULES, get_kind, register_kind, unregister_kind
from embstab.kinds import KINDS as _KINDS
from embstab.study.settings import PLAN_VERSION, REFERENCE_RECIPE, Setting, TaskRule

if TYPE_CHECKING:
    from embstab.study.plan import Variant
    from embstab.study.schema import StudySpec

__all__ = ["StudyKind", "TaskRule", "Setting", "KINDS", "KIND_MODULES", "register_kind", "unregister_kind",
           "get_kind", "PLAN_VERSION", "REFERENCE_RECIPE"]


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
        Name of the task that builds the source pair; by default the ``source_key`` (a keyword
        argument, as is ``check``).
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
        ``(validator, spec) -> None``: cross-checks of a parsed study of this kind; None (the
        default): none beyond the shared ones.
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
    vector_store : bool
        Whether ``compression.scheme: vector_store`` applies: members whose rows a vector store
        keeps (word vectors, sentence features).
    trained_dim : callable or None
        ``(spec, dim) -> int``: the dimension a member is trained at for the grid's ``dim``. Where it
        is larger, the grid's dimension is that member's leading ``dim`` dimensions (Matryoshka
        truncation, as vector stores shorten a pretrained model's vectors): one training serves
        every such dimension, and the compressed pair's configuration records ``truncate``.
        None (the default): every dimension is trained.
    steps : dict
        The kind's computations among the fields of :class:`embstab.study.steps.Steps` (field
        name → module-level function), which :func:`embstab.study.steps.default_steps` takes from
        the registry: the word kind gives ``train_embedding``, so the study engine imports no kind.
    """

    name: str
    label: str
    memory_unit: str
    source_key: str
    # keyword-only, so the fields without a default keep their places and kinds state only what differs
    source_stage: str = field(default="", kw_only=True)
    parse_source: Callable[[Any, Any], Any]
    algorithms: Callable[[Any, Any], tuple[str, ...]]
    training: dict[str, Setting]
    tasks: Callable[[], dict[str, TaskRule]]
    check: Callable[[Any, Any], None] | None = field(default=None, kw_only=True)
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
    trained_dim: Callable[[StudySpec, int], int] | None = None
    vector_store: bool = False
    # not hashed: a dict; the kind is still hashable by its other fields
    steps: Mapping[str, Callable[..., Any]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.source_stage:  # the task that builds the source is named after its study-file key
            object.__setattr__(self, "source_stage", self.source_key)

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


# The registry lives below every layer that reads it (embstab.kinds): the results tables' labels and
# the report ask it for a kind's label and memory unit without importing the study engine.
KINDS: Mapping[str, StudyKind] = _KINDS

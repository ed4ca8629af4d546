"""The study's task graph: which tasks exist, what each needs, and the content hash that names it.

Every task is named by the hash of its full configuration, upstream included (a compressed pair's
configuration holds both trainings', which hold the corpus'), so equal work gets one name in every
study and on every worker. Rows already in the results database are left out, and so is every
task that only they needed: a restarted study plans just what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import embstab.study.steps as S
from embstab.study.calibrate import assemble_unmeasured_row, choose_measured
from embstab.study.kinds import PLAN_VERSION, REFERENCE_RECIPE
from embstab.study.schema import DownstreamSpec, StudySpec
from embstab.study.store import ArtifactStore, config_hash

__all__ = [
    "FULL_PRECISION_BITS",
    "PLAN_VERSION",
    "MeasureInputs",
    "Node",
    "Ref",
    "StudyPlan",
    "StudyRow",
    "Variant",
    "measure_inputs",
    "plan_study",
    "study_rows",
]

#: Bit width of the anchors (full precision: clipping only, no rounding).
FULL_PRECISION_BITS = 32
#: The compression transform of the anchors (and the axis' default); their recipe is REFERENCE_RECIPE.
NO_TRANSFORM = "none"
# Higher runs first among ready tasks: finish rows before starting new trainings, so results
# arrive steadily and an interrupted study has kept as much as possible.
# A kind's source stage (corpus, graph...) is not listed: it comes first (0).
_PRIORITY = {"train": 1, "compress": 2, "measures": 3, "downstream": 3, "row": 4}


@dataclass(frozen=True)
class Ref:
    """A placeholder argument: the output of the node named ``key``."""

    key: str


@dataclass(frozen=True)
class Node:
    """One task: ``func(*args)`` with :class:`Ref` arguments replaced by upstream outputs."""

    key: str
    stage: str
    func: Callable[..., Any]
    args: tuple[Any, ...]

    @property
    def deps(self) -> tuple[str, ...]:
        return tuple(a.key for a in self.args if isinstance(a, Ref))

    @property
    def priority(self) -> int:
        return _PRIORITY.get(self.stage, 0)


@dataclass
class StudyPlan:
    """The graph of a study (nodes in a topological order) and its result rows.

    Attributes
    ----------
    spec : StudySpec
    nodes : dict
        Node key → :class:`Node`, upstream before downstream.
    rows : dict
        Row id → node key of the task that assembles it (only rows still to compute).
    all_rows : dict
        Row id → row metadata (algo, recipe, seed, dim, bitrate, transform, task, model) for every
        row of the study.
    unmeasured : set of str
        The rows of ``rows`` whose downstream models do not run (a calibrated study's rows outside
        its share): their task assembles the measures alone.
    """

    spec: StudySpec
    nodes: dict[str, Node] = field(default_factory=dict)
    rows: dict[str, str] = field(default_factory=dict)
    all_rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    unmeasured: set[str] = field(default_factory=set)

    def stage_counts(self) -> dict[str, int]:
        """How many tasks of each stage the plan holds.

        Returns
        -------
        dict of str to int
            Stage name → number of tasks.
        """
        out: dict[str, int] = {}
        for node in self.nodes.values():
            out[node.stage] = out.get(node.stage, 0) + 1
        return out


# --------------------------------------------------------------------------------------------
# configurations (plain dicts: what is hashed is exactly what determines the output)


def _corpus_cfg(spec: StudySpec) -> dict[str, Any]:
    # the source pair of the study's kind (corpus pair, graph versions...); every configuration nests it
    return spec.study_kind.source_config(spec)


@dataclass(frozen=True)
class Variant:
    """One point of the grid above the pair: algorithm, training recipe, seed, dimension, bits,
    compression transform."""

    algo: str
    recipe: str
    seed: int
    dim: int
    bits: int
    transform: str

    def anchor(self, spec: StudySpec) -> Variant:
        """The anchors: highest dimension, full precision, trained in fp32, no transform.

        Parameters
        ----------
        spec : StudySpec
            The study (its ``anchor_dim``).

        Returns
        -------
        Variant
            This variant's algorithm and seed at the anchor dimension, full-precision bits, the fp32
            recipe and no transform.
        """
        return Variant(self.algo, REFERENCE_RECIPE, self.seed, spec.anchor_dim, FULL_PRECISION_BITS, NO_TRANSFORM)


def _trained(spec: StudySpec, v: Variant) -> Variant:
    # the member behind a grid point: a truncated dimension is read from a wider trained member
    trained_dim = spec.study_kind.trained_dim
    dim = v.dim if trained_dim is None else int(trained_dim(spec, v.dim))
    return v if dim == v.dim else replace(v, dim=dim)


def _train_cfg(spec: StudySpec, side: str, v: Variant) -> dict[str, Any]:
    return spec.study_kind.train_config(spec, side, _trained(spec, v))


def _pair_cfg(spec: StudySpec, v: Variant) -> dict[str, Any]:
    cfg = {"v": PLAN_VERSION, "stage": "compress", "old": _train_cfg(spec, "old", v),
           "new": _train_cfg(spec, "new", v), "bits": v.bits, "rounding": spec.compression.rounding, "seed": v.seed}
    if v.transform != NO_TRANSFORM:
        cfg["transform"] = v.transform
    if _trained(spec, v).dim != v.dim:
        cfg["truncate"] = v.dim
    if spec.compression.scheme != "uniform":  # absent by default: older pairs keep their names
        cfg["scheme"] = spec.compression.scheme
    return cfg


def _measures_cfg(spec: StudySpec, v: Variant) -> dict[str, Any]:
    m = {"names": list(spec.measures.names), "top_n": spec.measures.top_n, "params": spec.measures.params_dict()}
    # "uncompressed": the new member before compression, to report how much of its own neighbourhoods
    # the compressed member keeps (a compressed pair can look stable while keeping few of them)
    return {"v": PLAN_VERSION, "stage": "measures", "pair": _pair_cfg(spec, v),
            "anchor": _pair_cfg(spec, v.anchor(spec)), "uncompressed": _train_cfg(spec, "new", v), "measures": m}


def _downstream_cfg(spec: StudySpec, entry: DownstreamSpec, v: Variant) -> dict[str, Any]:
    # the model seed is the embedding seed: the two models differ only by embedding
    return {"v": PLAN_VERSION, "stage": "downstream", "pair": _pair_cfg(spec, v),
            "task": entry.task, "model": entry.model, "options": dict(entry.options), "seed": v.seed}


def _variants(spec: StudySpec) -> Iterable[Variant]:
    t, c = spec.training, spec.compression
    for algo in t.algorithms:
        for recipe in t.recipes:
            for seed in t.seeds:
                for dim in sorted(t.dimensions, reverse=True):
                    for bits in sorted(c.bit_widths, reverse=True):
                        for transform in c.transforms:
                            yield Variant(algo, recipe, seed, dim, bits, transform)


@dataclass(frozen=True)
class StudyRow:
    """One row of a study: a grid point and one downstream task, with the configuration it is hashed from.

    Attributes
    ----------
    row_id : str
        The hash of :attr:`config`: the row's key in the store, stable across runs.
    variant : Variant
        The grid point (algorithm, recipe, seed, dimension, bits, transform).
    task : str
        The downstream entry's label.
    model : str
        The downstream model.
    kind : str
        The study's kind.
    config : dict
        What the row's values depend on (measures and downstream configurations), as hashed.
    """

    row_id: str
    variant: Variant
    task: str
    model: str
    kind: str
    config: Mapping[str, Any]

    @property
    def columns(self) -> dict[str, Any]:
        """The row's metadata columns as stored: ``algo``, ``recipe``, ``seed``, ``dim``,
        ``bitrate``, ``transform``, ``task``, ``model``, ``kind``."""
        v = self.variant
        return {"algo": v.algo, "recipe": v.recipe, "seed": v.seed, "dim": v.dim, "bitrate": v.bits,
                "transform": v.transform, "task": self.task, "model": self.model, "kind": self.kind}


def study_rows(spec: StudySpec) -> Iterator[StudyRow]:
    """Every row of the study, in plan order.

    Parameters
    ----------
    spec : StudySpec
        The study definition.

    Yields
    ------
    StudyRow
    """
    for v in _variants(spec):
        for entry in spec.downstream:
            cfg = {"v": PLAN_VERSION, "stage": "row", "label": entry.label,
                   "measures": _measures_cfg(spec, v), "downstream": _downstream_cfg(spec, entry, v)}
            yield StudyRow(config_hash(cfg), v, entry.label, entry.model, spec.kind, cfg)


@dataclass(frozen=True)
class MeasureInputs:
    """What the measures task of one row reads: its key and configuration, and the artifact keys of
    the compressed pair, the compressed anchor pair and the new member's training."""

    key: str
    config: dict[str, Any]
    pair_key: str
    anchor_key: str
    uncompressed_key: str


def measure_inputs(spec: StudySpec) -> dict[str, MeasureInputs]:
    """Per row id, the inputs of its measures task (:func:`embstab.study.steps.run_measures`).

    Parameters
    ----------
    spec : StudySpec
        The study definition.

    Returns
    -------
    dict of str to MeasureInputs
        Every row of the study; the rows of one pair share their measures task.
    """
    out = {}
    for row in study_rows(spec):
        v, mcfg = row.variant, row.config["measures"]
        out[row.row_id] = MeasureInputs(config_hash(mcfg), mcfg, config_hash(_pair_cfg(spec, v)),
                                        config_hash(_pair_cfg(spec, v.anchor(spec))),
                                        config_hash(_train_cfg(spec, "new", v)))
    return out


def plan_study(spec: StudySpec, store: ArtifactStore, steps: S.Steps, done: Iterable[str] = ()) -> StudyPlan:
    """Build the task graph of the rows of ``spec`` that are not in ``done``.

    Order: per (algorithm, seed), the corpus pair, the anchors (highest dimension, full
    precision), then per dimension from the largest down, the trainings, each bit width's pair,
    its measures, its downstream runs and rows. Anchor-first means the measures of every pair can
    start as soon as the pair exists.

    A calibrated study (``spec.calibrate``) runs the downstream models only for the rows
    :func:`embstab.study.calibrate.choose_measured` picks; the others' tasks assemble their
    measures alone (:attr:`StudyPlan.unmeasured`), and are planned on every run, as they are never
    stored as finished.

    Parameters
    ----------
    spec : StudySpec
    store : ArtifactStore
        Passed to every task (tasks read inputs from and write outputs to it).
    steps : Steps
        The computations.
    done : iterable of str
        Row ids already stored; they and the tasks only they need are left out.

    Returns
    -------
    StudyPlan

    Raises
    ------
    StudyDefinitionError
        If the study has more than :data:`embstab.study.schema.MAX_ROWS` rows.
    """
    spec.check_size()  # a spec built in Python skips parse_study's check
    done = set(done)
    plan = StudyPlan(spec)
    kind = spec.study_kind  # its task functions build the source pair, train, compress and run downstream

    def add(stage: str, cfg: Mapping[str, Any], func: Callable[..., Any], *args: Any) -> str:
        key = f"{stage}-{config_hash(cfg)}"
        if key not in plan.nodes:
            plan.nodes[key] = Node(key, stage, func, args)
        return key

    measure_steps = kind.measure_steps(steps)
    corpus_cfg = _corpus_cfg(spec)
    rows = list(study_rows(spec))
    # the choice is made on the whole grid, whatever is stored: the same rows on every run
    measured = (None if spec.calibrate is None
                else choose_measured({row.row_id: row.columns for row in rows}, spec.calibrate))
    for row in rows:
        row_id, meta, cfg, variant = row.row_id, row.columns, row.config, row.variant
        plan.all_rows[row_id] = meta
        if row_id in done:
            continue
        corpus_key = add(kind.source_stage, corpus_cfg, kind.run_source, store, steps, config_hash(corpus_cfg),
                         corpus_cfg)

        def pair(v: Variant, corpus_key: str = corpus_key) -> tuple[str, str]:
            trained = []
            for side in ("old", "new"):
                tcfg = _train_cfg(spec, side, v)
                trained.append(add("train", tcfg, kind.run_train, store, steps, config_hash(tcfg), tcfg, Ref(corpus_key)))
            pcfg = _pair_cfg(spec, v)
            return add("compress", pcfg, kind.run_compress, store, steps, config_hash(pcfg), pcfg,
                       Ref(trained[0]), Ref(trained[1])), trained[1]

        anchor_key, _ = pair(variant.anchor(spec))
        pair_key, new_key = pair(variant)
        mcfg = cfg["measures"]
        measures_key = add("measures", mcfg, S.run_measures, store, measure_steps, config_hash(mcfg), mcfg,
                           Ref(pair_key), Ref(anchor_key), Ref(new_key))
        if measured is not None and row_id not in measured:
            # a task of its own name: never the measured row's, whose output holds a disagreement
            ucfg = {"v": PLAN_VERSION, "stage": "unmeasured_row", "label": meta["task"], "measures": mcfg}
            plan.rows[row_id] = add("row", ucfg, assemble_unmeasured_row, meta, Ref(measures_key))
            plan.unmeasured.add(row_id)
            continue
        dcfg = cfg["downstream"]
        downstream_key = add("downstream", dcfg, kind.run_downstream, store, steps, config_hash(dcfg), dcfg,
                             Ref(pair_key))
        row_key = add("row", cfg, S.assemble_row, meta, Ref(measures_key), Ref(downstream_key))
        plan.rows[row_id] = row_key
    return plan

"""Studies: the grid of embeddings behind "which dimension and precision should I ship?".

A study (a YAML file, see :func:`parse_study`) trains embeddings on two versions of their data,
compresses each pair, measures it against anchors and trains downstream models on both members.
Its ``kind`` (:data:`KINDS`: word, knowledge-graph, contextual or hyperbolic graph embeddings, each
defined in its own package) says what the data and the trainer are; everything after training is shared.
:func:`run_study` runs it in-process or on Dask distributed, with a content-addressed artifact
store (:class:`ArtifactStore`) and an SQLite results database (:class:`ResultDB`), resuming
where an interrupted run stopped.
"""

from __future__ import annotations

from embstab.study.kinds import KINDS, StudyKind, get_kind
from embstab.study.plan import StudyPlan, plan_study
from embstab.study.results import ResultDB
from embstab.study.runner import DEFAULT_STORE, StudyRun, default_db_path, run_study
from embstab.study.schema import StudyDefinitionError, StudySpec, load_study, parse_study
from embstab.study.status import format_status, study_status
from embstab.study.steps import Steps, StudyTaskError, default_steps
from embstab.study.store import ArtifactStore, config_hash

__all__ = [
    "ArtifactStore", "DEFAULT_STORE", "KINDS", "ResultDB", "Steps", "StudyDefinitionError", "StudyKind", "StudyPlan",
    "StudyRun", "StudySpec", "StudyTaskError", "config_hash", "default_db_path", "default_steps", "format_status",
    "get_kind", "load_study", "parse_study", "plan_study", "run_study", "study_status",
]

"""Studies: the grid of embeddings behind "which dimension and precision should I ship?".

A study (a YAML file, see :func:`parse_study`) trains embeddings on two versions of a corpus,
compresses each pair, measures it against anchors and trains downstream models on both members.
:func:`run_study` runs it in-process or on Dask distributed, with a content-addressed artifact
store (:class:`ArtifactStore`) and an SQLite results database (:class:`ResultDB`), resuming
where an interrupted run stopped.
"""

from __future__ import annotations

from embstab.study.plan import StudyPlan, plan_study
from embstab.study.results import ResultDB
from embstab.study.runner import DEFAULT_STORE, StudyRun, default_db_path, run_study
from embstab.study.schema import StudyDefinitionError, StudySpec, load_study, parse_study
from embstab.study.status import format_status, study_status
from embstab.study.steps import Steps, StudyTaskError, default_steps
from embstab.study.store import ArtifactStore, config_hash

__all__ = [
    "ArtifactStore", "DEFAULT_STORE", "ResultDB", "Steps", "StudyDefinitionError", "StudyPlan", "StudyRun",
    "StudySpec", "StudyTaskError", "config_hash", "default_db_path", "default_steps", "format_status",
    "load_study", "parse_study", "plan_study", "run_study", "study_status",
]

"""A kind states only what differs from the defaults: the source task is named after its study-file
key and a kind without cross-checks has none; the four shipped kinds keep their stage names."""

from __future__ import annotations

import dataclasses

from embstab.study.kinds import KINDS, StudyKind


def _minimal(**more) -> StudyKind:
    fn = lambda *a, **k: None  # noqa: E731 - never called: only the registration is read
    return StudyKind(name="bare", label="bare points", memory_unit="bits per point", source_key="points",
                     parse_source=fn, algorithms=fn, training={}, tasks=dict, source_config=fn, train_config=fn,
                     run_source=fn, run_train=fn, run_compress=fn, run_downstream=fn, **more)


def test_defaults_fill_what_a_kind_leaves_out():
    kind = _minimal()
    assert kind.source_stage == "points" and kind.check is None
    assert (kind.geometry, kind.recipes, kind.transforms, kind.measure_pair, dict(kind.steps)) == \
        ("euclidean", False, False, None, {})
    named = _minimal(source_stage="build", check=print)
    assert named.source_stage == "build" and named.check is print
    assert dataclasses.replace(named, name="twin").source_stage == "build"


def test_shipped_kinds_keep_their_source_stages():
    assert {name: KINDS[name].source_stage for name in ("word", "kg", "contextual", "hyperbolic")} == \
        {"word": "corpus", "kg": "graph", "contextual": "corpus", "hyperbolic": "graph"}
    assert all(KINDS[name].check is not None for name in ("word", "kg", "contextual", "hyperbolic"))

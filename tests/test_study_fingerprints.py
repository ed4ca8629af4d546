"""Every shipped study keeps its names: the definition's fingerprint, the row ids and the artifact
keys of its plan are pinned to the values of tests/data/study_fingerprints.json (made on the tree
before the kinds moved into their own packages), so moving code never orphans stored artifacts or
results rows."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ROOT / "pipelines"
PINNED = Path(__file__).resolve().parent / "data" / "study_fingerprints.json"


def _digest(items) -> str:
    return hashlib.sha256("\n".join(sorted(items)).encode()).hexdigest()[:16]


def names_of(path: Path, store_root: Path) -> dict:
    """The fingerprint, row ids and task keys of one study file's plan (nothing is run)."""
    from embstab.study import ArtifactStore, load_study, plan_study
    from embstab.study.steps import default_steps

    spec = load_study(path)
    plan = plan_study(spec, ArtifactStore(store_root), default_steps())
    return {"kind": spec.kind, "fingerprint": spec.fingerprint(), "rows": len(plan.all_rows),
            "row_ids": _digest(plan.all_rows), "task_keys": _digest(plan.nodes),
            "first_row": min(plan.all_rows)}


def _pinned() -> dict:
    return json.loads(PINNED.read_text(encoding="utf-8"))


@pytest.fixture
def pinned_version(monkeypatch):
    # every source configuration holds the package version; pin it so a release does not fail this test
    import embstab

    data = _pinned()
    monkeypatch.setattr(embstab, "__version__", data["embstab_version"])
    return data["studies"]


@pytest.mark.parametrize("name", sorted(p.name for p in PIPELINES.glob("*.yaml")))
def test_pipeline_keeps_its_fingerprint_row_ids_and_artifact_keys(name, pinned_version, tmp_path):
    assert name in pinned_version, f"{name} is not pinned: add it to {PINNED.name}"
    assert names_of(PIPELINES / name, tmp_path) == pinned_version[name]


if __name__ == "__main__":  # regenerate: python tests/test_study_fingerprints.py (only when names must change)
    import tempfile

    import embstab

    with tempfile.TemporaryDirectory() as tmp:
        studies = {p.name: names_of(p, Path(tmp)) for p in sorted(PIPELINES.glob("*.yaml"))}
    PINNED.write_text(json.dumps({"_comment": sys.argv[1] if len(sys.argv) > 1 else "",
                                  "embstab_version": embstab.__version__, "studies": studies},
                                 indent=1, sort_keys=True) + "\n", encoding="utf-8")

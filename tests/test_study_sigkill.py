"""Reliability: SIGKILL the runner at random points, restart, and check nothing was lost or doubled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from embstab.study import ArtifactStore, ResultDB, parse_study, run_study

REPO = Path(__file__).resolve().parents[1]
STUDY = {
    "name": "killme",
    "corpus": {"name": "gensim_lee", "fraction": 0.1, "seed": 0},
    "training": {"algorithms": ["w2v_cbow"], "dimensions": [8, 16], "seeds": [3, 4], "epochs": 2,
                 "min_count": 3},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["eis", "knn", "pip_loss"], "top_n": 300, "params": {"knn": {"n_queries": 50}}},
    "downstream": [{"task": "rt_sentiment", "options": {"limit": 300, "epochs": 2}}],
}
N_ROWS = 2 * 2 * 2


# the slow tier: a bigger grid, so a dozen short-lived runs each leave it in a different state
STUDY_BIG = {**STUDY, "name": "killme_big",
             "training": {**STUDY["training"], "dimensions": [8, 12, 16, 24], "seeds": [3, 4, 5]},
             "compression": {"bit_widths": [1, 2, 4, 32]}}


def _launch(study: Path, store: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "embstab.cli.study", str(study), "--scheduler", "synchronous",
           "--store", str(store), "--no-report", "--no-progress"]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _check_store_whole(store: ArtifactStore) -> int:
    """Every artifact under its final name loads completely and has its configuration sidecar."""
    n = 0
    for kind, key, path in store.iter_artifacts():
        if path.endswith(".npz"):
            emb = store.get_embedding(kind, key)
            assert len(emb) > 0 and np.isfinite(emb.vectors).all()
        elif path.endswith(".txt.gz"):
            assert store.get_docs(kind, key)
        elif path.endswith(".result.json"):
            assert isinstance(store.get_json(kind, key), dict)
        else:
            raise AssertionError(f"unexpected file in the store: {path}")
        assert store.exists(kind, key, "json"), f"{path} has no configuration sidecar"
        n += 1
    return n


def _check_db(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    with ResultDB(db_path) as db:
        df = db.results()
    if df.empty:  # killed before the first row was stored
        return 0
    assert df["row_id"].is_unique
    assert not df[["algo", "seed", "dim", "bitrate", "task"]].duplicated().any()
    assert df["disagreement"].notna().all() and df["eis"].notna().all()
    return len(df)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted run: the values every interrupted run must end up with, and its duration."""
    run = run_study(parse_study(STUDY), tmp_path_factory.mktemp("reference"), progress=False)
    assert run.complete
    return run


def _kill_and_restart(tmp_path: Path, reference, trials: int, rng_seed: int, share: float = 1.0,
                      definition: dict = STUDY) -> None:
    """Start the runner ``trials`` times, each killed after a random delay of up to start-up plus
    ``share`` of an uninterrupted run; then run it to the end and compare with ``reference``."""
    study = tmp_path / "killme.yaml"
    study.write_text(yaml.safe_dump(definition))
    store_dir = tmp_path / "store"
    db_path = store_dir / "results.sqlite"
    n_rows = parse_study(definition).n_rows()
    rng = np.random.default_rng(rng_seed)
    # kill points spread over the whole duration of an uninterrupted run
    span = share * max(reference.wall_s, 1.0) + 3.0  # + interpreter start-up and imports
    progress, artifacts, kills = [], [], 0
    for _ in range(trials):
        proc = _launch(study, store_dir)
        time.sleep(float(rng.uniform(0.2, span)))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait(timeout=60)
        artifacts.append(_check_store_whole(ArtifactStore(store_dir)))
        progress.append(_check_db(db_path))
    assert kills >= 1, "every run finished before its kill point: the test killed nothing"
    assert progress == sorted(progress), "a restart lost rows"
    assert artifacts == sorted(artifacts), "a restart lost artifacts"
    print(f"after each of {trials} trials ({kills} killed): rows {progress}, artifacts {artifacts}")
    proc = _launch(study, store_dir)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert _check_store_whole(ArtifactStore(store_dir)) > 0
    assert _check_db(db_path) == n_rows
    with ResultDB(db_path) as db:
        got = db.results().drop(columns=["row_id"])
    # the interrupted-and-resumed study equals the uninterrupted one, value for value
    pd.testing.assert_frame_equal(got, reference.results)


def test_sigkill_at_random_points_then_restart(tmp_path, reference):
    _kill_and_restart(tmp_path, reference, trials=3, rng_seed=20260522)


@pytest.mark.slow
def test_sigkill_many_trials(tmp_path):
    reference = run_study(parse_study(STUDY_BIG), tmp_path / "reference", progress=False)
    # short windows: each trial gets a little further, so kills land in many different states
    _kill_and_restart(tmp_path, reference, trials=12, rng_seed=7, share=0.2, definition=STUDY_BIG)


def test_two_runners_on_one_store_at_once(tmp_path, reference):
    """Two runners racing on the same store and database: each artifact whole, each row stored once."""
    study = tmp_path / "killme.yaml"
    study.write_text(yaml.safe_dump(STUDY))
    store_dir = tmp_path / "store"
    procs = [_launch(study, store_dir) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    _check_store_whole(ArtifactStore(store_dir))
    assert _check_db(store_dir / "results.sqlite") == N_ROWS
    with ResultDB(store_dir / "results.sqlite") as db:
        got = db.results().drop(columns=["row_id"])
    pd.testing.assert_frame_equal(got, reference.results)

"""The study runner on real (tiny) data: graph, resume, failure capture, Dask, determinism."""

from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import pytest

from embstab import compare
from embstab.errors import EmbstabError
from embstab.study.runner import StudyRun
from embstab.study import (
    ArtifactStore,
    ResultDB,
    Steps,
    StudyTaskError,
    parse_study,
    plan_study,
    run_study,
    study_status,
)

# gensim's Lee corpus (60k tokens, inside the gensim wheel) and small dims keep this fast
TINY = {
    "name": "tiny",
    "corpus": {"name": "gensim_lee", "fraction": 0.1, "seed": 0},
    "training": {"algorithms": ["w2v_cbow"], "dimensions": [8, 16], "seeds": [1, 2], "epochs": 3, "min_count": 3},
    "compression": {"bit_widths": [1, 32]},
    "measures": {"names": ["eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap"],
                 "top_n": 400, "params": {"knn": {"n_queries": 100}}},
    "downstream": [{"task": "rt_sentiment", "options": {"limit": 300, "epochs": 3}}],
    "budgets": [16, 64],
}
N_ROWS = 1 * 2 * 2 * 2 * 1


def tiny_spec(**changes) -> object:
    data = {**TINY, **changes}
    return parse_study(data)


def _unused(*args, **kwargs):  # planning never calls the steps
    raise AssertionError("planning must not run any step")


PLAN_ONLY = Steps(*[_unused] * 6)


def test_plan_has_each_task_once(tmp_path):
    spec = tiny_spec()
    plan = plan_study(spec, ArtifactStore(tmp_path), PLAN_ONLY)
    counts = plan.stage_counts()
    # 2 sides x 2 dims x 2 seeds trainings; 2 dims x 2 bits x 2 seeds pairs (the 16-d 32-bit pair
    # doubles as the anchor); one measures and one downstream task per pair
    assert counts == {"corpus": 1, "train": 8, "compress": 8, "measures": 8, "downstream": 8, "row": N_ROWS}
    assert len(plan.rows) == len(plan.all_rows) == N_ROWS
    keys = list(plan.nodes)
    for i, node in enumerate(plan.nodes.values()):  # topological: deps come first
        assert all(keys.index(d) < i for d in node.deps)
    # anchors are the highest-dimension full-precision pair of the same seed
    measure_nodes = [n for n in plan.nodes.values() if n.stage == "measures"]
    for node in measure_nodes:
        anchor = plan.nodes[node.deps[1]]
        cfg = anchor.args[3]
        assert cfg["bits"] == 32 and cfg["new"]["dim"] == 16 and cfg["seed"] == node.args[3]["pair"]["seed"]


def test_plan_skips_finished_rows_and_what_only_they_need(tmp_path):
    spec = tiny_spec()
    store = ArtifactStore(tmp_path)
    full = plan_study(spec, store, PLAN_ONLY)
    seed2_dim8 = {r for r, meta in full.all_rows.items() if meta["seed"] == 2 and meta["dim"] == 8}
    done = set(full.all_rows) - seed2_dim8
    plan = plan_study(spec, store, PLAN_ONLY, done)
    assert set(plan.rows) == seed2_dim8
    # the 8-d seed-2 pairs need their own trainings and the seed-2 anchors (16-d) only
    assert plan.stage_counts() == {"corpus": 1, "train": 4, "compress": 3, "measures": 2, "downstream": 2, "row": 2}
    assert plan_study(spec, store, PLAN_ONLY, set(full.all_rows)).nodes == {}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The tiny study run once, synchronously, with the real steps."""
    root = tmp_path_factory.mktemp("study")
    run = run_study(tiny_spec(), root / "store", progress=False)
    return root, run


def test_synchronous_run_produces_every_row(finished):
    _, run = finished
    assert run.complete and run.n_new == N_ROWS and run.n_failed == 0
    df = run.results
    assert len(df) == N_ROWS
    assert set(df.columns) >= {"algo", "seed", "dim", "bitrate", "memory", "task", "disagreement", "quality",
                               "eis", "knn", "semantic_displacement", "pip_loss", "eigenspace_overlap"}
    assert (df["memory"] == df["dim"] * df["bitrate"]).all()
    assert df["disagreement"].between(0, 100).all() and df["quality"].between(0, 100).all()
    assert df["eis"].between(0, 1).all() and df["knn"].between(0, 1).all()
    assert df[["algo", "seed", "dim", "bitrate", "task"]].duplicated().sum() == 0
    assert pd.read_parquet(run.parquet_path).shape[0] == N_ROWS
    # how the measures were taken travels with the rows, the export and the database
    from embstab.selection.results import as_results, measure_settings

    settings = {"top_n": 400, "params": {"knn": {"n_queries": 100}}}
    assert measure_settings(df) == settings == measure_settings(pd.read_parquet(run.parquet_path))
    assert measure_settings(as_results(run.db_path, keep_near_chance=True)) == settings


def test_rows_hold_the_measures_of_their_pair(finished):
    """Cross-check the stored values against embstab.compare on the stored pair and anchors:
    orientation (new embedding first), anchors (16-d full precision, same seed) and top_n."""
    root, run = finished
    store = ArtifactStore(root / "store")
    spec = tiny_spec()
    plan = plan_study(spec, store, PLAN_ONLY)
    checked = 0
    for row_id, node_key in plan.rows.items():
        meta = plan.all_rows[row_id]
        if meta["dim"] != 8:
            continue
        measures_node = plan.nodes[plan.nodes[node_key].deps[0]]
        pair_key, anchor_key, raw_key = (plan.nodes[d].args[2] for d in measures_node.deps)
        new, old = store.get_embedding("pair_new", pair_key), store.get_embedding("pair_old", pair_key)
        anchors = (store.get_embedding("pair_new", anchor_key), store.get_embedding("pair_old", anchor_key))
        assert anchors[0].dim == 16 and new.dim == 8
        expected = compare(new, old, anchors=anchors, measures=list(spec.measures.names), top_n=spec.measures.top_n,
                           rank_by="a", params={"knn": {"k": 5, "n_queries": 100, "seed": 1234}})
        got = run.results.query("seed == @meta['seed'] and dim == 8 and bitrate == @meta['bitrate']").iloc[0]
        for name, value in zip(expected["measure"], expected["value"], strict=True):
            assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
        # and how much of its own neighbourhoods the compressed new member kept
        raw = store.get_embedding("embedding", raw_key)
        own = compare(new, raw, anchors=(raw, raw), measures=["knn"], top_n=spec.measures.top_n, rank_by="a",
                      params={"knn": {"k": 5, "n_queries": 100, "seed": 1234}})
        assert got["agreement_uncompressed"] == pytest.approx(float(own["value"].iloc[0]), rel=1e-9)
        if meta["bitrate"] == 32:
            assert got["agreement_uncompressed"] > 0.99
        checked += 1
    assert checked == 4


def test_run_times_every_task_it_ran(finished, tmp_path):
    _, run = finished
    planned = plan_study(tiny_spec(), ArtifactStore(tmp_path), PLAN_ONLY).stage_counts()
    stages = run.stage_times()
    assert list(stages["stage"]) == ["corpus", "train", "compress", "measures", "downstream", "row"]
    assert dict(zip(stages["stage"], stages["tasks"])) == planned
    t = run.timings
    assert len(t) == sum(planned.values()) and t["key"].is_unique
    assert (t["wall_s"] >= 0).all() and (t["cpu_s"] >= 0).all()
    # a training (gensim on 60k tokens) is real work; assembling a row dict is not
    assert t.loc[t["stage"] == "train", "wall_s"].min() > t.loc[t["stage"] == "row", "wall_s"].max()
    assert (stages["span_s"] >= stages["wall_s"] - 1e-3).all()  # one task at a time: spans cover the sums
    assert set(run.phases) == {"plan", "execute", "export"}
    assert sum(run.phases.values()) == pytest.approx(run.wall_s, abs=1e-3)
    assert run.phases["execute"] >= t["wall_s"].sum()


def test_rerun_resumes_without_recomputing(finished):
    root, first = finished
    store = ArtifactStore(root / "store")
    stamps = {p: os.stat(p).st_mtime_ns for _, _, p in store.iter_artifacts()}
    run = run_study(tiny_spec(), store, progress=False)
    assert run.n_skipped == N_ROWS and run.n_new == 0
    assert run.timings.empty and run.stage_times().empty  # nothing was planned, nothing ran
    assert {p: os.stat(p).st_mtime_ns for _, _, p in store.iter_artifacts()} == stamps
    pd.testing.assert_frame_equal(run.results, first.results)


def test_lost_row_is_recomputed_from_cached_artifacts_identically(finished, tmp_path):
    root, first = finished
    db_path = tmp_path / "results.sqlite"
    # a fresh database over the same store: every row is recomputed from cached artifacts only
    store = ArtifactStore(root / "store")
    n_before = len(list(store.iter_artifacts()))
    run = run_study(tiny_spec(), store, db_path, progress=False)
    assert run.n_new == N_ROWS
    assert len(list(store.iter_artifacts())) == n_before
    pd.testing.assert_frame_equal(run.results, first.results)


def test_failing_task_is_recorded_and_the_rest_go_on(tmp_path, finished):
    root, _ = finished
    broken = {"task": "rt_sentiment", "label": "broken", "options": {"limit": 300, "epochs": 3, "lr": -1.0}}
    spec = tiny_spec(downstream=[*TINY["downstream"], broken])
    db_path = tmp_path / "r.sqlite"
    run = run_study(spec, root / "store", db_path, progress=False)
    assert run.n_failed == N_ROWS and len(run.results) == N_ROWS
    assert set(run.results["task"]) == {"rt_sentiment"}
    assert set(run.failures["stage"]) == {"downstream"}
    assert run.failures["error"].str.contains("lr|learning rate", case=False).all()
    assert run.failures["traceback"].str.contains("Traceback").all()
    summary, failures = study_status(db_path)
    assert summary[["planned", "done", "failed", "pending"]].iloc[0].tolist() == [2 * N_ROWS, N_ROWS, N_ROWS, 0]
    # a re-run retries the failed rows (and only those)
    again = run_study(spec, root / "store", db_path, progress=False)
    assert again.n_skipped == N_ROWS and again.n_failed == N_ROWS
    assert (again.failures["attempts"] == 2).all()


def test_study_task_error_survives_pickling():
    import pickle

    err = pickle.loads(pickle.dumps(StudyTaskError("train", "ValueError: x", "Traceback ...")))
    assert (err.stage, err.message, err.traceback) == ("train", "ValueError: x", "Traceback ...")
    assert "train failed" in str(err)


def test_dask_cluster_over_tcp_gives_the_same_results(finished, tmp_path):
    """An existing Dask cluster reached by its tcp:// address computes exactly what the synchronous run did."""
    distributed = pytest.importorskip("distributed")
    _, reference = finished
    # memory_limit=0: in-process workers would measure the whole test process against their share
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                                  memory_limit=0, dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        run = run_study(tiny_spec(), tmp_path / "store", scheduler=cluster.scheduler_address, progress=False)
    assert run.complete and run.n_failed == 0
    pd.testing.assert_frame_equal(run.results, reference.results)
    # every task's time came back from the workers, as in the synchronous run
    counts = lambda r: dict(zip(r.stage_times()["stage"], r.stage_times()["tasks"]))  # noqa: E731
    assert counts(run) == counts(reference)
    with ResultDB(run.db_path) as db:
        assert db.journal_mode == "wal"
    np.testing.assert_array_equal(run.results["eis"].to_numpy(), reference.results["eis"].to_numpy())


def test_scheduler_and_store_checked_before_any_work(tmp_path):
    from embstab.errors import EmbstabError
    from embstab.study.executors import default_workers

    with pytest.raises(EmbstabError, match="tcp://HOST"):
        run_study(tiny_spec(), tmp_path, scheduler="nonsense", steps=PLAN_ONLY)
    with pytest.raises(EmbstabError, match="worker processes cannot"):
        run_study(tiny_spec(), "memory://embstab-shared", scheduler="local", steps=PLAN_ONLY)
    assert not (tmp_path / "results.sqlite").exists()
    assert 1 <= default_workers() <= (os.cpu_count() or 1)


def test_fsspec_store_on_a_threaded_cluster(finished, tmp_path):
    """A non-local (fsspec) store shared by the workers of an in-process cluster: same results."""
    _, reference = finished
    url = f"memory://embstab-test-{os.getpid()}"
    store = ArtifactStore(url)
    try:
        run = run_study(tiny_spec(), store, tmp_path / "r.sqlite", scheduler="threads", workers=2, progress=False)
        assert not store.is_local
        assert {k for k, _, _ in store.iter_artifacts()} == {"corpus_old", "corpus_new", "embedding", "pair_old",
                                                            "pair_new", "measures", "nulls", "downstream"}
    finally:
        store.fs.rm(store.root, recursive=True)
    pd.testing.assert_frame_equal(run.results, reference.results)


def test_threaded_workers_never_pause_for_the_callers_memory():
    """In-process workers share the caller's memory; Dask must not pause them for it (a silent hang).

    With a pause threshold far below this process's resident size, workers with a memory limit
    stop taking tasks for good; ours must still run one.
    """
    import dask

    from embstab.study.executors import make_client

    with dask.config.set({"distributed.worker.memory.pause": 0.001,
                          "distributed.worker.memory.monitor-interval": "10ms"}):
        client, cluster = make_client("threads", workers=2)
        try:
            assert all(w["memory_limit"] == 0 for w in client.scheduler_info()["workers"].values())
            assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3
        finally:
            client.close()
            cluster.close()


def _malloc_env() -> tuple:
    # the environment the process started with: glibc reads its malloc settings only then
    with open("/proc/self/environ", "rb") as f:
        env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
    return (env.get(b"MALLOC_MMAP_THRESHOLD_", b"").decode(), env.get(b"MALLOC_TRIM_THRESHOLD_", b"").decode())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/environ (Linux)")
def test_local_worker_processes_keep_large_blocks_on_the_heap():
    """Dask's MALLOC_TRIM_THRESHOLD_ alone pins glibc's mmap threshold at 128 KiB, so every large
    temporary is mapped and faulted in afresh; local workers get a 32 MiB threshold beside it."""
    from embstab.study.executors import WORKER_MMAP_THRESHOLD, make_client

    client, cluster = make_client("local", workers=1)
    try:
        envs = list(client.run(_malloc_env).values())
    finally:
        client.close()
        cluster.close()
    assert envs and all(mmap == str(WORKER_MMAP_THRESHOLD) for mmap, _ in envs), envs


@pytest.mark.slow  # ~20 s of process start-up; the default tier reaches a cluster by address in-process
def test_separate_process_cluster_gives_the_same_results(finished, tmp_path):
    """A real cluster: a `dask scheduler` process and two `dask worker` processes on 127.0.0.1,
    reached by address, sharing the store directory; same rows as the synchronous run."""
    import json
    import subprocess
    import sys
    import time

    distributed = pytest.importorskip("distributed")
    from embstab.study.executors import make_client

    _, reference = finished
    info = tmp_path / "scheduler.json"
    common = {"cwd": tmp_path, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                               str(info)], **common)]
    try:
        deadline = time.monotonic() + 60
        while not info.exists() or not info.read_text().strip():
            assert procs[0].poll() is None, "the scheduler exited"
            assert time.monotonic() < deadline, "no scheduler file after 60 s"
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        with pytest.warns(UserWarning, match="no workers yet"):
            make_client(address)[0].close()
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                       "--nworkers", "2", "--nthreads", "1", "--no-dashboard",
                                       "--local-directory", str(tmp_path / "workers")], **common))
        with distributed.Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=120)  # a worker that cannot start fails here, not by hanging
        run = run_study(tiny_spec(), tmp_path / "store", scheduler=address, progress=False)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    assert address.startswith("tcp://127.0.0.1:")
    assert run.complete and run.n_failed == 0
    pd.testing.assert_frame_equal(run.results, reference.results)
    # the worker processes' task times reached this process through the scheduler
    assert sorted(run.timings["key"]) == sorted(reference.timings["key"])
    assert run.timings.loc[run.timings["stage"] == "train", "cpu_s"].min() > 0


def test_a_saved_run_reopens_with_the_same_results_and_reports(finished, tmp_path):
    _, run = finished
    run.save(tmp_path / "saved")
    back = StudyRun.load(tmp_path / "saved")
    pd.testing.assert_frame_equal(back.results, run.results)
    assert back.spec.fingerprint() == run.spec.fingerprint()
    assert (back.n_rows, back.n_new, back.n_failed, back.db_path) == (run.n_rows, run.n_new, run.n_failed,
                                                                        run.db_path)
    pd.testing.assert_frame_equal(back.timings, run.timings)
    assert back.phases == run.phases and not back.stage_times().empty
    html = back.report(tmp_path / "report.html")
    assert html.startswith("<!DOCTYPE html>") and (tmp_path / "report.html").read_text(encoding="utf-8") == html
    (tmp_path / "saved" / "run.json").write_text('{"format": "something else"}', encoding="utf-8")
    with pytest.raises(EmbstabError, match="not a saved study run"):
        StudyRun.load(tmp_path / "saved")
    with pytest.raises(EmbstabError, match="run.json is missing"):
        StudyRun.load(tmp_path / "nowhere")

"""Outputs that would land on an input, and inputs that are devices or pipes, on the newer commands
(contextual, kg, hyperbolic, study): one case per row, run through the real command line.

Every case exits 2 with exactly one stderr line naming the flag and the path, before any work; every
file of the workspace is byte-identical afterwards (same inode, same hash), nothing new appears in
it, and no journal appears beside a device. The tests at the end check what must keep working: the
read-only ``study status`` on a real database, and outputs beside (not inside) an input folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import embstab.cli as cli  # noqa: E402
from embstab._fs import OutputClashError, check_outputs  # noqa: E402
from embstab.study.results import ResultDB  # noqa: E402

#: Files SQLite would create beside a device it was pointed at.
STRAYS = [f"/dev/{dev}{suffix}" for dev in ("zero", "null", "full") for suffix in ("-journal", "-wal", "-shm")]


# --------------------------------------------------------------------------------- the workspace
@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Regular files every case starts from: a tiny BERT folder, a text, a graph folder, an edge list,
    a study file and a results database."""
    from _contextual import tiny_model

    d = tmp_path_factory.mktemp("template")
    tiny_model(0).save(d / "model")
    lines = "the government said on monday\nthe prime minister said\npolice said the fire\n"
    (d / "text.txt").write_text(lines)
    (d / "t.vocab").write_text(lines)  # what a features --out t.npy would write its words to
    graph = d / "graph"
    graph.mkdir()
    (graph / "train.txt").write_text("".join(f"e{i}\tr{i % 2}\te{(i + 1) % 6}\n" for i in range(6)))
    (graph / "valid.txt").write_text("e0\tr0\te2\n")
    (graph / "test.txt").write_text("e1\tr1\te3\n")
    kgm = d / "kgmodel"
    kgm.mkdir()
    for name in ("entities.npz", "relations.npz", "model.safetensors", "config.json"):
        (kgm / name).write_bytes(b"placeholder")  # refused before anything reads them
    (d / "g.edges").write_text("".join(f"{(i - 1) // 3} {i}\n" for i in range(1, 14)))
    (d / "g.hyp").write_text("not read\n")
    (d / "study.yaml").write_text("name: s\ncorpus: {name: gensim_lee}\ntraining: {algorithms: [w2v_cbow], "
                                  "dimensions: [4], seeds: [1]}\ncompression: {bit_widths: [1]}\n"
                                  "measures: {names: [knn]}\n"
                                  "downstream:\n  - {task: rt_sentiment, model: linear, options: {limit: 20}}\n")
    (d / "empty.sqlite").write_bytes(b"")
    with ResultDB(d / "results.sqlite") as db:
        db.register_study("s", "f" * 16, {"name": "s"}, ["r1", "r2"])
        db.add_result("r1", {"algo": "w2v", "seed": 1, "dim": 4, "bitrate": 1, "memory": 4, "task": "t",
                             "model": "linear", "disagreement": 1.0, "quality": 50.0, "quality_old": 50.0,
                             "measures": {"knn": 0.5}})
    return d


@pytest.fixture
def ws(template, tmp_path, monkeypatch):
    """A fresh copy of the template plus the special files and links of the cases."""
    d = tmp_path / "ws"
    shutil.copytree(template, d, symlinks=True, ignore=shutil.ignore_patterns("model"))
    # model copies are hard links (writers replace files, they never write into them); a case that
    # replaced one would show as a changed inode
    (d / "runs").mkdir()
    for name in ("model", "runs/a", "fifomodel", "zeromodel", "cache/hub/org--m/main"):
        shutil.copytree(template / "model", d / name, copy_function=os.link)
    for name, broken in (("fifomodel", "tokenizer.json"), ("zeromodel", "config.json")):
        os.remove(d / name / broken)
    os.mkfifo(d / "fifomodel" / "tokenizer.json")  # no writer: opening it would block forever
    os.symlink("/dev/zero", d / "zeromodel" / "config.json")
    for name, broken in (("zerograph", "train.txt"), ("fifograph", "valid.txt")):
        shutil.copytree(d / "graph", d / name)
        os.remove(d / name / broken)
    os.symlink("/dev/zero", d / "zerograph" / "train.txt")
    os.mkfifo(d / "fifograph" / "valid.txt")
    shutil.copytree(d / "kgmodel", d / "fifokg")
    os.remove(d / "fifokg" / "config.json")
    os.mkfifo(d / "fifokg" / "config.json")
    os.mkfifo(d / "fifo")
    os.symlink("/dev/zero", d / "zero_link")
    os.symlink("/dev/null", d / "null_link")
    os.symlink(d / "fifo", d / "fifo_link")
    os.symlink(d / "text.txt", d / "text_link.txt")
    os.link(d / "text.txt", d / "text_hardlink.txt")
    os.symlink(d / "model", d / "model_link")
    os.symlink(d / "graph", d / "graph_link")
    os.symlink(d / "g.edges", d / "edges_link")
    os.link(d / "g.edges", d / "edges_hardlink")
    (d / "afile").write_text("a file where a folder is expected\n")
    (d / "outdir").mkdir()
    # cache/hub/org--m/main is where hub:org/m lives with EMBSTAB_DATA=d/cache
    monkeypatch.setenv("EMBSTAB_DATA", str(d / "cache"))
    return d


def _snapshot(d: Path) -> dict[str, tuple]:
    """Type, target, inode and content hash of every entry of the workspace."""
    out = {}
    for p in sorted(d.rglob("*")):
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            out[str(p)] = ("link", os.readlink(p))
        elif stat.S_ISREG(st.st_mode):
            out[str(p)] = ("file", st.st_ino, hashlib.sha256(p.read_bytes()).hexdigest())
        else:
            out[str(p)] = ("other", stat.S_IFMT(st.st_mode))
    return out


# ------------------------------------------------------------------------------------ the cases
F = ["contextual", "features"]
P = ["contextual", "pretrain", "--corpus", "gensim_lee", "--steps", "1", "--batch-size", "2", "--no-baseline"]
D = ["contextual", "disagreement"]
KT = ["kg", "train", "--dim", "4", "--epochs", "1", "--no-progress"]
HE = ["hyperbolic", "embed", "--quiet"]
S = ["study", "--no-progress", "--scheduler", "synchronous"]

# (id, argv with {d} for the workspace, words the one stderr line must contain)
CASES = [
    # contextual features: the output lands on the text or in the model folder
    ("features-out-is-text", [*F, "{d}/model", "--text", "{d}/text.txt", "--out", "{d}/text.txt"],
     ["--out", "text.txt", "same file as the input --text"]),
    ("features-out-is-text-symlink", [*F, "{d}/model", "--text", "{d}/text.txt", "--out", "{d}/text_link.txt"],
     ["--out", "text_link.txt", "same file as the input --text"]),
    ("features-out-is-text-hardlink", [*F, "{d}/model", "--text", "{d}/text.txt", "--out", "{d}/text_hardlink.txt"],
     ["--out", "text_hardlink.txt", "same file"]),
    ("features-out-is-tokenizer", [*F, "{d}/model", "--text", "{d}/text.txt", "--out", "{d}/model/tokenizer.json"],
     ["--out", "tokenizer.json", "inside the input folder MODEL"]),
    ("features-out-is-config", [*F, "{d}/model", "--corpus", "gensim_lee", "--out", "{d}/model/config.json"],
     ["--out", "config.json", "inside the input folder MODEL"]),
    ("features-out-is-weights", [*F, "{d}/model", "--corpus", "gensim_lee", "--out", "{d}/model/model.safetensors"],
     ["--out", "model.safetensors", "inside the input folder MODEL"]),
    ("features-out-new-file-in-model", [*F, "{d}/model", "--corpus", "gensim_lee", "--out", "{d}/model/w.txt"],
     ["--out", "w.txt", "inside the input folder MODEL"]),
    ("features-out-in-model-via-dotdot", [*F, "{d}/model", "--corpus", "gensim_lee", "--out",
                                          "{d}/outdir/../model/tokenizer.json"], ["--out", "inside the input folder"]),
    ("features-out-in-model-via-link", [*F, "{d}/model", "--corpus", "gensim_lee", "--out",
                                        "{d}/model_link/tokenizer.json"], ["--out", "model_link", "inside the input"]),
    ("features-model-via-link-out-in-model", [*F, "{d}/model_link", "--corpus", "gensim_lee", "--out",
                                              "{d}/model/tokenizer.json"], ["--out", "inside the input folder MODEL"]),
    ("features-out-is-model", [*F, "{d}/model", "--corpus", "gensim_lee", "--out", "{d}/model"],
     ["--out", "same folder as the input MODEL"]),
    ("features-npy-vocab-is-text", [*F, "{d}/model", "--text", "{d}/t.vocab", "--out", "{d}/t.npy"],
     ["--out's vocabulary", "t.vocab", "same file as the input --text"]),
    ("features-npy-vocab-in-model", [*F, "{d}/model", "--corpus", "gensim_lee", "--out", "{d}/model/x.npy"],
     ["--out", "x.npy", "inside the input folder MODEL"]),
    ("features-out-in-hub-model", [*F, "hub:org/m", "--corpus", "gensim_lee", "--out",
                                   "{d}/cache/hub/org--m/main/tokenizer.json"],
     ["--out", "inside the input folder MODEL", "org--m/main"]),
    ("features-out-is-directory", [*F, "{d}/model", "--corpus", "gensim_lee", "--out", "{d}/outdir"],
     ["--out", "outdir", "directory"]),
    ("features-out-in-missing-dir", [*F, "{d}/model", "--corpus", "gensim_lee", "--out", "{d}/nodir/x.txt"],
     ["--out", "nodir", "does not exist"]),
    # contextual features: inputs that are devices or pipes
    ("features-text-dev-zero", [*F, "{d}/model", "--text", "/dev/zero", "--out", "{d}/o.txt"],
     ["/dev/zero", "character device", "--text", "not a regular file"]),
    ("features-text-dev-null", [*F, "{d}/model", "--text", "/dev/null", "--out", "{d}/o.txt"],
     ["/dev/null", "character device", "--text"]),
    ("features-text-fifo", [*F, "{d}/model", "--text", "{d}/fifo", "--out", "{d}/o.txt"],
     ["fifo", "named pipe", "--text", "not a regular file"]),
    ("features-text-link-to-zero", [*F, "{d}/model", "--text", "{d}/zero_link", "--out", "{d}/o.txt"],
     ["zero_link", "symlink to the character device /dev/", "--text"]),
    ("features-text-link-to-fifo", [*F, "{d}/model", "--text", "{d}/fifo_link", "--out", "{d}/o.txt"],
     ["fifo_link", "symlink to the named pipe", "--text"]),
    ("features-model-fifo-tokenizer", [*F, "{d}/fifomodel", "--corpus", "gensim_lee", "--out", "{d}/o.txt"],
     ["fifomodel/tokenizer.json", "named pipe", "given as MODEL"]),
    ("features-model-config-to-zero", [*F, "{d}/zeromodel", "--corpus", "gensim_lee", "--out", "{d}/o.txt"],
     ["zeromodel/config.json", "character device", "given as MODEL"]),
    # contextual pretrain: the output folder is, holds or lies inside the base model
    ("pretrain-out-is-base", [*P, "--base", "{d}/model", "--out", "{d}/model"],
     ["--out", "same folder as the input --base"]),
    ("pretrain-out-contains-base", [*P, "--base", "{d}/runs/a", "--out", "{d}/runs"],
     ["--out", "runs contains the input --base", "runs/a"]),
    ("pretrain-out-contains-base-deeper", [*P, "--base", "{d}/runs/a", "--out", "{d}"],
     ["--out", "contains the input --base"]),
    ("pretrain-out-inside-base", [*P, "--base", "{d}/model", "--out", "{d}/model/sub"],
     ["--out", "model/sub", "inside the input folder --base"]),
    ("pretrain-out-is-base-via-link", [*P, "--base", "{d}/model_link", "--out", "{d}/model"],
     ["--out", "same folder as the input --base"]),
    ("pretrain-out-inside-base-via-link", [*P, "--base", "{d}/model", "--out", "{d}/model_link/a"],
     ["--out", "inside the input folder --base"]),
    ("pretrain-out-inside-hub-base", [*P, "--base", "hub:org/m", "--out", "{d}/cache/hub/org--m/main/ft"],
     ["--out", "inside the input folder --base"]),
    ("pretrain-base-fifo-tokenizer", [*P, "--base", "{d}/fifomodel", "--out", "{d}/ft"],
     ["fifomodel/tokenizer.json", "named pipe", "--base"]),
    ("pretrain-out-is-a-file", [*P, "--out", "{d}/afile"], ["--out", "afile", "not a folder"]),
    ("pretrain-out-dev-null", [*P, "--out", "/dev/null"], ["--out", "/dev/null", "not a folder"]),
    # contextual disagreement and download
    ("disagreement-a-fifo-tokenizer", [*D, "{d}/fifomodel", "--seed-baseline"],
     ["fifomodel/tokenizer.json", "named pipe", "given as OLD"]),
    ("disagreement-b-config-to-zero", [*D, "{d}/model", "{d}/zeromodel"],
     ["zeromodel/config.json", "character device", "given as NEW"]),
    ("download-dest-is-a-file", ["contextual", "download", "org/m", "--dest", "{d}/afile"],
     ["--dest", "afile", "not a folder"]),
    # kg train: the model folder is, holds or lies inside the graph folder
    ("kg-out-is-graph", [*KT, "--graph", "{d}/graph", "-o", "{d}/graph"], ["-o", "same folder as the input --graph"]),
    ("kg-out-inside-graph", [*KT, "--graph", "{d}/graph", "-o", "{d}/graph/model"],
     ["-o", "graph/model", "inside the input folder --graph"]),
    ("kg-out-contains-graph", [*KT, "--graph", "{d}/graph", "-o", "{d}"], ["-o", "contains the input --graph"]),
    ("kg-out-is-graph-via-link", [*KT, "--graph", "{d}/graph_link", "-o", "{d}/graph"],
     ["-o", "same folder as the input --graph"]),
    ("kg-out-inside-graph-via-link", [*KT, "--graph", "{d}/graph", "-o", "{d}/graph_link/m"],
     ["-o", "inside the input folder --graph"]),
    ("kg-train-split-to-zero", [*KT, "--graph", "{d}/zerograph", "-o", "{d}/m"],
     ["zerograph/train.txt", "character device", "--graph"]),
    ("kg-valid-split-fifo", [*KT, "--graph", "{d}/fifograph", "-o", "{d}/m"],
     ["fifograph/valid.txt", "named pipe", "--graph"]),
    ("kg-out-is-a-file", [*KT, "--graph", "nations", "-o", "{d}/afile"], ["-o", "afile", "not a folder"]),
    ("kg-out-dev-null", [*KT, "--graph", "nations", "-o", "/dev/null"], ["-o", "/dev/null", "not a folder"]),
    ("kg-out-under-a-file", [*KT, "--graph", "nations", "-o", "{d}/afile/m"], ["-o", "not a directory"]),
    # kg downstream: model and graph folders with devices or pipes
    ("kg-downstream-a-fifo", ["kg", "downstream", "{d}/fifokg", "{d}/kgmodel", "--graph", "nations"],
     ["fifokg/config.json", "named pipe", "given as OLD"]),
    ("kg-downstream-graph-split-to-zero", ["kg", "downstream", "{d}/kgmodel", "{d}/kgmodel", "--graph",
                                           "{d}/zerograph"], ["zerograph/train.txt", "--graph"]),
    # hyperbolic embed / eval
    ("hyp-out-is-edges", [*HE, "{d}/g.edges", "-o", "{d}/g.edges"], ["-o", "g.edges", "same file as the input GRAPH"]),
    ("hyp-out-is-edges-symlink", [*HE, "{d}/g.edges", "-o", "{d}/edges_link"], ["-o", "edges_link", "same file"]),
    ("hyp-out-is-edges-hardlink", [*HE, "{d}/g.edges", "-o", "{d}/edges_hardlink"],
     ["-o", "edges_hardlink", "same file"]),
    ("hyp-sgd-out-is-edges", [*HE, "{d}/g.edges", "--method", "sgd", "--epochs", "1", "-o", "{d}/g.edges"],
     ["-o", "same file as the input GRAPH"]),
    ("hyp-edges-dev-zero", [*HE, "/dev/zero", "-o", "{d}/o.hyp"], ["/dev/zero", "character device", "GRAPH"]),
    ("hyp-edges-fifo", [*HE, "{d}/fifo", "-o", "{d}/o.hyp"], ["fifo", "named pipe", "GRAPH"]),
    ("hyp-edges-link-to-zero", [*HE, "{d}/zero_link", "-o", "{d}/o.hyp"], ["zero_link", "symlink", "GRAPH"]),
    ("hyp-out-is-directory", [*HE, "{d}/g.edges", "-o", "{d}/outdir"], ["-o", "outdir", "directory"]),
    ("hyp-out-in-missing-dir", [*HE, "{d}/g.edges", "-o", "{d}/nodir/o.hyp"], ["-o", "nodir", "does not exist"]),
    ("hyp-eval-embedding-fifo", ["hyperbolic", "eval", "{d}/g.edges", "{d}/fifo"], ["fifo", "EMBEDDING"]),
    ("hyp-eval-graph-dev-zero", ["hyperbolic", "eval", "/dev/zero", "{d}/g.hyp"], ["/dev/zero", "GRAPH"]),
    # study status: read-only, never a journal beside a device, never a table written into a file
    ("status-db-dev-zero", ["study", "status", "--db", "/dev/zero"], ["/dev/zero", "character device", "--db"]),
    ("status-db-dev-null", ["study", "status", "--db", "/dev/null"], ["/dev/null", "--db", "not a regular file"]),
    ("status-db-link-to-null", ["study", "status", "--db", "{d}/null_link"],
     ["null_link", "symlink to the character device /dev/", "--db"]),
    ("status-db-fifo", ["study", "status", "--db", "{d}/fifo"], ["fifo", "named pipe", "--db"]),
    ("status-db-empty-file", ["study", "status", "--db", "{d}/empty.sqlite"],
     ["empty.sqlite", "not a study results database"]),
    ("status-db-text-file", ["study", "status", "--db", "{d}/study.yaml"], ["study.yaml", "results database"]),
    # study runs: the database and the study file
    ("study-db-dev-zero", [*S, "{d}/study.yaml", "--store", "{d}/store", "--db", "/dev/zero"],
     ["/dev/zero", "--db", "not a regular file"]),
    ("study-db-link-to-null", [*S, "{d}/study.yaml", "--store", "{d}/store", "--db", "{d}/null_link"],
     ["null_link", "--db", "not a regular file"]),
    ("study-db-is-study-file", [*S, "{d}/study.yaml", "--store", "{d}/store", "--db", "{d}/study.yaml"],
     ["--db", "same file as the input STUDY.yaml"]),
    ("study-db-is-directory", [*S, "{d}/study.yaml", "--store", "{d}/store", "--db", "{d}/outdir"],
     ["--db", "outdir", "directory"]),
    ("study-file-fifo", [*S, "{d}/fifo", "--store", "{d}/store"], ["fifo", "named pipe", "STUDY.yaml"]),
    ("study-file-link-to-zero", [*S, "{d}/zero_link", "--store", "{d}/store"], ["zero_link", "STUDY.yaml"]),
    ("study-report-is-study-file", [*S, "{d}/study.yaml", "--store", "{d}/store", "-o", "{d}/study.yaml"],
     ["-o", "same file as the input STUDY.yaml"]),
]


@pytest.mark.timeout(120)  # a regression that opens a pipe blocks; fail instead of hanging the suite
@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_refused_with_one_line_and_nothing_changed(ws, capsys, case, argv, words):
    before = _snapshot(ws)
    strays_before = {p for p in STRAYS if os.path.lexists(p)}
    try:
        code = cli.main([a.replace("{d}", str(ws)) for a in argv])
    finally:
        created = {p for p in STRAYS if os.path.lexists(p)} - strays_before
        for p in created:  # only what this run itself left beside a device
            os.remove(p)
    err = capsys.readouterr().err
    assert not created, f"left {sorted(created)} beside a device"
    assert _snapshot(ws) == before, "an input changed, or a file appeared in the workspace"
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("embstab"), lines[0]
    for word in words:
        assert word in lines[0], lines[0]


def test_the_cases_are_many_and_distinct():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)


# ---------------------------------------------------------------- what must keep working
def test_status_reads_a_database_without_writing_beside_it(ws, capsys):
    before = _snapshot(ws)
    assert cli.main(["study", "status", "--db", str(ws / "results.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "results database" in out and "1" in out
    assert _snapshot(ws) == before  # no -wal/-shm, no schema written, no migration


def test_status_reads_the_rows_of_a_study_that_is_writing(ws, capsys):
    # a live writer keeps its -wal file: status must read through it, not the stale main file
    with ResultDB(ws / "results.sqlite") as writer:
        writer.add_result("r2", {"algo": "w2v", "seed": 1, "dim": 4, "bitrate": 1, "memory": 4, "task": "t",
                                 "model": "linear", "disagreement": 2.0, "quality": 50.0, "quality_old": 50.0,
                                 "measures": {"knn": 0.4}})
        assert (ws / "results.sqlite-wal").exists()
        from embstab.study import study_status

        summary, _ = study_status(ws / "results.sqlite")
    assert summary["done"].tolist() == [2] and summary["pending"].tolist() == [0]


def test_an_output_beside_an_input_folder_is_not_a_clash(tmp_path):
    # "model2" shares the prefix of "model" but is not inside it
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    check_outputs([("--out", tmp_path / "model2")], [("--base", tmp_path / "model")])
    check_outputs([("--out", tmp_path / "model2" / "a")], [("--base", tmp_path / "model")])
    check_outputs([("--out", tmp_path / "x.txt")], [("MODEL", "builtin:minilm_l6"), ("--text", None)])
    with pytest.raises(OutputClashError, match="inside the input folder --base"):
        check_outputs([("--out", tmp_path / "model" / "a")], [("--base", tmp_path / "model")])


def test_special_outputs_stay_writable(ws, capsys):
    assert cli.main(["hyperbolic", "embed", str(ws / "g.edges"), "--quiet", "-o", "/dev/null"]) == 0
    assert "wrote /dev/null" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_the_results_database_refuses_devices_in_python_too(ws):
    from embstab.data.errors import DataFormatError

    strays_before = {p for p in STRAYS if os.path.lexists(p)}
    for path in ("/dev/null", ws / "null_link"):
        for readonly in (False, True):
            with pytest.raises(DataFormatError, match="not a regular file"):
                ResultDB(path, readonly=readonly)
    assert {p for p in STRAYS if os.path.lexists(p)} == strays_before
    with pytest.raises(FileNotFoundError):
        ResultDB(ws / "missing.sqlite", readonly=True)
    assert not (ws / "missing.sqlite").exists()

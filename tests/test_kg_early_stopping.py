"""KG training to convergence: PyKEEN's early stopper on the validation MRR, in `embstab.kg.train`,
`embstab kg train` and the KG study (`training.early_stopping`); the offline UMLS/Kinships graphs."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pykeen")

from embstab.kg import evaluate, load_graph, train  # noqa: E402
from embstab.kg import EarlyStopping, load_kg_model  # noqa: E402
from embstab.study import StudyDefinitionError, load_study, parse_study, run_study  # noqa: E402
from embstab.study.plan import study_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = ROOT / "pipelines"
#: Stop at the second evaluation unless the MRR grows by more than 90 % between two epochs.
EAGER = {"frequency": 1, "patience": 1, "relative_delta": 0.9}


@pytest.fixture(scope="module")
def nations():
    return load_graph("nations")


@pytest.fixture(scope="module")
def stopped(nations):
    return train(nations, "TransE", dim=8, epochs=50, seed=3, batch_size=256, progress=False, early_stopping=EAGER)


def test_patience_one_stops_before_the_maximum_and_says_so(nations, stopped):
    st = stopped.stopping
    assert st["stopped"] is True
    assert st["epochs_trained"] == len(stopped.losses) == stopped.epochs_trained < 50
    # one evaluation per epoch, and the last one ended training
    assert [e for e, _ in st["valid_history"]] == list(range(1, st["epochs_trained"] + 1))
    assert st["best_epoch"] < st["epochs_trained"]
    # the kept model is the best evaluation's: its validation MRR is the one recorded
    assert st["valid_mrr"] == dict(st["valid_history"])[st["best_epoch"]]
    assert evaluate(stopped.model, nations, "valid").mrr == pytest.approx(st["valid_mrr"], rel=1e-6)
    assert stopped.settings["early_stopping"] == EAGER and stopped.settings["epochs"] == 50


def test_same_seed_same_model_with_early_stopping(nations, stopped):
    again = train(nations, "TransE", dim=8, epochs=50, seed=3, batch_size=256, progress=False, early_stopping=EAGER)
    assert np.array_equal(again.entities.vectors, stopped.entities.vectors)
    assert np.array_equal(again.relations.vectors, stopped.relations.vectors)
    assert again.losses == stopped.losses and again.stopping == stopped.stopping
    other = train(nations, "TransE", dim=8, epochs=50, seed=4, batch_size=256, progress=False, early_stopping=EAGER)
    assert not np.allclose(other.entities.vectors, stopped.entities.vectors)


def test_running_out_of_epochs_keeps_the_best_evaluation(nations):
    """PyKEEN reloads the best weights only when its stopper ends training; embstab also does when
    the epochs run out first, so the model is always the one whose validation MRR is recorded."""
    res = train(nations, "DistMult", dim=8, epochs=7, seed=0, batch_size=256, progress=False,
                early_stopping={"frequency": 2, "patience": 100, "relative_delta": 0.0})
    st = res.stopping
    assert st["stopped"] is False and st["epochs_trained"] == 7 == len(res.losses)
    assert [e for e, _ in st["valid_history"]] == [2, 4, 6]
    assert evaluate(res.model, nations, "valid").mrr == pytest.approx(st["valid_mrr"], rel=1e-6)


def test_no_early_stopping_changes_nothing(nations):
    res = train(nations, "TransE", dim=4, epochs=3, seed=0, progress=False, evaluate_on=None)
    assert res.stopping is None and "early_stopping" not in res.settings and res.epochs_trained == 3
    assert "stopping" not in res.to_dict()


def test_saved_folder_keeps_the_stopping_record(nations, stopped, tmp_path):
    stopped.save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["stopping"]["epochs_trained"] == stopped.epochs_trained
    back = load_kg_model(tmp_path / "m", nations)
    assert back.stopping == json.loads(json.dumps(stopped.stopping))
    assert back.epochs_trained == stopped.epochs_trained and back.settings["early_stopping"] == EAGER


@pytest.mark.parametrize("value, words", [
    ({"frequency": 0}, "early stopping frequency must be a positive integer, got 0"),
    ({"patience": 1.5}, "early stopping patience must be a positive integer"),
    ({"relative_delta": 1.0}, "relative_delta must be a number in [0, 1)"),
    ({"patiense": 2}, "early stopping has no setting 'patiense'"),
])
def test_bad_early_stopping_settings(nations, value, words):
    with pytest.raises(ValueError) as err:
        train(nations, "TransE", dim=4, epochs=5, progress=False, early_stopping=value)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_early_stopping_that_would_never_evaluate_is_refused(nations):
    with pytest.raises(ValueError, match="evaluates every 10 epochs, so within epochs=5 it would never evaluate"):
        train(nations, "TransE", dim=4, epochs=5, progress=False, early_stopping=EarlyStopping())


# --------------------------------------------------------------------------------------------
# the study: training.early_stopping

KG = {
    "name": "es_kg", "kind": "kg",
    "graph": {"name": "nations", "share": 0.1, "lost": "protect"},
    "training": {"algorithms": ["TransE"], "dimensions": [4, 8], "seeds": [0], "epochs": 40, "batch_size": 512,
                 "early_stopping": dict(EAGER)},
    "compression": {"bit_widths": [4, 32]},
    "measures": {"names": ["eis", "knn"], "top_n": 14, "params": {"knn": {"k": 3}}},
    "downstream": [{"task": "link_prediction"}, {"task": "triple_classification"}],
}


def _spec(**training):
    data = copy.deepcopy(KG)
    data["training"].update(training)
    for key, value in list(data["training"].items()):
        if value is _DROP:
            del data["training"][key]
    return data


_DROP = object()


def test_study_rows_record_the_epoch_each_model_stopped_at(tmp_path):
    spec = parse_study(_spec())
    run = run_study(spec, tmp_path / "store", tmp_path / "results.sqlite", progress=False)
    assert run.n_failed == 0 and run.complete, run.failures
    df = run.results
    for col in ("epochs_trained", "epochs_trained_old", "best_epoch", "valid_mrr", "valid_mrr_old"):
        assert df[col].notna().all(), col
    assert (df["epochs_trained"] < 40).all() and (df["epochs_trained_old"] < 40).all()
    assert (df["best_epoch"] < df["epochs_trained"]).all()
    assert df["valid_mrr"].between(0, 100).all()
    # the same model, the same record, whichever row reads it
    assert df.groupby(["dim"])["epochs_trained"].nunique().eq(1).all()


def test_early_stopping_validates_with_one_line_errors():
    cases = [
        (_spec(early_stopping={"patiense": 2}), "training.early_stopping.patiense", "did you mean 'patience'"),
        (_spec(early_stopping={"patience": 0}), "training.early_stopping.patience", "must be >= 1"),
        (_spec(early_stopping={"frequency": 1.5}), "training.early_stopping.frequency", "must be an integer"),
        (_spec(early_stopping={"relative_delta": 2}), "training.early_stopping.relative_delta", "must be in [0.0, 0.99]"),
        (_spec(early_stopping=5), "training.early_stopping", "must be a mapping"),
        (_spec(early_stopping={"frequency": 50}), "training.early_stopping.frequency",
         "never happens within training.epochs = 40"),
    ]
    for data, key, words in cases:
        with pytest.raises(StudyDefinitionError) as err:
            parse_study(data, source="s.yaml")
        assert err.value.key == key, str(err.value)
        assert words in str(err.value) and "\n" not in str(err.value)
        assert str(err.value).startswith(f"s.yaml: key '{key}': ")


def test_spec_without_the_field_keeps_its_fingerprint_and_configurations():
    """Studies written before early stopping existed keep their fingerprints and row ids; null is
    the same as absent; setting it changes both, and every member's configuration carries it."""
    quick = load_study(PIPELINES / "kg_quick.yaml")
    assert quick.fingerprint() == "98deef1b17e4cb8a"
    assert "early_stopping" not in quick.training.params_dict()
    plain, null = parse_study(_spec(early_stopping=_DROP)), parse_study(_spec(early_stopping=None))
    assert plain.fingerprint() == null.fingerprint() and plain == null
    assert [r.row_id for r in study_rows(plain)] == [r.row_id for r in study_rows(null)]
    with_es = parse_study(_spec())
    assert with_es.fingerprint() != plain.fingerprint()
    cfg = next(iter(study_rows(with_es))).config
    assert cfg["measures"]["pair"]["new"]["early_stopping"] == EAGER
    # defaults are filled in, the spec stays hashable, and to_dict reads back to the same spec
    full = parse_study(_spec(early_stopping={}))
    assert full.training.params_dict()["early_stopping"] == {"frequency": 10, "patience": 2, "relative_delta": 0.01}
    hash(full)
    assert parse_study(full.to_dict()) == full and parse_study(full.to_dict()).fingerprint() == full.fingerprint()


@pytest.mark.parametrize("name", ["kg.yaml", "kg_kinships.yaml", "kg_wordnet.yaml"])
def test_real_kg_tiers_train_to_convergence(name):
    spec = load_study(PIPELINES / name)
    stopping = spec.training.params_dict()["early_stopping"]
    assert stopping["frequency"] < spec.training.params_dict()["epochs"]


# --------------------------------------------------------------------------------------------
# the command line, and the offline graphs


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "embstab", *args], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)}, timeout=600)


def test_cli_trains_with_early_stopping(tmp_path):
    res = _cli("kg", "train", "--graph", "nations", "--dim", "8", "--epochs", "50", "--patience", "1",
               "--frequency", "1", "--relative-delta", "0.9", "--seed", "3", "--batch-size", "256", "--no-progress",
               "-o", str(tmp_path / "m"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    st = config["stopping"]
    assert st["stopped"] and st["epochs_trained"] < 50
    assert f"stopped early at epoch {st['epochs_trained']}" in res.stdout
    assert f"kept the model of epoch {st['best_epoch']}" in res.stdout
    bad = _cli("kg", "train", "--graph", "nations", "--epochs", "5", "--frequency", "2", "-o", str(tmp_path / "x"),
               cwd=tmp_path)
    assert bad.returncode == 2 and "needs --patience N" in bad.stderr and bad.stderr.count("\n") == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name, sizes", [("kinships", (104, 25, 8544, 1068, 1074)),
                                         ("umls", (135, 46, 5216, 652, 661))])
def test_umls_and_kinships_load_offline(name, sizes, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("loading a builtin graph must not open a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    g = load_graph(name)
    assert (g.n_entities, g.n_relations, len(g.train), len(g.valid), len(g.test)) == sizes
    from embstab.kg import list_graphs

    assert {r["name"]: r["available"] for r in list_graphs()}[name] is True

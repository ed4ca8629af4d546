"""KG model folders keep their weights in safetensors: bit-identical round trip, no pickle read."""

from __future__ import annotations

import ast
import re
import struct
from pathlib import Path

import pytest

pytest.importorskip("pykeen")

from embstab import cli  # noqa: E402
from embstab.errors import EmbstabError  # noqa: E402
from embstab.kg import load_graph, load_kg_model, train  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "embstab"


@pytest.fixture(scope="module")
def nations():
    return load_graph("nations")


@pytest.fixture(scope="module", params=["TransE", "TuckER"])  # TuckER: int64 buffers and a 3-way core tensor
def saved(request, nations, tmp_path_factory):
    res = train(nations, request.param, dim=4, epochs=1, seed=3, progress=False, evaluate_on=None)
    return res, res.save(tmp_path_factory.mktemp(request.param) / "m")


def test_round_trip_is_bit_identical_and_writes_no_pickle(nations, saved):
    import torch
    from safetensors.torch import load_file

    res, folder = saved
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "entities.npz", "model.safetensors",
                                                        "relations.npz"]
    on_disk = load_file(str(folder / "model.safetensors"))
    before = res.model.state_dict()
    after = load_kg_model(folder, nations).model.state_dict()
    assert before.keys() == after.keys() == on_disk.keys()
    for k in before:
        assert before[k].dtype == after[k].dtype and torch.equal(before[k], after[k]), k
        # bit-identical, NaN payloads and signed zeros included
        assert before[k].numpy().tobytes() == on_disk[k].numpy().tobytes(), k


def test_saving_over_an_old_folder_drops_its_model_pt(nations, saved, tmp_path):
    res, _ = saved
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.pt").write_bytes(b"stale")
    res.save(tmp_path / "m")
    assert not (tmp_path / "m" / "model.pt").exists() and (tmp_path / "m" / "model.safetensors").is_file()


def _copy(folder: Path, dest: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, dest))


def test_folder_with_only_model_pt_is_refused_with_the_conversion(nations, saved, tmp_path):
    import torch
    from safetensors.torch import load_file

    res, folder = saved
    old = _copy(folder, tmp_path / "old")
    torch.save(load_file(str(old / "model.safetensors")), old / "model.pt")
    (old / "model.safetensors").unlink()
    with pytest.raises(EmbstabError) as info:
        load_kg_model(old, nations)
    msg = str(info.value)
    assert "\n" not in msg and "older embstab" in msg and "model.pt" in msg and "kg train" in msg
    # the conversion the message gives works, and the folder then loads with the same weights
    command = re.search(r'python -c "(.*?)"', msg).group(1)
    exec(command, {})  # noqa: S102 - the test's own file, written just above
    after = load_kg_model(old, nations).model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in res.model.state_dict().items())


def test_cli_routes_an_old_folder_to_the_same_message(saved, tmp_path, capsys):
    _, folder = saved
    old = _copy(folder, tmp_path / "old")
    (old / "model.safetensors").rename(old / "model.pt")
    assert cli.main(["downstream", str(folder), str(old), "--task", "link_prediction:nations"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "older embstab" in err, err


@pytest.mark.parametrize("damage", ["truncated", "header_too_long", "data_cut", "missing"])
def test_damaged_or_missing_weights_give_one_line(nations, saved, tmp_path, damage):
    _, folder = saved
    bad = _copy(folder, tmp_path / damage)
    path = bad / "model.safetensors"
    raw = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(raw[:5])
    elif damage == "header_too_long":  # a header length that claims far more than the file
        path.write_bytes(struct.pack("<Q", 1 << 40) + raw[8:])
    elif damage == "data_cut":  # header intact, the last tensor's bytes gone
        path.write_bytes(raw[:-4])
    else:
        path.unlink()
    with pytest.raises(EmbstabError) as info:
        load_kg_model(bad, nations)
    msg = str(info.value)
    assert "\n" not in msg and "model.safetensors" in msg, msg


def _calls(tree, module: str, name: str) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == name and isinstance(n.func.value, ast.Name) and n.func.value.id == module]


def test_no_torch_load_on_model_folders():
    # torch.load unpickles; a model folder is read with safetensors only. The one call left reads
    # PyKEEN's own early-stopping checkpoint, written moments before in the same training run.
    hits = {}
    for p in ROOT.rglob("*.py"):
        text = p.read_text()
        tree = ast.parse(text)
        for line in _calls(tree, "torch", "load") + _calls(tree, "torch", "save"):
            hits[f"{p.relative_to(ROOT)}:{line}"] = text.splitlines()[line - 1].strip()
    assert len(hits) == 1 and "torch.load(stopper.best_model_path" in next(iter(hits.values())), hits

"""KG model folders keep their weights in safetensors: bit-identical round trip, no pickle read."""

from __future__ import annotations

import ast
import os
import pickle
import re
import shlex
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


def _legacy(saved, dest: Path) -> Path:
    """A copy of a saved model folder as an older embstab wrote it: weights in the pickle model.pt."""
    import torch
    from safetensors.torch import load_file

    _, folder = saved
    old = _copy(folder, dest)
    torch.save(load_file(str(old / "model.safetensors")), old / "model.pt")
    (old / "model.safetensors").unlink()
    return old


def _printed_command(msg: str) -> str:
    return re.search(r"convert it once with: (.*) \(or retrain", msg).group(1)


def test_folder_with_only_model_pt_is_refused_with_the_conversion(nations, saved, tmp_path):
    import torch

    res, _ = saved
    old = _legacy(saved, tmp_path / "old")
    with pytest.raises(EmbstabError) as info:
        load_kg_model(old, nations)
    msg = str(info.value)
    assert "\n" not in msg and "older embstab" in msg and "model.pt" in msg and "kg train" in msg
    assert "python -c" not in msg and "torch.load" not in msg
    # the conversion the message gives works, and the folder then loads with the same weights
    assert cli.main(shlex.split(_printed_command(msg))[1:]) == 0
    assert not (old / "model.pt").exists()
    after = load_kg_model(old, nations).model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in res.model.state_dict().items())


# the quoting is the question here, not the model: one model (the conversion of each is tested above)
@pytest.mark.parametrize("saved", ["TransE"], indirect=True)
@pytest.mark.parametrize("name", ["$(touch PWNED)", "a\"b", "it's", "back`touch PWNED`tick", "with space",
                                  "semi;touch PWNED", "new\nline"])
def test_the_printed_command_pasted_into_a_shell_runs_nothing_else(nations, saved, tmp_path, name):
    import shutil
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    old = _legacy(saved, work / name)
    with pytest.raises(EmbstabError) as info:
        load_kg_model(old, nations)
    command = _printed_command(str(info.value))
    # paste the line into bash as a user would, with `embstab` meaning this interpreter's CLI
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "embstab").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m embstab \"$@\"\n")
    (shim / "embstab").chmod(0o755)
    env = {"PATH": f"{shim}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not any(p.name == "PWNED" for p in tmp_path.rglob("PWNED")), "the pasted line ran a command"
    assert (old / "model.safetensors").is_file() and not (old / "model.pt").exists()
    assert shutil.which("embstab", path=str(shim))


def test_convert_refuses_what_it_cannot_convert(saved, tmp_path):
    from embstab.kg import convert_legacy_model

    _, folder = saved
    with pytest.raises(EmbstabError, match="already holds model.safetensors"):
        convert_legacy_model(folder)
    with pytest.raises(EmbstabError, match="no such folder"):
        convert_legacy_model(tmp_path / "absent")
    bad = _legacy(saved, tmp_path / "bad")
    (bad / "model.pt").write_bytes(pickle.dumps({"w": [1, 2]}))  # not tensors: torch's restricted loader decides
    with pytest.raises(EmbstabError, match="model.pt"):
        convert_legacy_model(bad)
    assert not (bad / "model.safetensors").exists()


def test_a_pickle_payload_in_model_pt_never_runs(saved, tmp_path):
    from embstab.kg import convert_legacy_model

    marker = tmp_path / "PWNED"
    bad = _legacy(saved, tmp_path / "payload")
    (bad / "model.pt").write_bytes(pickle.dumps(_Payload(str(marker))))
    with pytest.raises(EmbstabError, match="weights_only"):
        convert_legacy_model(bad)
    assert not marker.exists()


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


@pytest.mark.parametrize("part", ["model.safetensors", "config.json", "entities.npz", "relations.npz"])
def test_no_component_may_lead_out_of_the_folder(nations, saved, tmp_path, part):
    from embstab.io.modelfolder import UnsafeWeightsError

    _, folder = saved
    other = _copy(folder, tmp_path / "other")
    linked = _copy(folder, tmp_path / "linked")
    (linked / part).unlink()
    (linked / part).symlink_to(other / part)  # another model's file: 0 % disagreement if it were read
    with pytest.raises(UnsafeWeightsError, match="leads outside the model folder"):
        load_kg_model(linked, nations)


def test_cli_refuses_a_linked_model_in_one_line(saved, tmp_path, capsys):
    _, folder = saved
    linked = _copy(folder, tmp_path / "linked")
    (linked / "model.safetensors").unlink()
    (linked / "model.safetensors").symlink_to(folder / "model.safetensors")
    assert cli.main(["kg", "downstream", str(folder), str(linked), "--graph", "nations"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "outside the model folder" in err, err


def test_a_link_to_a_system_file_never_echoes_its_bytes(nations, saved, tmp_path):
    _, folder = saved
    linked = _copy(folder, tmp_path / "sys")
    (linked / "model.safetensors").unlink()
    (linked / "model.safetensors").symlink_to("/etc/passwd")
    first8 = str(struct.unpack("<Q", Path("/etc/passwd").read_bytes()[:8])[0])
    with pytest.raises(EmbstabError) as info:
        load_kg_model(linked, nations)
    assert first8 not in str(info.value)


def test_a_header_dtype_that_is_a_list_is_one_line(nations, saved, tmp_path):
    import json

    _, folder = saved
    bad = _copy(folder, tmp_path / "dtype")
    raw = json.dumps({"x": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}).encode()
    (bad / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4)
    with pytest.raises(EmbstabError, match="key 'dtype'") as info:
        load_kg_model(bad, nations)
    assert "\n" not in str(info.value)


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
    # The other converts an older folder's model.pt with torch's restricted loader, only when the
    # user runs `embstab kg convert`.
    assert len(hits) == 2, hits
    assert sorted(v.split("(")[0] for v in hits.values()) == ["kge.load_state_dict", "state = torch.load"], hits

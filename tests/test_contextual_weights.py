"""Model folders are safetensors-only for real: every shard a safetensors file inside the folder, no
pickle ever opened, headers checked against the file, and the configuration checked against the
weights before a network is built. Each hostile folder gives one line and exit 2 through the CLI,
and leaves every file as it was."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import struct

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from _contextual import tiny_model  # noqa: E402

from embstab.cli import main  # noqa: E402
from embstab.contextual import load_model  # noqa: E402
from embstab.contextual.errors import UnsafeWeightsError  # noqa: E402
from embstab.data.errors import DataFormatError  # noqa: E402


class Payload:
    """Unpickling this creates ``marker``: proof that a weight file ran code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("good") / "model"
    tiny_model(seed=3).save(folder)
    return folder


@pytest.fixture
def model(saved, tmp_path):
    """A fresh copy of a tiny saved BERT, and the marker a pickle payload would create."""
    folder = tmp_path / "model"
    shutil.copytree(saved, folder)
    return folder, tmp_path / "PWNED"


def _weights(folder):
    return safetensors_torch.load_file(str(folder / "model.safetensors"))


def _write_index(folder, mapping):
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": mapping}))


def _shard(folder, marker, names: dict[str, str]):
    """Split the weights into the files ``names`` gives (tensor → shard file); drop model.safetensors."""
    weights = _weights(folder)
    (folder / "model.safetensors").unlink()
    files: dict[str, dict] = {}
    for key, tensor in weights.items():
        files.setdefault(names.get(key, "model-00001-of-00002.safetensors"), {})[key] = tensor
    for name, tensors in files.items():
        if name.endswith(".safetensors") and "/" not in name:
            safetensors_torch.save_file(tensors, str(folder / name))
    return {key: names.get(key, "model-00001-of-00002.safetensors") for key in weights}


def _header(entries: dict, data: bytes = b"") -> bytes:
    raw = json.dumps(entries).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def _hashes(root):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------- shards that are not safe
def test_a_sharded_folder_loads_the_same_network(model):
    folder, _ = model
    whole = load_model(folder).network.state_dict()
    weights = _weights(folder)
    second = {k: "model-00002-of-00002.safetensors" for k in list(weights)[::2]}
    _write_index(folder, _shard(folder, None, second))
    sharded = load_model(folder).network.state_dict()
    assert sharded.keys() == whole.keys()
    assert all(torch.equal(sharded[k], whole[k]) for k in whole)


def test_an_index_naming_a_pickle_shard_never_unpickles_it(model):
    folder, marker = model
    mapping = _shard(folder, marker, {})
    key = next(iter(mapping))
    mapping[key] = "pytorch_model.bin"
    with open(folder / "pytorch_model.bin", "wb") as fh:
        pickle.dump(Payload(str(marker)), fh)
    _write_index(folder, mapping)
    with pytest.raises(UnsafeWeightsError, match=r"lives in 'pytorch_model.bin', not a .safetensors file"):
        load_model(folder)
    assert not marker.exists()


@pytest.mark.parametrize("shard", ["../../../../../../etc/shadow", "/etc/passwd", "sub/model.safetensors",
                                   "..\\model.safetensors", "../outside.safetensors", "/tmp/x.safetensors",
                                   "..", "."])
def test_an_index_naming_a_path_is_refused(model, shard):
    folder, _ = model
    mapping = _shard(folder, None, {})
    mapping[next(iter(mapping))] = shard
    _write_index(folder, mapping)
    with pytest.raises(UnsafeWeightsError):
        load_model(folder)


def test_a_shard_that_links_out_of_the_folder_is_refused(model, tmp_path):
    folder, _ = model
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(folder / "model.safetensors", outside)
    (folder / "model.safetensors").symlink_to(outside)
    with pytest.raises(UnsafeWeightsError, match="leads outside the model folder"):
        load_model(folder)


def test_an_index_with_a_missing_shard_names_it(model):
    folder, _ = model
    mapping = _shard(folder, None, {})
    mapping[next(iter(mapping))] = "model-00009-of-00009.safetensors"
    _write_index(folder, mapping)
    with pytest.raises(FileNotFoundError, match="model-00009-of-00009.safetensors"):
        load_model(folder)


@pytest.mark.parametrize("index", ["{", "[]", '{"weight_map": []}', '{"weight_map": {}}',
                                   '{"weight_map": {"a": 3}}', "\xff\xfe"])
def test_a_malformed_index_is_named(model, index):
    folder, _ = model
    _shard(folder, None, {})
    (folder / "model.safetensors.index.json").write_bytes(index.encode("latin-1"))
    with pytest.raises(DataFormatError, match="model.safetensors.index.json"):
        load_model(folder)


def test_a_pickle_beside_safetensors_weights_is_never_read(model):
    folder, marker = model
    with open(folder / "pytorch_model.bin", "wb") as fh:
        pickle.dump(Payload(str(marker)), fh)
    load_model(folder)
    assert not marker.exists()


# ------------------------------------------------------------------- headers that lie
@pytest.mark.parametrize("content, problem", [
    (b"", "shorter than its 8-byte header"),
    (b"\x01\x02", "shorter than its 8-byte header"),
    (struct.pack("<Q", 1 << 60) + b"{}", "header length exceeds the file"),
    (struct.pack("<Q", 10) + b"{}", "header length exceeds the file"),
    (_header({"x": {"dtype": "F32", "shape": [1 << 40, 1 << 20], "data_offsets": [0, 4]}}, b"\0" * 4),
     "does not fill|data_offsets"),
    (_header({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1 << 50]}}, b"\0" * 16), "data_offsets"),
    (_header({"x": {"dtype": "F32", "shape": [4], "data_offsets": [8, 4]}}, b"\0" * 16), "data_offsets"),
    (_header({"x": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, b"\0" * 16), "key 'shape'"),
    (_header({"x": {"dtype": "F32", "shape": [4.0], "data_offsets": [0, 16]}}, b"\0" * 16), "key 'shape'"),
    (_header({"x": {"dtype": "OBJ", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 16), "key 'dtype'"),
    (_header({"x": {"dtype": ["F32"], "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 16), "key 'dtype'"),
    (_header({"x": {"dtype": "F32", "shape": [4], "data_offsets": {"a": 0, "b": 16}}}, b"\0" * 16),
     "data_offsets"),
    (_header({"x": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}}, b"\0" * 16), "key 'shape'"),
    (_header({"x": {"dtype": "F32"}}), "no dtype, shape and data_offsets"),
    (_header({"x": 7}), "no dtype, shape and data_offsets"),
    (_header([1, 2]), "not a JSON object"),
    (struct.pack("<Q", 3) + b"{\xff}", "not valid JSON"),
    (struct.pack("<Q", 6000) + b"[" * 3000 + b"]" * 3000, "not valid JSON"),
])
def test_a_lying_safetensors_header_is_refused_before_reading(model, content, problem):
    folder, _ = model
    (folder / "model.safetensors").write_bytes(content)
    with pytest.raises(DataFormatError, match=problem):
        load_model(folder)


def test_a_weight_file_with_no_tensors_is_not_a_random_network(model):
    folder, _ = model
    safetensors_torch.save_file({}, str(folder / "model.safetensors"))
    with pytest.raises(DataFormatError, match=r"num_hidden_layers is 2 but the weights hold 0 layers"):
        load_model(folder)


def test_a_weight_file_with_only_the_embeddings_is_refused(model):
    folder, _ = model
    weights = {k: v for k, v in _weights(folder).items() if "embeddings" in k}
    safetensors_torch.save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(DataFormatError, match="weights hold 0 layers"):
        load_model(folder)


def test_a_weight_file_missing_one_encoder_tensor_names_it(model):
    folder, _ = model
    weights = _weights(folder)
    del weights["bert.encoder.layer.1.attention.self.query.weight"]
    safetensors_torch.save_file(weights, str(folder / "model.safetensors"))
    with pytest.raises(DataFormatError, match=r"lack 1 of the encoder's tensors \(bert.encoder.layer.1.attention"):
        load_model(folder)


def test_a_missing_mlm_head_is_initialised_the_same_way_each_time(model):
    folder, _ = model
    weights = {k: v for k, v in _weights(folder).items() if not k.startswith("cls.")}
    safetensors_torch.save_file(weights, str(folder / "model.safetensors"))
    a, b = load_model(folder).network.state_dict(), load_model(folder).network.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(a["bert.encoder.layer.0.output.dense.weight"], weights["bert.encoder.layer.0.output.dense.weight"])


def test_checkpoints_without_the_base_prefix_and_with_gamma_beta_names_load(model):
    """Encoder-only checkpoints (no ``bert.`` prefix, old ``gamma``/``beta`` names) load as the same encoder."""
    folder, _ = model
    weights = _weights(folder)
    renamed = {}
    for key, value in weights.items():
        if key.startswith("bert."):
            key = key[len("bert."):].replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                                             "LayerNorm.beta")
            renamed[key] = value
    safetensors_torch.save_file(renamed, str(folder / "model.safetensors"))
    state = load_model(folder).network.state_dict()
    assert all(torch.equal(state[k], v) for k, v in weights.items() if k.startswith("bert."))


# ------------------------------------------------------------------- configurations that lie
@pytest.mark.parametrize("change, problem", [
    ({"model_type": "gpt2"}, "model_type is 'gpt2'"),
    ({"num_hidden_layers": 10 ** 6}, "num_hidden_layers is 1000000 but the weights hold 2 layers"),
    ({"num_hidden_layers": 1}, "num_hidden_layers is 1 but the weights hold 2"),
    ({"hidden_size": 10 ** 9}, "hidden_size is 1000000000"),
    ({"vocab_size": 10 ** 12}, "vocab_size is 1000000000000"),
    ({"intermediate_size": 10 ** 9}, "intermediate_size is 1000000000"),
    ({"max_position_embeddings": 10 ** 9}, "max_position_embeddings is 1000000000"),
    ({"type_vocab_size": 10 ** 9}, "type_vocab_size is 1000000000"),
    ({"num_attention_heads": 3}, "not a multiple of num_attention_heads 3"),
    ({"hidden_size": "four"}, "hidden_size must be a positive integer, got 'four'"),
    ({"num_hidden_layers": True}, "num_hidden_layers must be a positive integer"),
    ({"num_hidden_layers": -2}, "num_hidden_layers must be a positive integer"),
    ({"num_hidden_layers": 2.0}, "num_hidden_layers must be a positive integer"),
])
def test_a_configuration_that_does_not_match_the_weights_is_named(model, change, problem):
    folder, _ = model
    config = json.loads((folder / "config.json").read_text())
    config.update(change)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(DataFormatError, match=problem):
        load_model(folder)


@pytest.mark.parametrize("content", [b"[]", b"{", b"\xff", b"[" * 5000, b"null"])
def test_a_malformed_configuration_is_named(model, content):
    folder, _ = model
    (folder / "config.json").write_bytes(content)
    with pytest.raises(DataFormatError, match="config.json"):
        load_model(folder)


def test_a_configuration_that_is_a_device_is_refused(model):
    folder, _ = model
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")  # inside the folder, but would block a reader
    with pytest.raises(DataFormatError, match="not a regular file"):
        load_model(folder)


@pytest.mark.parametrize("component", ["config.json", "tokenizer.json", "embstab.json", "modules.json"])
def test_no_component_may_lead_out_of_the_folder(model, tmp_path, component):
    folder, _ = model
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    target = outside / component
    if (folder / component).exists():
        shutil.copy(folder / component, target)
        (folder / component).unlink()
    else:
        target.write_text("[]")
    (folder / component).symlink_to(target)
    with pytest.raises(UnsafeWeightsError, match="leads outside the model folder"):
        load_model(folder)


def test_a_link_to_a_system_file_never_echoes_its_bytes(model):
    folder, _ = model
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to("/etc/passwd")
    first8 = str(struct.unpack("<Q", open("/etc/passwd", "rb").read(8))[0])
    with pytest.raises(UnsafeWeightsError) as info:
        load_model(folder)
    assert first8 not in str(info.value) and "root" not in str(info.value).replace(str(folder), "")


# ------------------------------------------------------------------- the same through the CLI
def _break_with_pickle_shard(folder, marker):
    mapping = _shard(folder, marker, {})
    mapping[next(iter(mapping))] = "pytorch_model.bin"
    with open(folder / "pytorch_model.bin", "wb") as fh:
        pickle.dump(Payload(str(marker)), fh)
    _write_index(folder, mapping)


def _break_with_traversal(folder, marker):
    mapping = _shard(folder, marker, {})
    mapping[next(iter(mapping))] = "../../../../../../etc/shadow"
    _write_index(folder, mapping)


def _break_with_huge_header(folder, marker):
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 60) + b"{}")


def _break_with_gpt2(folder, marker):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, model_type="gpt2")))


def _break_with_empty_weights(folder, marker):
    safetensors_torch.save_file({}, str(folder / "model.safetensors"))


@pytest.mark.parametrize("damage", [_break_with_pickle_shard, _break_with_traversal, _break_with_huge_header,
                                    _break_with_gpt2, _break_with_empty_weights])
def test_cli_gives_one_line_and_changes_nothing(model, tmp_path, damage, capsys):
    folder, marker = model
    damage(folder, marker)
    text = tmp_path / "texts.txt"
    text.write_text("a short sentence\nanother one\n")
    before = _hashes(tmp_path)
    code = main(["contextual", "features", str(folder), "--text", str(text), "--out", str(tmp_path / "out.npz")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert _hashes(tmp_path) == before and not marker.exists() and not (tmp_path / "out.npz").exists()

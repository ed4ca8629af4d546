"""Read a model folder's weights safely: safetensors files inside the folder, checked before loading.

A model folder's weights are ``model.safetensors`` or the shards that ``model.safetensors.index.json``
names. Nothing else is ever opened: a shard must be a ``.safetensors`` file that lies inside the
folder (no path separators, no ``..``, no link that leads out of it), so a pickle cannot be loaded
through an index and a shard name cannot point at another file of the machine. Every header is read
and checked against the file before any tensor is: a header that claims more bytes than the file
holds, an unknown dtype or an offset outside the data is refused by name, so a small file cannot
make the loader allocate memory it does not have.

:func:`match_to_network` then checks the weight set against the network the folder's
``config.json`` describes, before the network is built: every encoder tensor present with its
shape, the layer count of the configuration equal to the layers the weights hold.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from embstab.contextual.errors import UnsafeWeightsError
from embstab.errors import DataFormatError
from embstab.io.modelfolder import PICKLE_SUFFIXES, TensorEntry, component, read_header, read_json_file

__all__ = ["WeightSet", "read_weight_set", "read_json_file", "match_to_network", "load_tensors"]

SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"

_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.")


@dataclass(frozen=True)
class WeightSet:
    """The tensors of a model folder, by name, with the file each one lives in (nothing loaded yet).

    Attributes
    ----------
    folder : pathlib.Path
    files : tuple of pathlib.Path
        The safetensors files, inside ``folder``.
    tensors : dict
        Tensor name → :class:`~embstab.io.modelfolder.TensorEntry`.
    """

    folder: Path
    files: tuple[Path, ...]
    tensors: Mapping[str, TensorEntry]


def _shard_names(folder: Path) -> list[str]:
    index = read_json_file(component(folder, INDEX, "shard index"), "shard index")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise DataFormatError(folder / INDEX, "shard index has no weight_map of tensor name → file")
    names = []
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise DataFormatError(folder / INDEX, f"shard of tensor {tensor!r} is not a file name: {shard!r}")
        if not shard.endswith(".safetensors"):
            raise UnsafeWeightsError(f"{folder / INDEX}: tensor {tensor!r} lives in {shard!r}, not a .safetensors "
                                     "file; embstab never reads pickle weights (reading them can run code)")
        if "/" in shard or "\\" in shard or "\0" in shard or shard in (".", "..") or os.path.isabs(shard):
            raise UnsafeWeightsError(f"{folder / INDEX}: shard name {shard!r} is a path; a shard must be a file "
                                     "of the model folder itself")
        if shard not in names:
            names.append(shard)
    return names


def read_weight_set(folder: str | os.PathLike) -> WeightSet:
    """Find and check a model folder's safetensors weights (headers only; no tensor is read).

    ``model.safetensors`` is used when present, else the shards of ``model.safetensors.index.json``.

    Parameters
    ----------
    folder : str or os.PathLike

    Returns
    -------
    WeightSet

    Raises
    ------
    UnsafeWeightsError
        If the only weights are pickle files, or the index names a non-safetensors file, a path,
        or a file that leads out of the folder.
    FileNotFoundError
        If the folder has no weights at all, or the index names a missing shard.
    DataFormatError
        If a file is malformed, or two shards hold the same tensor.
    """
    folder = Path(folder)
    if os.path.lexists(folder / SINGLE):
        files = [component(folder, SINGLE, "weight file")]
    elif os.path.lexists(folder / INDEX):
        component(folder, INDEX, "shard index")
        files = []
        for shard in _shard_names(folder):
            if not os.path.lexists(folder / shard):
                raise FileNotFoundError(2, f"the shard index names {shard}, which the model folder lacks",
                                        str(folder / shard))
            files.append(component(folder, shard, "shard"))
    else:
        pickles = sorted(p.name for p in folder.iterdir() if p.name.endswith(PICKLE_SUFFIXES))
        if pickles:
            raise UnsafeWeightsError(f"model folder {folder} has only pickle weights ({', '.join(pickles)}), which "
                                     "can run code when read; convert them to model.safetensors with a tool you trust")
        raise FileNotFoundError(2, "no model.safetensors in the model folder", str(folder / SINGLE))
    tensors: dict[str, TensorEntry] = {}
    for path in files:
        for name, entry in read_header(path).items():
            if name in tensors:
                raise DataFormatError(path, f"tensor {name!r} is also in {tensors[name].file.name}")
            tensors[name] = entry
    return WeightSet(folder, tuple(files), tensors)


def _canonical(name: str, prefix: str) -> str:
    # checkpoints name tensors with or without the base model's prefix ("bert."), and old ones call
    # layer-norm parameters gamma/beta
    if not name.startswith(prefix) and not name.startswith("cls."):
        name = prefix + name
    if name.endswith(".gamma"):
        name = name[: -len("gamma")] + "weight"
    elif name.endswith(".beta"):
        name = name[: -len("beta")] + "bias"
    return name


def canonical_names(weights: WeightSet, prefix: str) -> dict[str, str]:
    """Checkpoint tensor name → the network's parameter name (prefix added, gamma/beta renamed).

    Parameters
    ----------
    weights : WeightSet
    prefix : str
        The base model's prefix in the network, ``"bert."``.

    Returns
    -------
    dict
    """
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in weights.tensors:
        canon = _canonical(name, prefix)
        if canon in seen:
            raise DataFormatError(weights.tensors[name].file, f"tensors {seen[canon]!r} and {name!r} are the same "
                                                              f"parameter {canon!r}")
        seen[canon] = name
        out[name] = canon
    return out


def layers_held(names: Iterable[str], prefix: str) -> int:
    """How many encoder layers a weight set holds (one more than the highest layer number).

    Parameters
    ----------
    names : iterable of str
        Canonical tensor names.
    prefix : str

    Returns
    -------
    int
    """
    numbers = [int(m.group(1)) for n in names if (m := _LAYER.match(n[len(prefix):]))]
    return max(numbers) + 1 if numbers else 0


def match_to_network(weights: WeightSet, expected: Mapping[str, tuple[int, ...]], required_prefix: str,
                     config_path: Path) -> dict[str, str]:
    """Check a weight set against the shapes of the network a configuration builds.

    Parameters
    ----------
    weights : WeightSet
    expected : mapping
        The network's parameter name → shape (from a network built without memory, on the meta device).
    required_prefix : str
        Parameters under this prefix (the encoder) must all be present; the others (a masked-LM
        head) are initialised when absent.
    config_path : pathlib.Path
        The configuration, named in the messages.

    Returns
    -------
    dict
        Checkpoint tensor name → parameter name, for the tensors the network uses.

    Raises
    ------
    DataFormatError
        If an encoder tensor is missing, or a tensor's shape differs from the configuration's.
    """
    names = canonical_names(weights, required_prefix)
    by_canon = {canon: name for name, canon in names.items()}
    missing = [k for k in expected if k.startswith(required_prefix) and k not in by_canon]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise DataFormatError(weights.folder, f"the weights lack {len(missing)} of the encoder's tensors ({shown}); "
                                              f"an incomplete weight set would load as a partly random network")
    for canon, name in by_canon.items():
        if canon in expected and tuple(expected[canon]) != weights.tensors[name].shape:
            raise DataFormatError(weights.tensors[name].file,
                                  f"tensor {name!r} has shape {weights.tensors[name].shape} but {config_path.name} "
                                  f"makes it {tuple(expected[canon])}; the configuration and the weights do not match")
    return {name: canon for canon, name in by_canon.items() if canon in expected}


def load_tensors(weights: WeightSet, names: Mapping[str, str]) -> dict:
    """Read the named tensors (memory-mapped by safetensors) under their parameter names.

    Parameters
    ----------
    weights : WeightSet
    names : mapping
        Checkpoint tensor name → parameter name.

    Returns
    -------
    dict of str to torch.Tensor
    """
    from safetensors import safe_open

    out = {}
    for path in weights.files:
        with safe_open(str(path), framework="pt") as fh:
            for name in fh.keys():
                if name in names:
                    out[names[name]] = fh.get_tensor(name)
    return out

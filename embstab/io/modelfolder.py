"""Read the files of a model folder safely: every component inside the folder, every header checked.

KG model folders (``embstab kg train``) and contextual model folders (``contextual pretrain``, a
downloaded hub model) share these rules, so one module holds them:

- **Nothing outside the folder.** Every component is resolved (links followed) and must lie inside
  the folder, as a regular file: a ``model.safetensors`` that is a link to another model, or to a
  system file, is refused before a byte of it is read.
- **Headers before data.** A safetensors header is checked against the file's size before any
  tensor is: a header that claims more bytes than the file holds, a dtype that is not one of
  safetensors' names, or an offset outside the data is refused by name, so a small file cannot
  make a reader allocate memory it does not have.
- **Messages never echo file contents.** A refusal names the file, the key and what is wrong with
  it, never the bytes it found (a link to a system file must not print that file).
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from embstab._textfiles import loads_json
from embstab.errors import DataFormatError, UntrustedSourceError

__all__ = ["DTYPE_BYTES", "MAX_HEADER_BYTES", "MAX_JSON_BYTES", "PICKLE_SUFFIXES", "TensorEntry", "UnsafeWeightsError",
           "component", "read_header", "read_json_file"]

#: Bytes per element of each safetensors dtype.
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
               "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
#: A BERT header holds a few hundred entries (about 100 bytes each); 64 MiB is far beyond any real model.
MAX_HEADER_BYTES = 64 << 20
#: config.json, embstab.json and shard indexes are a few kilobytes.
MAX_JSON_BYTES = 16 << 20
#: File suffixes of pickled weights (``torch.save`` files such as ``pytorch_model.bin``), never read.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# tensor names are the file's own words: shown shortened, so a hostile header cannot flood a message
_NAME_CHARS = 80


class UnsafeWeightsError(UntrustedSourceError):
    """A model's weights can run code when read (pickle files), or lead outside the model folder."""


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a safetensors file, as its header declares it."""

    file: Path
    dtype: str
    shape: tuple[int, ...]


def _shown(name: str) -> str:
    return repr(name if len(name) <= _NAME_CHARS else name[:_NAME_CHARS] + "…")


def component(folder: str | os.PathLike, name: str, what: str) -> Path:
    """The resolved path of the file ``name`` of a model folder, refused if it leads outside the folder.

    Parameters
    ----------
    folder : str or os.PathLike
        The model folder.
    name : str
        The component's file name inside the folder (``model.safetensors``, ``config.json``).
    what : str
        What the file is, for the message (``"weight file"``).

    Returns
    -------
    pathlib.Path
        The real path of the file (links resolved), a regular file inside ``folder``.

    Raises
    ------
    UnsafeWeightsError
        If the path (through links) leads outside the folder; the message names where, never what
        the file holds.
    DataFormatError
        If the file is missing, or is a folder, a device or a FIFO.
    """
    folder = Path(folder)
    path = folder / name
    real = Path(os.path.realpath(path))
    root = Path(os.path.realpath(folder))
    if os.path.lexists(path) and root not in real.parents:
        raise UnsafeWeightsError(f"{path}: the {what} leads outside the model folder (to {real}); "
                                 "embstab reads a model only from inside its folder")
    if not real.is_file():
        # a device, a FIFO or a folder would block, stream forever, or fail deep inside a library
        kind = "missing" if not os.path.lexists(path) else "not a regular file"
        raise DataFormatError(path, f"{what} is {kind}")
    return real


def read_json_file(path: str | os.PathLike, what: str) -> object:
    """Parse a small JSON file of a model folder, refusing one that is too large or not UTF-8 JSON.

    Parameters
    ----------
    path : str or os.PathLike
        The file, already resolved with :func:`component` where it belongs to a folder.
    what : str
        What the file is, for the message (``"model configuration"``).

    Returns
    -------
    object

    Raises
    ------
    DataFormatError
        Naming the file: missing, not a regular file, over :data:`MAX_JSON_BYTES`, not UTF-8 or
        not JSON.
    """
    path = Path(path)
    if not path.is_file():
        kind = "missing" if not os.path.lexists(path) else "not a regular file"
        raise DataFormatError(path, f"{what} is {kind}")
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise DataFormatError(path, f"{what} of {size:,} bytes; a real one is a few kilobytes")
    try:
        return loads_json(path.read_bytes().decode("utf-8"))  # the package's one bounded-nesting reader
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, f"{what} is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, f"{what} is not valid JSON ({exc.msg})", line=exc.lineno) from None
    except ValueError as exc:  # nested too deeply
        raise DataFormatError(path, f"{what} is not usable JSON ({exc})") from None


def read_header(path: str | os.PathLike) -> dict[str, TensorEntry]:
    """The tensors a safetensors file declares, each field type-checked and checked against the file's size.

    Parameters
    ----------
    path : str or os.PathLike
        A regular file (resolve folder components with :func:`component` first).

    Returns
    -------
    dict
        Tensor name → :class:`TensorEntry` (``__metadata__`` left out).

    Raises
    ------
    DataFormatError
        If the header is truncated, longer than the file, too large, not JSON, gives a dtype that is
        not a safetensors dtype name, a shape that is not a list of non-negative integers, offsets
        that are not two integers inside the data, or a region of the wrong size.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise DataFormatError(path, "not a safetensors file (shorter than its 8-byte header length)")
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER_BYTES, size - 8):
            # the claimed length is the file's first 8 bytes: not echoed
            raise DataFormatError(path, f"not a safetensors file: its header length exceeds the file's {size:,} "
                                        f"bytes (or the {MAX_HEADER_BYTES >> 20} MiB limit)")
        raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise DataFormatError(path, "safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise DataFormatError(path, "safetensors header is not a JSON object")
    data = size - 8 - n
    out: dict[str, TensorEntry] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out[name] = _entry(path, name, entry, data)
    return out


def _entry(path: Path, name: str, entry: object, data: int) -> TensorEntry:
    """One header entry, each field checked for its type before it is used."""
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise DataFormatError(path, f"tensor {_shown(name)} has no dtype, shape and data_offsets")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise DataFormatError(path, f"tensor {_shown(name)}: key 'dtype' is not one of {', '.join(DTYPE_BYTES)}")
    if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)):
        raise DataFormatError(path, f"tensor {_shown(name)}: key 'shape' is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data):
        raise DataFormatError(path, f"tensor {_shown(name)}: key 'data_offsets' is not two integers inside the "
                                    f"file's {data:,} data bytes")
    if math.prod(shape) * DTYPE_BYTES[dtype] != offsets[1] - offsets[0]:
        raise DataFormatError(path, f"tensor {_shown(name)} of shape {tuple(shape)} ({dtype}) does not fill its "
                                    f"{offsets[1] - offsets[0]:,} bytes")
    return TensorEntry(path, dtype, tuple(shape))

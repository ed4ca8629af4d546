"""Reading and writing hyperbolic and product embeddings: one module for both text formats.

A file starts with a magic line naming its kind, then a JSON header, then one row per node
(label, tab-separated coordinates). Multiprecision coordinates keep all their digits; float64 ones
are written with ``repr`` (exact). Files are written atomically (a crash leaves the old file or
the whole new one) and every malformed file is reported with its name and line.
"""

from __future__ import annotations

import json
import os
from typing import Any

import mpmath

from embstab._fs import atomic_write, json_safe
from embstab._textfiles import loads_json
from embstab.errors import EmbeddingFormatError
from embstab.hyperbolic.errors import HyperbolicError

__all__ = ["HYPERBOLIC_MAGIC", "PRODUCT_MAGIC", "register_kind", "save_embedding", "load_embedding"]

HYPERBOLIC_MAGIC = "# embstab-hyperbolic v1"
PRODUCT_MAGIC = "# embstab-product v1"

#: Embedding classes by the magic line of their files; each class registers itself when defined
#: (see :class:`embstab.hyperbolic.base.ManifoldEmbedding`), so this module imports none of them.
_KINDS: dict[str, type] = {}


def register_kind(magic: str, cls: type) -> None:
    """Read files that start with ``magic`` as ``cls`` (a ``ManifoldEmbedding`` subclass).

    Parameters
    ----------
    magic : str
        The first line of the kind's files.
    cls : type
        The class; it provides ``file_header``, ``file_rows``, ``file_layout`` and ``from_file``.

    Raises
    ------
    ValueError
        If another class already owns ``magic``.
    """
    owner = _KINDS.setdefault(magic, cls)
    if owner is not cls and owner.__qualname__ != cls.__qualname__:
        raise ValueError(f"{magic!r} is already the magic line of {owner.__qualname__}")
    _KINDS[magic] = cls


def save_embedding(emb: Any, path: str | os.PathLike) -> None:
    """Write a hyperbolic or product embedding to a text file, atomically.

    Parameters
    ----------
    emb : HyperbolicEmbedding or ProductEmbedding
        What to write.
    path : str or os.PathLike
        The target file.

    Raises
    ------
    TypeError
        If ``emb`` is not an embedding of :mod:`embstab.hyperbolic`.
    """
    magic = getattr(type(emb), "file_magic", None)
    if magic is None or _KINDS.get(magic) is not type(emb):
        raise TypeError(f"save_embedding takes a HyperbolicEmbedding or ProductEmbedding, got {type(emb).__name__}")
    head = {**emb.file_header(), "n": len(emb), "metadata": json_safe(emb.metadata)}
    with atomic_write(path, "w") as fh:
        fh.write(magic + "\n# " + json.dumps(head) + "\n")
        fh.writelines(str(label) + "\t" + "\t".join(values) + "\n" for label, values in emb.file_rows())


def load_embedding(path: str | os.PathLike, kind: type | None = None) -> Any:
    """Read a file written by :func:`save_embedding`; the magic line says which kind it is.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    kind : type, optional
        Require this class (e.g. ``HyperbolicEmbedding``); default: whatever the file holds.

    Returns
    -------
    HyperbolicEmbedding or ProductEmbedding

    Raises
    ------
    embstab.errors.EmbeddingFormatError
        When the file is missing, not such a file (or not of ``kind``), or a header or row is
        malformed.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise EmbeddingFormatError(path, "no such file")
    with open(path, encoding="utf-8") as fh:
        try:
            first = fh.readline().rstrip("\n")
        except UnicodeDecodeError:
            first = None
        cls = _KINDS.get(first)
        if cls is None:
            raise EmbeddingFormatError(path, "not an embstab hyperbolic embedding (first line should be "
                                       + " or ".join(repr(m) for m in _KINDS) + ")", line=1)
        if kind is not None and not issubclass(cls, kind):
            raise EmbeddingFormatError(path, f"holds a {cls.__name__}, not a {kind.__name__}", line=1)
        try:
            head = loads_json(fh.readline()[2:])
            if not isinstance(head, dict):
                raise TypeError("the header is not a JSON object")
            width, number, bits = cls.file_layout(head)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, HyperbolicError) as exc:
            raise EmbeddingFormatError(path, f"bad header: {exc}", line=2) from None
        with mpmath.workprec(bits or 53):
            labels, rows = _read_rows(fh, path, width, number)
    labels = [int(lab) if lab.lstrip("-").isdigit() else lab for lab in labels]
    if len(rows) != head.get("n", len(rows)):
        raise EmbeddingFormatError(path, f"header says {head['n']} rows, found {len(rows)} (truncated file?)")
    try:
        return cls.from_file(head, labels, rows)
    except HyperbolicError as exc:
        raise EmbeddingFormatError(path, str(exc)) from None


def _is_number(text: str, number) -> bool:
    try:
        number(text)
    except ValueError:
        return False
    return True


def _read_rows(fh, path: str, width: int, number) -> tuple[list[str], list[list]]:
    labels, rows = [], []
    try:
        for lineno, line in enumerate(fh, 3):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != width + 1:
                raise EmbeddingFormatError(path, f"expected a label and {width} coordinates, got {len(parts)} fields",
                                           lineno)
            try:
                rows.append([number(s) for s in parts[1:]])
            except ValueError:
                bad = next(s for s in parts[1:] if not _is_number(s, number))
                raise EmbeddingFormatError(path, f"non-numeric coordinate {bad!r}", lineno) from None
            labels.append(parts[0])
    except UnicodeDecodeError:
        raise EmbeddingFormatError(path, "not UTF-8 text", len(rows) + 3) from None
    return labels, rows

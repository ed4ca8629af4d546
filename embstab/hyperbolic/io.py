"""Reading and writing hyperbolic and product embeddings: one module for both text formats.

A file starts with a magic line naming its kind, then a JSON header, then one row per node
(label, tab-separated coordinates). Multiprecision coordinates keep all their digits; float64 ones
are written with ``repr`` (exact). Files are written atomically (a crash leaves the old file or
the whole new one) and every malformed file is reported with its name and line.

What a file may hold is checked as it is read, so that nothing downstream computes on it first:

* **labels** are node ids, parsed once (:func:`parse_label`): a label written as an integer
  (``-?[0-9]+`` without leading zeros, as embstab writes them) is that integer, any other label is
  text; a label that only looks like an integer (``01``, ``+1``, ``--1``, ``-0``) is refused, and so
  is a node listed twice;
* **points** must lie on their manifold (``invalid_row`` of the embedding): Poincaré points strictly
  inside the unit ball, Lorentz rows on the hyperboloid and sphere rows on the sphere within
  :data:`embstab.hyperbolic.base.POINT_TOLERANCE` (1e-9, relative to x₀² on the hyperboloid);
* **the header's** ``precision_bits`` obeys the bounds of ``embed(precision=...)`` (2 to 2**20).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import mpmath

from embstab._fs import atomic_write, json_safe
from embstab._textfiles import loads_json
from embstab.errors import EmbeddingFormatError
from embstab.hyperbolic.errors import HyperbolicError
# the magic lines live with the other formats' leading bytes, where files are told apart
from embstab.io import HYPERBOLIC_MAGIC, PRODUCT_MAGIC

__all__ = ["HYPERBOLIC_MAGIC", "PRODUCT_MAGIC", "register_kind", "save_embedding", "load_embedding", "parse_label"]

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
        When the file is missing, not such a file (or not of ``kind``), a header or row is
        malformed, a label is not a node id or names a node twice, or a point is off its manifold
        (the message names the line).
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
    if len(rows) != head.get("n", len(rows)):
        raise EmbeddingFormatError(path, f"header says {head['n']} rows, found {len(rows)} (truncated file?)")
    try:
        emb = cls.from_file(head, labels, rows)
    except HyperbolicError as exc:
        raise EmbeddingFormatError(path, str(exc)) from None
    bad = emb.invalid_row()
    if bad is not None:  # rows start on line 3, one per line
        raise EmbeddingFormatError(path, f"node {labels[bad[0]]!r}: {bad[1]}", line=bad[0] + 3)
    return emb


_INF = float("inf")
#: A label that is an integer as embstab writes one (``str(int)``): no leading zeros, no '+', no '-0'.
_INTEGER_LABEL = re.compile(r"0|-?[1-9][0-9]*")
#: A label made only of what integers are made of: if it is not one as written, it is a typo.
_NUMBER_LIKE = re.compile(r"[-+0-9_ ]*[0-9][-+0-9_ ]*")


def parse_label(text: str) -> int | str:
    """A node label as read from a file: the integer it writes, or the text itself.

    Labels are parsed here, once, so that two spellings cannot name one node (``1`` and ``01``
    were both node 1).

    Parameters
    ----------
    text : str
        The label field of a row.

    Returns
    -------
    int or str
        ``int(text)`` for ``-?[0-9]+`` without leading zeros, else ``text``.

    Raises
    ------
    ValueError
        For an empty label, or one made of digits and signs that is not written as an integer
        (``01``, ``+1``, ``--1``, ``-0``, ``1_000``).
    """
    if _INTEGER_LABEL.fullmatch(text):
        return int(text)
    if not text:
        raise ValueError("empty node label")
    if _NUMBER_LIKE.fullmatch(text):
        raise ValueError(f"node label {text!r} is not an integer as embstab writes one (digits, an optional "
                         "leading '-', no leading zeros)")
    return text


def _is_number(text: str, number) -> bool:
    try:
        number(text)
    except ValueError:
        return False
    return True


def _read_rows(fh, path: str, width: int, number) -> tuple[list[int | str], list[list]]:
    labels, rows = [], []
    seen: dict[int | str, int] = {}  # node -> the line that listed it first
    try:
        for lineno, line in enumerate(fh, 3):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != width + 1:
                raise EmbeddingFormatError(path, f"expected a label and {width} coordinates, got {len(parts)} fields",
                                           lineno)
            try:
                row = [number(s) for s in parts[1:]]
            except ValueError:
                bad = next(s for s in parts[1:] if not _is_number(s, number))
                raise EmbeddingFormatError(path, f"non-numeric coordinate {bad!r}", lineno) from None
            if not all(abs(v) < _INF for v in row):  # (NaN compares False too)
                bad = next(s for s, v in zip(parts[1:], row) if not abs(v) < _INF)
                raise EmbeddingFormatError(path, f"coordinate {bad!r} is not a finite number", lineno)
            rows.append(row)
            try:
                label = parse_label(parts[0])
            except ValueError as exc:
                raise EmbeddingFormatError(path, str(exc), lineno) from None
            first = seen.setdefault(label, lineno)
            if first != lineno:
                raise EmbeddingFormatError(path, f"node {label!r} is listed twice (first on line {first})", lineno)
            labels.append(label)
    except UnicodeDecodeError:
        raise EmbeddingFormatError(path, "not UTF-8 text", len(rows) + 3) from None
    return labels, rows

"""Triple files: tab-separated ``head<TAB>relation<TAB>tail`` lines, one split per file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from embstab._resources import check_memory, regular_file_size
from embstab._textfiles import read_utf8, split_lines
from embstab.data.errors import DataFormatError
from embstab.kg.graph import KnowledgeGraph, control_character

__all__ = ["PARSE_BYTES_PER_BYTE", "read_triples", "parse_triples", "load_triples_graph"]

#: Memory parsing a triples file takes per byte of it: the text, its lines and a tuple of three
#: label strings per line (a 30-byte line holds some 600 bytes of Python objects).
PARSE_BYTES_PER_BYTE = 32


def parse_triples(text: str, source: str | os.PathLike) -> list[tuple[str, str, str]]:
    r"""Parse tab-separated triples from ``text``; ``source`` names it in error messages.

    Lines end at ``\n`` (a ``\r`` before it is dropped); separators such as U+2028 stay inside a
    label, so line numbers are the editor's. Blank lines are skipped. A line must hold exactly
    three tab-separated, non-empty fields (surrounding whitespace of each field is stripped)
    without control characters: a label ``"a\x00"`` would become ``"a"`` in the saved tables.

    Parameters
    ----------
    text : str
        The content of one split file.
    source : str or os.PathLike
        Where ``text`` came from, for error messages.

    Returns
    -------
    list of (head, relation, tail) label triples

    Raises
    ------
    DataFormatError
        Naming the source and line: a line with another number of columns, an empty field, a
        control character, or no triple at all (an empty split).
    """
    out: list[tuple[str, str, str]] = []
    for lineno, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise DataFormatError(source, f"expected 3 tab-separated columns (head, relation, tail), found "
                                          f"{len(fields)}", lineno)
        bad = control_character(line.replace("\t", ""))
        if bad is not None:
            raise DataFormatError(source, f"control character {bad!r} in a label (labels must be printable text)",
                                  lineno)
        fields = [f.strip() for f in fields]
        if not all(fields):
            raise DataFormatError(source, "empty head, relation or tail", lineno)
        out.append((fields[0], fields[1], fields[2]))
    if not out:
        raise DataFormatError(source, "no triples: the split is empty")
    return out


def read_triples(path: str | os.PathLike) -> list[tuple[str, str, str]]:
    """Read one split file of tab-separated ``head relation tail`` lines (UTF-8).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    list of (head, relation, tail) label triples

    Raises
    ------
    DataFormatError
        For a device, pipe or other file that is not a regular file (``/dev/zero`` would never end),
        a file that is not UTF-8 (naming the byte offset), a line without exactly 3 columns, an
        empty field, a control character, or a file without triples.
    InsufficientMemoryError
        If parsing the file would take more memory than is available.
    FileNotFoundError
        If the file does not exist.

    Notes
    -----
    The read is bounded by the file's size: parsing costs about :data:`PARSE_BYTES_PER_BYTE` bytes
    of memory per byte of the file (the text, the lines and three label strings per triple), which
    is checked against the available memory before the file is read.
    """
    size = regular_file_size(path, "triples file")
    check_memory(PARSE_BYTES_PER_BYTE * size, f"parsing the triples file {os.fspath(path)} ({size:,} bytes)")
    return parse_triples(read_utf8(path), path)


def load_triples_graph(train: str | os.PathLike, valid: str | os.PathLike, test: str | os.PathLike,
                       name: str | None = None, metadata: Mapping[str, Any] | None = None) -> KnowledgeGraph:
    """A :class:`KnowledgeGraph` from three triple files (vocabulary from the training file).

    Parameters
    ----------
    train, valid, test : str or os.PathLike
        The split files.
    name : str, optional
        Graph name (default: the training file's parent folder name).
    metadata : mapping, optional

    Returns
    -------
    KnowledgeGraph

    Raises
    ------
    DataFormatError
        For a malformed or empty file.
    VocabularyError
        For a validation or test triple whose entity or relation never occurs in training.
    """
    name = name or Path(train).resolve().parent.name
    meta = {"source": "files", "files": [str(train), str(valid), str(test)], **dict(metadata or {})}
    return KnowledgeGraph.from_labeled(name, read_triples(train), read_triples(valid), read_triples(test), meta)

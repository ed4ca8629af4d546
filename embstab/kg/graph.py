"""The :class:`KnowledgeGraph` container: labelled entities and relations, and id-triple splits."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from embstab.errors import ConfigError, ShapeError, VocabularyError

__all__ = ["KnowledgeGraph", "SPLITS", "control_character"]

#: The three splits every graph has, in this order.
SPLITS = ("train", "valid", "test")

#: Unicode's control characters (category Cc: C0, DEL and C1).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def control_character(text: str) -> str | None:
    r"""The first control character (NUL, tab, U+0085, ...) of ``text``, or None.

    Labels holding one do not survive a round trip: NumPy's string arrays drop trailing NULs, so
    ``"a"`` and ``"a\x00"`` would be saved as one label, and line-based files split at others.

    Parameters
    ----------
    text : str

    Returns
    -------
    str or None
        The character, or None when there is none.
    """
    found = _CONTROL.search(text)
    return None if found is None else found.group()


def _as_triples(x: Any, split: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ShapeError(f"split {split!r} must be an (n, 3) array of (head, relation, tail) ids, got shape {arr.shape}")
    return arr


def _shown(labels: Sequence[str]) -> str:
    head = ", ".join(repr(x) for x in labels[:5])
    return head + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")


@dataclass(frozen=True)
class KnowledgeGraph:
    """A knowledge graph: entity and relation labels and three splits of ``(head, relation, tail)`` ids.

    Entities are ordered by their number of training triples, most frequent first (ties by label),
    so that an entity embedding's rows are in frequency order like a word embedding's, and
    :meth:`embstab.Embedding.top` keeps the best-trained entities.

    Parameters
    ----------
    name : str
        Short name, shown in results.
    entities, relations : sequence of str
        Unique labels; the id of a label is its position.
    train, valid, test : array_like of shape (n, 3)
        Integer triples ``(head id, relation id, tail id)``; none may be empty.
    metadata : mapping, optional
        Where the graph came from and how it was built.

    Raises
    ------
    ShapeError
        If a split is not an (n, 3) integer array, is empty, or holds an id out of range.
    VocabularyError
        If a label is duplicated or holds a control character.
    """

    name: str
    entities: tuple[str, ...]
    relations: tuple[str, ...]
    train: np.ndarray = field(repr=False)
    valid: np.ndarray = field(repr=False)
    test: np.ndarray = field(repr=False)
    metadata: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entities", tuple(str(e) for e in self.entities))
        object.__setattr__(self, "relations", tuple(str(r) for r in self.relations))
        for what, labels in (("entity", self.entities), ("relation", self.relations)):
            if control_character("".join(labels)) is not None:
                bad = next(x for x in labels if control_character(x) is not None)
                raise VocabularyError(f"graph {self.name!r}: {what} label {bad!r} holds the control character "
                                      f"{control_character(bad)!r}; labels must be printable text")
            if len(set(labels)) != len(labels):
                seen: set[str] = set()
                dup = next(x for x in labels if x in seen or seen.add(x))
                raise VocabularyError(f"graph {self.name!r}: duplicate {what} label {dup!r}")
        for split in SPLITS:
            arr = _as_triples(getattr(self, split), split)
            if len(arr) == 0:
                raise ShapeError(f"graph {self.name!r}: split {split!r} is empty")
            for col, n, what in ((0, len(self.entities), "entity"), (1, len(self.relations), "relation"),
                                 (2, len(self.entities), "entity")):
                if arr[:, col].min() < 0 or arr[:, col].max() >= n:
                    raise ShapeError(f"graph {self.name!r}: split {split!r} holds a {what} id outside 0..{n - 1}")
            arr.setflags(write=False)
            object.__setattr__(self, split, arr)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_labeled(cls, name: str, train: Iterable[Sequence[str]], valid: Iterable[Sequence[str]],
                     test: Iterable[Sequence[str]], metadata: Mapping[str, Any] | None = None) -> KnowledgeGraph:
        """Build a graph from labelled triples; the vocabulary is that of the training split.

        Parameters
        ----------
        name : str
        train, valid, test : iterable of (head, relation, tail) label triples
        metadata : mapping, optional

        Returns
        -------
        KnowledgeGraph

        Raises
        ------
        VocabularyError
            If a validation or test triple names an entity or relation absent from training (its
            embedding would never be trained, so every score involving it would be noise).
        ShapeError
            If a split is empty.
        """
        splits = {"train": [tuple(t) for t in train], "valid": [tuple(t) for t in valid],
                  "test": [tuple(t) for t in test]}
        for split, triples in splits.items():
            if not triples:
                raise ShapeError(f"graph {name!r}: split {split!r} is empty")
        degree: dict[str, int] = {}
        for h, _, t in splits["train"]:
            degree[h] = degree.get(h, 0) + 1
            degree[t] = degree.get(t, 0) + 1
        entities = sorted(degree, key=lambda e: (-degree[e], e))
        relations = sorted({r for _, r, _ in splits["train"]})
        e_id = {e: i for i, e in enumerate(entities)}
        r_id = {r: i for i, r in enumerate(relations)}
        arrays = {}
        for split, triples in splits.items():
            unknown_e = sorted({x for h, _, t in triples for x in (h, t) if x not in e_id})
            unknown_r = sorted({r for _, r, _ in triples if r not in r_id})
            if unknown_e or unknown_r:
                what = (f"{len(unknown_e)} entities ({_shown(unknown_e)})" if unknown_e else "") + \
                       (" and " if unknown_e and unknown_r else "") + \
                       (f"{len(unknown_r)} relations ({_shown(unknown_r)})" if unknown_r else "")
                raise VocabularyError(f"graph {name!r}: the {split} split names {what} that no training "
                                      "triple has; every entity and relation must appear in training")
            arrays[split] = np.array([(e_id[h], r_id[r], e_id[t]) for h, r, t in triples], dtype=np.int64)
        return cls(name, tuple(entities), tuple(relations), arrays["train"], arrays["valid"], arrays["test"],
                   dict(metadata or {}))

    def with_splits(self, name: str | None = None, **splits: np.ndarray) -> KnowledgeGraph:
        """The same vocabulary with some splits replaced (``train=``, ``valid=``, ``test=``).

        Parameters
        ----------
        name : str, optional
            Name of the new graph (default: this graph's name).
        **splits : array_like of shape (n, 3)
            Replacement id triples, keyed by split name.

        Returns
        -------
        KnowledgeGraph

        Raises
        ------
        ValueError
            If a keyword is not a split name.
        ShapeError
            If a replacement split is not an (n, 3) id array, is empty, or holds an id out of range.
        """
        bad = set(splits) - set(SPLITS)
        if bad:
            raise ConfigError(f"unknown split(s) {sorted(bad)}; splits are {SPLITS}")
        return replace(self, name=name or self.name, **splits)

    # ------------------------------------------------------------------ queries
    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @property
    def n_relations(self) -> int:
        return len(self.relations)

    @cached_property
    def entity_index(self) -> dict[str, int]:
        """Entity label → id."""
        return {e: i for i, e in enumerate(self.entities)}

    @cached_property
    def relation_index(self) -> dict[str, int]:
        """Relation label → id."""
        return {r: i for i, r in enumerate(self.relations)}

    def split(self, name: str) -> np.ndarray:
        """The id triples of split ``name`` ("train", "valid" or "test").

        Parameters
        ----------
        name : {"train", "valid", "test"}

        Returns
        -------
        numpy.ndarray
            Read-only int64 array of shape (n, 3).

        Raises
        ------
        ValueError
            If ``name`` is not a split.
        """
        if name not in SPLITS:
            raise ConfigError(f"split must be one of {SPLITS}, got {name!r}")
        return getattr(self, name)

    def known_triples(self) -> np.ndarray:
        """Every triple known to be true: the filter of filtered ranking.

        The three splits, plus the triples a version of a graph left out of its training split
        (``metadata["also_known"]``, set by :func:`embstab.kg.version_pair`): they are still facts,
        so every version of a graph ranks against the same filter and one model has one MRR.

        Returns
        -------
        numpy.ndarray
            int64 array of shape (n, 3), deduplicated, rows sorted.
        """
        extra = np.asarray(self.metadata.get("also_known", np.empty((0, 3))), dtype=np.int64).reshape(-1, 3)
        return np.unique(np.concatenate([self.train, self.valid, self.test, extra]), axis=0)

    def degree(self, split: str = "train") -> np.ndarray:
        """Number of triples of ``split`` each entity takes part in (as head or tail).

        A self-loop ``(e, r, e)`` counts twice.

        Parameters
        ----------
        split : {"train", "valid", "test"}

        Returns
        -------
        numpy.ndarray
            int64 array of shape (n_entities,).
        """
        arr = self.split(split)
        return np.bincount(np.concatenate([arr[:, 0], arr[:, 2]]), minlength=self.n_entities)

    def encode(self, triples: Iterable[Sequence[str]]) -> np.ndarray:
        """Labelled ``(head, relation, tail)`` triples → ids.

        Parameters
        ----------
        triples : iterable of (head, relation, tail) label triples

        Returns
        -------
        numpy.ndarray
            int64 array of shape (n, 3).

        Raises
        ------
        VocabularyError
            If a label is not an entity or relation of this graph.
        """
        out = []
        for h, r, t in triples:
            for label, index, what in ((h, self.entity_index, "entity"), (r, self.relation_index, "relation"),
                                       (t, self.entity_index, "entity")):
                if label not in index:
                    raise VocabularyError(f"unknown {what} {label!r}: graph {self.name!r} has no such label")
            out.append((self.entity_index[h], self.relation_index[r], self.entity_index[t]))
        return np.array(out, dtype=np.int64).reshape(-1, 3)

    def labeled(self, split: str = "train") -> list[tuple[str, str, str]]:
        """The triples of ``split`` as label triples.

        Parameters
        ----------
        split : {"train", "valid", "test"}

        Returns
        -------
        list of (head, relation, tail) str triples
        """
        return [(self.entities[h], self.relations[r], self.entities[t]) for h, r, t in self.split(split)]

    def triples_factory(self, split: str = "train"):
        """``split`` as a PyKEEN ``TriplesFactory`` over this graph's full vocabulary (needs pykeen).

        Parameters
        ----------
        split : {"train", "valid", "test"}

        Returns
        -------
        pykeen.triples.TriplesFactory
            Entity and relation ids are this graph's ids.
        """
        from embstab.kg._pykeen import triples_factory

        return triples_factory(self, split)

    def summary(self) -> dict[str, Any]:
        """Sizes, as a dict: entities, relations and the triples of each split.

        Returns
        -------
        dict
            Keys ``graph``, ``entities``, ``relations``, ``train``, ``valid``, ``test``.
        """
        return {"graph": self.name, "entities": self.n_entities, "relations": self.n_relations,
                **{split: int(len(self.split(split))) for split in SPLITS}}

    def __repr__(self) -> str:
        s = self.summary()
        return (f"KnowledgeGraph({self.name!r}, {s['entities']} entities, {s['relations']} relations, "
                f"{s['train']}/{s['valid']}/{s['test']} triples)")

"""Graph-version pairs: a training graph and an updated version of it, over one vocabulary.

As for corpora, a pair models retraining on updated data: ``"remove"`` compares the full training
graph with a version missing a share of its triples; ``"add"`` compares a version with a share of
the triples held back against the full graph (the held-back triples are the ones added). Both
versions keep the full graph's entity and relation vocabulary and its validation and test splits.

An entity (or relation) that has no training triple in one version would get an untrained,
random embedding there, and its instability would measure nothing. ``lost=`` says what to do:
``"error"`` refuses, ``"protect"`` only removes triples that leave every entity and relation at
least one training triple, ``"drop"`` removes such entities and relations from both versions
(with every triple that names them, in all splits), so both versions stay aligned.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from embstab.errors import ConfigError, ShapeError, VocabularyError, lookup
from embstab.kg.graph import SPLITS, KnowledgeGraph

__all__ = ["GraphPair", "version_pair", "seed_pair", "CHANGES", "LOST_POLICIES"]

CHANGES = {"remove": "full training graph vs a version without a share of its triples",
           "add": "a version without a held-back share vs the full graph (held-back triples added)"}
LOST_POLICIES = {"error": "refuse a version in which an entity or relation has no training triple",
                 "protect": "change only triples whose removal leaves every entity and relation trained",
                 "drop": "drop entities and relations untrained in either version from both versions"}


@dataclass(frozen=True)
class GraphPair:
    """Two versions of a graph over one vocabulary, to train the same model on each.

    Attributes
    ----------
    old, new : KnowledgeGraph
        The old and the new version (same entities, relations, validation and test triples).
    change : str
        ``"remove"``, ``"add"`` or ``"seed"`` (the same graph twice: the seed-only baseline).
    share : float
        Share of the full training triples that differ between the versions.
    seed : int
        Seed that chose the changed triples.
    n_changed : int
        Number of training triples in one version and not the other.
    dropped_entities, dropped_relations : tuple of str
        Labels removed from both versions under ``lost="drop"``.
    """

    old: KnowledgeGraph
    new: KnowledgeGraph
    change: str
    share: float
    seed: int
    n_changed: int
    dropped_entities: tuple[str, ...] = ()
    dropped_relations: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)


def _untrained(graph: KnowledgeGraph, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ent = np.bincount(np.concatenate([train[:, 0], train[:, 2]]), minlength=graph.n_entities) == 0
    rel = np.bincount(train[:, 1], minlength=graph.n_relations) == 0
    return ent, rel


def _choose(train: np.ndarray, n_entities: int, n_relations: int, count: int, rng: np.random.Generator,
            protect: bool) -> np.ndarray:
    """Rows of ``train`` to take out: ``count`` at random, or greedily keeping everything trained."""
    order = rng.permutation(len(train))
    if not protect:
        return np.sort(order[:count])
    ent = np.bincount(np.concatenate([train[:, 0], train[:, 2]]), minlength=n_entities)
    rel = np.bincount(train[:, 1], minlength=n_relations)
    chosen: list[int] = []
    for i in order:
        if len(chosen) == count:
            break
        h, r, t = train[i]
        need_h = 2 if h == t else 1  # a self-loop counts twice in the degree
        if ent[h] > need_h and (h == t or ent[t] > 1) and rel[r] > 1:
            ent[h] -= 1
            ent[t] -= 1
            rel[r] -= 1
            chosen.append(int(i))
    if len(chosen) < count:
        raise ShapeError(f"only {len(chosen)} of the {count} requested triples can be removed with every entity "
                         "and relation keeping a training triple; use a smaller share or lost='drop'")
    return np.sort(np.asarray(chosen, dtype=np.int64))


def _drop(graph: KnowledgeGraph, ent_bad: np.ndarray, rel_bad: np.ndarray, trains: list[np.ndarray],
          name_suffix: str) -> tuple[list[KnowledgeGraph], tuple[str, ...], tuple[str, ...]]:
    """Both versions without the flagged entities/relations, renumbered over the kept labels."""
    e_new = np.cumsum(~ent_bad) - 1
    r_new = np.cumsum(~rel_bad) - 1

    def keep(arr: np.ndarray) -> np.ndarray:
        ok = ~(ent_bad[arr[:, 0]] | ent_bad[arr[:, 2]] | rel_bad[arr[:, 1]])
        arr = arr[ok]
        return np.stack([e_new[arr[:, 0]], r_new[arr[:, 1]], e_new[arr[:, 2]]], axis=1)

    ents = tuple(e for e, bad in zip(graph.entities, ent_bad) if not bad)
    rels = tuple(r for r, bad in zip(graph.relations, rel_bad) if not bad)
    out = []
    for train, suffix in zip(trains, name_suffix.split("|")):
        splits = {"train": keep(train), "valid": keep(graph.valid), "test": keep(graph.test)}
        for s in SPLITS:
            if len(splits[s]) == 0:
                raise ShapeError(f"dropping the untrained entities leaves split {s!r} of {graph.name!r} empty")
        out.append(KnowledgeGraph(f"{graph.name}{suffix}", ents, rels, splits["train"], splits["valid"],
                                  splits["test"], dict(graph.metadata, also_known=keep(graph.known_triples()))))
    dropped_e = tuple(e for e, bad in zip(graph.entities, ent_bad) if bad)
    dropped_r = tuple(r for r, bad in zip(graph.relations, rel_bad) if bad)
    return out, dropped_e, dropped_r


def version_pair(graph: KnowledgeGraph, change: str = "remove", share: float = 0.05, seed: int = 0,
                 lost: str = "error") -> GraphPair:
    """Two versions of ``graph``'s training triples, for a retraining pair.

    Parameters
    ----------
    graph : KnowledgeGraph
    change : {"remove", "add"}
        ``"remove"``: (full, full minus ``share``). ``"add"``: (full minus ``share``, full).
    share : float
        Share of the training triples changed, in (0, 1).
    seed : int
        Seed choosing the changed triples.
    lost : {"error", "protect", "drop"}
        What to do about entities or relations left without a training triple in a version (see the
        module docstring).

    Returns
    -------
    GraphPair

    Raises
    ------
    VocabularyError
        With ``lost="error"``, when a version loses every training triple of some entity or
        relation; the message counts them and names a few.
    ShapeError
        With ``lost="protect"``, when the share cannot be removed without losing an entity.
    """
    lookup(CHANGES, change, "graph change")
    lookup(LOST_POLICIES, lost, "lost-entity policy")
    if not 0.0 < float(share) < 1.0:
        raise ConfigError(f"share must be in (0, 1), got {share!r}")
    count = max(1, int(round(share * len(graph.train))))
    rng = np.random.default_rng(seed)
    out_rows = _choose(graph.train, graph.n_entities, graph.n_relations, count, rng, protect=(lost == "protect"))
    mask = np.ones(len(graph.train), dtype=bool)
    mask[out_rows] = False
    smaller = graph.train[mask]
    trains = [graph.train, smaller] if change == "remove" else [smaller, graph.train]
    # the version without the changed triples is named NAME-SHARE, the full one keeps NAME
    suffixes = f"|-{share:g}" if change == "remove" else f"-{share:g}|"
    ent_bad, rel_bad = _untrained(graph, smaller)
    dropped_e: tuple[str, ...] = ()
    dropped_r: tuple[str, ...] = ()
    if ent_bad.any() or rel_bad.any():
        if lost == "error":
            names = [graph.entities[i] for i in np.flatnonzero(ent_bad)[:5]]
            rels = [graph.relations[i] for i in np.flatnonzero(rel_bad)[:5]]
            raise VocabularyError(
                f"the version of {graph.name!r} without {count} triples loses every training triple of "
                f"{int(ent_bad.sum())} entities {names} and {int(rel_bad.sum())} relations {rels}: their "
                "embeddings would stay random; use lost='protect' (keep them trained) or lost='drop' "
                "(remove them from both versions)")
        (old, new), dropped_e, dropped_r = _drop(graph, ent_bad, rel_bad, trains, suffixes)
    else:
        # both versions filter their rankings with every triple of the full graph (the left-out ones
        # are still facts), so a model's MRR is the same whichever version or full graph scores it
        known = dict(graph.metadata, also_known=graph.known_triples())
        old = replace(graph.with_splits(name=graph.name + suffixes.split("|")[0], train=trains[0]), metadata=known)
        new = replace(graph.with_splits(name=graph.name + suffixes.split("|")[1], train=trains[1]), metadata=known)
    return GraphPair(old, new, change, float(share), int(seed), int(count), dropped_e, dropped_r,
                     {"lost": lost, "graph": graph.name})


def seed_pair(graph: KnowledgeGraph) -> GraphPair:
    """The same graph twice: train it with two seeds for the seed-only baseline.

    Parameters
    ----------
    graph : KnowledgeGraph

    Returns
    -------
    GraphPair
        ``old`` and ``new`` both ``graph``, change ``"seed"``, nothing removed.
    """
    return GraphPair(graph, graph, "seed", 0.0, 0, 0)

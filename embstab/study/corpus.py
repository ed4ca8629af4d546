"""The ``corpus`` section of a study: one corpus split into an old and a new version.

Word studies and contextual studies both build their pair from one corpus, so the section's
definition and its parser live with the engine, below the kinds that use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from embstab.errors import did_you_mean

__all__ = ["CorpusSpec", "PAIR_KINDS", "parse_corpus"]

#: How two corpus versions differ (see :func:`embstab.data.make_corpus_pair`).
PAIR_KINDS = ("leave_out", "extend")


@dataclass(frozen=True)
class CorpusSpec:
    """The corpus pair: one corpus from :func:`embstab.data.load_corpus`, split into old/new."""

    name: str
    pair: str = "leave_out"
    fraction: float = 0.05
    seed: int = 0
    max_docs: int | None = None


def parse_corpus(v: Any, value: Any) -> CorpusSpec:
    """The ``corpus`` section: ``{name*, pair, fraction, seed, max_docs}``.

    Parameters
    ----------
    v : validator
        The schema's validator (its ``fail`` builds the error naming the key).
    value : Any
        The section as read from the study file.

    Returns
    -------
    CorpusSpec
        The section with its defaults filled in.

    Raises
    ------
    StudyDefinitionError
        An unknown corpus or pair kind, a fraction out of range, or a leave-out share of ``max_docs``
        that removes no document, naming its key.
    """
    c = v.mapping(value, "corpus", {"name": True, "pair": False, "fraction": False, "seed": False, "max_docs": False})
    pair = v.string(c.get("pair", "leave_out"), "corpus.pair", PAIR_KINDS)
    corpus = CorpusSpec(
        name=_corpus_name(v, c["name"]),
        pair=pair,
        fraction=v.number(c.get("fraction", 0.05), "corpus.fraction", 0.0, 0.5 if pair == "leave_out" else 1.0,
                          open_low=True, open_high=True),
        seed=v.integer(c.get("seed", 0), "corpus.seed", 0),
        max_docs=None if c.get("max_docs") is None else v.integer(c["max_docs"], "corpus.max_docs", 2),
    )
    if corpus.pair == "leave_out" and corpus.max_docs is not None and corpus.max_docs * corpus.fraction < 1:
        raise v.fail("corpus.fraction", f"leaving out {corpus.fraction:g} of {corpus.max_docs} documents "
                                         "removes no document; the two corpora would be identical")
    return corpus


def _corpus_name(v: Any, value: Any) -> str:
    name = v.string(value, "corpus.name")
    from embstab.data import corpus_names  # noqa: PLC0415

    known = tuple(corpus_names())
    for part in name.split("+"):
        if part not in known:
            hint = did_you_mean(part, known)
            raise v.fail("corpus.name", f"unknown corpus {part!r} (choose from {', '.join(known)}, "
                                        f"or join several with '+'){hint}")
    return name

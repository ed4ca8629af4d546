"""Parsers for the raw formats of the offline sources (pure functions of a path, easy to test)."""

from __future__ import annotations

import bz2
import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = ["iter_dictd_entries", "read_brown_file", "read_wiki_summaries",
           "read_nlp_corpus_file", "simplify_brown_tag", "read_wikipedia_xml"]

# GCIDE marks where each sense came from; the markers are not English text.
_GCIDE_SOURCE = re.compile(r"\[(?:1913 Webster|Webster 1913 Suppl\.|WordNet 1\.5[^\]]*|PJC|AS)\]")
_CROSSREF = re.compile(r"[{}]")            # dictd cross-reference braces: {The Hague}
_HEADWORD_PRON = re.compile(r"\\[^\\]*\\")  # GCIDE syllabified headword between backslashes
# GCIDE respellings such as (l[a^]v"[i^]sh): a parenthesis holding accent markup like [a^].
_RESPELLING = re.compile(r"\([^()]*\[[^\]]{1,3}\][^()]*\)")


def iter_dictd_entries(path: str | Path) -> Iterator[str]:
    """Yield the text of each entry of a dictd ``.dict`` / ``.dict.dz`` file.

    An entry starts at a line with no leading whitespace (the headword) and runs until the next
    such line; the ``00-database-*`` header entries are skipped. Source markers and cross-reference
    braces are removed; usage labels such as ``[Obs.]`` are kept.

    Parameters
    ----------
    path : str or pathlib.Path
        The dictionary file (gzip-compressed when it ends in ``.dz`` or ``.gz``).

    Yields
    ------
    str
        The cleaned text of one entry.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".dz" or path.suffix == ".gz" else open
    entry: list[str] = []
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line[:1] not in (" ", "\t", "\n", "") and entry:
                text = _clean_dictd(entry)
                if text:
                    yield text
                entry = []
            entry.append(line)
    if entry:
        text = _clean_dictd(entry)
        if text:
            yield text


def _clean_dictd(lines: list[str]) -> str:
    if lines[0].startswith("00-database") or lines[0].startswith("00database"):
        return ""
    text = _HEADWORD_PRON.sub(" ", lines[0].strip()) + " " + " ".join(line.strip() for line in lines[1:])
    text = _RESPELLING.sub(" ", _GCIDE_SOURCE.sub(" ", text))
    return _CROSSREF.sub("", text).strip()


def read_brown_file(path: str | Path) -> list[list[tuple[str, str]]]:
    """Sentences of one Brown corpus file in ``word/tag`` format.

    Parameters
    ----------
    path : str or pathlib.Path
        One corpus file (e.g. ``ca01``).

    Returns
    -------
    list of list of tuple
        ``[[(word, tag), ...], ...]``, one list per non-empty line; tokens without a tag are dropped.
    """
    sentences = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            pairs = [tok.rsplit("/", 1) for tok in line.split()]
            sent = [(w, t) for w, t in (p for p in pairs if len(p) == 2) if w]
            if sent:
                sentences.append(sent)
    return sentences


def simplify_brown_tag(tag: str) -> str:
    """Reduce a Brown tag to its core: drop the title/headline/cited/foreign markers.

    ``np-tl`` → ``np``, ``nn-hl`` → ``nn``, ``fw-in`` → ``fw``; compound tags such as ``ppss+bem``
    and the negation star (``do*``) are kept, since they are real distinctions.

    Parameters
    ----------
    tag : str
        A Brown tag (any case).

    Returns
    -------
    str
        The simplified, lower-case tag.
    """
    tag = tag.lower()
    if tag.startswith("fw-"):
        return "fw"
    while True:  # markers can stack: nn-tl-hl
        m = re.match(r"^(.+?)-(?:tl|hl|nc)$", tag)
        if m is None:
            return tag
        tag = m.group(1)


def read_wiki_summaries(path: str | Path) -> list[str]:
    """The lead-section texts of ``summaries_en-us.json`` (``{title: {title, extract}}``).

    Parameters
    ----------
    path : str or pathlib.Path
        The JSON file.

    Returns
    -------
    list of str
        The non-empty extracts, in file order.
    """
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return [v["extract"] for v in data.values() if isinstance(v, dict) and v.get("extract")]


def read_nlp_corpus_file(path: str | Path) -> list[str]:
    """One ``builds/doc-N.json`` file of npm ``nlp-corpus``: a JSON list of sentences.

    Parameters
    ----------
    path : str or pathlib.Path
        The JSON file.

    Returns
    -------
    list of str
        The non-blank sentences.
    """
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return [s for s in data if isinstance(s, str) and s.strip()]


def read_wikipedia_xml(path: str | Path) -> list[str]:
    """Plain text of the articles in a (bz2) MediaWiki XML dump, markup removed with gensim's filter.

    Only main-namespace pages are read; redirects are skipped.

    Parameters
    ----------
    path : str or pathlib.Path
        The dump (bz2-compressed when it ends in ``.bz2``).

    Returns
    -------
    list of str
        One text per article.
    """
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    path = Path(path)
    opener = bz2.open if path.suffix == ".bz2" else open
    texts = []
    with opener(path, "rb") as fh:
        for _title, text, _pageid in extract_pages(fh, filter_namespaces=("0",)):
            if text and not text.lstrip().lower().startswith("#redirect"):
                texts.append(filter_wiki(text))
    return texts

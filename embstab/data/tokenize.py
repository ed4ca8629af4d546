"""Tokenisation shared by corpora and downstream tasks (one rule everywhere keeps vocabularies aligned)."""

from __future__ import annotations

import re

__all__ = ["tokenize"]

# Words with inner apostrophes/hyphens stay whole ("don't", "well-known"); numbers are kept because
# dictionary and news text use them as content. Punctuation is dropped.
_TOKEN = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*", re.UNICODE)


def tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Split ``text`` into word tokens.

    Parameters
    ----------
    text : str
    lowercase : bool
        Lower-case first (the default, as for all embstab corpora and tasks).

    Returns
    -------
    list of str
    """
    if lowercase:
        text = text.lower()
    return [t.replace("’", "'") for t in _TOKEN.findall(text)]

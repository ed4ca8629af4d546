"""Word pieces of word-tokenised text, and the inputs a BERT encoder reads.

Text reaches the models as words (the lower-cased tokens of :func:`embstab.data.tokenize`, the
same units the word embeddings and tasks use). Each distinct word is split into pieces once and
cached; an input is ``[CLS] pieces… [SEP]``. Because the split of a word does not depend on its
neighbours, every occurrence of a word maps to a known span of positions, which is what word-type
averaging needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from embstab.contextual.errors import EmptyTextError, SequenceLengthError
from embstab.data.tokenize import tokenize

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["WordPieces", "as_word_lists", "check_length", "pad_inputs"]


class WordPieces:
    """Cached ``word → piece ids`` for one tokenizer (no special tokens).

    Parameters
    ----------
    tokenizer : tokenizers.Tokenizer
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.unk = tokenizer.token_to_id("[UNK]")
        self._cache: dict[str, np.ndarray] = {}

    def add(self, words: Iterable[str]) -> None:
        """Split every new word of ``words`` (one batched call into the Rust tokenizer).

        Parameters
        ----------
        words : iterable of str
            Words already cached are skipped.
        """
        new = sorted({w for w in words if w not in self._cache})
        if not new:
            return
        for word, enc in zip(new, self.tokenizer.encode_batch(new, add_special_tokens=False)):
            self._cache[word] = np.asarray(enc.ids, dtype=np.int64)

    def __getitem__(self, word: str) -> np.ndarray:
        if word not in self._cache:
            self.add([word])
        return self._cache[word]

    def is_unknown(self, word: str) -> bool:
        """Whether the word has no pieces, or only ``[UNK]`` (the model cannot see it).

        Parameters
        ----------
        word : str

        Returns
        -------
        bool
        """
        ids = self[word]
        return len(ids) == 0 or bool(np.all(ids == self.unk))

    def encode(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Piece ids of a word list and the start offset of each word's span (length ``n + 1``).

        Parameters
        ----------
        words : sequence of str
            The ``n`` words of one text.

        Returns
        -------
        ids : numpy.ndarray
            int64 piece ids of all words in order, without special tokens.
        starts : numpy.ndarray
            int64 array of length ``n + 1``: word ``i`` is ``ids[starts[i]:starts[i + 1]]``.
        """
        self.add(words)
        parts = [self._cache[w] for w in words]
        starts = np.zeros(len(parts) + 1, dtype=np.int64)
        if parts:
            np.cumsum([len(p) for p in parts], out=starts[1:])
        return (np.concatenate(parts) if parts else np.zeros(0, np.int64)), starts


def as_word_lists(texts: Sequence[str] | Sequence[Sequence[str]], allow_empty: bool = False) -> list[list[str]]:
    """Strings are tokenised with :func:`embstab.data.tokenize`; token lists are kept.

    Parameters
    ----------
    texts : sequence of str, or sequence of token lists
    allow_empty : bool
        Let a text have no word (it becomes an empty list).

    Returns
    -------
    list of list of str
        One word list per text.

    Raises
    ------
    EmptyTextError
        If a text has no word and ``allow_empty`` is false; the message gives its 1-based position.
    """
    out: list[list[str]] = []
    for i, text in enumerate(texts):
        words = tokenize(text) if isinstance(text, str) else [str(w) for w in text]
        if not words and not allow_empty:
            raise EmptyTextError(f"text {i + 1} (line {i + 1}) is empty: remove empty lines, or pass "
                                 "allow_empty=True to give it the features of an empty input")
        out.append(words)
    return out


def check_length(n_pieces: int, limit: int, position: int, truncate: bool) -> int:
    """Pieces of a text to keep: all, or ``limit - 2`` when truncating; raise when it does not fit.

    Parameters
    ----------
    n_pieces : int
        Pieces of the text, without special tokens.
    limit : int
        The model's position limit, ``[CLS]`` and ``[SEP]`` included.
    position : int
        0-based index of the text, for the error message.
    truncate : bool
        Keep the first ``limit - 2`` pieces of an over-long text instead of raising.

    Returns
    -------
    int
        The number of pieces to keep.

    Raises
    ------
    SequenceLengthError
        If the text does not fit and ``truncate`` is false.
    """
    if n_pieces + 2 <= limit:
        return n_pieces
    if truncate:
        return limit - 2
    raise SequenceLengthError(f"text {position + 1} has {n_pieces} word pieces, more than the model's limit of "
                              f"{limit - 2} (+[CLS] and [SEP]); shorten it or truncate (truncate=True, "
                              "--truncate)")


def pad_inputs(rows: Sequence[np.ndarray], cls: int, sep: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[CLS] row [SEP]`` for each row, right-padded: ``(input_ids, attention_mask)``.

    Parameters
    ----------
    rows : sequence of numpy.ndarray
        Piece ids of each text, without special tokens; at least one row.
    cls, sep, pad : int
        Ids of ``[CLS]``, ``[SEP]`` and ``[PAD]``.

    Returns
    -------
    input_ids, attention_mask : torch.Tensor
        int64 tensors of shape (len(rows), longest row + 2); the mask is 1 on real tokens.
    """
    width = max(len(r) for r in rows) + 2
    ids = np.full((len(rows), width), pad, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, 0], ids[i, 1:len(r) + 1], ids[i, len(r) + 1] = cls, r, sep
        mask[i, :len(r) + 2] = 1
    return torch.from_numpy(ids), torch.from_numpy(mask)

"""Turn an embedding plus a task vocabulary into a frozen lookup table and index sequences."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from embstab.embedding import Embedding

__all__ = ["TaskVocabulary", "lookup_table", "OOV_RANGE"]

#: Out-of-vocabulary words get U(−0.25, 0.25) vectors, as in the reference sentence classifier.
OOV_RANGE = 0.25


class TaskVocabulary:
    """Every word of a task's splits, index 0 reserved for padding; order = first occurrence.

    Parameters
    ----------
    *splits : sequence of sequence of str
        The token sequences of each split (train, dev, test...).
    """

    def __init__(self, *splits: Sequence[Sequence[str]]) -> None:
        self.words: list[str] = ["<pad>"]
        self.index: dict[str, int] = {"<pad>": 0}
        for split in splits:
            for seq in split:
                for w in seq:
                    if w not in self.index:
                        self.index[w] = len(self.words)
                        self.words.append(w)

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, seqs: Sequence[Sequence[str]], max_len: int | None = None) -> list[np.ndarray]:
        """Index arrays (truncated to ``max_len`` tokens when given).

        Parameters
        ----------
        seqs : sequence of sequence of str
            Token sequences whose words are all in the vocabulary.
        max_len : int, optional
            Keep at most this many tokens of each sequence (None or 0: all of them).

        Returns
        -------
        list of numpy.ndarray
            One int64 index array per sequence.

        Raises
        ------
        KeyError
            A word that is not in the vocabulary.
        """
        out = []
        for seq in seqs:
            ids = np.fromiter((self.index[w] for w in seq), dtype=np.int64, count=len(seq))
            out.append(ids[:max_len] if max_len else ids)
        return out


def lookup_table(emb: Embedding, vocab: TaskVocabulary, seed: int) -> tuple[torch.Tensor, float]:
    """Frozen (len(vocab), dim) float32 table: embedding rows for known words, random for the rest.

    The random rows come from a ``torch.Generator`` seeded with the *model* seed and are drawn for
    every task word before the known rows overwrite theirs, so two embeddings of equal dimension
    give the same vector to a word that both lack: in a same-seed pair only the embedding differs.

    Parameters
    ----------
    emb : Embedding
        The embedding whose rows fill the table.
    vocab : TaskVocabulary
        The task's words.
    seed : int
        The model seed, which draws the rows of words the embedding lacks (uniform in
        ``[-OOV_RANGE, OOV_RANGE)``; the padding row is zero).

    Returns
    -------
    table : torch.Tensor
    coverage : float
        Fraction of task words (excluding padding) found in the embedding.
    """
    table = _random_rows(int(seed), len(vocab), emb.dim).clone()
    table[0] = 0.0  # padding: excluded from means and masked in sequence models
    rows = [(i, emb.index(w)) for i, w in enumerate(vocab.words) if i > 0 and w in emb]
    if rows:
        task_idx, emb_idx = (np.asarray(x, dtype=np.int64) for x in zip(*rows))
        table[torch.as_tensor(task_idx)] = torch.as_tensor(np.asarray(emb.vectors, dtype=np.float32)[emb_idx])
    return table, len(rows) / max(len(vocab) - 1, 1)


@functools.lru_cache(maxsize=4)
def _random_rows(seed: int, n: int, dim: int) -> torch.Tensor:
    # the same draw for every embedding of one dimension and model seed: a study trains a model on
    # a dozen of them in a row, so it is drawn once (callers copy it before writing)
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(n, dim, generator=gen) * 2 - 1) * OOV_RANGE

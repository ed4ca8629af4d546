"""Downstream models on frozen embeddings: sentence classifiers and sequence taggers."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = ["LinearBoW", "MeanMLP", "KimCNN", "LSTMClassifier", "BiLSTMTagger", "CRF"]


class LinearBoW(nn.Module):
    """Mean of the word vectors → one linear layer (the reference "la" model).

    It takes precomputed mean vectors: with frozen embeddings the mean never changes, so it is
    computed once per dataset instead of once per batch and epoch. Unlike the reference, padding
    does not enter the mean (there it depends on the batch's longest sentence, i.e. on batching).

    Parameters
    ----------
    dim : int
        Dimension of the mean vectors.
    n_classes : int
        Number of classes.
    """

    def __init__(self, dim: int, n_classes: int) -> None:
        super().__init__()
        self.out = nn.Linear(dim, n_classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Class scores of precomputed mean vectors.

        Parameters
        ----------
        features : torch.Tensor
            ``(batch, dim)`` float32 mean word vectors of the sentences.

        Returns
        -------
        torch.Tensor
            ``(batch, n_classes)`` class scores (logits).
        """
        return self.out(features)


class MeanMLP(nn.Module):
    """Mean of the word vectors → one hidden ReLU layer with dropout → linear.

    Like :class:`LinearBoW` it takes the precomputed means; the hidden layer lets it use features
    that are not linearly separable (e.g. frozen contextual sentence vectors).

    Parameters
    ----------
    dim : int
        Dimension of the mean vectors.
    n_classes : int
        Number of classes.
    hidden : int, default 256
        Width of the hidden layer.
    dropout : float, default 0.1
        Dropout after the hidden layer.
    """

    def __init__(self, dim: int, n_classes: int, hidden: int = 256, dropout: float = 0.1) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, n_classes))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Class scores of precomputed mean vectors.

        Parameters
        ----------
        features : torch.Tensor
            ``(batch, dim)`` float32 mean word vectors of the sentences.

        Returns
        -------
        torch.Tensor
            ``(batch, n_classes)`` class scores (logits).
        """
        return self.net(features)


class KimCNN(nn.Module):
    """Kim (2014): convolutions of widths 3/4/5 (100 filters each), max-over-time, dropout, linear.

    Parameters
    ----------
    table : torch.Tensor
        The frozen ``(vocabulary, dim)`` lookup table; row 0 is padding.
    n_classes : int
        Number of classes.
    widths : tuple of int, default (3, 4, 5)
        Convolution widths.
    filters : int, default 100
        Filters per width.
    dropout : float, default 0.5
        Dropout before the output layer.
    """

    def __init__(self, table: torch.Tensor, n_classes: int, widths: tuple[int, ...] = (3, 4, 5),
                 filters: int = 100, dropout: float = 0.5) -> None:
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(table, freeze=True, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(table.shape[1], filters, w) for w in widths)
        self.min_len = max(widths)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(filters * len(widths), n_classes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Class scores of a batch of sentences (shorter than the widest filter: padded).

        Parameters
        ----------
        ids : torch.Tensor
            ``(batch, length)`` int64 word indices, right-padded with 0.
        lengths : torch.Tensor
            ``(batch,)`` number of real tokens per sentence (unused: padding rows are zero).

        Returns
        -------
        torch.Tensor
            ``(batch, n_classes)`` class scores (logits).
        """
        if ids.shape[1] < self.min_len:  # short batches are padded up to the widest filter
            ids = nn.functional.pad(ids, (0, self.min_len - ids.shape[1]))
        x = self.emb(ids).transpose(1, 2)
        pooled = [torch.relu(conv(x)).max(dim=2).values for conv in self.convs]
        return self.out(self.drop(torch.cat(pooled, dim=1)))


class LSTMClassifier(nn.Module):
    """LSTM over the word vectors; the last hidden state of the top layer → linear.

    Parameters
    ----------
    table : torch.Tensor
        The frozen ``(vocabulary, dim)`` lookup table; row 0 is padding.
    n_classes : int
        Number of classes.
    hidden : int, default 128
        LSTM hidden size.
    layers : int, default 2
        Stacked LSTM layers.
    dropout : float, default 0.3
        Dropout between the LSTM layers and before the output layer.
    """

    def __init__(self, table: torch.Tensor, n_classes: int, hidden: int = 128, layers: int = 2,
                 dropout: float = 0.3) -> None:
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(table, freeze=True, padding_idx=0)
        self.lstm = nn.LSTM(table.shape[1], hidden, num_layers=layers, batch_first=True,
                            dropout=dropout if layers > 1 else 0.0)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, n_classes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Class scores of a batch of sentences (padding is packed away).

        Parameters
        ----------
        ids : torch.Tensor
            ``(batch, length)`` int64 word indices, right-padded with 0.
        lengths : torch.Tensor
            ``(batch,)`` number of real tokens per sentence.

        Returns
        -------
        torch.Tensor
            ``(batch, n_classes)`` class scores (logits).
        """
        packed = pack_padded_sequence(self.emb(ids), lengths.clamp(min=1).cpu(), batch_first=True,
                                      enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return self.out(self.drop(h[-1]))


class CRF(nn.Module):
    """Linear-chain conditional random field: transition scores, forward algorithm, Viterbi.

    Parameters
    ----------
    n_tags : int
        Number of tags.
    """

    def __init__(self, n_tags: int) -> None:
        super().__init__()
        self.start = nn.Parameter(torch.zeros(n_tags))
        self.end = nn.Parameter(torch.zeros(n_tags))
        self.trans = nn.Parameter(torch.zeros(n_tags, n_tags))  # trans[i, j]: score of tag i → tag j

    def neg_log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Sum over the batch of −log p(tags | emissions); ``mask`` marks real tokens (left-aligned).

        Parameters
        ----------
        emissions : torch.Tensor
            ``(batch, length, n_tags)`` per-token tag scores.
        tags : torch.Tensor
            ``(batch, length)`` int64 gold tags.

        mask : torch.Tensor
            ``(batch, length)`` bool, True at real tokens; every sentence has at least its first one.

        Returns
        -------
        torch.Tensor
            A scalar: the summed negative log-likelihood.
        """
        batch, steps, _ = emissions.shape
        maskf = mask.float()
        ar = torch.arange(batch)
        score = self.start[tags[:, 0]] + emissions[ar, 0, tags[:, 0]]
        for t in range(1, steps):
            step = self.trans[tags[:, t - 1], tags[:, t]] + emissions[ar, t, tags[:, t]]
            score = score + step * maskf[:, t]
        last = tags[ar, mask.sum(1) - 1]
        score = score + self.end[last]
        alpha = self.start + emissions[:, 0]
        for t in range(1, steps):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.trans + emissions[:, t].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, t].unsqueeze(1), nxt, alpha)
        log_z = torch.logsumexp(alpha + self.end, dim=1)
        return (log_z - score).sum()

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Viterbi: the best tag sequence per sentence (padding positions hold 0).

        Parameters
        ----------
        emissions : torch.Tensor
            ``(batch, length, n_tags)`` per-token tag scores.

        mask : torch.Tensor
            ``(batch, length)`` bool, True at real tokens; every sentence has at least its first one.

        Returns
        -------
        torch.Tensor
            ``(batch, length)`` int64 tags.
        """
        batch, steps, n = emissions.shape
        score = self.start + emissions[:, 0]
        back = []
        for t in range(1, steps):
            cand = score.unsqueeze(2) + self.trans
            best, idx = cand.max(dim=1)
            nxt = best + emissions[:, t]
            score = torch.where(mask[:, t].unsqueeze(1), nxt, score)
            back.append(torch.where(mask[:, t].unsqueeze(1), idx, torch.arange(n).expand(batch, n)))
        score = score + self.end
        best_last = score.argmax(dim=1)
        path = [best_last]
        for idx in reversed(back):
            best_last = idx.gather(1, best_last.unsqueeze(1)).squeeze(1)
            path.append(best_last)
        out = torch.stack(list(reversed(path)), dim=1)
        return out * mask.long()


class BiLSTMTagger(nn.Module):
    """Frozen vectors → trainable Linear(d, d) ("relearn") → 1-layer BiLSTM → per-token scores [→ CRF].

    As in the reference NER tagger (flair ``SequenceTagger``, hidden 256, no CRF); ``crf=True``
    adds a CRF output layer.

    Parameters
    ----------
    table : torch.Tensor
        The frozen ``(vocabulary, dim)`` lookup table; row 0 is padding.
    n_tags : int
        Number of tags.
    hidden : int, default 256
        LSTM hidden size per direction.
    dropout : float, default 0.5
        Dropout after the relearn layer and after the LSTM.
    crf : bool, default False
        Add a CRF output layer.
    """

    def __init__(self, table: torch.Tensor, n_tags: int, hidden: int = 256, dropout: float = 0.5,
                 crf: bool = False) -> None:
        super().__init__()
        dim = table.shape[1]
        self.emb = nn.Embedding.from_pretrained(table, freeze=True, padding_idx=0)
        self.relearn = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, n_tags)
        self.crf = CRF(n_tags) if crf else None

    def emissions(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Per-token tag scores.

        Parameters
        ----------
        ids : torch.Tensor
            ``(batch, length)`` int64 word indices, right-padded with 0.
        lengths : torch.Tensor
            ``(batch,)`` number of real tokens per sentence.

        Returns
        -------
        torch.Tensor
            ``(batch, length, n_tags)`` tag scores.
        """
        x = self.drop(self.relearn(self.emb(ids)))
        packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = pad_packed_sequence(h, batch_first=True, total_length=ids.shape[1])
        return self.out(self.drop(h))

    def loss(self, ids: torch.Tensor, lengths: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        """Training loss of a batch: the CRF's negative log-likelihood per sentence, or else the
        cross-entropy over real tokens.

        Parameters
        ----------
        ids : torch.Tensor
            ``(batch, length)`` int64 word indices, right-padded with 0.
        lengths : torch.Tensor
            ``(batch,)`` number of real tokens per sentence.
        tags : torch.Tensor
            ``(batch, length)`` int64 gold tags.

        Returns
        -------
        torch.Tensor
            A scalar loss.
        """
        mask = ids != 0
        em = self.emissions(ids, lengths)
        if self.crf is not None:
            return self.crf.neg_log_likelihood(em, tags, mask) / ids.shape[0]
        return nn.functional.cross_entropy(em[mask], tags[mask])

    def predict(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Predicted tags (Viterbi with a CRF, otherwise the best tag per token).

        Parameters
        ----------
        ids : torch.Tensor
            ``(batch, length)`` int64 word indices, right-padded with 0.
        lengths : torch.Tensor
            ``(batch,)`` number of real tokens per sentence.

        Returns
        -------
        torch.Tensor
            ``(batch, length)`` int64 tags, 0 at padding positions.
        """
        mask = ids != 0
        em = self.emissions(ids, lengths)
        if self.crf is not None:
            return self.crf.decode(em, mask)
        return em.argmax(dim=2) * mask.long()

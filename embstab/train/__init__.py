"""Train word embeddings on a tokenised corpus, deterministically under a seed.

``train_embedding(docs, algo=...)`` returns an :class:`embstab.Embedding` in frequency order with
counts and the training settings in ``metadata``. Algorithms: word2vec CBOW/skip-gram and fastText
(gensim 4.4), GloVe and PPMI matrix completion (torch).

Determinism: the same ``docs``, ``seed`` and settings give bit-identical vectors. For gensim this
needs ``workers=1`` (the default here; more workers make the update order depend on thread
scheduling) and a hash independent of ``PYTHONHASHSEED`` (set here). The torch trainers use a local
``torch.Generator`` and never reseed global RNGs; they are reproducible for a fixed torch thread
count.
"""

from __future__ import annotations

from embstab.train.api import ALGOS, train_embedding, train_pair

__all__ = ["ALGOS", "train_embedding", "train_pair"]

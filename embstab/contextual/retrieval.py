"""Contextual models on the retrieval tasks: each query and document becomes one sentence vector.

:func:`text_encoder` turns a model into the text-to-vector function the retrieval tasks of
:mod:`embstab.downstream.retrieval` accept in place of a word embedding, so
:func:`embstab.downstream.disagreement` searches with the model's sentence features (its own
pipeline: tokenizer on the raw text, pooling and normalisation as the model declares; long
documents are cut at its length limit, as its users' texts are).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from embstab.contextual.features import sentence_features
from embstab.contextual.model import ContextualModel
from embstab.downstream.api import DisagreementResult, disagreement
from embstab.downstream.retrieval import RetrievalData
from embstab.errors import ShapeError

__all__ = ["text_encoder", "contextual_retrieval_disagreement"]


def text_encoder(model: ContextualModel, *, layer: int = -1, pooling: str | None = None,
                 normalize: bool | None = None, batch_size: int = 32, threads: int | None = 1,
                 progress: bool = False) -> Callable[[list[str]], np.ndarray]:
    """A function from a list of texts to the model's sentence vectors, one row per text.

    Parameters
    ----------
    model : ContextualModel
        The model whose features rank the documents.
    layer, pooling, normalize, batch_size, threads, progress
        As for :func:`~embstab.contextual.sentence_features` (texts longer than the model's limit
        are truncated, and an empty text reads ``[CLS] [SEP]``).

    Returns
    -------
    callable
        ``encode(texts) -> numpy.ndarray`` of shape ``(len(texts), hidden)``, float32.

    Raises
    ------
    ShapeError
        If ``model`` is not a :class:`ContextualModel`.
    """
    if not isinstance(model, ContextualModel):
        raise ShapeError(f"text_encoder needs a ContextualModel, got {type(model).__name__}")

    def encode(texts: list[str]) -> np.ndarray:
        return sentence_features(model, list(texts), layer=layer, pooling=pooling, normalize=normalize, truncate=True,
                                 batch_size=batch_size, allow_empty=True, threads=threads, progress=progress)

    encode.__name__ = f"text_encoder({getattr(model, 'name', 'model')})"
    return encode


def contextual_retrieval_disagreement(old: ContextualModel, new: ContextualModel,
                                      task: str | RetrievalData = "wiki_retrieval", *, layer: int = -1,
                                      pooling: str | None = None, normalize: bool | None = None,
                                      batch_size: int = 32, threads: int | None = 1, progress: bool = False,
                                      **kwargs: Any) -> DisagreementResult:
    """The queries whose top-k documents change when the old model's sentence vectors give way to the new one's.

    Parameters
    ----------
    old, new : ContextualModel
        The two models, old first.
    task : str or RetrievalData, default "wiki_retrieval"
        A retrieval task of :data:`embstab.downstream.TASKS`, or task data.
    layer, pooling, normalize, batch_size, threads, progress
        As for :func:`text_encoder`.
    **kwargs
        Passed to :func:`embstab.downstream.disagreement` (``k``, ``precision``, ``limit``,
        ``split_seed``, ``keep_predictions``...).

    Returns
    -------
    DisagreementResult
        As for any retrieval task (model ``search``).
    """
    options = dict(layer=layer, pooling=pooling, normalize=normalize, batch_size=batch_size, threads=threads,
                   progress=progress)
    return disagreement(text_encoder(old, **options), text_encoder(new, **options), task, "search", **kwargs)

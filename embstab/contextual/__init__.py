"""Contextual embeddings: BERT models pretrained on two corpus versions, MiniLM, features, disagreement.

The path is the one word embeddings take, with a transformer in front:

- models: :func:`build_model` (a ``transformers`` BERT masked-LM of a named :data:`SIZES` tier),
  :func:`train_mlm` (pretraining or fine-tuning), :func:`pretrain_pair` (two corpus versions from
  :func:`embstab.data.make_corpus_pair`, one tokenizer, same seed; plus a seed-only baseline),
  :func:`load_model` (the packaged ``minilm_l6``, a saved folder, or ``hub:org/name`` once
  :func:`download_model` has fetched it from a Hugging Face hub: loading is always offline),
  :func:`quantize_weights` (weights through :func:`embstab.lowprec.quantize`);
- features: :func:`word_type_embedding` (an :class:`~embstab.Embedding` every measure and
  :func:`embstab.compare` accept), :func:`sentence_features` and :func:`token_features`;
- downstream: :func:`contextual_disagreement` / :func:`feature_disagreement` (frozen-feature
  classifiers) and :func:`token_feature_disagreement` (frozen per-word features into the
  ``bilstm`` taggers, ``brown_pos``), all giving :class:`~embstab.downstream.DisagreementResult`;
  :func:`compress_features`.

``transformers`` is imported only when a network is built or loaded.
"""

from __future__ import annotations

from embstab.contextual.compression import compress_features
from embstab.contextual.downstream import (FEATURE_CLASSIFIERS, TOKEN_TAGGERS, contextual_disagreement,
                                           feature_disagreement, task_features, task_token_features,
                                           token_feature_disagreement)
from embstab.contextual.errors import (EmptyTextError, HubNameError, ModelNotDownloadedError, SequenceLengthError,
                                       UnsafeWeightsError)
from embstab.contextual.features import POOLINGS, SUBWORDS, sentence_features, token_features, word_type_embedding
from embstab.contextual.hub import download_model
from embstab.contextual.model import SIZES, ContextualModel, ModelSize, build_model, load_model_dir
from embstab.contextual.pretrain import PretrainPair, PretrainResult, pretrain_pair, split_heldout, train_mlm
from embstab.contextual.pretrained import MODELS, load_model, minilm_l6
from embstab.contextual.quantized import quantize_weights
from embstab.contextual.tokenizer import load_tokenizer, train_wordpiece

__all__ = [
    "FEATURE_CLASSIFIERS", "MODELS", "POOLINGS", "SIZES", "SUBWORDS", "ContextualModel", "EmptyTextError",
    "HubNameError", "ModelNotDownloadedError", "ModelSize", "PretrainPair", "PretrainResult", "SequenceLengthError",
    "UnsafeWeightsError", "build_model", "compress_features", "download_model",
    "contextual_disagreement", "feature_disagreement", "load_model", "load_model_dir", "load_tokenizer", "minilm_l6",
    "pretrain_pair", "quantize_weights", "sentence_features", "split_heldout", "task_features",
    "task_token_features", "token_feature_disagreement", "token_features", "TOKEN_TAGGERS", "train_mlm",
    "train_wordpiece", "word_type_embedding",
]

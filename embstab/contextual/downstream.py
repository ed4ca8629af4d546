"""Frozen-feature downstream disagreement for contextual models.

Each task example becomes one sentence vector (:func:`~embstab.contextual.sentence_features`).
The vectors of one model are wrapped as an :class:`~embstab.Embedding` whose "words" are example
ids, and each example as a one-token text of its own id; :func:`embstab.downstream.disagreement`
then runs unchanged: the mean of one vector is that vector, so the ``linear`` model is a linear
classifier on the features and ``mlp`` a one-hidden-layer network on them, trained with the same
seed, split, settings and dev-set selection as for word embeddings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from embstab.contextual.features import sentence_features
from embstab.contextual.model import ContextualModel
from embstab.data.tasks import ClassificationData
from embstab.downstream.api import DisagreementResult, disagreement, load_task
from embstab.downstream.catalog import MODELS
from embstab.embedding import Embedding
from embstab.errors import EmbstabError, ShapeError, lookup

__all__ = ["FEATURE_CLASSIFIERS", "task_features", "feature_disagreement", "contextual_disagreement",
           "features_as_task"]

#: Downstream models that read one vector per example (the others read word sequences).
FEATURE_CLASSIFIERS = ("linear", "mlp")


def _classification(task: str | ClassificationData, split_seed: int, limit: int | None) -> ClassificationData:
    data = load_task(task, split_seed, limit) if isinstance(task, str) else task
    if not isinstance(data, ClassificationData):
        raise EmbstabError(f"frozen sentence features serve classification tasks; {getattr(data, 'name', task)!r} "
                           "is not one (choose rt_sentiment, rt_subjectivity or bbc_topic)")
    return data


def _texts(data: ClassificationData) -> list[list[str]]:
    return [*data.train_x, *data.dev_x, *data.test_x]


def task_features(model: ContextualModel, task: str | ClassificationData = "rt_sentiment", *, split_seed: int = 0,
                  limit: int | None = None, layer: int = -1, pooling: str = "mean", batch_size: int = 32,
                  threads: int | None = 1, progress: bool = False) -> np.ndarray:
    """Sentence features of every example of a classification task: train, then dev, then test rows.

    Texts longer than the model's limit are truncated (BBC articles run to thousands of pieces,
    and a classifier reads their opening as a reader would); an empty example gets the features of
    ``[CLS] [SEP]``. ``settings["truncated"]`` of the disagreement result reports how many.

    Parameters
    ----------
    model : ContextualModel
    task : str or ClassificationData
        ``"rt_sentiment"``, ``"rt_subjectivity"``, ``"bbc_topic"``, or task data.
    split_seed, limit
        As for :func:`embstab.downstream.load_task`.
    layer, pooling, batch_size, threads, progress
        As for :func:`~embstab.contextual.sentence_features`.

    Returns
    -------
    numpy.ndarray of shape (n_train + n_dev + n_test, hidden), float32
    """
    data = _classification(task, split_seed, limit)
    return sentence_features(model, _texts(data), layer=layer, pooling=pooling, batch_size=batch_size,
                             truncate=True, allow_empty=True, threads=threads, progress=progress)


def features_as_task(data: ClassificationData, features: np.ndarray, label: str = "features"
                     ) -> tuple[ClassificationData, Embedding]:
    """Task data whose examples are one id each, and the embedding mapping each id to its features.

    Raises
    ------
    ShapeError
        If ``features`` does not have one row per example.
    """
    n = len(data.train_x) + len(data.dev_x) + len(data.test_x)
    features = np.asarray(features)
    if features.ndim != 2 or features.shape[0] != n:
        raise ShapeError(f"features {label} must have one row per example of task {data.name!r} ({n}), "
                         f"got shape {features.shape}")
    ids = [f"#{i}" for i in range(n)]
    a, b = len(data.train_x), len(data.train_x) + len(data.dev_x)
    one = lambda lo, hi: [[ids[i]] for i in range(lo, hi)]  # noqa: E731
    wrapped = ClassificationData(data.name, data.labels, one(0, a), data.train_y, one(a, b), data.dev_y,
                                 one(b, n), data.test_y, {**data.info, "features": True})
    return wrapped, Embedding(ids, features, name=label)


def feature_disagreement(features_a: np.ndarray, features_b: np.ndarray, task: str | ClassificationData = "rt_sentiment",
                         classifier: str = "linear", seed: int = 0, *, seed_b: int | None = None,
                         split_seed: int = 0, limit: int | None = None, progress: bool = False,
                         keep_predictions: bool = False, **kwargs: Any) -> DisagreementResult:
    """Train the same classifier on two feature matrices of one task and count flipped test predictions.

    Parameters
    ----------
    features_a, features_b : numpy.ndarray
        One row per example in :func:`task_features` order (any widths).
    task : str or ClassificationData
        Must be the task (and ``split_seed``/``limit``) the features were extracted for.
    classifier : {"linear", "mlp"}
    seed, seed_b
        Classifier seeds (``seed_b`` defaults to ``seed``: only the features differ).
    split_seed, limit, progress, keep_predictions
        As for :func:`embstab.downstream.disagreement`.
    **kwargs
        Training settings (``epochs``, ``lr``, ``batch_size``, ``hidden`` for mlp …).

    Returns
    -------
    DisagreementResult
        ``settings["features"]`` is true; dims are the feature widths.
    """
    lookup({m: None for m in FEATURE_CLASSIFIERS}, classifier, "feature classifier",
           f"{classifier!r} reads word sequences" if classifier in MODELS else "")
    data = _classification(task, split_seed, limit)
    wrapped, emb_a = features_as_task(data, features_a, "A")
    _, emb_b = features_as_task(data, features_b, "B")
    res = disagreement(emb_a, emb_b, wrapped, classifier, seed, seed_b=seed_b, split_seed=split_seed,
                       progress=progress, keep_predictions=keep_predictions, min_coverage=0.0, **kwargs)
    res.settings.update({"limit": limit, "features": True})
    return res


def contextual_disagreement(model_a: ContextualModel, model_b: ContextualModel,
                            task: str | ClassificationData = "rt_sentiment", classifier: str = "linear",
                            seed: int = 0, *, seed_b: int | None = None, split_seed: int = 0,
                            limit: int | None = None, layer: int = -1, pooling: str = "mean", batch_size: int = 32,
                            threads: int | None = 1, progress: bool = False, **kwargs: Any) -> DisagreementResult:
    """Frozen-feature disagreement of two contextual models on a classification task.

    Features of both models are extracted (:func:`task_features`), then
    :func:`feature_disagreement` trains one classifier per model with the same seed. With
    ``model_b = model_a`` and another ``seed_b`` it measures the classifier-seed floor.

    Parameters
    ----------
    model_a, model_b : ContextualModel
        E.g. the models of corpus versions A and B, or a model and its quantized copy.
    task, classifier, seed, seed_b, split_seed, limit
        As for :func:`feature_disagreement`.
    layer, pooling, batch_size, threads
        Feature extraction settings.
    progress : bool
    **kwargs
        Classifier training settings.

    Returns
    -------
    DisagreementResult
        ``settings`` adds the model names, layer and pooling.
    """
    data = _classification(task, split_seed, limit)
    extract = dict(layer=layer, pooling=pooling, batch_size=batch_size, threads=threads, progress=progress)
    fa = task_features(model_a, data, **extract)
    fb = fa if model_b is model_a else task_features(model_b, data, **extract)
    res = feature_disagreement(fa, fb, data, classifier, seed, seed_b=seed_b, split_seed=split_seed,
                               progress=progress, **kwargs)
    res.settings["limit"] = limit
    res.settings.update({"model_a": model_a.name, "model_b": model_b.name, "layer": layer, "pooling": pooling})
    return res

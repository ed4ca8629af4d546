"""Frozen-feature downstream disagreement for contextual models.

Each task example becomes one sentence vector (:func:`~embstab.contextual.sentence_features`).
The vectors of one model are wrapped as an :class:`~embstab.Embedding` whose "words" are example
ids, and each example as a one-token text of its own id; :func:`embstab.downstream.disagreement`
then runs unchanged: the mean of one vector is that vector, so the ``linear`` model is a linear
classifier on the features and ``mlp`` a one-hidden-layer network on them, trained with the same
seed, split, settings and dev-set selection as for word embeddings.

Tagging (``brown_pos``) works the same way one level down: every word occurrence gets its own
contextual vector (:func:`~embstab.contextual.token_features`) and its own id, each sentence
becomes the sequence of its occurrence ids, and the existing ``bilstm``/``bilstm_crf`` taggers read
the frozen per-occurrence vectors where they would read word vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from embstab.contextual.features import sentence_features, token_features
from embstab.contextual.model import ContextualModel
from embstab.data.tasks import ClassificationData, TaggingData
from embstab.downstream.api import DisagreementResult, disagreement, load_task
from embstab.downstream.catalog import MODELS
from embstab.embedding import Embedding
from embstab.errors import EmbstabError, ShapeError, lookup
from embstab.pair import MISSING, unpack_pair

__all__ = ["FEATURE_CLASSIFIERS", "TOKEN_TAGGERS", "task_features", "feature_disagreement", "contextual_disagreement",
           "features_as_task", "task_token_features", "tokens_as_task", "token_feature_disagreement"]

#: Downstream models that read one vector per example (the others read word sequences).
FEATURE_CLASSIFIERS = ("linear", "mlp")

#: Taggers that read one frozen vector per word occurrence.
TOKEN_TAGGERS = tuple(m for m, (kind, _) in MODELS.items() if kind == "tagging")


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
    # task examples are token lists; the vectors stay unnormalised whatever the model's own pipeline,
    # as the contextual study has always read them, so its stored rows keep their meaning
    return sentence_features(model, _texts(data), layer=layer, pooling=pooling, normalize=False,
                             batch_size=batch_size, truncate=True, allow_empty=True, threads=threads,
                             progress=progress)


def features_as_task(data: ClassificationData, features: np.ndarray, label: str = "features"
                     ) -> tuple[ClassificationData, Embedding]:
    """Task data whose examples are one id each, and the embedding mapping each id to its features.

    This lets the downstream classifiers of :mod:`embstab.downstream` train on fixed feature rows:
    example ``i`` (train, then dev, then test) becomes the one-token text ``#i``.

    Parameters
    ----------
    data : ClassificationData
        The task the features were extracted for.
    features : numpy.ndarray of shape (n_examples, dim)
        One row per example, in train, dev, test order.
    label : str
        Name of the feature embedding, shown in messages.

    Returns
    -------
    ClassificationData
        The task with each example replaced by its id (``info["features"]`` is True).
    Embedding
        The ids and their feature rows.

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


def feature_disagreement(features_old: np.ndarray, features_new: np.ndarray,
                         task: str | ClassificationData = "rt_sentiment",
                         classifier: str = "linear", seed: int = 0, *, seed_b: int | None = None,
                         split_seed: int = 0, limit: int | None = None, progress: bool = False,
                         keep_predictions: bool = False, **kwargs: Any) -> DisagreementResult:
    """Train the same classifier on the old and the new features of one task; count flipped test predictions.

    Parameters
    ----------
    features_old, features_new : numpy.ndarray
        One row per example in :func:`task_features` order (any widths), the old model's first.
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
    note = ("" if classifier not in MODELS else f"{classifier!r} is a tagger, for brown_pos"
            if MODELS[classifier][0] == "tagging" else f"{classifier!r} reads word sequences")
    lookup({m: None for m in FEATURE_CLASSIFIERS}, classifier, "feature classifier", note)
    data = _classification(task, split_seed, limit)
    wrapped, emb_old = features_as_task(data, features_old, "old")
    _, emb_new = features_as_task(data, features_new, "new")
    res = disagreement(emb_old, emb_new, wrapped, classifier, seed, seed_b=seed_b, split_seed=split_seed,
                       progress=progress, keep_predictions=keep_predictions, min_coverage=0.0, **kwargs)
    res.settings.update({"limit": limit, "features": True})
    return res


def contextual_disagreement(old: ContextualModel, new: ContextualModel = MISSING,
                            task: str | ClassificationData | TaggingData = MISSING, classifier: str | None = MISSING,
                            seed: int = MISSING, *, seed_b: int | None = None, split_seed: int = 0,
                            limit: int | None = None, layer: int = -1, pooling: str = "mean", subword: str = "first",
                            batch_size: int = 32, threads: int | None = 1, progress: bool = False,
                            **kwargs: Any) -> DisagreementResult:
    """Frozen-feature disagreement of an old and a new contextual model on a classification or tagging task.

    Classification: sentence features of both models are extracted (:func:`task_features`), then
    :func:`feature_disagreement` trains one classifier per model with the same seed. Tagging
    (``brown_pos``): per-word features (:func:`task_token_features`), then
    :func:`token_feature_disagreement` trains one tagger per model. With ``new = old`` and
    another ``seed_b`` it measures the task-model seed floor.

    Parameters
    ----------
    old, new : ContextualModel
        E.g. the models of the old and the new corpus version, or a model and its quantized copy
        (old first; or one :class:`embstab.Pair` of both, with ``task`` second).
    task : str or ClassificationData or TaggingData
        ``rt_sentiment``, ``rt_subjectivity``, ``bbc_topic`` or ``brown_pos``, or task data.
    classifier : str, optional
        The task model: ``linear``/``mlp`` for classification (default ``linear``),
        ``bilstm``/``bilstm_crf`` for tagging (default ``bilstm``).
    seed, seed_b, split_seed, limit
        As for :func:`feature_disagreement` (``seed_b`` seeds the new model's task model; ``limit``
        counts sentences for tagging).
    layer, pooling, subword, batch_size, threads
        Feature extraction settings (``pooling`` for sentence features, ``subword`` for tokens).
    progress : bool
    **kwargs
        Task-model training settings.

    Returns
    -------
    DisagreementResult
        ``settings`` adds the model names, layer and pooling (or subword rule).
    """
    old, new, (task, classifier, seed) = unpack_pair(old, new, (task, classifier, seed), ("rt_sentiment", None, 0))
    data = load_task(task, split_seed, limit) if isinstance(task, str) else task
    if isinstance(data, TaggingData):
        extract = dict(layer=layer, subword=subword, batch_size=batch_size, threads=threads, progress=progress)
        fa = task_token_features(old, data, **extract)
        fb = fa if new is old else task_token_features(new, data, **extract)
        res = token_feature_disagreement(fa, fb, data, classifier or "bilstm", seed, seed_b=seed_b,
                                         split_seed=split_seed, progress=progress, **kwargs)
        res.settings.update({"limit": limit, "model_old": old.name, "model_new": new.name, "layer": layer,
                             "subword": subword})
        return res
    classifier = classifier or "linear"
    data = _classification(data, split_seed, limit)
    extract = dict(layer=layer, pooling=pooling, batch_size=batch_size, threads=threads, progress=progress)
    fa = task_features(old, data, **extract)
    fb = fa if new is old else task_features(new, data, **extract)
    res = feature_disagreement(fa, fb, data, classifier, seed, seed_b=seed_b, split_seed=split_seed,
                               progress=progress, **kwargs)
    res.settings["limit"] = limit
    res.settings.update({"model_old": old.name, "model_new": new.name, "layer": layer, "pooling": pooling})
    return res


def _tagging(task: str | TaggingData, split_seed: int, limit: int | None) -> TaggingData:
    data = load_task(task, split_seed, limit) if isinstance(task, str) else task
    if not isinstance(data, TaggingData):
        raise EmbstabError(f"per-word features serve tagging tasks; {getattr(data, 'name', task)!r} is not one "
                           "(choose brown_pos)")
    return data


def task_token_features(model: ContextualModel, task: str | TaggingData = "brown_pos", *, split_seed: int = 0,
                        limit: int | None = None, layer: int = -1, subword: str = "first", batch_size: int = 32,
                        threads: int | None = 1, progress: bool = False) -> list[np.ndarray]:
    """Per-word features of every sentence of a tagging task: train, then dev, then test sentences.

    Parameters
    ----------
    model : ContextualModel
    task : str or TaggingData
        ``"brown_pos"``, or tagging data.
    split_seed, limit
        As for :func:`embstab.downstream.load_task` (``limit`` counts sentences).
    layer, subword, batch_size, threads, progress
        As for :func:`~embstab.contextual.token_features`.

    Returns
    -------
    list of numpy.ndarray
        Per sentence, ``(n_words, hidden)`` float32.
    """
    data = _tagging(task, split_seed, limit)
    return token_features(model, [*data.train_x, *data.dev_x, *data.test_x], layer=layer, subword=subword,
                          batch_size=batch_size, threads=threads, progress=progress)


def tokens_as_task(data: TaggingData, features: Sequence[np.ndarray], label: str = "features"
                   ) -> tuple[TaggingData, Embedding]:
    """Tagging data whose words are occurrence ids, and the embedding mapping each id to its vector.

    Occurrence ``#k`` is the ``k``-th word of the task in train, dev, test order; the tags are
    unchanged, so a tagger trained on the result reads one frozen contextual vector per word.

    Parameters
    ----------
    data : TaggingData
    features : sequence of numpy.ndarray
        Per sentence (in :func:`task_token_features` order), one row per word; one width for all.
    label : str
        Name of the embedding, shown in messages.

    Returns
    -------
    (TaggingData, Embedding)

    Raises
    ------
    ShapeError
        If there is not one array per sentence with one row per word, or the widths differ.
    """
    sentences = [*data.train_x, *data.dev_x, *data.test_x]
    if len(features) != len(sentences):
        raise ShapeError(f"features {label} must have one array per sentence of task {data.name!r} "
                         f"({len(sentences)}), got {len(features)}")
    arrays = [np.asarray(f) for f in features]
    widths = {a.shape[1] for a in arrays if a.ndim == 2}
    for i, (a, sent) in enumerate(zip(arrays, sentences)):
        if a.ndim != 2 or a.shape[0] != len(sent) or len(widths) != 1:
            raise ShapeError(f"features {label} of sentence {i + 1} must be ({len(sent)} words, one width for all), "
                             f"got shape {a.shape}" + (f" among widths {sorted(widths)}" if len(widths) > 1 else ""))
    n = sum(len(s) for s in sentences)
    ids = [f"#{k}" for k in range(n)]
    cuts = np.cumsum([0, *(len(s) for s in sentences)])
    seqs = [ids[cuts[i]:cuts[i + 1]] for i in range(len(sentences))]
    a, b = len(data.train_x), len(data.train_x) + len(data.dev_x)
    wrapped = TaggingData(data.name, data.tags, seqs[:a], data.train_y, seqs[a:b], data.dev_y, seqs[b:], data.test_y,
                          data.outside_tag, {**data.info, "features": True})
    width = widths.pop() if widths else 0
    vectors = np.concatenate(arrays) if n else np.zeros((0, width), np.float32)
    return wrapped, Embedding(ids, vectors, name=label)


def token_feature_disagreement(features_old: Sequence[np.ndarray], features_new: Sequence[np.ndarray],
                               task: str | TaggingData = "brown_pos", tagger: str = "bilstm", seed: int = 0, *,
                               seed_b: int | None = None, split_seed: int = 0, limit: int | None = None,
                               progress: bool = False, keep_predictions: bool = False,
                               **kwargs: Any) -> DisagreementResult:
    """Train the same tagger on the old and the new frozen per-word features; count the tags that differ.

    Parameters
    ----------
    features_old, features_new : sequence of numpy.ndarray
        Per sentence in :func:`task_token_features` order, one row per word (any widths), the old
        model's first.
    task : str or TaggingData
        Must be the task (and ``split_seed``/``limit``) the features were extracted for.
    tagger : {"bilstm", "bilstm_crf"}
    seed, seed_b
        Tagger seeds (``seed_b`` defaults to ``seed``: only the features differ).
    split_seed, limit, progress, keep_predictions
        As for :func:`embstab.downstream.disagreement`.
    **kwargs
        Training settings and tagger options (``epochs``, ``lr``, ``hidden`` ...).

    Returns
    -------
    DisagreementResult
        Over test tokens; ``settings["features"]`` is true.
    """
    lookup({m: None for m in TOKEN_TAGGERS}, tagger, "tagger on token features",
           f"{tagger!r} is a classifier; tagging uses {', '.join(TOKEN_TAGGERS)}" if tagger in MODELS else "")
    data = _tagging(task, split_seed, limit)
    wrapped, emb_old = tokens_as_task(data, features_old, "old")
    _, emb_new = tokens_as_task(data, features_new, "new")
    res = disagreement(emb_old, emb_new, wrapped, tagger, seed, seed_b=seed_b, split_seed=split_seed, progress=progress,
                       keep_predictions=keep_predictions, min_coverage=0.0, **kwargs)
    res.settings.update({"limit": limit, "features": True})
    return res

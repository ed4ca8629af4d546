"""Training loops with dev-set early stopping, seeded so a run is a function of (data, embedding, seed)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from embstab._threads import torch_threads
from embstab.downstream.models import BiLSTMTagger, KimCNN, LinearBoW, LSTMClassifier, MeanMLP
from embstab.recipes.training import IterateAverage, TrainingRecipe, training_recipe

__all__ = ["FitResult", "NETWORKS", "MEAN_MODELS", "fit_classifier", "fit_tagger", "mean_features", "pad_batch"]

#: The network behind each model name (its constructor takes the model's options).
NETWORKS = {"linear": LinearBoW, "mlp": MeanMLP, "cnn": KimCNN, "lstm": LSTMClassifier, "bilstm": BiLSTMTagger,
            "bilstm_crf": BiLSTMTagger}


#: Models that read one mean vector per text (their features can be computed once and shared).
MEAN_MODELS = ("linear", "mlp")


def mean_features(table: torch.Tensor, seqs: Sequence[np.ndarray]) -> torch.Tensor:
    """The mean of each text's rows of ``table`` (padding row 0 left out): what the mean-vector models read.

    Parameters
    ----------
    table : torch.Tensor
        Frozen ``(vocabulary, dim)`` lookup table, row 0 padding.
    seqs : sequence of numpy.ndarray
        Int64 index arrays of the texts.

    Returns
    -------
    torch.Tensor
        ``(len(seqs), dim)``; an empty text gets the zero vector.
    """
    bag = nn.EmbeddingBag.from_pretrained(table, freeze=True, mode="mean", padding_idx=0)
    flat = torch.as_tensor(np.concatenate(seqs) if len(seqs) else np.zeros(0, np.int64))
    offsets = torch.as_tensor(np.concatenate([[0], np.cumsum([len(s) for s in seqs])[:-1]]).astype(np.int64))
    with torch.no_grad():
        return bag(flat, offsets)


@dataclass
class FitResult:
    """Predictions of the dev-selected model and how training went."""

    test_pred: np.ndarray            # classification: (n_test,); tagging: concatenated tokens
    dev_score: float                 # percent, at the selected epoch
    best_epoch: int                  # 1-based
    epochs_run: int
    seconds: float
    model: nn.Module | None = field(default=None, repr=False)  # the dev-selected model (eval mode)


def pad_batch(seqs: Sequence[np.ndarray], min_len: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad index arrays with 0 into a (batch, max_len) tensor, plus the lengths.

    Parameters
    ----------
    seqs : sequence of numpy.ndarray
        Int64 index arrays.
    min_len : int, default 1
        Minimum width of the padded tensor.

    Returns
    -------
    ids : torch.Tensor
        ``(batch, max(longest, min_len))`` int64, right-padded with 0.
    lengths : torch.Tensor
        ``(batch,)`` int64 length of each array.
    """
    lengths = torch.as_tensor([len(s) for s in seqs], dtype=torch.int64)
    out = torch.zeros(len(seqs), max(int(lengths.max()) if len(seqs) else 0, min_len), dtype=torch.int64)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.as_tensor(s)
    return out, lengths


def _batches(n: int, batch_size: int, gen: torch.Generator, lengths: np.ndarray | None = None
             ) -> Iterator[np.ndarray | slice]:
    """Shuffled mini-batches; with ``lengths``, batches of similar length in a shuffled order.

    Length bucketing (as the reference does for SST) cuts padding, which dominates the cost of
    recurrent models on CPU; ties in length are broken by a seeded permutation. Without
    ``lengths``, a batch that holds the whole set is ``slice(None)``: shuffling it would change
    only the rounding of the mean loss, and gathering a shuffled copy of the set at every step
    cost more than the step of a linear model (measured: 2.5 vs 1.2 ms for 1,755 x 200).
    """
    if lengths is None and batch_size >= n:
        yield slice(None)
        return
    perm = torch.randperm(n, generator=gen).numpy()
    if lengths is None:
        for start in range(0, n, batch_size):
            yield perm[start:start + batch_size]
        return
    order = perm[np.argsort(lengths[perm], kind="stable")]
    chunks = [order[s:s + batch_size] for s in range(0, n, batch_size)]
    for c in torch.randperm(len(chunks), generator=gen).tolist():
        yield chunks[c]


def _sorted_chunks(seqs: Sequence[np.ndarray], size: int = 256) -> Iterator[np.ndarray]:
    """Index chunks of length-sorted sequences (for prediction with little padding)."""
    order = np.argsort([len(s) for s in seqs], kind="stable")
    for start in range(0, len(order), size):
        yield order[start:start + size]


def _loop(model: nn.Module, n_train: int, step: Callable[[np.ndarray], torch.Tensor],
          dev_score: Callable[[], float], epochs: int, patience: int | None, lr: float, batch_size: int,
          seed: int, progress: bool, desc: str, lengths: np.ndarray | None = None,
          recipe: TrainingRecipe | None = None) -> tuple[dict, float, int, int]:
    gen = torch.Generator().manual_seed(int(seed))  # batch order: local generator, seeded by the model seed
    recipe = training_recipe(recipe)
    params = [p for p in model.parameters() if p.requires_grad]
    # the recipe rounds the trainable weights (the frozen embedding is the input, never touched);
    # its rounding stream is its own generator, so the batch order is the same for every recipe
    opt = recipe.wrap(torch.optim.Adam(params, lr=lr), seed=int(seed) + 1)
    average = IterateAverage(params) if recipe.average else None
    average_from = max(1, epochs // 2)  # SWALP: average the epoch-end iterates of the second half
    best_state, best, best_epoch, stale, ran = copy.deepcopy(model.state_dict()), -1.0, 0, 0, 0
    for epoch in tqdm(range(1, epochs + 1), desc=desc, unit="epoch", disable=not progress, leave=False):
        model.train()
        for idx in _batches(n_train, batch_size, gen, lengths):
            loss = step(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        model.eval()
        iterate = None
        if average is not None and epoch >= average_from:
            # the dev set scores (and selection keeps) the average; training goes on from the iterate
            average.update()
            iterate = [p.detach().clone() for p in params]
            with torch.no_grad():
                for p, m in zip(params, average.mean):
                    p.copy_(m.to(p.dtype))
        with torch.no_grad():
            score = dev_score()
        ran = epoch
        stop = False
        if score > best:  # strict: ties keep the earlier epoch, so selection is deterministic
            best, best_epoch, stale = score, epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            stale += 1
            stop = patience is not None and stale >= patience
        if iterate is not None:
            with torch.no_grad():
                for p, w in zip(params, iterate):
                    p.copy_(w)
        if stop:
            break
    model.load_state_dict(best_state)
    model.eval()
    return best_state, best, best_epoch, ran


def fit_classifier(model_name: str, table: torch.Tensor, n_classes: int,
                   train: tuple[list[np.ndarray], np.ndarray], dev: tuple[list[np.ndarray], np.ndarray],
                   test: list[np.ndarray], *, seed: int, lr: float, epochs: int, batch_size: int,
                   patience: int | None, progress: bool = False, threads: int | None = 1,
                   recipe: str | TrainingRecipe | None = None, **model_kwargs) -> FitResult:
    """Train a sentence classifier ("linear", "mlp", "cnn" or "lstm") and predict the test set.

    Runs inside ``torch.random.fork_rng`` seeded with ``seed``: parameter initialisation and dropout
    are reproducible, and the caller's global torch RNG state is restored afterwards. ``recipe``
    (a name of :data:`embstab.recipes.TRAINING_RECIPES`) sets how the trainable weights are
    stored and updated.

    Parameters
    ----------
    model_name : str
        ``"linear"`` (:class:`~embstab.downstream.models.LinearBoW`), ``"mlp"``
        (:class:`~embstab.downstream.models.MeanMLP`), ``"cnn"`` (:class:`~embstab.downstream.models.KimCNN`)
        or ``"lstm"`` (:class:`~embstab.downstream.models.LSTMClassifier`).
    table : torch.Tensor
        Frozen ``(vocabulary, dim)`` float32 lookup table, row 0 padding
        (:func:`embstab.downstream.lookup.lookup_table`).
    n_classes : int
        Number of classes.
    train, dev : tuple of (list of numpy.ndarray, numpy.ndarray)
        Index arrays of the sentences and their int labels; the dev accuracy selects the epoch.
        For ``"linear"`` and ``"mlp"`` the sentences may instead be a ``(n, dim)`` tensor of their
        :func:`mean_features` (computed once when several models read the same texts).
    test : list of numpy.ndarray
        Index arrays of the test sentences (or their mean features, as above).

    seed : int
        Seeds initialisation, dropout, the batch order and the recipe's rounding.
    lr : float
        Adam learning rate.
    epochs : int
        Maximum number of epochs.
    batch_size : int
        Sentences per batch.
    patience : int or None
        Stop after this many epochs without a better dev score; None trains every epoch.

    progress : bool, default False
        Show a progress bar over the epochs.
    threads : int or None, default 1
        Torch intra-op threads while training; None leaves torch's setting alone.
    recipe : str or TrainingRecipe, optional
        Training recipe of the trainable weights (default: fp32).
    **model_kwargs
        Passed to the model's constructor (e.g. ``hidden``, ``dropout``).

    Returns
    -------
    FitResult
        Test predictions of the model of the best dev epoch (the earliest on ties), its dev score in
        percent, that epoch (1-based), the epochs run, the wall time and the model.
    """
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]), torch_threads(threads):
        torch.manual_seed(int(seed))
        y_train = torch.as_tensor(train[1])
        if model_name in MEAN_MODELS:
            def features(seqs: list[np.ndarray] | torch.Tensor) -> torch.Tensor:
                return seqs if isinstance(seqs, torch.Tensor) else mean_features(table, seqs)

            x_train, x_dev, x_test = features(train[0]), features(dev[0]), features(test)
            model: nn.Module = NETWORKS[model_name](table.shape[1], n_classes, **model_kwargs)
            step = lambda idx: nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])  # noqa: E731
            predict = lambda x: model(x).argmax(1).numpy()  # noqa: E731
            dev_in, test_in = x_dev, x_test
        else:
            model = NETWORKS[model_name](table, n_classes, **model_kwargs)

            def step(idx: np.ndarray) -> torch.Tensor:
                ids, lengths = pad_batch([train[0][i] for i in idx])
                return nn.functional.cross_entropy(model(ids, lengths), y_train[idx])

            def predict(seqs: list[np.ndarray]) -> np.ndarray:
                out = np.zeros(len(seqs), dtype=np.int64)
                for idx in _sorted_chunks(seqs):
                    ids, lengths = pad_batch([seqs[i] for i in idx])
                    out[idx] = model(ids, lengths).argmax(1).numpy()
                return out

            dev_in, test_in = dev[0], test
        dev_y = np.asarray(dev[1])
        lengths = None if model_name in ("linear", "mlp") else np.asarray([len(x) for x in train[0]])
        _, best, best_epoch, ran = _loop(model, len(train[1]), step,
                                         lambda: float(100.0 * np.mean(predict(dev_in) == dev_y)),
                                         epochs, patience, lr, batch_size, seed, progress, f"{model_name} model",
                                         lengths, recipe)
        with torch.no_grad():
            test_pred = predict(test_in)
    return FitResult(np.asarray(test_pred), best, best_epoch, ran, time.perf_counter() - start, model)


def tagging_score(pred: np.ndarray, gold: np.ndarray, outside: int | None) -> float:
    """Token accuracy in percent, or, with an outside tag, micro-F1·100 over non-outside tags."""
    if outside is None:
        return float(100.0 * np.mean(pred == gold)) if len(gold) else 0.0
    tp = np.sum((pred == gold) & (gold != outside))
    n_pred, n_gold = np.sum(pred != outside), np.sum(gold != outside)
    if n_pred == 0 or n_gold == 0:
        return 0.0
    p, r = tp / n_pred, tp / n_gold
    return float(100.0 * 2 * p * r / (p + r)) if p + r else 0.0


def fit_tagger(model_name: str, table: torch.Tensor, n_tags: int,
               train: tuple[list[np.ndarray], list[np.ndarray]], dev: tuple[list[np.ndarray], list[np.ndarray]],
               test: list[np.ndarray], *, seed: int, lr: float, epochs: int, batch_size: int,
               patience: int | None, outside: int | None = None, progress: bool = False,
               threads: int | None = 1, recipe: str | TrainingRecipe | None = None, **model_kwargs) -> FitResult:
    """Train a BiLSTM ("bilstm") or BiLSTM-CRF ("bilstm_crf") tagger; test predictions are concatenated.

    ``recipe`` is a training recipe as for :func:`fit_classifier`.

    Parameters
    ----------
    model_name : str
        ``"bilstm"`` or ``"bilstm_crf"`` (:class:`~embstab.downstream.models.BiLSTMTagger`).
    table : torch.Tensor
        Frozen ``(vocabulary, dim)`` float32 lookup table, row 0 padding.
    n_tags : int
        Number of tags.
    train, dev : tuple of (list of numpy.ndarray, list of numpy.ndarray)
        Index arrays of the sentences and their int tag arrays; the dev score selects the epoch.
    test : list of numpy.ndarray
        Index arrays of the test sentences.

    seed : int
        Seeds initialisation, dropout, the batch order and the recipe's rounding.
    lr : float
        Adam learning rate.
    epochs : int
        Maximum number of epochs.
    batch_size : int
        Sentences per batch.
    patience : int or None
        Stop after this many epochs without a better dev score; None trains every epoch.
    outside : int, optional
        The outside tag: the dev score is then micro-F1 over the other tags, else token accuracy.

    progress : bool, default False
        Show a progress bar over the epochs.
    threads : int or None, default 1
        Torch intra-op threads while training; None leaves torch's setting alone.
    recipe : str or TrainingRecipe, optional
        Training recipe of the trainable weights (default: fp32).
    **model_kwargs
        Passed to the model's constructor (e.g. ``hidden``, ``dropout``).

    Returns
    -------
    FitResult
        Test predictions (the tags of all test tokens, concatenated) of the model of the best dev
        epoch (the earliest on ties), its dev score in percent, that epoch (1-based), the epochs
        run, the wall time and the model.
    """
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]), torch_threads(threads):
        torch.manual_seed(int(seed))
        model = BiLSTMTagger(table, n_tags, crf=(model_name == "bilstm_crf"), **model_kwargs)

        def step(idx: np.ndarray) -> torch.Tensor:
            ids, lengths = pad_batch([train[0][i] for i in idx])
            tags, _ = pad_batch([train[1][i] for i in idx])
            return model.loss(ids, lengths, tags)

        def predict(seqs: list[np.ndarray]) -> np.ndarray:
            out: list[np.ndarray] = [np.zeros(0, np.int64)] * len(seqs)
            for idx in _sorted_chunks(seqs):
                ids, lengths = pad_batch([seqs[i] for i in idx])
                pred = model.predict(ids, lengths).numpy()
                for row, i in enumerate(idx):
                    out[i] = pred[row, :len(seqs[i])]
            return np.concatenate(out) if out else np.zeros(0, np.int64)

        dev_gold = np.concatenate(dev[1]) if dev[1] else np.zeros(0, np.int64)
        _, best, best_epoch, ran = _loop(model, len(train[0]), step,
                                         lambda: tagging_score(predict(dev[0]), dev_gold, outside),
                                         epochs, patience, lr, batch_size, seed, progress, f"{model_name} tagger",
                                         np.asarray([len(x) for x in train[0]]), recipe)
        with torch.no_grad():
            test_pred = predict(test)
    return FitResult(test_pred, best, best_epoch, ran, time.perf_counter() - start, model)

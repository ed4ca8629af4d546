"""Masked-language-model training of a :class:`ContextualModel`, and the pretraining pair protocol.

:func:`train_mlm` trains a copy of a model with BERT's objective (15 % of pieces chosen; of those
80 % become ``[MASK]``, 10 % a random piece, 10 % stay) on contiguous blocks of a corpus, with
AdamW and a linear warm-up then decay. It serves pretraining from scratch and fine-tuning the
packaged MiniLM alike. :func:`pretrain_pair` runs the protocol: one held-out set, two corpus
versions from :func:`embstab.data.make_corpus_pair`, one tokenizer trained on their union, the
same size, seed and step count for both, plus a seed-only baseline on version A.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from embstab._limits import check_learning_rate
from embstab._numbers import is_integer
from embstab._threads import torch_threads
from embstab.contextual.encoding import WordPieces
from embstab.contextual.model import ContextualModel, ModelSize, build_model
from embstab.contextual.tokenizer import train_wordpiece
from embstab.data.corpora import make_corpus_pair
from embstab.errors import ConfigError, EmbstabError

__all__ = ["PretrainResult", "PretrainPair", "train_mlm", "pretrain_pair", "mask_tokens", "make_blocks",
           "mlm_loss", "split_heldout"]

MASK_RATE = 0.15


@dataclass
class PretrainResult:
    """A model trained with masked-LM, and how training went.

    Attributes
    ----------
    model : ContextualModel
        The trained model (a copy; the model passed in is untouched).
    train_losses : list of float
        Training loss at every step.
    heldout_loss : float or None
        Mean cross-entropy (nats per masked piece) on the held-out blocks, fixed masking.
    heldout_perplexity : float or None
        ``exp(heldout_loss)``.
    initial_heldout_loss : float or None
        The same before training (how much the steps bought).
    steps : int
    seconds : float
        Wall time of the training steps (evaluation excluded).
    n_blocks : int
        Training blocks (inputs of ``block_length`` pieces) the corpus gave.
    settings : dict
        Seed, batch size, learning rate, warm-up, block length, threads.
    """

    model: ContextualModel = field(repr=False)
    train_losses: list[float] = field(repr=False)
    heldout_loss: float | None
    heldout_perplexity: float | None
    initial_heldout_loss: float | None
    steps: int
    seconds: float
    n_blocks: int
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds_per_step(self) -> float:
        return self.seconds / max(self.steps, 1)

    def to_dict(self) -> dict[str, Any]:
        """Numbers and settings (no model, no per-step losses) as a flat dict for a table row.

        Returns
        -------
        dict
            Model name, held-out loss and perplexity (before and after), last training loss, steps,
            times, block and parameter counts, then the settings.
        """
        return {"model": self.model.name, "heldout_loss": self.heldout_loss,
                "heldout_perplexity": self.heldout_perplexity, "initial_heldout_loss": self.initial_heldout_loss,
                "final_train_loss": self.train_losses[-1] if self.train_losses else None, "steps": self.steps,
                "seconds": self.seconds, "seconds_per_step": self.seconds_per_step, "n_blocks": self.n_blocks,
                "parameters": self.model.n_parameters(), **self.settings}


@dataclass
class PretrainPair:
    """The two corpus versions' models and the seed-only baseline.

    Attributes
    ----------
    old, new : PretrainResult
        Same size, seed, tokenizer and steps; the old member on corpus version A, the new on B.
    baseline : PretrainResult or None
        Version A again with another seed: the instability that seeds alone cause.
    settings : dict
        Corpus pair settings (fraction, pair seed, documents per version, held-out documents).
    """

    old: PretrainResult
    new: PretrainResult
    baseline: PretrainResult | None
    settings: dict[str, Any] = field(default_factory=dict)

    def results(self) -> dict[str, PretrainResult]:
        """``{"a": old, "b": new, "baseline": …}``, keyed by corpus version (the baseline only when trained).

        The keys name the folders ``embstab contextual pretrain`` writes the models to.

        Returns
        -------
        dict of str to PretrainResult
        """
        out = {"a": self.old, "b": self.new}
        if self.baseline is not None:
            out["baseline"] = self.baseline
        return out


def split_heldout(docs: Sequence[list[str]], fraction: float = 0.02, seed: int = 0
                  ) -> tuple[list[list[str]], list[list[str]]]:
    """Split documents into (training, held-out) with a seeded draw; order is kept in each part.

    Parameters
    ----------
    docs : sequence of word lists
    fraction : float
        Share of documents held out (rounded to a count), in (0, 0.5).
    seed : int
        Seed of the draw.

    Returns
    -------
    (list of list of str, list of list of str)
        The training and the held-out documents.

    Raises
    ------
    ValueError
        If ``fraction`` is not in (0, 0.5) or leaves no held-out document.
    """
    if not 0.0 < fraction < 0.5:
        raise ConfigError(f"held-out fraction must be in (0, 0.5), got {fraction}")
    n = len(docs)
    k = int(round(fraction * n))
    if k == 0:
        raise ConfigError(f"a held-out fraction of {fraction} of {n} documents is no document; use more documents")
    held = set(np.random.default_rng(seed).permutation(n)[:k].tolist())
    return [d for i, d in enumerate(docs) if i not in held], [d for i, d in enumerate(docs) if i in held]


def make_blocks(docs: Sequence[Sequence[str]], pieces: WordPieces, block_length: int) -> torch.Tensor:
    """The corpus as one stream of pieces (``[SEP]`` between documents) cut into ``[CLS] … [SEP]`` blocks.

    Parameters
    ----------
    docs : sequence of word lists
    pieces : WordPieces
        The tokenizer's word pieces.
    block_length : int
        Pieces per block, ``[CLS]`` and ``[SEP]`` included; at least 3.

    Returns
    -------
    torch.Tensor of shape (n_blocks, block_length), int64
        The tail shorter than a block is dropped.

    Raises
    ------
    ValueError
        If ``block_length`` is below 3.
    """
    sep = pieces.tokenizer.token_to_id("[SEP]")
    cls = pieces.tokenizer.token_to_id("[CLS]")
    body = block_length - 2
    if body < 1:
        raise ConfigError(f"block_length must be at least 3, got {block_length}")
    stream = []
    for doc in docs:
        ids, _ = pieces.encode(list(doc))
        if len(ids):
            stream.append(ids)
            stream.append(np.asarray([sep], dtype=np.int64))
    flat = np.concatenate(stream) if stream else np.zeros(0, np.int64)
    n = len(flat) // body
    out = np.empty((n, block_length), dtype=np.int64)
    out[:, 0], out[:, -1] = cls, sep
    out[:, 1:-1] = flat[:n * body].reshape(n, body)
    return torch.from_numpy(out)


def mask_tokens(ids: torch.Tensor, model: ContextualModel, generator: torch.Generator,
                rate: float = MASK_RATE) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of a batch: ``(inputs, labels)`` with labels −100 where nothing is predicted.

    Each non-special piece is chosen with probability ``rate``; a chosen piece becomes ``[MASK]``
    (80%), a random piece (10%; ids below 5, the special tokens of a trained tokenizer, are never
    drawn) or stays (10%). Special tokens are never chosen; every row with a non-special piece gets
    at least one prediction target.

    Parameters
    ----------
    ids : torch.Tensor of shape (batch, length), int64
        Blocks as :func:`make_blocks` gives them.
    model : ContextualModel
        Its tokenizer gives the special ids and the vocabulary size.
    generator : torch.Generator
        Source of the random draws.
    rate : float
        Share of pieces chosen as targets.

    Returns
    -------
    inputs, labels : torch.Tensor
        Both shaped like ``ids``: the masked inputs, and the original id at targets, −100 elsewhere.
    """
    special = torch.zeros_like(ids, dtype=torch.bool)
    for tok in ("[CLS]", "[SEP]", "[PAD]"):
        special |= ids == model.special_id(tok)
    chosen = (torch.rand(ids.shape, generator=generator) < rate) & ~special
    # a row with no target would contribute nothing; force one (the first non-special piece)
    empty = ~chosen.any(dim=1) & (~special).any(dim=1)
    if empty.any():
        first = (~special).float().argmax(dim=1)
        chosen[empty.nonzero().squeeze(1), first[empty]] = True
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=generator)
    n_special = 5  # ids below this are the special tokens of a trained tokenizer; never drawn as random
    vocab = model.tokenizer.get_vocab_size()
    random_ids = torch.randint(min(n_special, vocab - 1), vocab, ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[chosen & (roll < 0.8)] = model.special_id("[MASK]")
    swap = chosen & (roll >= 0.8) & (roll < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, labels


def _masked_lm(net: Any, inputs: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of the masked-LM head at the target positions only.

    The loss ``BertForMaskedLM`` computes, without scoring every position against the whole
    vocabulary: only about 15 % of positions are targets, and with a 30,522-piece vocabulary the
    scores of the others would cost more than the encoder.
    """
    states = net.bert(input_ids=inputs)[0]
    target = labels != -100
    scores = net.cls(states[target])
    return torch.nn.functional.cross_entropy(scores, labels[target], reduction=reduction)


def mlm_loss(model: ContextualModel, blocks: torch.Tensor, seed: int = 0, batch_size: int = 64) -> float:
    """Mean masked-LM cross-entropy (nats per predicted piece) over ``blocks`` with a fixed masking.

    The network runs in eval mode (no dropout) and the masks come from ``seed``, so two models
    evaluated on the same blocks are scored on exactly the same targets.

    Parameters
    ----------
    model : ContextualModel
    blocks : torch.Tensor of shape (n_blocks, block_length)
        Held-out blocks (:func:`make_blocks`).
    seed : int
        Seed of the masking.
    batch_size : int
        Blocks run at once.

    Returns
    -------
    float
        Its exponential is the perplexity.

    Raises
    ------
    EmbstabError
        If ``blocks`` is empty.
    """
    if len(blocks) == 0:
        raise EmbstabError("no held-out block to evaluate: the held-out text is shorter than one block")
    gen = torch.Generator().manual_seed(int(seed))
    net = model.network
    was_training = net.training
    net.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(blocks), batch_size):
            ids = blocks[start:start + batch_size]
            inputs, labels = mask_tokens(ids, model, gen)
            total += float(_masked_lm(net, inputs, labels, reduction="sum"))
            count += int((labels != -100).sum())
    net.train(was_training)
    return total / count


def train_mlm(model: ContextualModel, docs: Sequence[Sequence[str]], steps: int, seed: int = 0, *,
              heldout: Sequence[Sequence[str]] | None = None, batch_size: int = 32, lr: float = 5e-4,
              warmup: float = 0.1, weight_decay: float = 0.01, block_length: int | None = None,
              threads: int | None = 1, name: str | None = None, progress: bool = False) -> PretrainResult:
    """Train a copy of ``model`` with masked-LM for ``steps`` steps.

    Parameters
    ----------
    model : ContextualModel
        The starting point: a fresh :func:`build_model` (pretraining) or a pretrained model
        (fine-tuning). It is deep-copied, never changed.
    docs : sequence of token lists
        Training text.
    steps : int
        Optimizer steps.
    seed : int
        Seeds block order, masking and dropout (the initialisation was seeded when the model was built).
    heldout : sequence of token lists, optional
        Held-out text; its MLM loss is measured before and after training.
    batch_size : int
    lr : float
        Peak AdamW learning rate.
    warmup : float
        Fraction of the steps spent warming up linearly; then linear decay to 0.
    weight_decay : float
    block_length : int, optional
        Pieces per training input (default: the model's position limit, at most 128).
    threads : int or None
        torch intra-op threads while training (default 1, robust on shared cores; ``None`` leaves
        torch's setting). Results are reproducible for a fixed thread count.
    name : str, optional
        Name of the trained model.
    progress : bool
        Show a progress bar over the steps.

    Returns
    -------
    PretrainResult

    Raises
    ------
    EmbstabError
        If the text is shorter than one block.
    ValueError
        If a setting is out of range.
    """
    if not is_integer(steps) or steps < 1:
        raise ConfigError(f"steps must be a positive integer, got {steps!r}")
    check_learning_rate(lr)  # one rule with the command line's --lr
    if batch_size < 1 or not 0.0 <= warmup < 1.0:
        raise ConfigError(f"need batch_size >= 1 and 0 <= warmup < 1; got {batch_size}, {warmup}")
    block_length = min(model.max_length, 128) if block_length is None else int(block_length)
    if not 3 <= block_length <= model.max_length:
        raise ConfigError(f"block_length must be in 3..{model.max_length} (the model's limit), got {block_length}")
    pieces = WordPieces(model.tokenizer)
    blocks = make_blocks(docs, pieces, block_length)
    if len(blocks) == 0:
        raise EmbstabError(f"the training text has fewer than {block_length - 2} word pieces: no training block")
    held = make_blocks(heldout, pieces, block_length) if heldout is not None else None
    trained = copy.deepcopy(model)
    net = trained.network
    settings = {"seed": int(seed), "batch_size": batch_size, "lr": lr, "warmup": warmup,
                "weight_decay": weight_decay, "block_length": block_length, "threads": threads,
                "train_documents": len(docs), "heldout_documents": 0 if heldout is None else len(heldout)}
    with torch_threads(threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))  # dropout draws from the global generator, seeded and restored here
        initial = mlm_loss(trained, held) if held is not None and len(held) else None
        gen = torch.Generator().manual_seed(int(seed))
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
        n_warm = int(warmup * steps)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: (s + 1) / max(n_warm, 1) if s < n_warm else max(0.0, (steps - s) / max(steps - n_warm, 1)))
        losses: list[float] = []
        order, cursor = torch.randperm(len(blocks), generator=gen), 0
        net.train()
        start = time.perf_counter()
        for _ in tqdm(range(steps), desc=f"MLM {trained.name}", unit="step", disable=not progress, leave=False):
            if cursor + batch_size > len(order) and cursor > 0:  # next epoch: a new seeded order
                order, cursor = torch.randperm(len(blocks), generator=gen), 0
            idx = order[cursor:cursor + batch_size]
            cursor += batch_size
            inputs, labels = mask_tokens(blocks[idx], trained, gen)
            loss = _masked_lm(net, inputs, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        seconds = time.perf_counter() - start
        net.eval()
        final = mlm_loss(trained, held) if held is not None and len(held) else None
    if not all(math.isfinite(x) for x in losses):
        raise EmbstabError(f"masked-LM training diverged (non-finite loss); lower lr (now {lr})")
    trained.name = name or f"{model.name}-mlm{steps}-s{seed}"
    trained.metadata = {**model.metadata, "mlm_steps": model.metadata.get("mlm_steps", 0) + steps,
                        "train_seed": int(seed), "heldout_loss": final}
    return PretrainResult(trained, losses, final, math.exp(final) if final is not None else None, initial, steps,
                          seconds, len(blocks), settings)


def pretrain_pair(docs: Sequence[list[str]], size: str | ModelSize = "tiny", steps: int = 200, seed: int = 0, *,
                  baseline_seed: int | None = None, base: ContextualModel | None = None, fraction: float = 0.05,
                  pair_seed: int = 0, heldout_fraction: float = 0.02, vocab_size: int = 8000,
                  max_length: int = 128, baseline: bool = True, progress: bool = False,
                  **train_kwargs: Any) -> PretrainPair:
    """The pretraining pair protocol on one corpus.

    1. A seeded share of documents is held out (same for every model: perplexity is comparable).
    2. The rest becomes versions A and B with ``make_corpus_pair(kind="leave_out")``.
    3. One WordPiece tokenizer is trained on the union (unless ``base`` brings its own).
    4. A and B models: same size, initialisation seed and steps (or the same ``base`` fine-tuned).
    5. Baseline: version A with ``baseline_seed`` (initialisation and training).

    Parameters
    ----------
    docs : sequence of token lists
        The corpus (e.g. ``embstab.data.load_corpus("wiki_vital")``).
    size : str or ModelSize
        Model size (ignored when ``base`` is given).
    steps : int
        Training steps per model.
    seed : int
        Initialisation and training seed of A and B.
    baseline_seed : int, optional
        Seed of the baseline model (default ``seed + 1``).
    base : ContextualModel, optional
        Fine-tune this model (e.g. the packaged MiniLM) on each version instead of pretraining.
    fraction, pair_seed : float, int
        Share of documents each version leaves out, and the seed choosing them.
    heldout_fraction : float
        Share of documents held out for perplexity.
    vocab_size : int
        Size of the trained WordPiece vocabulary.
    max_length : int
        Position limit of the models built.
    baseline : bool
        Train the seed baseline too.
    progress : bool
    **train_kwargs
        Passed to :func:`train_mlm` (``batch_size``, ``lr``, ``threads`` …).

    Returns
    -------
    PretrainPair
    """
    train_docs, held = split_heldout(docs, heldout_fraction, seed=pair_seed)
    version_a, version_b = make_corpus_pair(train_docs, kind="leave_out", fraction=fraction, seed=pair_seed)
    baseline_seed = seed + 1 if baseline_seed is None else baseline_seed

    if base is None:
        tokenizer = train_wordpiece(train_docs, vocab_size=vocab_size)  # A ∪ B = every training document
        start = {s: build_model(size, tokenizer, s, max_length=max_length) for s in {seed, baseline_seed}}
    else:
        start = {s: base for s in {seed, baseline_seed}}
    label = lambda tag, s: f"{start[s].name}-{tag}-s{s}"  # noqa: E731
    run = lambda d, s, tag: train_mlm(start[s], d, steps, s, heldout=held, name=label(tag, s),  # noqa: E731
                                      progress=progress, **train_kwargs)
    res_a, res_b = run(version_a, seed, "A"), run(version_b, seed, "B")
    res_base = run(version_a, baseline_seed, "A") if baseline else None
    for res, version in ((res_a, "A"), (res_b, "B"), (res_base, "A")):
        if res is not None:
            res.model.metadata["corpus_version"] = version
    return PretrainPair(res_a, res_b, res_base,
                        {"fraction": fraction, "pair_seed": pair_seed, "heldout_fraction": heldout_fraction,
                         "documents_a": len(version_a), "documents_b": len(version_b), "heldout_documents": len(held),
                         "seed": seed, "baseline_seed": baseline_seed, "steps": steps,
                         "fine_tuned_from": None if base is None else base.name})

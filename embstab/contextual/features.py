"""Contextual features: per-token hidden states → sentence vectors and word-type embeddings.

Both readers run the encoder in batches of inputs sorted by length (little padding), under
``torch.inference_mode``, and keep only what they return: :func:`sentence_features` one row per
text, :func:`word_type_embedding` a running sum and count per vocabulary word, so memory does not
grow with the corpus. Padding is masked out of attention, so a text's vectors do not depend on
what else is in its batch (up to float rounding).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from embstab._limits import check_threads
from embstab._numbers import is_integer
from embstab._threads import torch_threads
from embstab.contextual.encoding import WordPieces, as_word_lists, check_length, pad_inputs
from embstab.contextual.model import ContextualModel
from embstab.contextual.pipeline import POOLINGS, SentencePipeline
from embstab.contextual.errors import EmptyTextError, SequenceLengthError
from embstab.embedding import Embedding
from embstab.errors import ConfigError, VocabularyError

__all__ = ["POOLINGS", "SPLITS", "SUBWORDS", "hidden_states", "sentence_features", "token_features", "word_type_embedding",
           "word_windows"]

SUBWORDS = ("first", "mean")


def _check_layer(model: ContextualModel, layer: int) -> int:
    n = model.n_layers
    if not is_integer(layer) or not -(n + 1) <= layer <= n:
        raise ConfigError(f"layer must be an integer in {-(n + 1)}..{n} (0 = input embeddings, {n} = last; "
                         f"negative counts from the end), got {layer!r}")
    return int(layer) % (n + 1)


def _check_run(batch_size: int, threads: int | None) -> None:
    # before any text is tokenised: a count no machine runs is refused first, in one line
    if not is_integer(batch_size) or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer of at least 1, got {batch_size!r}")
    if threads is not None:
        check_threads(threads)


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise ConfigError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def hidden_states(model: ContextualModel, rows: Sequence[np.ndarray], layer: int, batch_size: int = 32,
                  threads: int | None = 1, progress: bool = False, desc: str = "features"
                  ) -> Iterator[tuple[np.ndarray, torch.Tensor, torch.Tensor]]:
    """Run the encoder over piece-id rows in length-sorted batches.

    Parameters
    ----------
    model : ContextualModel
    rows : sequence of numpy.ndarray
        Piece ids of each input, without special tokens (each fitting the model's positions).
    layer : int
        Hidden state to read: 0 = input embeddings, ``n_layers`` (or -1) = last layer.
    batch_size : int
        Rows run at once.
    threads : int or None
        torch threads while running (None: leave torch's setting alone).
    progress : bool
        Show a progress bar (tokens).
    desc : str
        Label of the progress bar.

    Yields
    ------
    (indices, states, mask)
        Row indices of the batch (into ``rows``), the ``(batch, width, hidden)`` states of
        ``layer`` (position 0 is ``[CLS]``, position ``j + 1`` is piece ``j`` of the row) and the
        attention mask.

    Raises
    ------
    ConfigError
        If ``batch_size`` is below 1, ``threads`` is more than the usable cores or ``layer`` is out
        of range.
    """
    _check_run(batch_size, threads)
    layer = _check_layer(model, layer)
    cls, sep, pad = (model.special_id(t) for t in ("[CLS]", "[SEP]", "[PAD]"))
    order = np.argsort([len(r) for r in rows], kind="stable")
    encoder = model.network.bert
    encoder.eval()
    n_tokens = sum(len(r) + 2 for r in rows)
    with torch_threads(threads), torch.inference_mode(), \
            tqdm(total=n_tokens, desc=desc, unit="tok", unit_scale=True, disable=not progress, leave=False) as bar:
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            ids, mask = pad_inputs([rows[i] for i in idx], cls, sep, pad)
            out = encoder(input_ids=ids, attention_mask=mask, output_hidden_states=layer != model.n_layers)
            states = out.last_hidden_state if layer == model.n_layers else out.hidden_states[layer]
            yield idx, states, mask
            bar.update(int(mask.sum()))


#: How :func:`sentence_features` splits a string: the model's own tokenizer on the raw text (as the
#: model's users get it), or embstab's word tokenizer first and then each word into pieces.
SPLITS = ("model", "words")


def _pieces_of(model: ContextualModel, texts, split: str, allow_empty: bool) -> list[np.ndarray]:
    if split == "model" and all(isinstance(t, str) for t in texts):
        rows = []
        for i, text in enumerate(texts):
            ids = np.asarray(model.tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
            if not len(ids) and not allow_empty:
                raise EmptyTextError(f"text {i + 1} (line {i + 1}) is empty: remove empty lines, or pass "
                                     "allow_empty=True to give it the features of an empty input")
            rows.append(ids)
        return rows
    words = as_word_lists(texts, allow_empty=allow_empty)
    pieces = WordPieces(model.tokenizer)
    pieces.add(w for ws in words for w in ws)
    return [pieces.encode(ws)[0] for ws in words]


def _pool(states: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    if pooling == "cls":
        return states[:, 0]
    m = mask.unsqueeze(-1).to(states.dtype)
    if pooling == "max":
        return states.masked_fill(m == 0, float("-inf")).amax(1)
    total = (states * m).sum(1)
    return total / (m.sum(1) if pooling == "mean" else m.sum(1).sqrt())


def sentence_features(model: ContextualModel, texts: Sequence[str] | Sequence[Sequence[str]], *, layer: int = -1,
                      pooling: str | None = None, normalize: bool | None = None, truncate: bool | None = None,
                      split: str = "model", batch_size: int = 32, allow_empty: bool = False,
                      threads: int | None = 1, progress: bool = False) -> np.ndarray:
    """One vector per text, the way the model's own pipeline makes it.

    A sentence-transformers model folder declares its pipeline (:mod:`embstab.contextual.pipeline`):
    by default the text goes through the model's tokenizer as it is (punctuation included), is
    truncated to the declared length, pooled and normalised as declared, so the vectors are those
    of ``SentenceTransformer.encode()``. A model without such a declaration is mean-pooled, not
    normalised, and a text longer than its position limit is an error. Each choice can be
    overridden.

    Parameters
    ----------
    model : ContextualModel
    texts : sequence of str or of token lists
        Strings are split as ``split`` says; token lists are taken as words.
    layer : int
        Hidden state to read: 0 = input embeddings, ``n_layers`` (or −1) = last layer.
    pooling : {"mean", "cls", "max", "mean_sqrt_len"}, optional
        Default: the model's. ``mean`` averages the non-padding positions (``[CLS]`` and ``[SEP]``
        included, as sentence-transformers does).
    normalize : bool, optional
        Scale each vector to unit length. Default: whether the model declares a Normalize module.
    truncate : bool, optional
        Keep the first pieces of a text longer than the limit instead of raising. Default: true
        for a model that declares a length limit (its users' texts are cut there), else false.
    split : {"model", "words"}, default "model"
        ``model``: the model's tokenizer on the raw string. ``words``: embstab's word tokenizer
        (:func:`embstab.data.tokenize`, which drops punctuation) and then each word into pieces,
        as for word-type embeddings.
    batch_size : int
    allow_empty : bool
        Accept empty texts (they read ``[CLS] [SEP]``) instead of raising.
    threads : int or None
        torch intra-op threads while extracting (default 1: on shared cores one thread is many
        times faster than OpenMP spin-waiting on two; ``None`` leaves torch's setting).
    progress : bool
        Progress bar in tokens.

    Returns
    -------
    numpy.ndarray of shape (len(texts), hidden), float32

    Raises
    ------
    EmptyTextError
        A text is empty (and ``allow_empty`` is false).
    SequenceLengthError
        A text does not fit the model (and ``truncate`` is false).
    ConfigError
        ``batch_size`` below 1, or ``threads`` below 1 or more than the usable cores.
    """
    _check_run(batch_size, threads)
    declared = model.sentence_pipeline
    pipeline = SentencePipeline(pooling if pooling is not None else declared.pooling,
                                declared.normalize if normalize is None else bool(normalize),
                                declared.max_length, declared.source)
    _check_choice(split, SPLITS, "split")
    if truncate is None:
        truncate = declared.max_length is not None
    limit = min(model.max_length, pipeline.max_length or model.max_length)
    rows = [ids[:check_length(len(ids), limit, i, truncate)]
            for i, ids in enumerate(_pieces_of(model, texts, split, allow_empty))]
    out = np.zeros((len(rows), model.hidden_size), dtype=np.float32)
    if not rows:
        return out
    for idx, states, mask in hidden_states(model, rows, layer, batch_size, threads, progress, "sentence features"):
        pooled = _pool(states, mask, pipeline.pooling)
        if pipeline.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        out[idx] = pooled.float().numpy()
    return out


def word_windows(docs: Sequence[Sequence[str]], pieces: WordPieces, limit: int) -> list[list[str]]:
    """Cut documents into consecutive word windows whose pieces fit ``limit`` (with ``[CLS]``/``[SEP]``).

    A window never spans two documents; a word without pieces counts as one (it is read as ``[UNK]``).

    Parameters
    ----------
    docs : sequence of word lists
    pieces : WordPieces
        The model's word pieces.
    limit : int
        The model's position limit, ``[CLS]`` and ``[SEP]`` included.

    Returns
    -------
    list of list of str
        The windows, in document order.

    Raises
    ------
    SequenceLengthError
        If one word alone has more pieces than fit.
    """
    body = limit - 2
    out: list[list[str]] = []
    for d, doc in enumerate(docs):
        window: list[str] = []
        used = 0
        for word in doc:
            n = max(1, len(pieces[word]))  # a word with no piece is read as [UNK] by token_features
            if n > body:
                raise SequenceLengthError(f"word {word[:40]!r} of text {d + 1} alone has {n} word pieces, more than "
                                          f"the model's limit of {body}")
            if used + n > body:
                out.append(window)
                window, used = [], 0
            window.append(word)
            used += n
        if window:
            out.append(window)
    return out


def word_type_embedding(model: ContextualModel, docs: Sequence[str] | Sequence[Sequence[str]], *, layer: int = -1,
                        subword: str = "first", min_count: int = 1, max_occurrences: int | None = None,
                        words: Sequence[str] | None = None, batch_size: int = 32, threads: int | None = 1,
                        progress: bool = False, name: str | None = None) -> Embedding:
    """Per vocabulary word, the mean of its contextual vectors over its occurrences in ``docs``.

    Documents are cut into windows that fit the model (:func:`word_windows`); a word's vector at
    one occurrence is the state of its first piece, or the mean over its pieces. Words the model
    cannot see (only ``[UNK]`` pieces) are skipped. The result is an :class:`~embstab.Embedding`
    in frequency order with the occurrence counts used, so every measure applies to two models
    given the same ``docs``.

    Parameters
    ----------
    model : ContextualModel
    docs : sequence of str or of token lists
        The corpus sample (strings are tokenised with :func:`embstab.data.tokenize`). Empty
        documents are skipped.
    layer : int
        Hidden state to read (0 = input embeddings, −1 = last).
    subword : {"first", "mean"}
        Which pieces of a word represent it.
    min_count : int
        Keep words occurring at least this often in ``docs``.
    max_occurrences : int, optional
        Average over at most this many occurrences per word (the first ones in ``docs``): bounds
        the work for frequent words.
    words : sequence of str, optional
        Restrict to these words (e.g. another embedding's vocabulary).
    batch_size, threads, progress
        As for :func:`sentence_features`.
    name : str, optional
        Name of the embedding (default: the model's name and the layer).

    Returns
    -------
    Embedding
        float32 vectors; ``metadata`` records the layer, subword rule and counts.

    Raises
    ------
    VocabularyError
        If no word of ``docs`` qualifies (none occurs ``min_count`` times, none is in ``words``, or
        the model knows none of them).
    ConfigError
        ``batch_size`` below 1, or ``threads`` below 1 or more than the usable cores.
    """
    _check_run(batch_size, threads)
    _check_choice(subword, SUBWORDS, "subword")
    if min_count < 1:
        raise ConfigError(f"min_count must be at least 1, got {min_count}")
    if max_occurrences is not None and max_occurrences < 1:
        raise ConfigError(f"max_occurrences must be at least 1, got {max_occurrences}")
    layer_index = _check_layer(model, layer)
    docs = [d for d in as_word_lists(docs, allow_empty=True) if d]
    counts = Counter(w for d in docs for w in d)
    pieces = WordPieces(model.tokenizer)
    pieces.add(counts)
    allowed = None if words is None else set(words)
    candidates = [w for w in counts if counts[w] >= min_count and (allowed is None or w in allowed)]
    known = [w for w in candidates if not pieces.is_unknown(w)]
    if not known:
        why = (f"no word occurs at least {min_count} times" if not candidates and allowed is None else
               "no word of the text is in the given word list" if not candidates else
               f"the model's vocabulary knows none of the {len(candidates)} candidate words (all map to [UNK])")
        raise VocabularyError(f"no word-type vectors from {len(docs)} texts: {why}")
    first_seen = {w: i for i, w in enumerate(counts)}  # Counter keeps first-occurrence order
    known.sort(key=lambda w: (-counts[w], first_seen[w]))
    vocab = {w: i for i, w in enumerate(known)}
    sums = np.zeros((len(known), model.hidden_size), dtype=np.float64)
    used = np.zeros(len(known), dtype=np.int64)

    windows = word_windows(docs, pieces, model.max_length)
    # occurrence selection happens in corpus order, before batching reorders the windows
    targets: list[list[tuple[int, int, int]]] = []  # per window: (vocab id, first piece, end piece)
    rows = []
    for window in windows:
        ids, starts = pieces.encode(window)
        mine = []
        for j, w in enumerate(window):
            v = vocab.get(w)
            if v is not None and (max_occurrences is None or used[v] < max_occurrences):
                used[v] += 1
                mine.append((v, int(starts[j]), int(starts[j + 1])))
        targets.append(mine)
        rows.append(ids)
    keep = [i for i, t in enumerate(targets) if t]  # windows with nothing to read are not run
    rows, targets = [rows[i] for i in keep], [targets[i] for i in keep]
    for idx, states, _ in hidden_states(model, rows, layer, batch_size, threads, progress, "word-type features"):
        flat = [(b, v, s, e) for b, i in enumerate(idx) for v, s, e in targets[i]]
        if not flat:
            continue
        b, v, s, e = (np.asarray(x, dtype=np.int64) for x in zip(*flat))
        np.add.at(sums, v, _word_vectors(states, b, s, e, subword).numpy())
    vectors = (sums / used[:, None]).astype(np.float32)
    return Embedding(known, vectors, used, name=name or f"{model.name}.layer{layer_index}",
                     source=f"contextual word types of {model.name}",
                     metadata={"kind": "contextual_word_type", "model": model.name, "layer": layer_index,
                               "subword": subword, "min_count": min_count, "max_occurrences": max_occurrences,
                               "texts": len(docs), "windows": len(windows)})


def _word_vectors(states: torch.Tensor, b: np.ndarray, s: np.ndarray, e: np.ndarray, subword: str) -> torch.Tensor:
    """float64 vectors of word spans: piece ``s`` (first) or the mean of pieces ``s..e-1`` of row ``b``."""
    h = states.double()
    bt = torch.from_numpy(b)
    if subword == "first":
        return h[bt, torch.from_numpy(s + 1)]
    # span means from a prefix sum over positions (float64, so no cancellation to speak of)
    csum = torch.nn.functional.pad(h.cumsum(1), (0, 0, 1, 0))
    return (csum[bt, torch.from_numpy(e + 1)] - csum[bt, torch.from_numpy(s + 1)]) \
        / torch.from_numpy(e - s).unsqueeze(1).double()


def token_features(model: ContextualModel, sentences: Sequence[str] | Sequence[Sequence[str]], *, layer: int = -1,
                   subword: str = "first", batch_size: int = 32, threads: int | None = 1,
                   progress: bool = False) -> list[np.ndarray]:
    """One contextual vector per word of each sentence (the input of a tagger on frozen features).

    A sentence longer than the model's limit is read in consecutive windows that fit
    (:func:`word_windows`), so every word gets a vector; a word the tokenizer turns into no piece
    at all reads as ``[UNK]``. A word's vector is the state of its first piece, or the mean of its
    pieces, as for :func:`word_type_embedding`.

    Parameters
    ----------
    model : ContextualModel
    sentences : sequence of str or of token lists
        Strings are split with :func:`embstab.data.tokenize`; token lists (a tagging task's) are
        kept word for word, so the vectors line up with the tags.
    layer : int
        Hidden state to read (0 = input embeddings, −1 = last).
    subword : {"first", "mean"}
    batch_size, threads, progress
        As for :func:`sentence_features`.

    Returns
    -------
    list of numpy.ndarray
        Per sentence, a ``(n_words, hidden)`` float32 array.

    Raises
    ------
    EmptyTextError
        If a sentence has no word.
    SequenceLengthError
        If one word alone has more pieces than the model reads.
    ConfigError
        ``batch_size`` below 1, or ``threads`` below 1 or more than the usable cores.
    """
    _check_run(batch_size, threads)
    _check_choice(subword, SUBWORDS, "subword")
    _check_layer(model, layer)
    words = as_word_lists(sentences)
    pieces = WordPieces(model.tokenizer)
    pieces.add(w for ws in words for w in ws)
    unk = np.asarray([pieces.unk], dtype=np.int64)
    out = [np.zeros((len(ws), model.hidden_size), dtype=np.float32) for ws in words]
    rows: list[np.ndarray] = []
    spans: list[tuple[int, int, np.ndarray]] = []  # per row: sentence, first word, piece offsets
    for i, ws in enumerate(words):
        first = 0
        for window in word_windows([ws], pieces, model.max_length):
            parts = [pieces[w] if len(pieces[w]) else unk for w in window]
            starts = np.zeros(len(parts) + 1, dtype=np.int64)
            np.cumsum([len(p) for p in parts], out=starts[1:])
            rows.append(np.concatenate(parts))
            spans.append((i, first, starts))
            first += len(window)
    for idx, states, _ in hidden_states(model, rows, layer, batch_size, threads, progress, "token features"):
        b = np.concatenate([np.full(len(spans[r][2]) - 1, k) for k, r in enumerate(idx)])
        s = np.concatenate([spans[r][2][:-1] for r in idx])
        e = np.concatenate([spans[r][2][1:] for r in idx])
        vecs = _word_vectors(states, b, s, e, subword).float().numpy()
        at = 0
        for r in idx:
            sent, first, starts = spans[r]
            n = len(starts) - 1
            out[sent][first:first + n] = vecs[at:at + n]
            at += n
    return out

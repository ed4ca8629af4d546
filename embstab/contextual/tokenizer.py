"""WordPiece tokenizers: trained once on a corpus (deterministically), or loaded from a model folder.

Both members of a pretraining pair must share one tokenizer, so that the same word is split into
the same pieces and word-type averages are taken over the same occurrences; the tokenizer is
therefore trained on the *union* of the two corpus versions, once, before either model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from typing import TYPE_CHECKING

from embstab.errors import ConfigError, DataFormatError
from embstab.contextual._deps import require

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["SPECIAL_TOKENS", "train_wordpiece", "load_tokenizer", "plain_tokenizer", "wordpiece_from_vocab"]

#: Special tokens in BERT order; ``[PAD]`` is id 0 for a trained tokenizer, as in BERT's vocabulary.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def plain_tokenizer(tok: Tokenizer) -> Tokenizer:
    """The same tokenizer with padding, truncation and the ``[CLS] … [SEP]`` template switched off.

    embstab adds special tokens, pads and checks lengths itself (so an over-long text is an error
    rather than silently cut); a packaged ``tokenizer.json`` often has truncation at 128 built in.

    Parameters
    ----------
    tok : tokenizers.Tokenizer
        Left unchanged.

    Returns
    -------
    tokenizers.Tokenizer
        A copy without padding, truncation or post-processor.
    """
    tok = require("tokenizers").Tokenizer.from_str(tok.to_str())
    tok.no_padding()
    tok.no_truncation()
    tok.post_processor = None
    return tok


def train_wordpiece(docs: Iterable[Sequence[str]], vocab_size: int = 8000, min_frequency: int = 2) -> Tokenizer:
    """Train a lower-casing BERT-style WordPiece tokenizer on tokenised documents, deterministically.

    The vocabulary is learnt as BERT's WordPiece trainer learns it (byte-pair merges over the
    normalised, pre-tokenised words, continuation pieces prefixed ``##``), but ties between
    equally frequent pairs go to the lexicographically smallest pair. The ``tokenizers`` trainer
    breaks them in hash-map order, which changes from one call to the next, so two pretraining
    runs with the same arguments got different vocabularies and shared no weight tensor.

    Parameters
    ----------
    docs : iterable of token lists
        The training text (e.g. the union of the two versions of a corpus pair).
    vocab_size : int
        Vocabulary size including the special tokens.
    min_frequency : int
        Minimum count of a merged pair; merging stops earlier when no pair is this frequent.

    Returns
    -------
    tokenizers.Tokenizer
        Without padding, truncation or post-processing (see :func:`plain_tokenizer`). The special
        tokens have ids 0–4 and the other pieces follow in sorted order. The same documents and
        arguments always give the same tokenizer.

    Raises
    ------
    ValueError
        If ``vocab_size`` is too small to hold the special tokens and an alphabet.
    """
    if vocab_size < len(SPECIAL_TOKENS) + 26:
        raise ConfigError(f"vocab_size must be at least {len(SPECIAL_TOKENS) + 26}, got {vocab_size}")
    tk = require("tokenizers")
    decoders, models, normalizers, pre_tokenizers = tk.decoders, tk.models, tk.normalizers, tk.pre_tokenizers
    normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None, clean_text=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    counts: dict[str, int] = {}
    for doc in docs:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(" ".join(doc))):
            counts[word] = counts.get(word, 0) + 1
    pieces = _wordpiece_vocabulary(counts, vocab_size - len(SPECIAL_TOKENS), max(1, min_frequency))
    vocab = {p: i for i, p in enumerate([*SPECIAL_TOKENS, *sorted(pieces)])}
    tok = tk.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.WordPiece()
    return tok


def _wordpiece_vocabulary(counts: dict[str, int], size: int, min_frequency: int) -> set[str]:
    """Pieces of a WordPiece vocabulary of at most ``size`` entries: every character (first and
    ``##`` continuation forms), then the most frequent adjacent pairs merged one at a time."""
    import heapq

    words = sorted(counts)  # a fixed order: nothing below depends on hash order
    weight = [counts[w] for w in words]
    symbols = [[w[0], *("##" + c for c in w[1:])] for w in words]
    pieces = {s for syms in symbols for s in syms}
    pair_count: dict[tuple[str, str], int] = {}
    where: dict[tuple[str, str], set[int]] = {}

    changed: set[tuple[str, str]] = set()

    def account(i: int, sign: int) -> None:
        syms = symbols[i]
        for pair in zip(syms, syms[1:]):
            pair_count[pair] = pair_count.get(pair, 0) + sign * weight[i]
            changed.add(pair)
            if sign > 0:
                where.setdefault(pair, set()).add(i)

    for i in range(len(words)):
        account(i, 1)
    changed.clear()
    # max count first, then the smallest pair: (-count, a, b) orders a min-heap exactly so;
    # entries whose count has since changed are skipped when popped
    heap = [(-c, a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    while len(pieces) < size and heap:
        neg, a, b = heapq.heappop(heap)
        if pair_count.get((a, b), 0) != -neg or -neg <= 0:
            continue
        if -neg < min_frequency:
            break
        merged = a + (b[2:] if b.startswith("##") else b)
        pieces.add(merged)
        for i in sorted(where.pop((a, b), ())):
            syms = symbols[i]
            if not any(x == a and y == b for x, y in zip(syms, syms[1:])):
                continue
            account(i, -1)
            out, j = [], 0
            while j < len(syms):
                if j + 1 < len(syms) and syms[j] == a and syms[j + 1] == b:
                    out.append(merged)
                    j += 2
                else:
                    out.append(syms[j])
                    j += 1
            symbols[i] = out
            account(i, 1)
        pair_count.pop((a, b), None)
        changed.discard((a, b))
        for pair in sorted(changed):
            if pair_count.get(pair, 0) > 0:
                heapq.heappush(heap, (-pair_count[pair], *pair))
        changed.clear()
    return pieces


def wordpiece_from_vocab(path: str | os.PathLike, lowercase: bool = True,
                         strip_accents: bool | None = None) -> Tokenizer:
    """A BERT WordPiece tokenizer from a ``vocab.txt`` (one piece per line, the line number is its id).

    Built like :func:`train_wordpiece` builds one (BERT normaliser and pre-tokenizer, ``##``
    continuation pieces), for checkpoints that ship ``vocab.txt`` without a ``tokenizer.json``.

    Parameters
    ----------
    path : str or os.PathLike
        The ``vocab.txt`` file.
    lowercase : bool, default True
        Lower-case the text first (``do_lower_case`` of the checkpoint's ``tokenizer_config.json``).
    strip_accents : bool, optional
        Strip accents; ``None`` follows ``lowercase``, as BERT's tokenizer does.

    Returns
    -------
    tokenizers.Tokenizer
        Without padding, truncation or post-processing.

    Raises
    ------
    ValueError
        If the file lacks ``[UNK]``.
    """
    tk = require("tokenizers")
    # lines end at "\n" only: a piece may hold "\r" or U+2028, and the line number is its id
    with open(path, encoding="utf-8", newline="\n") as f:
        # a piece listed twice keeps its later line, as the checkpoints' own BERT tokenizer reads it
        vocab = {line.rstrip("\n").removesuffix("\r"): i for i, line in enumerate(f)}
    if "[UNK]" not in vocab:
        raise DataFormatError(path, "no [UNK] piece")
    tok = tk.Tokenizer(tk.models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = tk.normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents, clean_text=True)
    tok.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
    tok.decoder = tk.decoders.WordPiece()
    return tok


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Load ``tokenizer.json`` (a file, or a folder holding one), made plain by :func:`plain_tokenizer`.

    Parameters
    ----------
    path : str or os.PathLike
        The file, or a model folder holding ``tokenizer.json``.

    Returns
    -------
    tokenizers.Tokenizer

    Raises
    ------
    OptionalDependencyError
        If ``tokenizers`` is not installed.
    FileNotFoundError
        If there is no such file.
    DataFormatError
        If the file is not a tokenizer ``tokenizers`` can read (the message names it).
    UnsafeWeightsError
        If a folder's ``tokenizer.json`` is a link that leads outside the folder.
    """
    from embstab.data.errors import DataFormatError  # noqa: PLC0415
    from embstab.io.modelfolder import component  # noqa: PLC0415

    path = os.fspath(path)
    if os.path.isdir(path):
        folder, path = path, os.path.join(path, "tokenizer.json")
        if os.path.lexists(path):  # a model folder's component: never one that leads out of the folder
            path = os.fspath(component(folder, "tokenizer.json", "tokenizer file"))
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "no tokenizer file", path)
    tokenizers = require("tokenizers")
    try:
        tok = tokenizers.Tokenizer.from_file(path)
    except Exception as exc:  # noqa: BLE001 - the Rust library raises a bare Exception for any bad file
        first = str(exc).strip().split("\n")[0] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(path, f"not a tokenizer file the 'tokenizers' library can read ({first[:200]})") from None
    return plain_tokenizer(tok)

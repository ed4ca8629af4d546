"""WordPiece tokenizers: trained once on a corpus with ``tokenizers``, or loaded from a model folder.

Both members of a pretraining pair must share one tokenizer, so that the same word is split into
the same pieces and word-type averages are taken over the same occurrences; the tokenizer is
therefore trained on the *union* of the two corpus versions, once, before either model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from typing import TYPE_CHECKING

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
    """Train a lower-casing BERT-style WordPiece tokenizer on tokenised documents.

    Parameters
    ----------
    docs : iterable of token lists
        The training text (e.g. the union of the two versions of a corpus pair).
    vocab_size : int
        Vocabulary size including the special tokens.
    min_frequency : int
        Minimum count of a merged piece.

    Returns
    -------
    tokenizers.Tokenizer
        Without padding, truncation or post-processing (see :func:`plain_tokenizer`). The special
        tokens have ids 0–4 and the other pieces follow in sorted order, so the same pieces always
        get the same ids.

    Raises
    ------
    ValueError
        If ``vocab_size`` is too small to hold the special tokens and an alphabet.
    """
    if vocab_size < len(SPECIAL_TOKENS) + 26:
        raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS) + 26}, got {vocab_size}")
    tk = require("tokenizers")
    decoders, models, normalizers, pre_tokenizers, trainers = (tk.decoders, tk.models, tk.normalizers,
                                                               tk.pre_tokenizers, tk.trainers)
    tok = tk.Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=None, clean_text=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tok.train_from_iterator((" ".join(d) for d in docs), trainer=trainer)
    # the trainer numbers its pieces in hash-map order, which changes from call to call; a fixed
    # order gives the same ids whenever it finds the same pieces (ties at the vocabulary cut can
    # still change which pieces it keeps)
    pieces = [p for p in tok.get_vocab() if p not in SPECIAL_TOKENS]
    vocab = {p: i for i, p in enumerate([*SPECIAL_TOKENS, *sorted(pieces)])}
    tok.model = models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100)
    return tok


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
        raise ValueError(f"{os.fspath(path)}: no [UNK] piece")
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
    """
    from embstab.data.errors import DataFormatError  # noqa: PLC0415

    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "no tokenizer file", path)
    tokenizers = require("tokenizers")
    try:
        tok = tokenizers.Tokenizer.from_file(path)
    except Exception as exc:  # noqa: BLE001 - the Rust library raises a bare Exception for any bad file
        first = str(exc).strip().split("\n")[0] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(path, f"not a tokenizer file the 'tokenizers' library can read ({first[:200]})") from None
    return plain_tokenizer(tok)

"""Reading and writing embedding files, with the format detected from the content.

Formats (``format=`` names):

========================  ==========================================================  ==========
name                      what                                                        suffix
========================  ==========================================================  ==========
``word2vec``              text, ``n d`` header line then ``word v1 … vd``              .txt .w2v
``vec``                   fastText text: the same layout as ``word2vec``               .vec
``glove``                 text without a header                                       .glove
``word2vec_binary``       ``n d`` header then word + d float32 per record              .bin
``npz``                   NumPy archive with ``words``, ``vectors`` (and ``counts``)    .npz
``npy``                   NumPy matrix plus ``X.vocab`` (a word per line [tab count])  .npy
``gensim``                gensim ``KeyedVectors.save`` file (a pickle: trusted files)  .kv
``embstab``               embstab's bit-packed compressed format                      .esq
========================  ==========================================================  ==========

Every problem with a file raises :class:`~embstab.errors.EmbeddingFormatError` naming the file,
the line and the problem. Sizes declared in headers are checked against the file size before
anything is allocated, so a tiny hostile file cannot ask for terabytes.

Pickles are never loaded on detection: unpickling runs code, so a file that starts with pickle
bytes (a gensim ``KeyedVectors.save`` file) is refused unless the caller asks for it with
``format="gensim"`` or ``trust_pickle=True`` (``--trust-pickle`` on the command line). Load
pickles only from sources you trust.

Writes go through :func:`embstab._fs.atomic_write`: a temporary file renamed into place for
regular files (a failed save leaves nothing behind and never clobbers an existing file with half a
file), streamed into devices, pipes and ``/dev/stdout``, which are never replaced.
"""

from __future__ import annotations

import os

import numpy as np

from embstab._fs import atomic_write
from embstab.embedding import Embedding, register_writer
from embstab.errors import EmbeddingFormatError, lookup
from embstab.io.arrays import read_npy, read_npz, vocab_path_for, write_npy, write_npz
from embstab.io.binary import read_word2vec_binary, write_word2vec_binary
from embstab.io.text import BOM, parse_header, read_text, write_text

__all__ = ["FORMATS", "HYPERBOLIC_MAGIC", "PICKLE_RISK", "PRODUCT_MAGIC", "detect_format", "format_of_path",
           "is_pickle", "load", "save", "sniff_format"]

FORMATS = ("word2vec", "vec", "glove", "word2vec_binary", "npz", "npy", "gensim", "embstab")
_SUFFIXES = {".txt": "word2vec", ".w2v": "word2vec", ".vec": "vec", ".glove": "glove", ".bin": "word2vec_binary",
             ".npz": "npz", ".npy": "npy", ".kv": "gensim", ".esq": "embstab"}


#: What ``--trust-pickle`` risks, for help texts and errors.
PICKLE_RISK = ("unpickling runs code stored in the file: trust a pickled gensim file only if you made it "
               "or trust its source")


#: ``embstab.load("builtin:NAME")`` loads a pretrained embedding that ships in a package.
BUILTIN_PREFIX = "builtin:"

#: The first lines of the text files of :mod:`embstab.hyperbolic` (a hyperbolic and a product
#: embedding). They live here, with the other formats' leading bytes, so that a file is told
#: apart by content in this one module; that kind imports them to write and read its files.
HYPERBOLIC_MAGIC = "# embstab-hyperbolic v1"
PRODUCT_MAGIC = "# embstab-product v1"
#: What every such first line starts with (any version): :func:`detect_format` says "hyperbolic".
_MANIFOLD_PREFIX = b"# embstab-"


def is_pickle(head: bytes) -> bool:
    """Whether bytes start like a pickle of protocol 2-5 (what gensim ``.save()`` writes).

    Parameters
    ----------
    head : bytes
        The first bytes of a file.

    Returns
    -------
    bool
    """
    return head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")


def _compressed_module():
    # the compressed format depends on the low-precision core; import it only when needed
    from embstab.io import compressed

    return compressed


def format_of_path(path: str | os.PathLike, default: str = "word2vec") -> str:
    """The format a path's suffix names (``.txt`` word2vec, ``.npz``, ``.esq`` embstab, ...), else ``default``.

    Parameters
    ----------
    path : str or os.PathLike
        A file to write.
    default : str, default "word2vec"
        The format of a path whose suffix names none.

    Returns
    -------
    str
        One of :data:`FORMATS`.
    """
    return _SUFFIXES.get(os.path.splitext(os.fspath(path))[1].lower(), default)


def detect_format(path: str | os.PathLike) -> str:
    """Guess the format of an existing file from its first bytes (the suffix is not trusted).

    Detection only reads bytes: a file that looks like a pickle is reported as ``"gensim"``
    but is never unpickled here (:func:`load` refuses it unless asked). A hyperbolic or product
    embedding of :mod:`embstab.hyperbolic` (a first line from :data:`HYPERBOLIC_MAGIC` or
    :data:`PRODUCT_MAGIC`, of any version) is ``"hyperbolic"``: that kind reads it, :func:`load` does not.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    str
        One of ``"embstab"``, ``"npz"``, ``"npy"``, ``"gensim"``, ``"hyperbolic"``,
        ``"word2vec_binary"``, ``"word2vec"`` (text with an ``n d`` header) and ``"glove"`` (text
        without one).

    Raises
    ------
    EmbeddingFormatError
        The path is a directory, the file is empty.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise EmbeddingFormatError(path, "is a directory, not an embedding file")
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if not head:
        raise EmbeddingFormatError(path, "the file is empty")
    if head.startswith(_compressed_module().MAGIC):
        return "embstab"
    if head.startswith(b"PK\x03\x04"):
        return "npz"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if is_pickle(head):
        return "gensim"
    if head.startswith(_MANIFOLD_PREFIX):
        return "hyperbolic"
    if head.startswith(BOM):
        head = head[len(BOM):]
    newline = head.find(b"\n")
    first = head[: newline if newline >= 0 else len(head)]
    try:
        header = parse_header(first.decode("ascii"))
    except UnicodeDecodeError:
        header = None
    if header is not None:
        rest = head[newline + 1:]
        try:
            rest.decode("utf-8")
            binary = b"\x00" in rest
        except UnicodeDecodeError as exc:
            # a multi-byte character cut at the end of the sniffed block is still text
            binary = exc.start < len(rest) - 4
        return "word2vec_binary" if binary else "word2vec"
    return "glove"


def sniff_format(spec: str | os.PathLike) -> str | None:
    """What :func:`detect_format` says of a regular file; None for anything that is not one.

    For a caller that must choose a reader before loading (a word embedding through
    :func:`load`, a ``"hyperbolic"`` one through :mod:`embstab.hyperbolic`): ``builtin:NAME``,
    a missing path, a directory, a pipe (whose read would block), an unreadable or empty file
    give None, and the reader then reports what is wrong.

    Parameters
    ----------
    spec : str or os.PathLike
        A path or ``builtin:NAME``, as :func:`load` takes.

    Returns
    -------
    str or None
        One of the names :func:`detect_format` returns, or None.
    """
    if not os.path.isfile(spec):
        return None
    try:
        return detect_format(spec)
    except (OSError, EmbeddingFormatError):
        return None


def load(
    path: str | os.PathLike,
    format: str | None = None,
    *,
    dtype=np.float64,
    duplicates: str = "error",
    name: str | None = None,
    vocab: str | os.PathLike | None = None,
    progress: bool | None = None,
    trust_pickle: bool = False,
) -> Embedding:
    """Load an embedding file into an :class:`~embstab.Embedding`.

    Parameters
    ----------
    path : str or os.PathLike
        The file, or ``"builtin:NAME"`` for a pretrained embedding that ships in a package
        (``builtin:glove_6b_50d``, ``builtin:minilm_l6_input``; see
        :mod:`embstab.data.pretrained`).
    format : str, optional
        One of :data:`FORMATS`; detected from the content when omitted. ``"gensim"`` unpickles
        the file (see ``trust_pickle``).
    dtype : numpy dtype
        Dtype of the matrix (float64 by default; float32 halves the memory).
    duplicates : {"error", "first"}
        A word that occurs twice is an error, or the first occurrence is kept with a warning.
    name : str, optional
        Name of the embedding (default: the name stored in the file, else the file name).
    vocab : str or os.PathLike, optional
        Vocabulary file of a ``.npy`` matrix (default: the same name with ``.vocab``).
    progress : bool, optional
        Progress bar for large files (default: on above 20 MB).
    trust_pickle : bool
        Load a file that turns out to be a pickle (a gensim ``KeyedVectors.save`` file). Off by
        default because unpickling runs code from the file; ``format="gensim"`` also opts in.

    Returns
    -------
    Embedding

    Raises
    ------
    EmbeddingFormatError
        Malformed file: inconsistent width, non-numeric field, NaN or Inf, header/row count
        mismatch, duplicate word, empty file, binary garbage, undecodable text, sizes that do not
        fit the file, a pickle that was not trusted, or a hyperbolic embedding (see
        :func:`detect_format`).
    UnknownNameError
        ``format`` or ``duplicates`` is not a known value.
    FileNotFoundError
        The file does not exist.
    """
    path = os.fspath(path)
    if isinstance(path, str) and path.startswith(BUILTIN_PREFIX) and not os.path.exists(path):
        # a data package, not a file: the catalogue lives in embstab.data (imported only when asked)
        from embstab.data.pretrained import load_pretrained

        emb = load_pretrained(path[len(BUILTIN_PREFIX):], dtype=dtype)
        if name is not None:
            emb.name = name
        return emb
    if not os.path.exists(path):
        raise FileNotFoundError(2, "no such embedding file", path)
    if not os.path.isdir(path) and not os.path.isfile(path):
        # readers make several passes (and a pipe would block detection forever)
        raise EmbeddingFormatError(path, "is not a regular file (a pipe, device or socket); embstab reads an "
                                   "embedding file more than once, so save it to a file first")
    if format is not None:
        lookup(dict.fromkeys(FORMATS), format, "embedding format")
    lookup(dict.fromkeys(("error", "first")), duplicates, "duplicates policy")
    fmt = format or detect_format(path)
    if fmt == "hyperbolic":
        raise EmbeddingFormatError(path, "holds a hyperbolic (or product) embedding, not a word embedding: read it "
                                   "with embstab.hyperbolic.load_embedding (`embstab compare` takes two of them)")
    if fmt == "gensim" and format is None and not trust_pickle:
        raise EmbeddingFormatError(path, "the file is a pickle (a gensim KeyedVectors file?), which embstab does "
                                   "not load unless asked because " + PICKLE_RISK + "; to load it anyway pass "
                                   "--trust-pickle (Python: embstab.load(path, format='gensim'))")
    counts = None
    lines = None
    meta: dict = {}
    if fmt in ("word2vec", "vec", "glove"):
        words, vectors, declared, lines = read_text(path, dtype=dtype, header=False if fmt == "glove" else None,
                                                    progress=progress)
    elif fmt == "word2vec_binary":
        words, vectors = read_word2vec_binary(path, dtype=dtype, progress=progress)
    elif fmt == "npz":
        words, vectors, counts, meta = read_npz(path)
    elif fmt == "npy":
        words, vectors, counts = read_npy(path, os.fspath(vocab) if vocab else None)
    elif fmt == "gensim":
        return _load_gensim(path, dtype, name)
    else:
        emb = _compressed_module().read_compressed(path)
        if name:
            emb.name = name
        return emb
    if duplicates == "error":
        seen: dict[str, int] = {}
        for i, w in enumerate(words):
            j = seen.setdefault(w, i)
            if j != i:
                where = lines[i] if lines is not None else i + 1
                first = f"line {lines[j]}" if lines is not None else f"record {j + 1}"
                raise EmbeddingFormatError(path, f"duplicate word {w!r} (first seen on {first}); "
                                           "keep the first occurrence with --duplicates first "
                                           "(Python: duplicates='first')", where)
    return Embedding(words, np.asarray(vectors, dtype=dtype), counts, name=name or meta.get("name") or _stem(path),
                     source=path, metadata=meta.get("metadata") or None, duplicates=duplicates, copy=False)


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def _load_gensim(path: str, dtype, name: str | None) -> Embedding:
    try:
        from gensim.models import KeyedVectors
    except ImportError:
        from embstab.errors import OptionalDependencyError

        raise OptionalDependencyError("gensim", "reading gensim KeyedVectors files") from None
    try:
        obj = KeyedVectors.load(path)
    except Exception as exc:  # unpickling errors come in many types
        raise EmbeddingFormatError(path, f"not a loadable gensim KeyedVectors file ({type(exc).__name__}: {exc})") \
            from None
    kv = getattr(obj, "wv", obj)  # a whole Word2Vec/FastText model saved with .save() also works
    if not hasattr(kv, "index_to_key"):
        raise EmbeddingFormatError(path, f"the pickle holds a {type(obj).__name__}, not gensim KeyedVectors")
    emb = Embedding.from_keyedvectors(kv, name=name or _stem(path), source=path)
    return emb.astype(dtype) if emb.dtype != dtype else emb


def save(emb: Embedding, path: str | os.PathLike, format: str | None = None, **kwargs) -> None:
    """Write ``emb`` to ``path`` safely (see :func:`embstab._fs.atomic_write`).

    Parameters
    ----------
    emb : Embedding
        What to write.
    path : str or os.PathLike
        The target; a device, pipe or ``/dev/stdout`` is written into, never replaced.
    format : str, optional
        One of :data:`FORMATS`; taken from the suffix when omitted (see the module table;
        unknown suffixes give word2vec text). An embedding made by :mod:`embstab.compress` is
        saved as ``.esq`` with its exact codes; any other embedding as raw float32. To quantize
        while saving, use :func:`embstab.compress.save_compressed` (``bits=``, ``format=``);
        passing such options here raises a ``TypeError`` that says so.

    Raises
    ------
    EmbeddingFormatError
        A word cannot be stored in the chosen format.
    UnknownNameError
        ``format`` is not one of :data:`FORMATS`.
    OSError
        The target cannot be written (a directory, no permission, disk full).
    """
    path = os.fspath(path)
    fmt = format or format_of_path(path)
    lookup(dict.fromkeys(FORMATS), fmt, "embedding format")
    words, vectors, counts = emb.words, emb.vectors, emb.counts
    if fmt in ("word2vec", "vec", "glove"):
        write_text(path, words, vectors, header=fmt != "glove")
    elif fmt == "word2vec_binary":
        write_word2vec_binary(path, words, vectors)
    elif fmt == "npz":
        write_npz(path, emb)
    elif fmt == "npy":
        write_npy(path, words, vectors, counts, vocab_path_for(path))
    elif fmt == "gensim":
        kv = emb.to_keyedvectors()
        with atomic_write(path) as fh:
            kv.save(fh)  # a file handle makes gensim write one self-contained file, no side files
    else:
        _compressed_module().write_compressed(emb, path, **kwargs)


register_writer(save)  # Embedding.save writes through this module

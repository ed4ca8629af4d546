"""The :class:`Embedding` container: words, a float matrix in frequency order, counts and metadata."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from embstab._numbers import is_integer
from embstab.errors import ConfigError, EmbstabError, ShapeError, VocabularyError

__all__ = ["DEFAULT_TOP_N", "Embedding", "shared_vocabulary", "take_top_n", "procrustes_rotation", "register_writer"]

# The writer behind Embedding.save. embstab.io builds Embedding objects, so this module cannot
# import it without closing an import cycle; io installs its ``save`` here instead, and
# ``import embstab`` always imports io.
_writer: Callable[..., None] | None = None


def register_writer(writer: Callable[..., None]) -> None:
    """Make ``writer(emb, path, format=None, **kwargs)`` the function behind :meth:`Embedding.save`.

    Parameters
    ----------
    writer : callable
        :func:`embstab.io.save`, which registers itself when :mod:`embstab.io` is imported.
    """
    global _writer
    _writer = writer


class Embedding:
    """A word embedding: unique words, one float row per word, in frequency order.

    Row order is meaningful: it is taken to be frequency rank (most frequent first), as word2vec,
    GloVe and fastText write their files, and it decides which words :meth:`top` and
    :func:`embstab.compare` keep.

    Parameters
    ----------
    words : sequence of str
        One unique word per row.
    vectors : array_like of shape (n_words, dim)
        Real-valued matrix; float32 and float64 are kept as given, other dtypes become float64.
    counts : array_like of int, optional
        Corpus frequency of each word, aligned with ``words``.
    name : str, optional
        Short human-readable name (shown in reports and tables).
    source : str, optional
        Where the embedding came from (a path, a package, a trainer configuration).
    metadata : mapping, optional
        Free-form extra information (training settings, compression settings...).
    duplicates : {"error", "first"}
        What to do when a word occurs twice: raise, or keep the first occurrence with a warning.
    copy : bool
        Copy ``vectors`` (default) or keep a reference when it is already a suitable array.
    codes : CompressedData, optional
        The exact low-precision codes ``vectors`` were decoded from (set by
        :mod:`embstab.compress`), so saving to ``.esq`` writes those codes again instead of
        float32 values. Saving checks they still decode to ``vectors`` and ignores them otherwise.

    Raises
    ------
    ShapeError
        If ``vectors`` is not 2-D, its row count differs from ``len(words)``, or it holds NaN/Inf.
    VocabularyError
        If a word is duplicated and ``duplicates="error"``.
    """

    __slots__ = ("_words", "_vectors", "_counts", "_index", "name", "source", "metadata", "codes")

    def __init__(
        self,
        words: Sequence[str],
        vectors: Any,
        counts: Any = None,
        *,
        name: str | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        duplicates: str = "error",
        copy: bool = True,
        codes: Any = None,
    ) -> None:
        words = [str(w) for w in words]
        vectors = _as_vectors(vectors, copy)
        if vectors.ndim != 2:
            raise ShapeError(f"embedding vectors must be a 2-D (n_words, dim) array, got shape {vectors.shape}")
        if vectors.shape[0] != len(words):
            raise ShapeError(f"{len(words)} words but {vectors.shape[0]} vector rows")
        if not np.isfinite(vectors).all():
            bad = int(np.flatnonzero(~np.isfinite(vectors).all(axis=1))[0])
            raise ShapeError(f"vector of word {words[bad]!r} (row {bad}) contains NaN or Inf")
        if counts is not None:
            counts = np.asarray(counts)
            if counts.shape != (len(words),):
                raise ShapeError(f"counts must have shape ({len(words)},), got {counts.shape}")
        index: dict[str, int] = {}
        keep: list[int] | None = None
        for i, w in enumerate(words):
            if w in index:
                if duplicates == "error":
                    raise VocabularyError(f"duplicate word {w!r} at rows {index[w]} and {i}")
                if duplicates != "first":
                    raise ConfigError(f"duplicates must be 'error' or 'first', got {duplicates!r}")
                if keep is None:
                    keep = list(range(i))
                warnings.warn(f"duplicate word {w!r} at row {i}: keeping the first occurrence (row {index[w]})",
                              stacklevel=2)
                continue
            index[w] = len(index)
            if keep is not None:
                keep.append(i)
        if keep is not None:
            words = [words[i] for i in keep]
            vectors = vectors[keep]
            counts = counts[keep] if counts is not None else None
        self._words: list[str] = words
        self._vectors: np.ndarray = vectors
        self._counts = counts
        self._index = index
        self.name = name
        self.source = source
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.codes: Any = codes

    # ------------------------------------------------------------------ basic container protocol
    @property
    def words(self) -> list[str]:
        """The words, in row (frequency) order. A copy: mutating it does not change the embedding."""
        return list(self._words)

    @property
    def vectors(self) -> np.ndarray:
        """The (n_words, dim) matrix (read-only view)."""
        view = self._vectors.view()
        view.flags.writeable = False
        return view

    @property
    def counts(self) -> np.ndarray | None:
        """Corpus counts aligned with :attr:`words`, or ``None``."""
        return None if self._counts is None else self._counts.copy()

    @property
    def dim(self) -> int:
        """Embedding dimension (number of columns)."""
        return int(self._vectors.shape[1])

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self._vectors.shape)  # type: ignore[return-value]

    @property
    def dtype(self) -> np.dtype:
        return self._vectors.dtype

    def __len__(self) -> int:
        return len(self._words)

    def __iter__(self) -> Iterator[str]:
        return iter(self._words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def __getitem__(self, word: str) -> np.ndarray:
        try:
            return self.vectors[self._index[word]]
        except KeyError:
            raise VocabularyError(f"word {word!r} is not in the embedding{self._label()}") from None

    def index(self, word: str) -> int:
        """Row index of ``word``.

        Parameters
        ----------
        word : str
            The word.

        Returns
        -------
        int
            Its row.

        Raises
        ------
        VocabularyError
            If the word is absent.
        """
        try:
            return self._index[word]
        except KeyError:
            raise VocabularyError(f"word {word!r} is not in the embedding{self._label()}") from None

    def get(self, word: str, default: Any = None) -> Any:
        """The vector of ``word`` or ``default`` when it is absent.

        Parameters
        ----------
        word : str
            The word.
        default : object, optional
            Returned for an absent word (None by default).

        Returns
        -------
        numpy.ndarray or object
            The row (a read-only view), or ``default``.
        """
        i = self._index.get(word)
        return default if i is None else self.vectors[i]

    def __repr__(self) -> str:
        name = f"{self.name!r}, " if self.name else ""
        return f"Embedding({name}{len(self)} words x {self.dim} dims, {self.dtype})"

    def _label(self) -> str:
        return f" {self.name!r}" if self.name else ""

    # ------------------------------------------------------------------ derived embeddings
    def _derive(self, words: list[str], vectors: np.ndarray, counts: Any, **meta: Any) -> Embedding:
        out = Embedding.__new__(Embedding)
        out._words = words
        out._vectors = vectors
        out._counts = counts
        out._index = {w: i for i, w in enumerate(words)}
        out.name = self.name
        out.source = self.source
        out.metadata = {**self.metadata, **meta}
        out.codes = self.codes  # kept only while they still decode to the vectors (checked on save)
        return out

    def subset(self, words: Iterable[str], missing: str = "error") -> Embedding:
        """The rows of ``words``, in the order given.

        Parameters
        ----------
        words : iterable of str
            The words to keep.
        missing : {"error", "skip"}, default "error"
            Raise :class:`VocabularyError` naming the missing words, or drop them silently.

        Returns
        -------
        Embedding
            A new embedding of those rows (counts kept).

        Raises
        ------
        VocabularyError
            If words are missing (with ``"error"``) or the list holds duplicates.
        ValueError
            If ``missing`` is neither choice.
        """
        words = list(words)
        rows = [self._index.get(w) for w in words]
        if any(r is None for r in rows):
            absent = [w for w, r in zip(words, rows) if r is None]
            if missing == "error":
                shown = ", ".join(repr(w) for w in absent[:5])
                more = f" and {len(absent) - 5} more" if len(absent) > 5 else ""
                raise VocabularyError(f"{len(absent)} of {len(words)} words are not in the embedding"
                                      f"{self._label()}: {shown}{more}")
            if missing != "skip":
                raise ConfigError(f"missing must be 'error' or 'skip', got {missing!r}")
            words = [w for w, r in zip(words, rows) if r is not None]
            rows = [r for r in rows if r is not None]
        if len(set(words)) != len(words):
            raise VocabularyError("the word list passed to subset() contains duplicates")
        idx = np.asarray(rows, dtype=np.intp)
        counts = None if self._counts is None else self._counts[idx]
        return self._derive(words, self._vectors[idx], counts)

    def top(self, n: int) -> Embedding:
        """The ``n`` most frequent words (the first ``n`` rows).

        Parameters
        ----------
        n : int
            How many rows to keep (≥ 0; more than there are keeps all).

        Returns
        -------
        Embedding
            A new embedding with copied vectors.

        Raises
        ------
        ValueError
            If ``n`` < 0.
        """
        if not is_integer(n) or n < 0:
            raise ConfigError(f"n must be an integer >= 0, got {n!r}")
        counts = None if self._counts is None else self._counts[:n]
        return self._derive(self._words[:n], self._vectors[:n].copy(), counts)

    def normalize(self) -> Embedding:
        """Rows scaled to unit L2 norm (all-zero rows are left at zero).

        Returns
        -------
        Embedding
            A new embedding; its metadata records ``normalized=True``.
        """
        norms = np.linalg.norm(self._vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return self._derive(list(self._words), self._vectors / norms, self._counts, normalized=True)

    def center(self) -> Embedding:
        """The mean row subtracted from every row.

        Returns
        -------
        Embedding
            A new embedding; its metadata records ``centered=True``.
        """
        return self._derive(list(self._words), self._vectors - self._vectors.mean(axis=0), self._counts,
                            centered=True)

    def astype(self, dtype: Any) -> Embedding:
        """The same embedding with vectors cast to ``dtype`` (e.g. ``np.float32``).

        Parameters
        ----------
        dtype : numpy dtype
            The new dtype.

        Returns
        -------
        Embedding
            A new embedding.
        """
        if np.dtype(dtype) not in (np.float32, np.float64):
            raise ConfigError(f"an embedding's vectors are float32 or float64, not {np.dtype(dtype)}")
        return self._derive(list(self._words), self._vectors.astype(dtype), self._counts)

    def with_vectors(self, vectors: Any, **metadata: Any) -> Embedding:
        """Same words, counts and name with a new matrix (same number of rows; any width).

        Parameters
        ----------
        vectors : array_like
            ``(len(self), d)`` finite matrix.
        **metadata
            Entries added to the new embedding's metadata.

        Returns
        -------
        Embedding
            A new embedding.

        Raises
        ------
        ShapeError
            If the shape does not fit or the matrix holds NaN/Inf.
        """
        vectors = _as_vectors(vectors, copy=False)
        if vectors.ndim != 2 or vectors.shape[0] != len(self):
            raise ShapeError(f"new vectors must have shape ({len(self)}, d), got {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise ShapeError("new vectors contain NaN or Inf")
        return self._derive(list(self._words), vectors, self._counts, **metadata)

    def align_to(self, other: Embedding, words: Iterable[str] | None = None) -> Embedding:
        """Rotate every row onto ``other`` by orthogonal Procrustes fitted on shared words.

        The rotation Ω minimises ``||X[S] Ω - Y[S]||_F`` over orthogonal Ω, with S the shared
        vocabulary (or ``words``), and is applied to all rows of this embedding.

        Parameters
        ----------
        other : Embedding
            The target, of the same dimension.
        words : iterable of str, optional
            The words S to fit on (default: all shared words); each must be in both embeddings.

        Returns
        -------
        Embedding
            The rotated embedding, in this one's dtype; its metadata records ``aligned_to``.

        Raises
        ------
        ShapeError
            If the dimensions differ.
        VocabularyError
            If there are fewer words to fit on than dimensions (and other words to rotate), or a given
            word is missing.
        """
        if other.dim != self.dim:
            raise ShapeError(f"cannot align a {self.dim}-d embedding to a {other.dim}-d one")
        fit_words = shared_vocabulary(self, other) if words is None else list(words)
        if not fit_words:
            raise VocabularyError("the two embeddings share no words to align on")
        if len(fit_words) < self.dim and len(set(fit_words)) < len(self):
            # fewer words than dimensions pin the rotation only on their span: the other words'
            # components outside it would turn arbitrarily (the fitted words themselves do not)
            raise VocabularyError(f"only {len(fit_words)} words to align on for {self.dim} dimensions, and "
                                  f"{len(self) - len(set(fit_words))} other words to rotate: the rotation is "
                                  "underdetermined for them; align on at least as many words as dimensions")
        x = self.subset(fit_words).vectors.astype(np.float64)
        y = other.subset(fit_words).vectors.astype(np.float64)
        omega = procrustes_rotation(x, y)
        return self._derive(list(self._words), (self._vectors.astype(np.float64) @ omega).astype(self.dtype),
                            self._counts, aligned_to=other.name)

    # ------------------------------------------------------------------ interop
    def to_keyedvectors(self):
        """A gensim ``KeyedVectors`` with the same words, order, vectors and counts.

        Returns
        -------
        gensim.models.KeyedVectors
            The vectors, with a ``count`` attribute per word when the embedding has counts.
        """
        from gensim.models import KeyedVectors

        kv = KeyedVectors(self.dim, count=0, dtype=self.dtype)
        # gensim 4.4's add_vectors(extras=...) iterates the dict wrongly, so counts are set after
        kv.add_vectors(self._words, self._vectors)
        if self._counts is not None:
            kv.allocate_vecattrs(["count"], [np.int64])
            kv.expandos["count"][:] = np.asarray(self._counts, dtype=np.int64)
        return kv

    @classmethod
    def from_keyedvectors(cls, kv, *, name: str | None = None, source: str | None = None) -> Embedding:
        """Build an :class:`Embedding` from a gensim ``KeyedVectors`` (row order kept).

        Parameters
        ----------
        kv : gensim.models.KeyedVectors
            The vectors; its ``count`` attribute, when set, becomes the counts.
        name : str, optional
            Name of the new embedding.
        source : str, optional
            Where it came from.

        Returns
        -------
        Embedding
            The embedding.
        """
        words = list(kv.index_to_key)
        counts = None
        if words and "count" in getattr(kv, "expandos", {}):
            counts = np.asarray(kv.expandos["count"][: len(words)], dtype=np.int64)
        return cls(words, np.asarray(kv.vectors), counts, name=name, source=source)

    def save(self, path: str | os.PathLike, format: str | None = None, **kwargs: Any) -> None:
        """Write the embedding to ``path``; see :func:`embstab.io.save` for the formats.

        Parameters
        ----------
        path : str or os.PathLike
            Destination file.
        format : str, optional
            File format (default: from the suffix).
        **kwargs
            Passed to the writer.

        Raises
        ------
        EmbstabError
            If no writer is registered (:mod:`embstab.io` not imported).
        """
        if _writer is None:
            raise EmbstabError("no embedding writer is registered; import embstab.io first")
        _writer(self, path, format=format, **kwargs)


def shared_vocabulary(a: Embedding, b: Embedding, top_n: int | None = None, rank_by: str = "a", *,
                      also_in: Iterable[Any] = (), exact: bool = False) -> list[str]:
    """Words present in both embeddings, ordered by the row order of ``rank_by``; the first ``top_n``.

    Parameters
    ----------
    a, b : Embedding
        The two embeddings.
    top_n : int, optional
        Keep only the first ``top_n`` shared words (by that order), > 0 (see :func:`take_top_n`).
    rank_by : {"a", "b"}, default "a"
        Whose row (frequency) order to follow.
    also_in : iterable of Embedding or collection of str, optional
        Further vocabularies (e.g. anchors) a word must be in too.
    exact : bool, default False
        Refuse fewer than ``top_n`` shared words instead of keeping them all.

    Returns
    -------
    list of str
        The shared words.

    Raises
    ------
    ValueError
        If ``rank_by`` is not "a" or "b", or ``top_n`` is not a positive integer (a
        :class:`~embstab.errors.ShapeError`).
    VocabularyError
        With ``exact``, if fewer than ``top_n`` words are shared.
    """
    if rank_by not in ("a", "b"):
        raise ConfigError(f"rank_by must be 'a' or 'b', got {rank_by!r}")
    first, second = (a, b) if rank_by == "a" else (b, a)
    others = list(also_in)
    shared = [w for w in first if w in second and all(w in o for o in others)]
    names = f"{_label(a)} and {_label(b)}"
    return take_top_n(shared, top_n, exact=exact, names=names, note=" (with the anchors)" if others else "")


class _AtMost(int):
    """A ``top_n`` that is a ceiling: fewer shared words are all kept, where a plain integer is exact."""

    def __repr__(self) -> str:
        return str(int(self))


#: The default ``top_n`` of :func:`embstab.compare` and ``embstab compare``: the paper's 10,000
#: most frequent shared words, or all of them when a pair shares fewer (a ceiling, not a demand).
DEFAULT_TOP_N = _AtMost(10000)


def take_top_n(words: Sequence[str], top_n: int | None, *, exact: bool = False,
               names: str = "the two embeddings", note: str = "") -> list[str]:
    """The first ``top_n`` of a shared vocabulary in rank order: how every part of embstab applies ``top_n``.

    :func:`shared_vocabulary`, :func:`embstab.compare` (``exact``) and the study (which compares
    the words all four of a pair and its anchors share, up to ``top_n``) all decide here.

    Parameters
    ----------
    words : sequence of str
        The shared words, most frequent first.
    top_n : int or None
        How many to keep, > 0; None keeps all. :data:`DEFAULT_TOP_N` is a ceiling even with
        ``exact``.
    exact : bool, default False
        Refuse fewer than ``top_n`` words instead of keeping them all.
    names : str, optional
        Who shares the words, for the message (``"'a' and 'b'"``).
    note : str, optional
        Appended after "words" in the message (e.g. ``" (with the anchors)"``).

    Returns
    -------
    list of str

    Raises
    ------
    ShapeError
        If ``top_n`` is not a positive integer.
    VocabularyError
        With ``exact``, if there are fewer than ``top_n`` words.
    """
    words = list(words)
    if top_n is None:
        return words
    if not is_integer(top_n) or top_n <= 0:
        raise ShapeError(f"top_n must be a positive integer (or None for all shared words), got {top_n!r}")
    if exact and len(words) < top_n and not isinstance(top_n, _AtMost):
        # both spellings: this reaches the command line as it is (one line, naming the flag)
        raise VocabularyError(f"top_n={top_n} was asked but {names} share only {len(words)} words{note}; "
                              "pass a smaller top_n (--top-n), or top_n=None (--top-n 0) for all shared words")
    return words[:top_n]


def _as_vectors(vectors: Any, copy: bool) -> np.ndarray:
    """``vectors`` as a float32 or float64 numpy array: float32 and float64 kept, other real numbers in float64.

    Complex numbers are refused (a cast would drop the imaginary parts silently), as are
    non-numeric entries; a torch tensor is detached and moved to the host first.
    """
    if hasattr(vectors, "detach") and hasattr(vectors, "cpu"):  # a torch tensor (grad, device, bf16)
        import torch  # noqa: PLC0415  (only reached with a tensor in hand)

        tensor = vectors.detach().cpu()
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.to(torch.float32)  # numpy has no bfloat16
        vectors = tensor.numpy()
    vectors = np.array(vectors, copy=copy) if copy else np.asarray(vectors)
    if vectors.dtype in (np.float32, np.float64):
        return vectors
    if np.issubdtype(vectors.dtype, np.complexfloating):
        raise ShapeError(f"embedding vectors must be real numbers, got dtype {vectors.dtype}")
    if not (np.issubdtype(vectors.dtype, np.number) or vectors.dtype == bool):
        raise ShapeError(f"embedding vectors must be numeric, got dtype {vectors.dtype}")
    return vectors.astype(np.float64)


def _label(e: Embedding) -> str:
    return repr(e.name) if getattr(e, "name", None) else "an embedding"


def procrustes_rotation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Orthogonal Ω minimising ``||x Ω - y||_F`` (Ω = U Vᵀ from the SVD of xᵀy).

    Parameters
    ----------
    x, y : numpy.ndarray
        ``(n, d)`` matrices with corresponding rows.

    Returns
    -------
    numpy.ndarray
        ``(d, d)`` orthogonal matrix.
    """
    u, _, vt = np.linalg.svd(x.T @ y)
    return u @ vt

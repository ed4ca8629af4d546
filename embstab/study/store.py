"""A content-addressed artifact store on any fsspec filesystem, with atomic writes.

An artifact's address is the SHA-256 of its canonical configuration (the settings that produce it,
including everything upstream), so two runs, two workers or two studies that need the same thing
share it, and a restart finds what is already done. Writes go to a uniquely named temporary file
next to the target and are renamed into place: a reader (or a restarted runner) sees either the
whole artifact or nothing, and two workers finishing the same artifact at once both rename a
complete file over the same name (the content is identical, because the configuration is).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import fsspec

from embstab._fs import atomic_write, is_temp_name, temp_path_for, to_json
from embstab.embedding import Embedding
from embstab.errors import DataFormatError, EmbeddingFormatError, EmbstabError, OptionalDependencyError
from embstab.io.arrays import npz_bytes, read_npz

__all__ = ["ArtifactStore", "CorruptArtifactError", "config_hash", "canonical_json"]

#: Part of every temporary file name; such files are never artifacts.


class CorruptArtifactError(DataFormatError):
    """A stored artifact cannot be read back (a damaged disk, a killed copy, an edited file).

    The message names the artifact and how to recompute it: delete the file (or run the study
    with ``--recompute``); the next run produces it again.

    Parameters
    ----------
    path : str
        The artifact's path in the store.
    problem : str
        What is wrong with it.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"corrupt artifact {path}: {problem}; delete it (or re-run the study with --recompute) "
                         "to recompute it")


def canonical_json(config: Mapping[str, Any]) -> str:
    """Deterministic JSON of a configuration (:func:`embstab._fs.to_json`: sorted keys, no white space).

    Parameters
    ----------
    config : mapping
        A configuration of JSON values (str, numbers, bools, None, lists and mappings).

    Returns
    -------
    str
        Its JSON text.

    Raises
    ------
    TypeError
        A value without a JSON form (objects are not part of a configuration).
    """
    return to_json(config)


def config_hash(config: Mapping[str, Any]) -> str:
    """The SHA-256 hex digest of :func:`canonical_json` of ``config``: an artifact's address.

    Parameters
    ----------
    config : mapping
        A configuration of JSON values.

    Returns
    -------
    str
        64 lower-case hex digits.
    """
    return hashlib.sha256(canonical_json(config).encode("utf-8")).hexdigest()


class ArtifactStore:
    """Artifacts keyed by (kind, configuration hash) under a directory or fsspec URL.

    Layout: ``ROOT/KIND/AB/ABCDEF….EXT`` plus ``….json`` holding the configuration that produced
    it (for humans and ``embstab study status``).

    Parameters
    ----------
    url : str or path-like
        A local directory (created if missing) or any fsspec URL (``memory://x``, ``s3://bucket/p``).
    storage_options : mapping, optional
        Passed to :func:`fsspec.core.url_to_fs` (credentials, endpoints).

    Raises
    ------
    OptionalDependencyError
        The URL's filesystem package (``s3fs``, ``gcsfs``...) is not installed.
    EmbstabError
        The URL's protocol is unknown.
    """

    def __init__(self, url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = os.fspath(url)
        try:
            self.fs, self.root = fsspec.core.url_to_fs(self.url, **dict(storage_options or {}))
        except ImportError:
            # fsspec knows the protocol but its implementation (s3fs, gcsfs, ...) is not installed
            protocol = self.url.split("://", 1)[0]
            from fsspec.registry import known_implementations  # noqa: PLC0415

            impl = known_implementations.get(protocol, {}).get("class", protocol)
            raise OptionalDependencyError(impl.split(".", 1)[0], f"the artifact store {self.url}") from None
        except ValueError as exc:  # "Protocol not known: foo"
            raise EmbstabError(f"store {self.url}: {exc}; use a directory or an fsspec URL such as s3://BUCKET/PATH") \
                from None
        self.root = self.root.rstrip("/")
        self.fs.makedirs(self.root, exist_ok=True)
        self._local = "file" in _protocols(self.fs)

    def __getstate__(self) -> dict[str, Any]:
        # Workers rebuild the filesystem object from the URL: fsspec instances are cached per
        # process and some hold sockets that must not be pickled.
        return {"url": self.url}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"])

    def __repr__(self) -> str:
        return f"ArtifactStore({self.url!r})"

    # Equal by URL, so per-process caches of immutable artifacts work across unpickled copies.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArtifactStore) and other.url == self.url

    def __hash__(self) -> int:
        return hash(("ArtifactStore", self.url))

    @property
    def is_local(self) -> bool:
        """Whether the store is a directory on this machine."""
        return self._local

    # --- paths -------------------------------------------------------------------------------

    def path(self, kind: str, key: str, ext: str) -> str:
        """Where the artifact ``kind``/``key`` with extension ``ext`` lives.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).
        ext : str
            File extension without the dot (``"npz"``, ``"result.json"``, ``"txt.gz"``, ``"json"``).

        Returns
        -------
        str
            ``ROOT/KIND/AB/KEY.EXT``, where ``AB`` is the first two characters of ``key``.
        """
        return f"{self.root}/{kind}/{key[:2]}/{key}.{ext}"

    def exists(self, kind: str, key: str, ext: str) -> bool:
        """Whether the artifact has been written (completely: partial files never get this name).

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).
        ext : str
            File extension without the dot.

        Returns
        -------
        bool
            True when the artifact's file exists.
        """
        return self.fs.exists(self.path(kind, key, ext))

    # --- raw bytes ---------------------------------------------------------------------------

    def put_bytes(self, kind: str, key: str, ext: str, data: bytes, config: Mapping[str, Any] | None = None) -> str:
        """Write ``data`` atomically as the artifact; return its path.

        The configuration sidecar is written first, so any artifact that exists has one.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).
        ext : str
            File extension without the dot.
        data : bytes
            The artifact's content.

        config : mapping, optional
            The configuration that produced the artifact, written first as a ``.json`` sidecar.

        Returns
        -------
        str
            The artifact's path in the store.
        """
        if config is not None:
            self._atomic_write(self.path(kind, key, "json"), canonical_json(config).encode("utf-8"))
        target = self.path(kind, key, ext)
        self._atomic_write(target, data)
        return target

    def get_bytes(self, kind: str, key: str, ext: str) -> bytes:
        """Read the artifact's bytes (FileNotFoundError when it does not exist).

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).
        ext : str
            File extension without the dot.

        Returns
        -------
        bytes
            The artifact's content.

        Raises
        ------
        FileNotFoundError
            The artifact does not exist.
        """
        with self.fs.open(self.path(kind, key, ext), "rb") as fh:
            return fh.read()

    def _atomic_write(self, target: str, data: bytes) -> None:
        parent = target.rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        if self._local:
            with atomic_write(target) as fh:  # fsynced before the rename
                fh.write(data)
            return
        tmp = temp_path_for(target, uuid.uuid4().hex)
        with self.fs.open(tmp, "wb") as fh:
            fh.write(data)
        try:
            self.fs.mv(tmp, target)
        except Exception:
            # Object stores that cannot rename: the object appears only on a completed upload, so
            # writing the target directly is atomic there.
            self.fs.rm(tmp)
            with self.fs.open(target, "wb") as fh:
                fh.write(data)

    # --- typed helpers -----------------------------------------------------------------------

    def put_json(self, kind: str, key: str, value: Any, config: Mapping[str, Any] | None = None) -> str:
        """Store a JSON-serialisable value.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).
        value : object
            A JSON-serialisable value (stored as ``{"value": value}`` in ``KEY.result.json``).

        config : mapping, optional
            The configuration that produced the artifact, written first as a ``.json`` sidecar.

        Returns
        -------
        str
            The artifact's path in the store.
        """
        return self.put_bytes(kind, key, "result.json", canonical_json({"value": value}).encode("utf-8"), config)

    def get_json(self, kind: str, key: str) -> Any:
        """Load a value written by :meth:`put_json`.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).

        Returns
        -------
        object
            The stored value.

        Raises
        ------
        CorruptArtifactError
            The artifact is not the JSON :meth:`put_json` writes.
        """
        raw = self.get_bytes(kind, key, "result.json")
        try:
            return json.loads(raw.decode("utf-8"))["value"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptArtifactError(self.path(kind, key, "result.json"), f"{type(exc).__name__}: {exc}") from None

    def has_json(self, kind: str, key: str) -> bool:
        """Whether a value written by :meth:`put_json` exists.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).

        Returns
        -------
        bool
            True when ``KEY.result.json`` exists.
        """
        return self.exists(kind, key, "result.json")

    def put_embedding(self, kind: str, key: str, emb: Embedding, config: Mapping[str, Any] | None = None) -> str:
        """Store an embedding as ``.npz`` (the codec of :func:`embstab.save`; no pickles).

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).
        emb : Embedding
            The embedding to store.

        config : mapping, optional
            The configuration that produced the artifact, written first as a ``.json`` sidecar.

        Returns
        -------
        str
            The artifact's path in the store.
        """
        return self.put_bytes(kind, key, "npz", npz_bytes(emb), config)

    def get_embedding(self, kind: str, key: str) -> Embedding:
        """Load an embedding written by :meth:`put_embedding`.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).

        Returns
        -------
        Embedding
            The stored words, vectors, counts, name, source and metadata.

        Raises
        ------
        CorruptArtifactError
            The artifact cannot be read; the message names it and how to recompute it.
        """
        path = self.path(kind, key, "npz")
        try:
            words, vectors, counts, meta = read_npz(self.get_bytes(kind, key, "npz"), label=path)
        except EmbeddingFormatError as exc:
            raise CorruptArtifactError(path, exc.problem) from None
        return Embedding(words, vectors, counts, name=meta.get("name"), source=meta.get("source"),
                         metadata=meta.get("metadata"), copy=False)

    def has_embedding(self, kind: str, key: str) -> bool:
        """Whether an embedding written by :meth:`put_embedding` exists.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).

        Returns
        -------
        bool
            True when ``KEY.npz`` exists.
        """
        return self.exists(kind, key, "npz")

    def put_docs(self, kind: str, key: str, docs: list[list[str]], config: Mapping[str, Any] | None = None) -> str:
        """Store tokenised documents (one document per line, tokens space-separated).

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).
        docs : list of list of str
            The tokenised documents (stored gzip-compressed as ``KEY.txt.gz``).

        config : mapping, optional
            The configuration that produced the artifact, written first as a ``.json`` sidecar.

        Returns
        -------
        str
            The artifact's path in the store.
        """
        text = "\n".join(" ".join(doc) for doc in docs)
        import gzip  # noqa: PLC0415

        return self.put_bytes(kind, key, "txt.gz", gzip.compress(text.encode("utf-8"), compresslevel=1), config)

    def get_docs(self, kind: str, key: str) -> list[list[str]]:
        """Load documents written by :meth:`put_docs`.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).

        Returns
        -------
        list of list of str
            The stored documents.

        Raises
        ------
        CorruptArtifactError
            The file is not the gzip-compressed UTF-8 text :meth:`put_docs` writes.
        """
        import gzip  # noqa: PLC0415

        try:
            text = gzip.decompress(self.get_bytes(kind, key, "txt.gz")).decode("utf-8")
        except (OSError, EOFError, ValueError) as exc:
            raise CorruptArtifactError(self.path(kind, key, "txt.gz"), f"{type(exc).__name__}: {exc}") from None
        return [line.split(" ") if line else [] for line in text.split("\n")] if text else []

    def has_docs(self, kind: str, key: str) -> bool:
        """Whether documents written by :meth:`put_docs` exist.

        Parameters
        ----------
        kind : str
            Artifact kind, the first directory level (e.g. ``"corpus_old"``, ``"embedding"``).
        key : str
            The artifact's configuration hash (:func:`config_hash`).

        Returns
        -------
        bool
            True when ``KEY.txt.gz`` exists.
        """
        return self.exists(kind, key, "txt.gz")

    # --- housekeeping ------------------------------------------------------------------------

    def iter_artifacts(self) -> Iterator[tuple[str, str, str]]:
        """Yield ``(kind, key, path)`` of every complete artifact (sidecars and temp files excluded).

        Yields
        ------
        tuple of (str, str, str)
            ``(kind, key, path)`` in sorted path order.
        """
        if not self.fs.exists(self.root):
            return
        for path in sorted(self.fs.find(self.root)):
            name = path.rsplit("/", 1)[-1]
            if is_temp_name(name) or name.endswith(".json") and not name.endswith(".result.json"):
                continue
            rel = path[len(self.root) + 1:] if path.startswith(self.root + "/") else path
            parts = rel.split("/")
            if len(parts) != 3:
                continue  # not an artifact (e.g. the results database beside the store)
            yield parts[0], name.split(".", 1)[0], path

    def verify(self, kind: str, key: str, path: str) -> str | None:
        """Read one artifact back; return what is wrong with it, or None if it reads.

        Parameters
        ----------
        kind, key, path : str
            As yielded by :meth:`iter_artifacts`.

        Returns
        -------
        str or None
            The problem found, or None when the artifact reads back (other extensions are not checked).
        """
        ext = path.rsplit("/", 1)[-1].split(".", 1)[-1]
        try:
            if ext == "npz":
                self.get_embedding(kind, key)
            elif ext == "result.json":
                self.get_json(kind, key)
            elif ext == "txt.gz":
                self.get_docs(kind, key)
        except CorruptArtifactError as exc:
            return exc.problem
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def remove_corrupt(self, progress: bool = False) -> list[str]:
        """Delete every artifact that no longer reads back (and its sidecar); return their paths.

        The next run of the study then computes them again. Reads the whole store, so it is an
        explicit step (``embstab study --recompute``), not part of every run.

        Parameters
        ----------
        progress : bool, default False
            Show a progress bar over the artifacts.

        Returns
        -------
        list of str
            Paths of the deleted artifacts.
        """
        from tqdm.auto import tqdm  # noqa: PLC0415

        removed = []
        for kind, key, path in tqdm(list(self.iter_artifacts()), desc="checking artifacts", unit="artifact",
                                    disable=not progress, leave=False):
            if self.verify(kind, key, path) is None:
                continue
            for target in (path, self.path(kind, key, "json")):
                try:
                    self.fs.rm(target)
                except FileNotFoundError:
                    pass
            removed.append(path)
        return removed

    def temp_files(self) -> list[str]:
        """Leftover temporary files (from writers killed mid-write).

        Returns
        -------
        list of str
            Paths of the temporary files under the store's root.
        """
        if not self.fs.exists(self.root):
            return []
        return [p for p in self.fs.find(self.root) if is_temp_name(p.rsplit("/", 1)[-1])]

    def clean_temp(self, older_than: float = 3600.0) -> int:
        """Delete temporary files older than ``older_than`` seconds; return how many.

        The age guard matters on a shared store: another runner may be writing right now.

        Parameters
        ----------
        older_than : float, default 3600.0
            Minimum age in seconds; 0 or less deletes every temporary file, whatever its age. A file
            whose age the filesystem cannot tell is kept unless ``older_than`` is 0 or less.

        Returns
        -------
        int
            How many files were deleted.
        """
        now = time.time()
        removed = 0
        for p in self.temp_files():
            try:
                mtime = self.fs.modified(p).timestamp()
            except (NotImplementedError, FileNotFoundError, AttributeError):
                mtime = None
            if older_than > 0 and (mtime is None or now - mtime < older_than):
                continue
            try:
                self.fs.rm(p)
                removed += 1
            except FileNotFoundError:
                pass
        return removed


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)

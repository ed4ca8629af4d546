"""BERT models from a Hugging Face hub (or a mirror), downloaded explicitly into embstab's cache.

Downloading is a separate, explicit step (:func:`download_model`, ``embstab contextual download``);
loading never reaches the network: ``load_model("hub:org/name")`` reads the copy this module put in
``cache_dir()/hub`` or raises :class:`~embstab.contextual.ModelNotDownloadedError` naming the
command that downloads it.

Only what a BERT encoder needs is fetched (top-level ``config.json``, safetensors weights and the
tokenizer files). Pickle weights (``pytorch_model.bin``) are refused: unpickling a downloaded file
can run arbitrary code, and a data file must never run code.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from embstab._fs import atomic_write
from embstab._shell import command
from embstab.contextual.errors import (
    PICKLE_SUFFIXES,
    HubNameError,
    ModelNotDownloadedError,
    UnsafeWeightsError,
)
from embstab.data.cache import cache_dir
from embstab.data.download import check_source_url
from embstab.data.errors import DownloadError

__all__ = ["HUB_PREFIX", "HubModel", "download_model", "hub_dir", "parse_hub_name", "downloaded_dir"]

#: Prefix of a hub model name given to :func:`embstab.contextual.load_model`: ``hub:org/name[@revision]``.
HUB_PREFIX = "hub:"

#: The files a BERT folder needs besides the weights; only top-level files are considered.
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
_EXTRA_FILES = ("tokenizer_config.json", "special_tokens_map.json")
# the hub forbids "--" and ".." in repo ids, which keeps the cache folder name "org--name" unambiguous
_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
# the record in a downloaded folder: written first (this repository's, unfinished), then last with
# "complete": true, so an interrupted download is never mistaken for a finished one
_RECORD = "embstab.json"


@dataclass(frozen=True)
class HubModel:
    """A model on a hub: repository and revision.

    Attributes
    ----------
    repo_id : str
        ``"org/name"`` (or a bare legacy ``"name"``).
    revision : str
        Branch, tag or commit (default ``"main"``).
    """

    repo_id: str
    revision: str = "main"

    def __post_init__(self) -> None:
        if not _REPO_ID.match(self.repo_id) or "--" in self.repo_id or ".." in self.repo_id:
            raise HubNameError(f"{self.repo_id!r} is not a hub repository id: use org/name (letters, digits, "
                               f"'-', '_', '.'; no '--' or '..')")
        if not self.revision or self.revision.strip() != self.revision or ".." in self.revision:
            raise HubNameError(f"{self.revision!r} is not a revision: give a branch, tag or commit")

    @property
    def label(self) -> str:
        """``org/name`` with ``@revision`` unless the revision is ``main``."""
        return self.repo_id if self.revision == "main" else f"{self.repo_id}@{self.revision}"


def parse_hub_name(name: str) -> HubModel:
    """Read ``hub:org/name`` or ``hub:org/name@revision`` (the prefix is optional).

    Parameters
    ----------
    name : str
        The model name.

    Returns
    -------
    HubModel

    Raises
    ------
    HubNameError
        If the repository id or the revision is malformed.
    """
    text = name[len(HUB_PREFIX):] if name.startswith(HUB_PREFIX) else name
    repo_id, at, revision = text.partition("@")
    return HubModel(repo_id, revision if at else "main")


def hub_dir(model: HubModel, create: bool = False) -> Path:
    """The cache folder of a hub model: ``cache_dir()/hub/<org>--<name>/<revision>``.

    Parameters
    ----------
    model : HubModel
        Repository and revision.
    create : bool, default False
        Create the cache directory (not the model folder) if needed.

    Returns
    -------
    pathlib.Path
    """
    # a revision may hold '/' (e.g. refs/pr/1): quote it into one path component
    return cache_dir(create=create) / "hub" / model.repo_id.replace("/", "--") / quote(model.revision, safe="")


def _record(folder: Path) -> dict[str, Any] | None:
    try:
        info = json.loads((folder / _RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    meta = info.get("metadata", {}) if isinstance(info, dict) else {}
    # a record edited into another shape is no record of a download: the folder is fetched again
    return meta if isinstance(meta, dict) and meta.get("source") == "hub" else None


def _complete(folder: Path, model: HubModel) -> bool:
    meta = _record(folder)
    return (meta is not None and meta.get("complete") is True and meta.get("repo_id") == model.repo_id
            and meta.get("revision") == model.revision and (folder / "tokenizer.json").is_file()
            and all((folder / f).is_file() for f in meta.get("files", ())))


def downloaded_dir(name: str | HubModel) -> Path:
    """The folder of a hub model that :func:`download_model` put in the cache; never downloads.

    Parameters
    ----------
    name : str or HubModel
        ``hub:org/name[@revision]`` (prefix optional) or a :class:`HubModel`.

    Returns
    -------
    pathlib.Path
        The complete model folder.

    Raises
    ------
    ModelNotDownloadedError
        If the model has not been downloaded (or the download did not finish); the message names
        the ``embstab contextual download`` command.
    """
    model = parse_hub_name(name) if isinstance(name, str) else name
    folder = hub_dir(model)
    if not _complete(folder, model):
        flag = () if model.revision == "main" else ("--revision", model.revision)
        fetch = command("embstab", "contextual", "download", model.repo_id, *flag)
        raise ModelNotDownloadedError(f"hub model {model.label!r} is not downloaded (nothing is fetched when a model "
                                      f"loads); run `{fetch}` first",
                                      name=model.label)
    return folder


def _hub():
    from embstab.contextual._deps import require

    hf = require("huggingface_hub")
    # the package loads its submodules lazily: import the ones used here as attributes
    for sub in ("constants", "errors", "utils"):
        importlib.import_module(f"huggingface_hub.{sub}")
    return hf


def _transport_errors() -> tuple[type[BaseException], ...]:
    # huggingface_hub 1.x talks through httpx, 2.x through httpx2; their errors are not OSErrors
    found: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module in ("httpx2", "httpx"):
        try:
            found.append(__import__(module).TransportError)
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def _quiet(hf):
    class Quiet(hf.utils.tqdm):
        """The hub's progress bar, always disabled."""

        def __init__(self, *args, **kwargs):
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Quiet


def _fail(hf, exc: BaseException, model: HubModel, where: str) -> DownloadError:
    """One line for what went wrong talking to the hub."""
    errors = hf.errors
    if isinstance(exc, errors.RepositoryNotFoundError) or isinstance(exc, errors.GatedRepoError):
        return DownloadError(f"no model repository {model.repo_id!r} on {where} (it does not exist, or it is private "
                             f"or gated and no token was given)")
    if isinstance(exc, errors.RevisionNotFoundError):
        return DownloadError(f"model repository {model.repo_id!r} on {where} has no revision {model.revision!r}")
    if isinstance(exc, errors.OfflineModeIsEnabled):
        return _offline(model)
    if isinstance(exc, errors.HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", "?")
        return DownloadError(f"{where} answered HTTP {status} for {model.label!r}; try again later or check --endpoint")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DownloadError(f"cannot reach {where} to download {model.label!r}: {first}")


def _offline(model: HubModel) -> DownloadError:
    return DownloadError(f"cannot download {model.label!r}: hub downloads are switched off (HF_HUB_OFFLINE is set); "
                         f"unset HF_HUB_OFFLINE to download")


def _select(files: list[str], model: HubModel, where: str) -> list[str]:
    """The files to fetch, or an error saying why the repository holds no loadable BERT."""
    top = {f for f in files if "/" not in f}
    if "model.safetensors" in top:
        weights = ["model.safetensors"]
    elif "model.safetensors.index.json" in top:  # a sharded checkpoint: the index and every shard
        weights = ["model.safetensors.index.json"] + sorted(f for f in top if f.endswith(".safetensors"))
    else:
        pickles = sorted(f for f in top if f.endswith(PICKLE_SUFFIXES))
        if pickles:
            raise UnsafeWeightsError(f"model repository {model.label!r} on {where} has only pickle weights "
                                     f"({', '.join(pickles)}), which embstab refuses (reading pickle can run "
                                     f"code; only safetensors weights are accepted)")
        raise DownloadError(f"model repository {model.label!r} on {where} has no model.safetensors: it holds no "
                            f"BERT weights embstab can load")
    if "config.json" not in top:
        raise DownloadError(f"model repository {model.label!r} on {where} has no config.json: not a transformers model")
    tokenizer = [f for f in _TOKENIZER_FILES if f in top]
    if not tokenizer:
        raise DownloadError(f"model repository {model.label!r} on {where} has neither tokenizer.json nor vocab.txt")
    return ["config.json"] + weights + tokenizer + [f for f in _EXTRA_FILES if f in top]


def _check_config(folder: Path, model: HubModel) -> dict[str, Any]:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except ValueError:
        raise DownloadError(f"config.json of {model.label!r} is not JSON") from None
    kind = config.get("model_type") if isinstance(config, dict) else None
    if kind != "bert":
        raise DownloadError(f"{model.label!r} is a {kind or 'untyped'} model; embstab's contextual models are "
                            f"BERT encoders (config.json model_type 'bert')")
    return config


def _write_tokenizer(folder: Path) -> None:
    """A ``tokenizer.json`` built from ``vocab.txt`` and ``tokenizer_config.json`` when the repo has none."""
    from embstab.contextual.tokenizer import wordpiece_from_vocab

    settings: dict[str, Any] = {}
    if (folder / "tokenizer_config.json").is_file():
        try:
            settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except ValueError:
            settings = {}
    try:
        tok = wordpiece_from_vocab(folder / "vocab.txt", lowercase=bool(settings.get("do_lower_case", True)),
                                   strip_accents=settings.get("strip_accents"))
    except ValueError as exc:
        raise DownloadError(f"cannot build a tokenizer: {exc}") from None
    with atomic_write(folder / "tokenizer.json", "w") as f:
        f.write(tok.to_str())


def download_model(repo_id: str, revision: str = "main", dest: str | os.PathLike | None = None,
                   endpoint: str | None = None, force: bool = False, progress: bool = True) -> Path:
    """Download a BERT model from a hub into a folder that :func:`~embstab.contextual.load_model` reads.

    The repository must hold ``config.json`` (``model_type`` ``bert``), ``model.safetensors`` (or
    safetensors shards with their index) and ``tokenizer.json`` or ``vocab.txt``; only those, and
    ``tokenizer_config.json`` / ``special_tokens_map.json`` if present, are fetched. A repository
    whose weights are only pickle files (``pytorch_model.bin``) is refused. When the repository has
    no ``tokenizer.json`` one is built from ``vocab.txt``. The folder gets an ``embstab.json`` record
    (repository, revision, commit, endpoint) marked complete last, so an interrupted download is
    resumed by the next call and a finished one is returned without contacting the hub. A refused
    repository leaves no folder behind.

    Parameters
    ----------
    repo_id : str
        ``"org/name"`` on the hub.
    revision : str, default "main"
        Branch, tag or commit.
    dest : str or os.PathLike, optional
        Target folder; by default ``cache_dir()/hub/<org>--<name>/<revision>``, which is where
        ``load_model("hub:org/name[@revision]")`` looks.
    endpoint : str, optional
        Hub address, e.g. a mirror; default ``$HF_ENDPOINT`` or ``https://huggingface.co``.
    force : bool, default False
        Download again even if the folder holds a finished download.
    progress : bool, default True
        Show the hub's progress bars.

    Returns
    -------
    pathlib.Path
        The model folder.

    Raises
    ------
    HubNameError
        If ``repo_id`` or ``revision`` is malformed.
    UnsafeWeightsError
        If the repository's only weights are pickle files.
    UntrustedSourceError
        If ``endpoint`` is not an https address, or an http one on this machine (loopback).
    DownloadError
        If downloads are switched off (``HF_HUB_OFFLINE``), the hub cannot be reached, the
        repository or revision does not exist, it holds no loadable BERT (no safetensors, no
        ``config.json``, no tokenizer, another ``model_type``), or ``dest`` is a file, another
        repository's download or a non-empty folder of other files.
    """
    model = HubModel(repo_id, revision)
    if endpoint is not None:
        check_source_url(endpoint, None, "--endpoint")  # a local file or an ftp: address is no hub
    folder = Path(dest) if dest is not None else hub_dir(model, create=True)
    if not force and _complete(folder, model):
        return folder
    if dest is not None:  # the cache folder is embstab's own; a given one may hold anything
        _check_folder(folder, model)
    hf = _hub()
    offline = getattr(hf.constants, "is_offline_mode", None)  # a function in 2.x, a flag before
    if offline() if callable(offline) else hf.constants.HF_HUB_OFFLINE:
        raise _offline(model)
    where = (endpoint or hf.constants.ENDPOINT).rstrip("/")
    api = hf.HfApi(endpoint=endpoint)
    tqdm_class = None if progress else _quiet(hf)
    created = not folder.exists()
    try:
        info = api.model_info(model.repo_id, revision=model.revision)
        if not info.sha:
            raise DownloadError(f"{where} gave no commit for {model.label!r}: not a hub-compatible endpoint")
        wanted = _select([s.rfilename for s in info.siblings or ()], model, where)
        # marks the folder as this repository's (unfinished) download before any file lands in it
        _write_record(folder, model, {"commit": info.sha, "endpoint": where, "complete": False})
        common = {"repo_id": model.repo_id, "revision": info.sha, "local_dir": folder, "endpoint": endpoint,
                  "force_download": force}
        # the config first (kilobytes): a non-BERT repository is refused before its weights are fetched
        hf.hf_hub_download(filename="config.json", **common)
        config = _check_config(folder, model)
        hf.snapshot_download(allow_patterns=wanted, tqdm_class=tqdm_class, max_workers=4, **common)
    except (hf.errors.HfHubHTTPError, hf.errors.OfflineModeIsEnabled, *_transport_errors()) as exc:
        raise _fail(hf, exc, model, where) from exc
    except DownloadError:
        if created and folder.is_dir():  # a refused repository leaves nothing behind
            shutil.rmtree(folder)
        raise
    missing = [f for f in wanted if not (folder / f).is_file()]
    if missing:
        raise DownloadError(f"download of {model.label!r} from {where} is incomplete: {', '.join(missing)} missing")
    if "tokenizer.json" not in wanted:
        # rebuilt every time, so that a new revision's vocab.txt never meets an old tokenizer.json
        _write_tokenizer(folder)
    _write_record(folder, model, {"commit": info.sha, "endpoint": where, "complete": True,
                                  "files": wanted + ["tokenizer.json"] * ("tokenizer.json" not in wanted),
                                  "layers": config.get("num_hidden_layers"), "hidden": config.get("hidden_size")})
    return folder


def _write_record(folder: Path, model: HubModel, fields: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"source": "hub", "repo_id": model.repo_id, "revision": model.revision, **fields}
    with atomic_write(folder / _RECORD, "w") as f:
        json.dump({"name": model.label, "metadata": meta}, f, indent=1)


def _check_folder(folder: Path, model: HubModel) -> None:
    """Refuse a target that is a file, another repository's download, or a folder of other things."""
    if folder.exists() and not folder.is_dir():
        raise DownloadError(f"cannot download {model.label!r} into {folder}: it is a file")
    if not folder.is_dir():
        return
    meta = _record(folder)
    if meta is not None and meta.get("repo_id") != model.repo_id:
        raise DownloadError(f"{folder} holds the download of {meta.get('repo_id')!r}; give another folder "
                            f"for {model.repo_id!r}")
    if meta is None and any(folder.iterdir()):
        raise DownloadError(f"cannot download {model.label!r} into {folder}: the folder is not empty and holds "
                            f"no hub download (give a new or empty folder)")

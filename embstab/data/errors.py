"""Errors of the data layer (all :class:`embstab.errors.EmbstabError`, so the CLI prints one line)."""

from __future__ import annotations

from embstab.errors import EmbstabError, UnknownNameError

__all__ = ["DataNotFoundError", "DataFormatError", "DownloadError", "ChecksumError", "UnknownDatasetError"]


class DataNotFoundError(EmbstabError, FileNotFoundError):
    """A dataset's files are not present locally; the message names the command that fetches them."""

    def __init__(self, name: str, detail: str = "", command: str | None = None) -> None:
        self.name = name
        extra = f" ({detail})" if detail else ""
        super().__init__(f"dataset {name!r} is not available locally{extra}; "
                         f"run `{command or f'embstab data fetch {name}'}` first")

    def __str__(self) -> str:  # FileNotFoundError would otherwise format (errno, strerror)
        return str(self.args[0])


#: An unknown dataset, corpus or task name is an :class:`~embstab.errors.UnknownNameError` like
#: every other unknown name; the alias keeps ``except UnknownDatasetError`` working.
UnknownDatasetError = UnknownNameError


class DownloadError(EmbstabError, OSError):
    """A download or a package-manager fetch failed."""


class UntrustedSourceError(DownloadError):
    """A fetch from an address embstab does not document, or of a file whose digest nobody gave."""


class ChecksumError(DownloadError):
    """A downloaded file does not have the expected SHA-256 digest."""


class DataFormatError(EmbstabError, ValueError):
    """A data file does not have the expected layout; the message names the file and the line."""

    def __init__(self, path, problem: str, line: int | None = None) -> None:
        self.path, self.problem, self.line = str(path), problem, line
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")

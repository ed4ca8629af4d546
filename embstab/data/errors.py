"""Errors of the data layer: the kinds of :mod:`embstab.errors`, under the names data code uses."""

from __future__ import annotations

from embstab.errors import DataFormatError, DataNotFoundError, DownloadError, UnknownNameError, UntrustedSourceError

__all__ = ["DataNotFoundError", "DataFormatError", "DownloadError", "ChecksumError", "UnknownDatasetError",
           "UntrustedSourceError"]

#: An unknown dataset, corpus or task name is an :class:`~embstab.errors.UnknownNameError` like
#: every other unknown name; the alias keeps ``except UnknownDatasetError`` working.
UnknownDatasetError = UnknownNameError


class ChecksumError(UntrustedSourceError):
    """A downloaded file does not have the expected SHA-256 digest."""

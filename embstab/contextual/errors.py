"""Errors for text given to a contextual model: one type per kind of mistake."""

from __future__ import annotations

from embstab.data.errors import DataNotFoundError
from embstab.errors import ConfigError, DataFormatError, ShapeError
# one home for the model-folder rules that KG and contextual folders share
from embstab.io.modelfolder import PICKLE_SUFFIXES, UnsafeWeightsError

__all__ = ["EmptyTextError", "HubNameError", "ModelNotDownloadedError", "PICKLE_SUFFIXES", "SequenceLengthError",
           "UnsafeWeightsError"]


class EmptyTextError(DataFormatError):
    """A text (a line of a file, an item of a list) is empty or only white space.

    An empty line would silently become a ``[CLS] [SEP]`` input whose features say nothing, so it
    is refused with its position instead.
    """


class SequenceLengthError(ShapeError):
    """A text has more word pieces than the model's position limit (and truncation was not asked for)."""


class HubNameError(ConfigError):
    """A hub model name that is not ``org/name`` (with an optional ``@revision``)."""


class ModelNotDownloadedError(DataNotFoundError):
    """A hub model asked for by name has no finished download in the cache; nothing is fetched on load.

    The message names the ``embstab contextual download`` command that fetches it.

    Parameters
    ----------
    message : str
        The whole message.
    name : str
        The model, ``org/name[@revision]``.
    """

    def __init__(self, message: str, name: str) -> None:
        self.name = name
        # DataNotFoundError words its message for datasets (`embstab data fetch`): skip its __init__
        super(DataNotFoundError, self).__init__(message)

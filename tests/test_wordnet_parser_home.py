"""One WordNet parser (embstab.data.wordnet) read by both the hyperbolic hierarchy and the KG graph."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from embstab.data.errors import DataFormatError
from embstab.data.wordnet import SynsetRecord, read_synset_records
from embstab.hyperbolic.errors import GraphError

ROOT = Path(__file__).resolve().parents[1] / "embstab"

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by\n"
# two nouns: dog (hypernym: canine), canine; offsets as written in the file
NOUNS = (HEADER
         + "00000010 05 n 02 Dog 0 domestic_dog 0 002 @ 00000050 n 0000 + 00000090 v 0101 | a domesticated canid\n"
         + "00000050 05 n 01 canine 0 000 | a carnivore\n")
VERBS = HEADER + "00000090 29 v 01 dog 0 001 + 00000010 n 0101 | go after with the intent to catch\n"
INDEX = HEADER + "dog n 1 1 @ 1 1 00000010\ncanine n 1 0 1 0 00000050\n"


@pytest.fixture
def wn_dir(tmp_path):
    (tmp_path / "data.noun").write_text(NOUNS)
    (tmp_path / "index.noun").write_text(INDEX)
    (tmp_path / "data.verb").write_text(VERBS)
    for part in ("adj", "adv"):
        (tmp_path / f"data.{part}").write_text(HEADER)
    return tmp_path


def test_records(wn_dir):
    dog, canine = read_synset_records(wn_dir / "data.noun")
    assert dog == SynsetRecord("00000010", "n", ("dog", "domestic_dog"),
                               (("@", "00000050", "n"), ("+", "00000090", "v")), 2)
    assert canine.words == ("canine",) and canine.pointers == () and canine.line == 3


@pytest.mark.parametrize("bad", ["00000070 05 n 01 cat 0 002 @ 00000050 n 0000 | too few pointers\n",
                                 "00000070 05 n zz cat 0 000 | bad word count\n",
                                 "00000070 05 n 00 000 | no words\n",
                                 "x0000070 05 n 01 cat 0 000 | bad offset\n"])
def test_a_malformed_record_names_file_and_line(wn_dir, bad):
    (wn_dir / "data.noun").write_text(NOUNS + bad)
    with pytest.raises(DataFormatError, match=r"data\.noun, line 4: malformed synset record"):
        list(read_synset_records(wn_dir / "data.noun"))
    # both users report it, each as its own kind of error
    from embstab.hyperbolic.wordnet import read_noun_synsets
    from embstab.kg.wordnet import read_wordnet_triples

    with pytest.raises(GraphError, match=r"data\.noun, line 4: malformed synset record"):
        read_noun_synsets(str(wn_dir))
    with pytest.raises(DataFormatError, match=r"data\.noun, line 4: malformed synset record"):
        read_wordnet_triples(str(wn_dir))


def test_both_users_read_the_same_records(wn_dir):
    from embstab.hyperbolic.wordnet import read_noun_synsets
    from embstab.kg.wordnet import read_wordnet_triples

    names, hypernyms = read_noun_synsets(str(wn_dir))
    assert names == {10: "dog.n.01", 50: "canine.n.01"} and hypernyms == {10: [(50, False)], 50: []}
    assert set(read_wordnet_triples(str(wn_dir))) == {
        ("dog.n.00000010", "hypernym", "canine.n.00000050"),
        ("dog.n.00000010", "derivationally_related_form", "dog.v.00000090"),
        ("dog.v.00000090", "derivationally_related_form", "dog.n.00000010")}


def test_no_other_wordnet_parser():
    # the record layout (hex word count, 4-field pointers) is decoded in one place only
    for rel in ("hyperbolic/wordnet.py", "kg/wordnet.py"):
        tree = ast.parse((ROOT / rel).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and n.module == "embstab.data.wordnet" for a in n.names}
        assert "read_synset_records" in imported, rel
        hex_ints = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "int"
                    and len(n.args) == 2 and getattr(n.args[1], "value", None) == 16]
        assert hex_ints == [], (rel, hex_ints)
        gloss_splits = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == " | "]
        assert gloss_splits == [], (rel, gloss_splits)

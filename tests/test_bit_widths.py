"""One set of bit widths, one message: the command line, the library, study files, the low-precision
format and the knowledge-graph quantizer accept and refuse the same widths in the same words."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import yaml

from embstab._bits import BIT_WIDTHS, BIT_WIDTHS_TEXT, check_bits
from embstab.cli.options import bits as cli_bits
from embstab.compress import compress_embedding
from embstab.embedding import Embedding
from embstab.lowprec import UniformFormat
from embstab.study import StudyDefinitionError, parse_study

REFUSED = [0, -1, 17, 24, 25, 31, 33, 64]
STUDY = {"name": "t", "corpus": {"name": "gensim_lee", "fraction": 0.1},
         "training": {"algorithms": ["w2v_cbow"], "dimensions": [10, 20], "seeds": [1, 2], "epochs": 2},
         "compression": {"bit_widths": [1, 32]}, "measures": {"names": ["eis", "knn"], "top_n": 500},
         "downstream": [{"task": "rt_sentiment"}], "budgets": [20, 100]}


def _entry_points():
    emb = Embedding([f"w{i}" for i in range(40)], np.random.default_rng(0).standard_normal((40, 6)))

    def study(b):
        spec = {**STUDY, "compression": {"bit_widths": [b]}, "budgets": [1000]}
        return parse_study(yaml.safe_load(yaml.safe_dump(spec)))

    return {
        "check_bits": check_bits,
        "cli --bits": lambda b: cli_bits(str(b)),
        "compress_embedding": lambda b: compress_embedding(emb, b),
        "UniformFormat": lambda b: UniformFormat(b, 1.0),
        "study compression.bit_widths": study,
    }


ERRORS = (ValueError, argparse.ArgumentTypeError, StudyDefinitionError)


@pytest.mark.parametrize("where", sorted(_entry_points()))
@pytest.mark.parametrize("width", REFUSED)
def test_every_entry_point_refuses_the_same_widths_with_the_same_words(where, width):
    with pytest.raises(ERRORS) as info:
        _entry_points()[where](width)
    assert BIT_WIDTHS_TEXT in str(info.value) and str(width) in str(info.value)


@pytest.mark.parametrize("where", sorted(_entry_points()))
@pytest.mark.parametrize("width", [1, 4, 16, 32])
def test_every_entry_point_accepts_the_widths_the_file_format_stores(where, width):
    _entry_points()[where](width)


def test_the_set_is_what_the_compressed_file_packs(tmp_path):
    from embstab.io import load, save

    emb = Embedding([f"w{i}" for i in range(30)], np.random.default_rng(1).standard_normal((30, 8)))
    for width in BIT_WIDTHS:
        out = compress_embedding(emb, width)
        save(out, tmp_path / "x.esq", format="embstab")
        back = load(tmp_path / "x.esq")
        assert np.array_equal(back.vectors, out.vectors)
    assert check_bits(np.int64(8)) == 8 and isinstance(check_bits(np.int64(8)), int)
    with pytest.raises(ValueError):
        check_bits(True)

"""The stored names of the two members' downstream quality: pinned, because stored artifacts (and the
content addresses of every study's downstream step) carry them, while the code says old and new."""

from __future__ import annotations

from embstab.study.steps import STORED_QUALITY_KEYS, downstream_output, stored_qualities


def test_the_stored_keys_are_pinned():
    # Artifacts written before the pair was old-first name the new member "a" and the old one "b".
    assert STORED_QUALITY_KEYS == {"quality_old": "quality_b", "quality_new": "quality_a"}


def test_a_downstream_output_reads_back_old_and_new_unswapped():
    out = downstream_output(7.5, quality_old=61.0, quality_new=64.0, n_test=200, chance=50.0)
    assert out["quality_b"] == 61.0 and out["quality_a"] == 64.0
    assert stored_qualities(out) == (61.0, 64.0)
    assert out["disagreement"] == 7.5 and out["n_test"] == 200 and out["chance"] == 50.0

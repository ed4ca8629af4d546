"""``embstab study`` prints each recommendation's gaps in points of disagreement, the random pick's too."""

from __future__ import annotations

import re
from pathlib import Path

from embstab.cli.study import _recommend
from embstab.selection import from_published_csv

PUBLISHED = Path(__file__).resolve().parent / "data" / "w2v_cbow_published.csv"


def test_random_pick_is_a_gap_in_points(capsys):
    _recommend(from_published_csv(PUBLISHED).query("task == 'sst'"), (400,))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("sst") and "chosen" in line]
    assert lines
    for line in lines:
        gap, random_gap = map(float, re.search(r"gap (\d+\.\d+) points \(a random pick's gap: (\d+\.\d+) points, "
                                               r"on average\)", line).groups())
        assert 0 <= gap <= random_gap  # the recommendation does no worse than a pick at random here

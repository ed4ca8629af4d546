"""The oracle gap of the recommendation: what `recommend` ships vs the best pick under the same budget."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from embstab.selection import ResultsError, recommend, recommendation_gap, recommendation_gap_of

#: Disagreement (%) of each (dim, bits) per task; the seeds add -1 / +1 around it.
DISAGREEMENT = {
    "a": {(4, 1): 30.0, (4, 2): 20.0, (4, 4): 6.0, (8, 1): 25.0, (8, 2): 10.0, (8, 4): 2.0},
    "b": {(4, 1): 9.0, (4, 2): 8.0, (4, 4): 7.0, (8, 1): 12.0, (8, 2): 3.0, (8, 4): 1.0},
}
#: EIS per configuration (a distance): (8, 2) looks most stable among those of memory <= 16.
EIS = {(4, 1): 0.9, (4, 2): 0.5, (4, 4): 0.3, (8, 1): 0.6, (8, 2): 0.1, (8, 4): 0.05}


def table() -> pd.DataFrame:
    rows = []
    for (seed, shift), task, (d, b) in itertools.product([(0, -1.0), (1, 1.0)], DISAGREEMENT, EIS):
        rows.append({"algo": "TransE", "seed": seed, "dim": d, "bitrate": b, "task": task, "quality": 60.0,
                     "disagreement": DISAGREEMENT[task][(d, b)] + shift, "eis": EIS[(d, b)]})
    return pd.DataFrame(rows)


def test_gap_is_the_chosen_configurations_disagreement_minus_the_best_under_the_budget():
    rec = recommend(table(), 16, "eis")
    assert (rec.dim, rec.bitrate) == (8, 2)
    gap = recommendation_gap_of(rec, table()).set_index("task")
    # task a: (4, 4) measured 6 % against the chosen 10 %; (8, 4) needs 32 bits and does not fit
    assert gap.loc["a", "disagreement"] == pytest.approx(10.0)
    assert (gap.loc["a", "oracle_dim"], gap.loc["a", "oracle_bitrate"]) == (4, 4)
    assert gap.loc["a", "oracle_disagreement"] == pytest.approx(6.0) and gap.loc["a", "gap"] == pytest.approx(4.0)
    # task b: the chosen configuration is the best one
    assert gap.loc["b", "gap"] == pytest.approx(0.0) and gap.loc["b", "oracle_dim"] == 8
    assert gap.loc["a", "n_candidates"] == 5
    assert gap.loc["a", "mean_disagreement"] == pytest.approx((30 + 20 + 6 + 25 + 10) / 5)
    assert gap.loc["a", "worst_disagreement"] == pytest.approx(30.0)


def test_gap_at_every_budget():
    gaps = recommendation_gap(table(), [4, 16, 32, 1])  # nothing fits 1 bit per row: skipped
    assert sorted(set(gaps["budget"])) == [4, 16, 32]
    at32 = gaps[gaps["budget"] == 32].set_index("task")
    assert (at32["dim"] == 8).all() and (at32["bitrate"] == 4).all() and (at32["gap"] == 0).all()
    at4 = gaps[gaps["budget"] == 4]
    assert (at4["n_candidates"] == 1).all() and (at4["gap"] == 0).all()
    assert (gaps["gap"] >= 0).all()
    with pytest.raises(ResultsError, match="no budget has a recommendation"):
        recommendation_gap(table(), [1])

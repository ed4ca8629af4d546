"""The measure contract: what every registered measure of word embeddings must honour.

:func:`check_measure_contract` runs every check on one :class:`~embstab.measures.MeasureInfo`;
``tests/test_measures_contract.py`` runs it over the registry, and a new measure is checked by
being registered. Each check is an ``assert`` on small random matrices (well under a second).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from embstab.errors import ShapeError
from embstab.measures import GEOMETRIES, MeasureInfo

N, D, WIDE = 60, 5, 7
#: The one-side transformations a measure may declare itself invariant to, applied to X.
TRANSFORMS = {
    "rotation": lambda x, rng: x @ np.linalg.qr(rng.normal(size=(x.shape[1],) * 2))[0],
    "rotation of X": lambda x, rng: x @ np.linalg.qr(rng.normal(size=(x.shape[1],) * 2))[0],
    "isotropic scaling": lambda x, rng: 3.7 * x,
    "translation": lambda x, rng: x + rng.normal(size=(1, x.shape[1])),
    "invertible linear map": lambda x, rng: x @ (rng.normal(size=(x.shape[1],) * 2) + 3 * np.eye(x.shape[1])),
}


def _data(seed: int = 0, n: int = N, d: int = D):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    related = x + 0.3 * rng.normal(size=(n, d))
    unrelated = rng.normal(size=(n, d))
    anchors = (rng.normal(size=(n, 2 * d - 1)), rng.normal(size=(n, 2 * d - 1)))
    return rng, x, related, unrelated, anchors


def _value(info: MeasureInfo, x, y, anchors, **params) -> float:
    value = info.evaluate(x, y, anchors=anchors if info.needs_anchors else None, **params)
    assert isinstance(value, float) and math.isfinite(value), f"{info.name}: {value!r} is not a finite float"
    return value


def check_declaration(info: MeasureInfo) -> None:
    """The properties are consistent with each other and with the function."""
    assert info.geometry in GEOMETRIES
    low, high = info.range
    assert low < high
    assert info.direction in ("larger is more stable", "smaller is more stable")
    assert set(info.defaults) <= set(info.parameters), f"{info.name}: defaults that are not parameters"
    assert info.fallback_rank is None or (isinstance(info.fallback_rank, int) and info.fallback_rank >= 1)
    assert not info.needs_anchors or "alpha" in info.defaults


def check_range_and_identity(info: MeasureInfo) -> None:
    """Values lie in the declared range; a member compared with itself is the most stable."""
    _, x, related, unrelated, anchors = _data(1)
    values = {kind: _value(info, x, y, anchors) for kind, y in
              (("same", x), ("related", related), ("unrelated", unrelated))}
    low, high = info.range
    for kind, value in values.items():
        assert low - 1e-9 <= value <= high + 1e-9, f"{info.name} {kind}: {value} outside {info.range}"
    best = 0.0 if info.larger_is_more_stable else low  # the distance of the most stable end
    assert info.to_distance(values["same"]) == pytest.approx(best, abs=1e-7)
    assert info.to_distance(values["same"]) < info.to_distance(values["unrelated"])
    assert info.to_distance(values["related"]) < info.to_distance(values["unrelated"])


def check_invariances(info: MeasureInfo) -> None:
    """Each declared invariance leaves the value unchanged (the transformation applied to X)."""
    unknown = [i for i in info.invariances if i not in TRANSFORMS]
    assert not unknown, f"{info.name}: invariances the contract cannot check: {unknown}"
    rng, x, related, _, anchors = _data(2)
    base = _value(info, x, related, anchors)
    for name in info.invariances:
        moved = TRANSFORMS[name](x, rng)
        assert _value(info, moved, related, anchors) == pytest.approx(base, rel=1e-7, abs=1e-10), \
            f"{info.name} is declared invariant to {name}"


def check_numpy_equals_torch(info: MeasureInfo) -> None:
    """The same value from numpy arrays and from torch tensors."""
    _, x, related, _, anchors = _data(3)
    as_torch = [torch.from_numpy(a) for a in (x, related, *anchors)]
    want = _value(info, x, related, anchors)
    got = _value(info, as_torch[0], as_torch[1], (as_torch[2], as_torch[3]))
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)


def check_widths(info: MeasureInfo) -> None:
    """Unequal widths are refused exactly when the measure declares it needs equal ones."""
    rng, x, _, _, anchors = _data(4)
    wide = np.hstack([x, rng.normal(size=(N, WIDE - D))])
    if info.needs_equal_dim:
        with pytest.raises(ShapeError, match="equal dimensions"):
            _value(info, x, wide, anchors)
    else:
        low, high = info.range
        assert low - 1e-9 <= _value(info, x, wide, anchors) <= high + 1e-9


def check_more_words_than_dims(info: MeasureInfo) -> None:
    """With no more words than dimensions, a measure that declares it needs more says nothing.

    Its value is then the same for a related and an unrelated partner; a measure that does not
    declare it still tells them apart.
    """
    _, x, related, unrelated, anchors = _data(5, n=8, d=12)
    near, far = _value(info, x, related, anchors), _value(info, x, unrelated, anchors)
    if info.needs_more_words_than_dims:
        assert near == pytest.approx(far, abs=1e-8), f"{info.name} separates pairs with n <= d: {near} vs {far}"
    else:
        assert info.to_distance(near) < info.to_distance(far), \
            f"{info.name} says nothing with n <= d ({near} vs {far}): declare needs_more_words_than_dims"


def check_defaults_are_the_values_used(info: MeasureInfo) -> None:
    """Passing the declared defaults explicitly gives the value of passing nothing."""
    _, x, related, _, anchors = _data(6)
    assert _value(info, x, related, anchors, **info.defaults) == _value(info, x, related, anchors)


CHECKS = (check_declaration, check_range_and_identity, check_invariances, check_numpy_equals_torch, check_widths,
          check_more_words_than_dims, check_defaults_are_the_values_used)


def check_measure_contract(info: MeasureInfo) -> None:
    """Run every check of the contract on one measure of word embeddings (an AssertionError names the first broken).

    Parameters
    ----------
    info : MeasureInfo
        A registered measure with ``geometry == "euclidean"``.
    """
    assert info.geometry == "euclidean", "the contract compares row-aligned matrices"
    for check in CHECKS:
        check(info)

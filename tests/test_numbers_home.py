"""One test of what a number is in user input, used by every parameter check."""

import numpy as np
import pytest

from embstab._numbers import is_integer, is_real


@pytest.mark.parametrize("value, integer, real", [
    (3, True, True), (np.int64(3), True, True), (np.uint8(3), True, True),
    (3.0, False, True), (np.float32(0.5), False, True), (np.float64("nan"), False, True),
    (True, False, False), (False, False, False), ("3", False, False), (None, False, False), (1j, False, False),
])
def test_integers_and_reals_exclude_bools(value, integer, real):
    # a bool is an int to Python, never a count, seed or size to a user
    assert is_integer(value) is integer and is_real(value) is real

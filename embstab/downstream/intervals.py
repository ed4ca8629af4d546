"""Sampling intervals of a disagreement: how far the share of flipped predictions could move on other test items.

One function, :func:`disagreement_interval`, serves every disagreement embstab reports (word
embeddings here, knowledge-graph link prediction and triple classification in :mod:`embstab.kg`),
so that every interval means the same thing.
"""

from __future__ import annotations

import math

from embstab._numbers import is_integer, is_real
from embstab.errors import ConfigError

__all__ = ["INTERVAL_LEVEL", "disagreement_interval"]

#: Confidence level of the intervals every disagreement carries.
INTERVAL_LEVEL = 0.95


def disagreement_interval(flipped: int, n: int, level: float = INTERVAL_LEVEL) -> tuple[float, float]:
    """Exact (Clopper–Pearson) binomial interval of a disagreement of ``flipped`` out of ``n`` items, in percent.

    Clopper–Pearson rather than Wilson: its coverage is at least ``level`` for every share and
    every ``n``, where Wilson's dips below the level for some shares; disagreements sit near 0 %
    (a few flips out of a few hundred items), exactly where approximate intervals fail most, and
    an interval that is too wide errs on the side a comparison of configurations can afford. At
    ``flipped = 0`` the low end is exactly 0 (and at ``flipped = n`` the high end exactly 100).

    The interval covers the sampling of the test items only, as if they were drawn independently:
    it says how much the share could move on another draw of test items for the same two models,
    not how much it moves with the model seeds (see :func:`embstab.downstream.seed_baseline`).
    Items that are not independent (the tokens of one sentence, the head and tail queries of one
    triple) make the true interval somewhat wider.

    Parameters
    ----------
    flipped : int
        Items whose predictions differ, 0 to ``n``.
    n : int
        Items compared, at least 1.
    level : float, default :data:`INTERVAL_LEVEL`
        Confidence level, strictly between 0 and 1.

    Returns
    -------
    tuple of (float, float)
        ``(low, high)`` in percent, ``0 <= low <= 100 * flipped / n <= high <= 100``.

    Raises
    ------
    ConfigError
        If ``n`` is not a positive integer, ``flipped`` not an integer in ``[0, n]`` or ``level``
        not in (0, 1).
    """
    if not is_integer(n) or n < 1:
        raise ConfigError(f"the number of compared items must be a positive integer, got {n!r}")
    if not is_integer(flipped) or not 0 <= flipped <= n:
        raise ConfigError(f"the number of flipped items must be an integer from 0 to {n}, got {flipped!r}")
    if not is_real(level) or not (math.isfinite(level) and 0.0 < level < 1.0):
        raise ConfigError(f"the interval level must be a number strictly between 0 and 1, got {level!r}")
    from scipy.stats import beta  # noqa: PLC0415 (scipy takes a while to import; only here)

    k, n, alpha = int(flipped), int(n), 1.0 - float(level)
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return 100.0 * low, 100.0 * high

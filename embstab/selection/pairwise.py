"""Pairwise selection error and robustness: does the measure order pairs of configs correctly?"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from embstab.errors import ConfigError
from embstab.measures import REGISTRY
from embstab.selection._common import groups, order_by, resolve_measures
from embstab.selection.errors import ResultsError
from embstab.selection.results import as_results

__all__ = ["selection_error", "pairwise_votes"]


def pairwise_votes(measure_values: np.ndarray, disagreement: np.ndarray, *,
                   larger_is_more_stable: bool, memory: np.ndarray | None = None,
                   same_space: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compare every unordered pair (i < j) of configurations of one seed.

    The measure votes for the more stable config (argmin of a distance, argmax of a similarity)
    and the truth is the config with the smaller disagreement. As in the reference script, a tie
    goes to the first index (i), because ``np.argmin``/``np.argmax`` return the first extremum.

    Parameters
    ----------
    measure_values : numpy.ndarray
        Raw measure values, one per configuration, in table order.
    disagreement : numpy.ndarray
        Disagreement (%) per configuration, same order.
    larger_is_more_stable : bool
        Direction of the measure (True for k-NN and eigenspace overlap).
    memory : numpy.ndarray, optional
        Memory per configuration; needed when ``same_space`` is True.
    same_space : bool, default False
        Keep only pairs with equal memory.

    Returns
    -------
    wrong : numpy.ndarray of bool
        Whether the measure's vote differs from the truth, per pair.
    gap : numpy.ndarray of float
        ``|DI_i - DI_j|`` per pair.
    pairs : numpy.ndarray of shape (n_pairs, 2)
        The index pairs (i, j), i < j, in itertools.combinations order.
    """
    v = np.asarray(measure_values, dtype=np.float64)
    di = np.asarray(disagreement, dtype=np.float64)
    i, j = np.triu_indices(len(v), k=1)  # row-major = itertools.combinations order
    if same_space:
        if memory is None:
            raise ConfigError("same_space=True needs the memory of each configuration")
        mem = np.asarray(memory)
        keep = mem[i] == mem[j]
        i, j = i[keep], j[keep]
    # j wins only when strictly better: on equality the first index (i) is chosen.
    vote_j = v[j] > v[i] if larger_is_more_stable else v[j] < v[i]
    truth_j = di[j] < di[i]
    return vote_j != truth_j, np.abs(di[i] - di[j]), np.stack([i, j], axis=1)


def selection_error(df: pd.DataFrame, measures: Sequence[str] | None = None, *,
                    same_space: bool = False, max_memory: float | None = None) -> pd.DataFrame:
    """Selection error and robustness of each measure as a pairwise selection criterion.

    For each algorithm, task and seed, every unordered pair of configurations (630 pairs for the
    36 configurations of a 6 × 6 grid) is a decision: pick the more stable one by the measure, and
    compare with the one that actually has the smaller disagreement. Then

    - ``selection_error`` = share of wrong votes, averaged over seeds;
    - ``robustness`` = the largest disagreement gap ``|DI_i - DI_j|`` among the wrong votes, maximum
      over seeds (how badly a wrong choice can hurt; 0 when there are none).

    Parameters
    ----------
    df : pandas.DataFrame, str or os.PathLike
        Results table in the shared convention (or a path / published-format table); rows near
        chance are left out unless it comes from ``as_results(..., keep_near_chance=True)``.
    measures : sequence of str, optional
        Registry names to evaluate; default every measure column present.
    same_space : bool, default False
        Only compare configurations with equal memory (the reference script's ``--same-space``).
    max_memory : float, optional
        Only use configurations with memory ≤ this many bits per word (the script's
        ``space_budget`` filter).

    Returns
    -------
    pandas.DataFrame
        Tidy table with columns ``algo, measure, task, selection_error, robustness, n_pairs,
        n_seeds``; ``n_pairs`` counts the decisions over all seeds.

    Raises
    ------
    ResultsError
        If no pair is left to compare.
    """
    df = as_results(df)
    names = resolve_measures(df, measures)
    if max_memory is not None:
        df = df[df["memory"] <= max_memory]
        if df.empty:
            raise ResultsError(f"no configuration has memory <= {max_memory} bits per word")
    rows = []
    for (algo, task), part in groups(df, ["algo", "task"]):
        for name in names:
            larger = REGISTRY[name].larger_is_more_stable
            errors, worst, n_pairs, n_seeds = [], [], 0, 0
            for _, seed_rows in groups(part, ["seed"]):
                seed_rows = seed_rows[seed_rows[name].notna()]
                wrong, gap, pairs = pairwise_votes(
                    seed_rows[name].to_numpy(), seed_rows["disagreement"].to_numpy(),
                    larger_is_more_stable=larger, memory=seed_rows["memory"].to_numpy(),
                    same_space=same_space)
                if len(pairs) == 0:
                    continue
                n_seeds += 1
                n_pairs += len(pairs)
                errors.append(wrong.mean())
                worst.append(gap[wrong].max() if wrong.any() else 0.0)
            if n_seeds == 0:
                raise ResultsError(f"no pair of configurations to compare for algo={algo!r}, "
                                   f"task={task!r}, measure={name!r}"
                                   + (" with same_space=True" if same_space else ""))
            rows.append({"algo": algo, "measure": name, "task": task,
                         "selection_error": float(np.mean(errors)),
                         "robustness": float(np.max(worst)), "n_pairs": n_pairs,
                         "n_seeds": n_seeds})
    return order_by(pd.DataFrame(rows), "measure", names)

"""The registry of training and compression recipes.

Recipes are kept apart from the low-precision primitives they use (:mod:`embstab.lowprec`), as
torchao keeps its quantization API apart from its primitives. Each recipe registers one
:class:`Recipe`: its name, a one-line summary, the Python entry points, and a small-problem
acceptance check that returns a :class:`CheckResult` (a table plus the claims it verified).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from embstab.errors import lookup

__all__ = ["Recipe", "CheckResult", "RECIPES", "register_recipe", "get_recipe"]


@dataclass
class CheckResult:
    """The outcome of a recipe's small-problem acceptance check.

    Attributes
    ----------
    recipe : str
        The recipe's registry name.
    table : pandas.DataFrame
        The figures the check computed (tidy: one row per configuration).
    claims : dict of str to bool
        Each claim the check tests, in words, and whether it held.
    seed : int
        The seed the check ran with.
    """

    recipe: str
    table: pd.DataFrame
    claims: dict[str, bool] = field(default_factory=dict)
    seed: int = 0

    @property
    def passed(self) -> bool:
        """True when every claim held."""
        return all(self.claims.values())

    def to_frame(self) -> pd.DataFrame:
        """The check's table (a copy).

        Returns
        -------
        pandas.DataFrame
            A copy of ``table``.
        """
        return self.table.copy()

    def to_dict(self) -> dict:
        """A JSON-ready summary: recipe, seed, passed, claims and the table's records.

        Returns
        -------
        dict
            ``recipe``, ``seed``, ``passed``, ``claims`` and ``table`` (a list of row dicts).
        """
        return {"recipe": self.recipe, "seed": self.seed, "passed": self.passed,
                "claims": dict(self.claims), "table": self.table.to_dict(orient="records")}


@dataclass(frozen=True)
class Recipe:
    """One registered recipe.

    Attributes
    ----------
    name : str
        Registry key, e.g. ``"swalp"``.
    summary : str
        One line for ``embstab recipes list``.
    entry_points : tuple of str
        The public Python names that implement it, e.g. ``("SWALP",)``.
    check : callable
        ``check(seed: int = 0) -> CheckResult``: the small-problem acceptance check.
    """

    name: str
    summary: str
    entry_points: tuple[str, ...]
    check: Callable[..., CheckResult]


RECIPES: dict[str, Recipe] = {}


def register_recipe(name: str, summary: str, entry_points: tuple[str, ...]):
    """Decorator that registers a recipe's check function under ``name``.

    Parameters
    ----------
    name : str
        Registry key; registering the same name twice is a programming error.
    summary : str
        One line for listings.
    entry_points : tuple of str
        Public names implementing the recipe.

    Returns
    -------
    callable
        The decorator; it returns the check function unchanged.
    """

    def decorate(check: Callable[..., CheckResult]) -> Callable[..., CheckResult]:
        if name in RECIPES:
            raise RuntimeError(f"recipe {name!r} registered twice")
        RECIPES[name] = Recipe(name, summary, tuple(entry_points), check)
        return check

    return decorate


def get_recipe(name: str) -> Recipe:
    """Return the registered recipe ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`RECIPES`.

    Returns
    -------
    Recipe

    Raises
    ------
    UnknownNameError
        If no recipe has that name (the message suggests the closest).
    """
    return lookup(RECIPES, name, "recipe")

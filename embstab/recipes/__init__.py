"""Training and compression recipes built on the shared low-precision core.

Every recipe registers itself in :data:`RECIPES` (see :mod:`embstab.recipes.registry`) with a
small-problem acceptance check; ``embstab recipes list`` and ``embstab recipes check NAME`` use it.
"""

from __future__ import annotations

from embstab.recipes.memory import LowMemoryModel, MemoryProfile, low_memory, memory_profile
from embstab.recipes.registry import RECIPES, CheckResult, Recipe, get_recipe, register_recipe
from embstab.recipes.sixteen_bit import (SIXTEEN_BIT_MODES, PrecisionRecipeError, SixteenBitTraining,
                                         least_squares_16bit, sixteen_bit)
from embstab.recipes.halp import HALP, least_squares_halp
from embstab.recipes.swalp import SWALP, bn_update, least_squares_swalp, swalp_formats

__all__ = ["RECIPES", "CheckResult", "Recipe", "get_recipe", "register_recipe"]
__all__ += ["SIXTEEN_BIT_MODES", "PrecisionRecipeError", "SixteenBitTraining", "least_squares_16bit", "sixteen_bit"]
__all__ += ["SWALP", "bn_update", "least_squares_swalp", "swalp_formats"]
__all__ += ["HALP", "least_squares_halp"]
__all__ += ["LowMemoryModel", "MemoryProfile", "low_memory", "memory_profile"]

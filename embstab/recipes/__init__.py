"""Training and compression recipes built on the shared low-precision core.

Every recipe registers itself in :data:`RECIPES` (see :mod:`embstab.recipes.registry`) with a
small-problem acceptance check; ``embstab recipes list`` and ``embstab recipes check NAME`` use it.
"""

from __future__ import annotations

from embstab.recipes.memory import LowMemoryModel, MemoryProfile, low_memory, memory_profile
from embstab.recipes.sparse import DynamicSparsity, Reallocation, sparse_candidates
from embstab.recipes.registry import RECIPES, CheckResult, Recipe, get_recipe, register_recipe
from embstab.recipes.sixteen_bit import (SIXTEEN_BIT_MODES, PrecisionRecipeError, SixteenBitTraining,
                                         least_squares_16bit, sixteen_bit)
from embstab.recipes.halp import HALP, least_squares_halp
from embstab.recipes.training import TRAINING_RECIPES, RecipeOptimizer, TrainingRecipe, training_recipe
from embstab.recipes.swalp import SWALP, bn_update, least_squares_swalp, swalp_formats
from embstab.recipes.tt import TTEmbedding, TTShape, suggest_tt_shape, tt_compress_embedding, tt_decompose, tt_full
from embstab.recipes.ocs import ocs_merge, ocs_quantize, ocs_split
from embstab.recipes.rotation import random_hadamard, random_orthogonal, rotate_quantize
from embstab.recipes.adasum import AdasumOptimizer, adasum_pair, adasum_reduce, simulate_data_parallel
from embstab.recipes.pipemare import delayed_gd_threshold, divergence_lr, simulate_pipeline
from embstab.recipes.communication import (maurey_sparsify, message_bits, pnorm_mirror_descent, round_robin,
                                           topk_sparsify)

__all__ = ["RECIPES", "CheckResult", "Recipe", "get_recipe", "register_recipe"]
# precision recipes
__all__ += ["SIXTEEN_BIT_MODES", "PrecisionRecipeError", "SixteenBitTraining", "least_squares_16bit", "sixteen_bit"]
__all__ += ["SWALP", "bn_update", "least_squares_swalp", "swalp_formats"]
__all__ += ["HALP", "least_squares_halp"]
__all__ += ["TRAINING_RECIPES", "RecipeOptimizer", "TrainingRecipe", "training_recipe"]
__all__ += ["LowMemoryModel", "MemoryProfile", "low_memory", "memory_profile"]
__all__ += ["DynamicSparsity", "Reallocation", "sparse_candidates"]
# compression and distributed recipes
__all__ += ["TTEmbedding", "TTShape", "suggest_tt_shape", "tt_compress_embedding", "tt_decompose", "tt_full",
            "ocs_merge", "ocs_quantize", "ocs_split", "random_hadamard", "random_orthogonal", "rotate_quantize",
            "AdasumOptimizer", "adasum_pair", "adasum_reduce", "simulate_data_parallel",
            "delayed_gd_threshold", "divergence_lr", "simulate_pipeline",
            "maurey_sparsify", "message_bits", "pnorm_mirror_descent", "round_robin", "topk_sparsify"]

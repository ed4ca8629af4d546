"""Precision recipes as a setting of embstab's own trainers and of a study.

A *training recipe* names how a model's trainable weights (an embedding table, or a downstream
model's layers) are stored and updated while it is fitted:
``"fp32"`` (the reference), ``"bf16-nearest"`` / ``"bf16-stochastic"`` / ``"bf16-kahan"`` (16-bit
weights, the update rounded to nearest, stochastically, or with a Kahan compensation buffer; the
same for ``fp16``), and ``"swalp"`` (8-bit block floating point with stochastic rounding plus a
float64 average of the iterates over the second half of training). The names are what a study
file sweeps (``training.recipes``), what ``embstab train --recipe`` takes and what the
downstream models take (``embstab.downstream.train_and_predict(..., recipe=...)``).

The rounding itself is the low-precision core's (:func:`embstab.lowprec.quantize`, and
:class:`embstab.lowprec.LowPrecisionOptimizer` for Kahan updates); :class:`RecipeOptimizer`
applies it after each float32 step, to the touched rows only when the gradient is sparse, and
:class:`IterateAverage` keeps the SWALP average.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from embstab.errors import lookup
from embstab.lowprec import BlockFloatFormat, FixedFormat, FloatFormat, Format, LowPrecisionOptimizer, get_format, quantize
from embstab.recipes.sixteen_bit import PrecisionRecipeError
from embstab.recipes.swalp import swalp_formats

__all__ = ["TrainingRecipe", "TRAINING_RECIPES", "training_recipe", "IterateAverage", "RecipeOptimizer"]


@dataclass(frozen=True)
class TrainingRecipe:
    """How a trainer stores and updates its tables.

    Attributes
    ----------
    name : str
        The registry name (``"fp32"``, ``"bf16-kahan"``, ``"swalp"``, ...).
    weight_format : str or None
        Format of the stored weights (``None``: float32, no rounding).
    update : str
        Rounding of the weight update: ``"nearest"``, ``"stochastic"`` or ``"kahan"``.
    block_float_bits : int or None
        Word length of SWALP's block-floating-point weights (one exponent per row of a table).
    average : bool
        Return the float64 average of the iterates of the second half of training (SWALP) instead
        of the last iterate.
    """

    name: str
    weight_format: str | None = None
    update: str = "nearest"
    block_float_bits: int | None = None
    average: bool = False

    @property
    def is_reference(self) -> bool:
        """True for full-precision training (no rounding anywhere)."""
        return self.weight_format is None and self.block_float_bits is None

    def formats(self, param: torch.Tensor) -> Format | None:
        """The stored format of one parameter (tables get per-row block exponents under SWALP).

        Parameters
        ----------
        param : torch.Tensor
            A trainable parameter.

        Returns
        -------
        Format or None
            Block floating point per row (matrices) or per tensor (vectors) under SWALP, else the weight
            format; None when the weights stay float32.
        """
        if self.block_float_bits is not None:
            fmts = swalp_formats(self.block_float_bits)
            return fmts["channel"] if param.dim() > 1 else fmts["tensor"]
        return None if self.weight_format is None else get_format(self.weight_format)

    def wrap(self, optimizer: torch.optim.Optimizer, seed: int) -> torch.optim.Optimizer | RecipeOptimizer:
        """Make ``optimizer`` store its parameters in this recipe's formats.

        Parameters
        ----------
        optimizer : torch.optim.Optimizer
            The trainer's optimizer over float32 parameters (its state stays float32: the recipes
            differ in how weights are stored and updated, which is what moves neighbourhoods).
        seed : int
            Seed of stochastic rounding (derived from the training seed, so a seed reproduces
            the run).

        Returns
        -------
        torch.optim.Optimizer or RecipeOptimizer
            ``optimizer`` itself for ``fp32``; otherwise a :class:`RecipeOptimizer` with the same
            ``step`` / ``zero_grad`` surface. Parameters are rounded onto their formats at once.
        """
        if self.is_reference:
            return optimizer
        return RecipeOptimizer(optimizer, self, seed)


def _row_local(fmt: Format) -> bool:
    """True when rounding a row depends on that row alone (so untouched rows need no rounding)."""
    if isinstance(fmt, (FloatFormat, FixedFormat)):
        return True
    if isinstance(fmt, BlockFloatFormat):
        return fmt.axis == 0 or fmt.block_size is not None
    return False


class RecipeOptimizer:
    """Steps a float32 optimizer, then rounds what it changed onto the recipe's weight formats.

    With a dense gradient the whole parameter is rounded after the step. With a sparse gradient
    (an embedding looked up with ``sparse=True``) only the rows the gradient touches are rounded:
    torch's sparse optimizers (SGD, Adagrad, SparseAdam) change no other row, and every other row
    already lies on the grid, so rounding it again would cost a pass over the whole table per
    step for nothing — this is what makes SWALP on large tables affordable. Formats whose rounding
    of a row depends on other rows (one exponent per tensor) are always rounded whole.

    The Kahan update keeps a compensation buffer per weight and is done by
    :class:`embstab.lowprec.LowPrecisionOptimizer` (dense), which this class delegates to.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        The base optimizer over float32 parameters.
    recipe : TrainingRecipe
        A non-reference recipe.
    seed : int
        Seed of the stochastic-rounding generator.

    Raises
    ------
    PrecisionRecipeError
        If a parameter is not float32 (storage is simulated on float32 tensors).
    """

    def __init__(self, optimizer: torch.optim.Optimizer, recipe: TrainingRecipe, seed: int) -> None:
        self.base = optimizer
        self.recipe = recipe
        params = [p for g in optimizer.param_groups for p in g["params"]]
        wrong = sorted({str(p.dtype) for p in params if p.dtype != torch.float32})
        if wrong:
            raise PrecisionRecipeError(f"training recipe {recipe.name!r} simulates its formats on float32 "
                                       f"parameters, got {', '.join(wrong)}")
        self._formats = {p: recipe.formats(p) for p in params}
        self._gen = torch.Generator().manual_seed(int(seed))
        self._kahan: LowPrecisionOptimizer | None = None
        if recipe.update == "kahan":
            fmts = set(self._formats.values())
            if len(fmts) != 1:
                raise PrecisionRecipeError(f"training recipe {recipe.name!r}: Kahan updates need one weight format")
            self._kahan = LowPrecisionOptimizer(optimizer, weight=fmts.pop(), update="kahan", generator=self._gen)
            return
        with torch.no_grad():  # start on the grid, so every stored weight is representable
            for p, fmt in self._formats.items():
                p.copy_(quantize(p, fmt))

    @property
    def param_groups(self) -> list[dict]:
        """The base optimizer's parameter groups (learning rates can be changed there)."""
        return self.base.param_groups

    @property
    def state(self) -> dict:
        """The base optimizer's state."""
        return self.base.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients (as ``torch.optim.Optimizer.zero_grad``).

        Parameters
        ----------
        set_to_none : bool, default True
            Set the gradients to None instead of zeroing them.
        """
        self.base.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        """One float32 step of the base optimizer, then the rounding of the changed weights."""
        if self._kahan is not None:
            self._kahan.step()
            return
        touched: dict[torch.Tensor, torch.Tensor | None] = {}
        for p, fmt in self._formats.items():
            if p.grad is None:
                continue
            if p.grad.is_sparse and _row_local(fmt):
                # coalesce once and hand the coalesced gradient on: the sparse optimizers would
                # coalesce it again otherwise (a no-op on a coalesced tensor)
                p.grad = p.grad.coalesce()
                touched[p] = p.grad.indices()[0]  # each row once
            else:
                touched[p] = None
        self.base.step()
        update = self.recipe.update
        with torch.no_grad():
            for p, rows in touched.items():
                fmt = self._formats[p]
                if rows is None:
                    p.copy_(quantize(p, fmt, update, self._gen))
                elif len(rows):
                    p.index_copy_(0, rows, quantize(p.index_select(0, rows), fmt, update, self._gen))


class IterateAverage:
    """Float64 running average of parameters (SWALP's full-precision average).

    Parameters
    ----------
    params : list of torch.Tensor
        The parameters to average (read, never written).
    """

    def __init__(self, params: list[torch.Tensor]) -> None:
        self._params = params
        self.mean: list[torch.Tensor] | None = None
        self.count = 0

    @torch.no_grad()
    def update(self) -> None:
        """Fold the current parameters into the average."""
        current = [p.detach().to(torch.float64) for p in self._params]
        if self.mean is None:
            self.mean = [c.clone() for c in current]
        else:
            for m, c in zip(self.mean, current):
                m += (c - m) / (self.count + 1)
        self.count += 1


def _build() -> dict[str, TrainingRecipe]:
    table = {"fp32": TrainingRecipe("fp32")}
    for fmt in ("bf16", "fp16"):
        for update in ("nearest", "stochastic", "kahan"):
            table[f"{fmt}-{update}"] = TrainingRecipe(f"{fmt}-{update}", weight_format=fmt, update=update)
    table["swalp"] = TrainingRecipe("swalp", update="stochastic", block_float_bits=8, average=True)
    return table


#: Every training recipe by name.
TRAINING_RECIPES: dict[str, TrainingRecipe] = _build()


def training_recipe(recipe: str | TrainingRecipe | None) -> TrainingRecipe:
    """Look a training recipe up by name (``None`` is ``"fp32"``).

    Parameters
    ----------
    recipe : str or TrainingRecipe or None
        A key of :data:`TRAINING_RECIPES`; a :class:`TrainingRecipe` is returned as is.

    Returns
    -------
    TrainingRecipe

    Raises
    ------
    UnknownNameError
        For a name that is not in :data:`TRAINING_RECIPES`.
    PrecisionRecipeError
        For something that is neither a name nor a :class:`TrainingRecipe`.
    """
    if recipe is None:
        return TRAINING_RECIPES["fp32"]
    if isinstance(recipe, TrainingRecipe):
        return recipe
    if not isinstance(recipe, str):
        raise PrecisionRecipeError(f"a training recipe is a name such as 'bf16-kahan', got {type(recipe).__name__}")
    return lookup(TRAINING_RECIPES, recipe, "training recipe")

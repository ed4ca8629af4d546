"""Dynamic sparse reparameterization: train with a fixed budget of nonzero weights that moves.

The weight matrices of the chosen layers start sparse (the same density in every layer, random
positions). Every ``every`` optimizer steps the budget is re-allocated: weights whose magnitude is
below a global threshold ``H`` are pruned, and as many weights are regrown at random zero
positions (initialised to zero), distributed over the layers in proportion to the weights each
layer kept, so layers whose weights survive get more. ``H`` adapts so that each re-allocation
prunes about ``prune_fraction`` of the budget: doubled when fewer than ``(1 - tolerance)`` times
that many were pruned, halved when more than ``(1 + tolerance)`` times. Optimizer state at pruned
and regrown positions is reset to zero, as a sparse implementation re-allocating its storage would.

The weights are kept as dense tensors with a mask (gradients are masked by a hook, the weights
re-masked after every step), which gives the same numbers as sparse storage; memory accounting
(:func:`embstab.recipes.memory_profile`) counts what compressed sparse row (CSR) storage of the
nonzeros would take, :meth:`DynamicSparsity.csr_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from embstab._numbers import is_real
from embstab.recipes.sixteen_bit import PrecisionRecipeError

__all__ = ["DynamicSparsity", "Reallocation", "sparse_candidates"]

_INDEX_BYTES = 4  # int32 column indices and row pointers


@dataclass(frozen=True)
class Reallocation:
    """One re-allocation of the nonzero budget.

    Attributes
    ----------
    step : int
        Optimizer step after which it ran.
    pruned : int
        Weights pruned (and as many regrown).
    threshold : float
        The magnitude threshold used for this prune (before it adapted).
    density : dict of str to float
        Fraction of nonzero weights of each layer afterwards.
    """

    step: int
    pruned: int
    threshold: float
    density: dict[str, float]


def sparse_candidates(model: nn.Module) -> dict[str, nn.Parameter]:
    """The weights dynamic sparsity applies to: trainable parameters of two or more dimensions
    (linear, convolution and recurrent weight matrices), embedding tables excepted.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    dict of str to torch.nn.Parameter
        By qualified parameter name.
    """
    tables = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))}
    return {n: p for n, p in model.named_parameters()
            if p.requires_grad and p.dim() >= 2 and id(p) not in tables}


class DynamicSparsity:
    """A fixed budget of nonzero weights re-allocated between layers during training.

    Parameters
    ----------
    params : dict of str to torch.nn.Parameter
        The sparse weights by name (see :func:`sparse_candidates`).
    sparsity : float
        Fraction of these weights that are zero, in ``[0, 1)``.
    every : int, default 100
        Optimizer steps between re-allocations.
    prune_fraction : float, default 0.1
        Target share of the budget pruned (and regrown) per re-allocation, in ``(0, 1)``.
    tolerance : float, default 0.1
        Band around the target inside which the threshold is left unchanged.
    seed : int, default 0
        Seeds the initial positions and the regrown positions.

    Attributes
    ----------
    masks : dict of str to torch.Tensor
        Boolean masks of the nonzero positions.
    budget : int
        Nonzero weights, constant through training.
    threshold : float or None
        Current pruning threshold (``None`` until the first re-allocation, which sets it so that
        exactly the target number of weights is pruned).
    history : list of Reallocation

    Raises
    ------
    PrecisionRecipeError
        For no parameters, ``sparsity`` outside ``[0, 1)``, ``every < 1`` or ``prune_fraction``
        outside ``(0, 1)``.
    """

    def __init__(self, params: dict[str, nn.Parameter], sparsity: float, every: int = 100,
                 prune_fraction: float = 0.1, tolerance: float = 0.1, seed: int = 0) -> None:
        if not params:
            raise PrecisionRecipeError("dynamic sparsity needs at least one weight matrix (linear, conv or "
                                       "recurrent layer)")
        if not is_real(sparsity) or not 0.0 <= sparsity < 1.0:
            raise PrecisionRecipeError(f"sparse: the sparsity must be a fraction in [0, 1), got {sparsity!r}")
        if not (isinstance(every, int) and every >= 1):
            raise PrecisionRecipeError(f"sparse re-allocation period must be an int >= 1, got {every!r}")
        if not 0.0 < prune_fraction < 1.0:
            raise PrecisionRecipeError(f"prune_fraction must be in (0, 1), got {prune_fraction!r}")
        if not tolerance >= 0.0:
            raise PrecisionRecipeError(f"tolerance must be >= 0, got {tolerance!r}")
        self.params = dict(params)
        self.sparsity = float(sparsity)
        self.every, self.prune_fraction, self.tolerance = every, float(prune_fraction), float(tolerance)
        self._gen = torch.Generator().manual_seed(int(seed))
        self.masks: dict[str, torch.Tensor] = {}
        for name, p in self.params.items():
            keep = max(1, round((1.0 - self.sparsity) * p.numel()))
            mask = torch.zeros(p.numel(), dtype=torch.bool)
            mask[torch.randperm(p.numel(), generator=self._gen)[:keep]] = True
            self.masks[name] = mask.view_as(p)
            # the optimizer never sees a gradient at a zero position
            p.register_hook(lambda g, name=name: g * self.masks[name])
        self.budget = int(sum(int(m.sum()) for m in self.masks.values()))
        self.threshold: float | None = None
        self.steps = 0
        self.history: list[Reallocation] = []
        self.apply_masks()

    @torch.no_grad()
    def apply_masks(self) -> None:
        """Zero every weight outside its mask."""
        for name, p in self.params.items():
            p.mul_(self.masks[name])

    def nonzeros(self) -> int:
        """Nonzero positions over all sparse weights (always :attr:`budget`).

        Returns
        -------
        int
            The number of True entries of the masks.
        """
        return int(sum(int(m.sum()) for m in self.masks.values()))

    def step(self, optimizer: torch.optim.Optimizer | None = None) -> Reallocation | None:
        """Bookkeeping after one optimizer step: re-mask, and re-allocate when it is due.

        Parameters
        ----------
        optimizer : torch.optim.Optimizer, optional
            Its state at pruned and regrown positions is reset.

        Returns
        -------
        Reallocation or None
            The re-allocation done at this step, if any.
        """
        self.steps += 1
        self.apply_masks()
        if self.steps % self.every == 0:
            return self.reallocate(optimizer)
        return None

    @torch.no_grad()
    def reallocate(self, optimizer: torch.optim.Optimizer | None = None) -> Reallocation:
        """Prune below the threshold, adapt it, and regrow as many weights across the layers.

        Parameters
        ----------
        optimizer : torch.optim.Optimizer, optional
            Its state at changed positions is zeroed.

        Returns
        -------
        Reallocation
        """
        target = max(1, round(self.prune_fraction * self.budget))
        if self.threshold is None:
            active = torch.cat([p.detach().abs()[self.masks[n]] for n, p in self.params.items()])
            # start where exactly the target is pruned: below the (target+1)-th smallest magnitude
            ordered = torch.sort(active).values
            self.threshold = float(ordered[min(target, len(ordered) - 1)])
        used = self.threshold
        changed: dict[str, torch.Tensor] = {}
        pruned = 0
        for name, p in self.params.items():
            cut = self.masks[name] & (p.detach().abs() < used)
            self.masks[name] = self.masks[name] & ~cut
            p[cut] = 0.0
            changed[name] = cut
            pruned += int(cut.sum())
        if pruned < (1.0 - self.tolerance) * target:
            self.threshold = used * 2.0
        elif pruned > (1.0 + self.tolerance) * target:
            self.threshold = used / 2.0
        for name, grown in self._regrow(pruned).items():
            changed[name] = changed[name] | grown
        if optimizer is not None:
            self._reset_state(optimizer, changed)
        density = {n: float(m.float().mean()) for n, m in self.masks.items()}
        record = Reallocation(self.steps, pruned, used, density)
        self.history.append(record)
        return record

    def _regrow(self, count: int) -> dict[str, torch.Tensor]:
        """Turn on ``count`` zero positions, shared in proportion to each layer's surviving weights."""
        names = list(self.params)
        kept = torch.tensor([float(self.masks[n].sum()) for n in names], dtype=torch.float64)
        room = torch.tensor([float((~self.masks[n]).sum()) for n in names], dtype=torch.float64)
        share = torch.zeros(len(names), dtype=torch.int64)
        left = count
        while left > 0:
            # largest-remainder shares among layers with room; a full layer passes its share on. A
            # layer that kept nothing still weighs 1, so it can come back rather than stay dead.
            weights = torch.where(room - share > 0, kept.clamp(min=1.0), torch.zeros_like(kept))
            if float(weights.sum()) == 0:
                break
            exact = left * weights / weights.sum()
            add = torch.minimum(exact.floor().long(), (room - share).long())
            short = left - int(add.sum())
            if short > 0:
                order = torch.argsort(exact - exact.floor(), descending=True, stable=True)
                for i in order.tolist():
                    if short == 0:
                        break
                    if room[i] - share[i] - add[i] > 0 and weights[i] > 0:
                        add[i] += 1
                        short -= 1
            share += add
            left = count - int(share.sum())
            if int(add.sum()) == 0:
                break
        grown = {}
        for n, k in zip(names, share.tolist()):
            mask = self.masks[n]
            g = torch.zeros_like(mask)
            if k:
                free = (~mask).flatten().nonzero().squeeze(1)
                pick = free[torch.randperm(len(free), generator=self._gen)[:k]]
                g.view(-1)[pick] = True
            self.masks[n] = mask | g  # regrown weights start at zero (they were pruned or never on)
            grown[n] = g
        return grown

    def _reset_state(self, optimizer: torch.optim.Optimizer, changed: dict[str, torch.Tensor]) -> None:
        for name, p in self.params.items():
            st = optimizer.state.get(p, {})
            for value in st.values():
                if isinstance(value, torch.Tensor) and value.shape == p.shape:
                    value[changed[name]] = 0

    def csr_bytes(self, name: str, element_bytes: int | None = None) -> int:
        """Bytes of CSR storage of one weight's nonzeros (viewed as rows x the rest).

        Parameters
        ----------
        name : str
            A key of :attr:`params`.
        element_bytes : int, optional
            Bytes per stored value (default: the parameter's element size).

        Returns
        -------
        int
            ``nnz * (element_bytes + 4) + (rows + 1) * 4``: values, int32 column indices and row
            pointers.
        """
        p = self.params[name]
        size = p.element_size() if element_bytes is None else element_bytes
        nnz = int(self.masks[name].sum())
        return nnz * (size + _INDEX_BYTES) + (p.shape[0] + 1) * _INDEX_BYTES

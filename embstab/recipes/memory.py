"""Low-memory training: where training memory goes, and four ways to cut it.

:func:`memory_profile` splits the memory of one training step into weights, gradients,
optimizer state and activations. Activations are the tensors autograd saves for the backward
pass; they are counted as they are saved (``torch.autograd.graph.saved_tensors_hooks``), each
storage once, leaving out the parameters themselves. The graph is walked as well to count the
backward nodes that hold them, and its backward pass is replayed (:mod:`embstab.recipes.peak`)
for the step's peak, the larger of that and the forward pass's own peak; what each op's and
each backward node's kernels allocate internally is measured once per op and shapes
(:mod:`embstab.recipes.workspace`), and ops it cannot measure are named in the profile.

:func:`low_memory` wraps a model with the techniques: activation checkpointing of chosen child
modules (recomputed in the backward pass; numbers unchanged), micro-batching (gradient
accumulation over slices of the batch; activations scale with the micro-batch), 16-bit
storage of saved activations (packed to bf16/fp16 when saved, widened when used) and dynamic
sparse reparameterization of the weight matrices (:class:`embstab.recipes.sparse.DynamicSparsity`:
a fixed budget of nonzero weights, pruned by magnitude and regrown periodically).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import nn
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import checkpoint as _torch_checkpoint

from embstab.recipes.peak import ForwardPeak, Recomputed, backward_peak
from embstab.recipes.registry import CheckResult, register_recipe
from embstab.recipes.sixteen_bit import PrecisionRecipeError
from embstab.recipes.sparse import DynamicSparsity, sparse_candidates
from embstab.recipes.workspace import KernelMemory

__all__ = ["LowMemoryModel", "MemoryProfile", "low_memory", "memory_profile"]

_STORAGE = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class MemoryProfile:
    """Bytes of one training step, by kind.

    Attributes
    ----------
    weights, gradients, optimizer_state, activations : int
        Bytes of each kind (activations: tensors saved for backward, each storage once).
    graph_nodes : int
        Backward nodes reached from the loss.
    graph_activations : int or None
        The same activations found by walking the autograd graph from the loss and reading each
        node's saved tensors (an independent count; None for a :class:`LowMemoryModel`, whose
        saved tensors are packed).
    backward_peak : int or None
        Most bytes live at once during the backward pass, replayed on the graph
        (:func:`embstab.recipes.peak.backward_peak`: saved tensors still held, the batch and the
        model's output, gradients in flight, leaf gradients so far, and what the running node
        allocates, its kernels' workspace included, measured once per node type and shapes).
        For a :class:`LowMemoryModel` the largest over its micro-batches, each replayed on its
        own graph with its saved tensors as stored (16-bit when packed) plus the gradients the
        earlier micro-batches left in ``.grad``; a checkpointed child is replayed on the same
        forward run without checkpointing: when the first of its backward nodes runs, its
        forward runs again (its own forward peak, up to its last saved tensor, on top of what is
        held) and its saved tensors live from then on; its inputs are held until its last node
        has run.
    held_gradients : int
        Bytes of the ``.grad`` tensors already held when the step begins (the step sums into them).
    forward_peak : int or None
        Most bytes live at once during the forward pass and loss: the batch, plus the new tensors
        followed as they run (:class:`embstab.recipes.peak.ForwardPeak`: the saved activations,
        the transients no node saves and each op's workspace); for a :class:`LowMemoryModel`
        the largest over its micro-batches, plus the gradients earlier micro-batches left.
    dense_overhead : int
        Bytes the step holds beyond the kinds' accounting: sparse weights and their per-weight
        optimizer state are counted as CSR / nonzeros, but this implementation keeps them as
        dense masked tensors (0 without dynamic sparsity). The peak includes them; the kinds and
        the total do not.
    unmeasured : dict of str to str
        Ops and backward nodes whose kernels' workspace could not be measured, with the reason
        (:class:`embstab.recipes.workspace.KernelMemory`: a Python ``autograd.Function``'s
        backward, an op off the CPU, another profiler running); their workspace is not in the
        peak, which is then a lower bound (see :attr:`peak_is_bound`). Empty when every op was
        measured.
    """

    weights: int
    gradients: int
    optimizer_state: int
    activations: int
    graph_nodes: int
    graph_activations: int | None = None
    backward_peak: int | None = None
    held_gradients: int = 0
    forward_peak: int | None = None
    dense_overhead: int = 0
    unmeasured: dict[str, str] = field(default_factory=dict)

    @property
    def peak(self) -> int:
        """Predicted peak of the step as this implementation runs it: weights, optimizer state,
        gradients already held and the dense overhead of sparse weights, plus the largest of the
        saved activations (end of forward), the forward pass's peak and the backward pass's peak
        (without a replay: activations plus the gradients not yet held)."""
        moving = self.activations + max(0, self.gradients - self.held_gradients) if self.backward_peak is None \
            else max(self.activations, self.forward_peak or 0, self.backward_peak)
        return self.weights + self.optimizer_state + self.held_gradients + self.dense_overhead + moving

    @property
    def peak_is_bound(self) -> bool:
        """True when some op's workspace could not be measured (:attr:`unmeasured`): the true
        peak may then be higher than :attr:`peak`."""
        return bool(self.unmeasured)

    @property
    def total(self) -> int:
        """Sum of the four kinds."""
        return self.weights + self.gradients + self.optimizer_state + self.activations

    def to_frame(self) -> pd.DataFrame:
        """One row per kind with bytes and MiB.

        Returns
        -------
        pandas.DataFrame
            Columns ``kind`` (weights, gradients, optimizer_state, activations, total), ``bytes`` and ``MiB``.
        """
        kinds = ["weights", "gradients", "optimizer_state", "activations"]
        b = [getattr(self, k) for k in kinds] + [self.total]
        return pd.DataFrame({"kind": kinds + ["total"], "bytes": b, "MiB": [x / 2 ** 20 for x in b]})


def _nbytes(t: torch.Tensor) -> int:
    return t.untyped_storage().nbytes()


def _graph_saved_bytes(fn, skip: set[int]) -> int:
    """Bytes of the tensors the backward nodes reachable from ``fn`` hold (``_saved_*``), each
    storage once, parameters left out."""
    seen, stack, found = set(), [fn], {}
    while stack:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        for name in dir(f):
            if not name.startswith("_saved_"):
                continue
            try:
                vals = getattr(f, name)
            except RuntimeError:  # already freed
                continue
            for v in vals if isinstance(vals, (tuple, list)) else (vals,):
                if isinstance(v, torch.Tensor):
                    ptr = v.untyped_storage().data_ptr()
                    if ptr not in skip:
                        found[ptr] = max(found.get(ptr, 0), _nbytes(v))
        stack.extend(nf for nf, _ in getattr(f, "next_functions", ()))
    return sum(found.values())


def _count_nodes(fn) -> int:
    seen, stack = set(), [fn]
    while stack:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        stack.extend(nf for nf, _ in getattr(f, "next_functions", ()))
    return len(seen)


def memory_profile(model: nn.Module, batch: torch.Tensor | Sequence[torch.Tensor],
                   loss_fn: Callable[..., torch.Tensor] | None = None,
                   optimizer: torch.optim.Optimizer | None = None) -> MemoryProfile:
    """Split the memory of one forward/backward step of ``model`` on ``batch``.

    Parameters
    ----------
    model : torch.nn.Module
        The model (any forward; a :class:`LowMemoryModel` is profiled with its techniques).
    batch : tensor or sequence of tensors
        Model inputs; with ``loss_fn`` the last element is the target.
    loss_fn : callable, optional
        ``loss_fn(output, target)``; without it the loss is ``output.float().sum()``.
    optimizer : torch.optim.Optimizer, optional
        Its current state tensors are counted as optimizer state (step it once first to
        materialize lazily created state such as Adam's moments).

    Returns
    -------
    MemoryProfile
        For a :class:`LowMemoryModel` with dynamic sparsity, the sparse weights count what CSR
        storage of their nonzeros takes (values, int32 column indices, row pointers) and their
        gradients and per-weight optimizer state count the nonzeros' values: what a sparse
        implementation stores (this one computes with masked dense tensors, the same numbers).

    Raises
    ------
    PrecisionRecipeError
        If the model has no parameter requiring a gradient.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise PrecisionRecipeError("memory_profile needs a model with trainable parameters")
    inputs = list(batch) if isinstance(batch, (list, tuple)) else [batch]
    target = inputs.pop() if loss_fn is not None else None
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in param_ptrs:
            saved[ptr] = max(saved.get(ptr, 0), _nbytes(t))
        return t

    held = _grad_bytes(model)
    graph = replay = None
    unmeasured: dict[str, str] = {}
    if isinstance(model, LowMemoryModel):
        # micro-batches run one after another: the peak is the largest micro-batch's saved set
        _, nodes, per_micro, replays = model._profile_step(inputs, target, loss_fn, param_ptrs, replay=True,
                                                           unmeasured=unmeasured)
        activations = max(per_micro)
        replay = max(r for r, _ in replays)
        forward = max(f for _, f in replays)
    else:
        kernels = KernelMemory()
        with ForwardPeak(kernels) as tracked, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(*inputs)
            loss = loss_fn(out, target) if loss_fn is not None else out.float().sum()
        forward = tracked.peak + sum(_outputs((inputs, target), param_ptrs).values())  # the batch is live too
        nodes = _count_nodes(loss.grad_fn)
        graph = _graph_saved_bytes(loss.grad_fn, param_ptrs)
        replay = backward_peak(loss.grad_fn, param_ptrs, held=_outputs((out, inputs, target), param_ptrs),
                               kernels=kernels)
        unmeasured.update(kernels.unseen)
        activations = sum(saved.values())
        del loss, out
    sparsity = model.sparsity if isinstance(model, LowMemoryModel) else None
    # a sparse weight stores its nonzeros in CSR; so do its gradient and its per-weight optimizer
    # state (they share its index structure, so they cost values only)
    sparse = {id(p): n for n, p in sparsity.params.items()} if sparsity is not None else {}

    def stored(p: torch.Tensor, with_index: bool) -> int:
        if id(p) not in sparse:
            return p.numel() * p.element_size()
        name = sparse[id(p)]
        return sparsity.csr_bytes(name) if with_index else int(sparsity.masks[name].sum()) * p.element_size()

    weights = sum(stored(p, True) for p in model.parameters())
    gradients = sum(stored(p, False) for p in params)
    state = dense_state = 0
    if optimizer is not None:
        for p, st in optimizer.state.items():
            for v in st.values():
                if isinstance(v, torch.Tensor):
                    per_weight = id(p) in sparse and v.shape == p.shape
                    state += int(sparsity.masks[sparse[id(p)]].sum()) * v.element_size() if per_weight \
                        else v.numel() * v.element_size()
                    dense_state += v.numel() * v.element_size()
    # what the masked dense tensors of this implementation hold beyond the CSR / nonzero counts
    dense_weights = sum(p.numel() * p.element_size() for p in model.parameters())
    overhead = dense_weights - weights + dense_state - state
    return MemoryProfile(weights, gradients, state, activations, nodes, graph, replay, held, forward, overhead,
                         unmeasured)


def _outputs(out, skip: set[int]) -> dict[int, int]:
    """Storages of the tensors in ``out``, parameters left out: the step holds the batch and the
    model's output (``out = model(x)``) through its backward pass."""
    return {t.untyped_storage().data_ptr(): _nbytes(t) for t in tree_flatten(out)[0]
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in skip}


def _grad_bytes(model: nn.Module) -> int:
    seen: dict[int, int] = {}
    for p in model.parameters():
        if p.grad is not None:
            seen[p.grad.untyped_storage().data_ptr()] = _nbytes(p.grad)
    return sum(seen.values())


@dataclass
class _RegionTrace:
    """The checkpointed regions of a forward run without checkpointing: what the backward pass
    recomputes (``regions``: each region's backward nodes and the height of its recomputation,
    the region's own forward peak up to its last saved tensor, where the checkpoint stops
    recomputing, and the region's inputs as the checkpoint keeps them) and the inputs inside
    non-tensor arguments such as a ``PackedSequence`` (``nested``), which the checkpoint keeps as
    they are, out of reach of the saved-tensor hooks."""

    skip: set[int]
    forward: ForwardPeak | None = None
    active: Recomputed | None = None
    regions: list[Recomputed] = field(default_factory=list)
    nested: dict[int, int] = field(default_factory=dict)
    keep: list[torch.Tensor] = field(default_factory=list)  # alive until the replay: addresses stay unique
    base: int = 0
    pack: Callable | None = None  # the model's pack hook: the checkpoint saves its inputs through it

    def saved(self) -> None:
        """A tensor was saved inside the active region: the recomputation reaches at least this
        far (the checkpoint stops once it has the last saved tensor, parameters included)."""
        if self.forward is not None:
            self.active.height = self.forward.window_peak - self.base

    def run(self, inner: nn.Module, args: tuple):
        """Run one checkpointed region without checkpointing, recording it."""
        region = Recomputed(set())
        widened = 0
        for arg in args:
            if isinstance(arg, torch.Tensor):
                if arg.untyped_storage().data_ptr() not in self.skip:
                    # the checkpoint saves a tensor input through the storage hooks (16-bit when
                    # packed: the same copy as any node outside that saves the same tensor)
                    kept = self.pack(arg)[1] if self.pack is not None else arg
                    self.keep.append(kept)
                    region.inputs[kept.untyped_storage().data_ptr()] = _nbytes(kept)
                    if kept is not arg:  # the recomputation runs on the copy widened again
                        widened += _nbytes(arg)
                continue
            for t in tree_flatten(arg)[0]:
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self.skip:
                    region.inputs[t.untyped_storage().data_ptr()] = self.nested[t.untyped_storage().data_ptr()] = \
                        _nbytes(t)
        self.regions.append(region)
        self.active = region
        self.base = self.forward.open_window() if self.forward is not None else 0
        try:
            out = inner(*args)
        finally:
            self.active = None
        region.height += widened
        # the region's nodes: reached from its outputs without passing the nodes that made its inputs
        outside = {t.grad_fn for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None}
        stack = [t.grad_fn for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        while stack:
            f = stack.pop()
            if f is None or f in outside or f in region.nodes:
                continue
            region.nodes.add(f)
            stack.extend(nf for nf, _ in f.next_functions)
        return out


class _Checkpointed(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.trace: _RegionTrace | None = None  # set while a profile traces the step without checkpointing

    def forward(self, *args):
        if self.trace is not None:
            return self.trace.run(self.inner, args)
        return _torch_checkpoint(self.inner, *args, use_reentrant=False)


class LowMemoryModel(nn.Module):
    """A model wrapped with low-memory training techniques (see :func:`low_memory`)."""

    def __init__(self, model: nn.Module, micro_batch: int | None, storage: str,
                 sparsity: DynamicSparsity | None = None) -> None:
        super().__init__()
        self.model = model
        self.micro_batch = micro_batch
        self.storage = storage
        self.sparsity = sparsity

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``, then the sparse bookkeeping (re-mask; re-allocate when due).

        Parameters
        ----------
        optimizer : torch.optim.Optimizer
            The optimizer over this model's parameters; with dynamic sparsity use this method
            instead of ``optimizer.step()`` so the budget is kept and re-allocated.
        """
        optimizer.step()
        if self.sparsity is not None:
            self.sparsity.step(optimizer)

    def _hooks(self, record: dict[int, int] | None = None, skip: set[int] | None = None,
               probe: list[bool] | None = None, trace: _RegionTrace | None = None):
        dtype = _STORAGE[self.storage]
        probe = probe if probe is not None else [False]
        skip = skip or set()
        # one 16-bit copy per saved tensor: a tensor two nodes save (a ReLU's output is also the
        # next Linear's input) is converted once; the weak reference proves it is the same object.
        # The copy is held weakly too: every saved tensor's hooks keep this closure alive until
        # the whole graph is freed, and a strong reference here would keep each copy that long
        # instead of releasing it when the last node that saved it has run
        copies: dict[int, tuple[weakref.ref, weakref.ref]] = {}

        def pack(t):
            if trace is not None and trace.active is not None:
                # inside a checkpointed region the recomputation saves tensors as they are
                trace.saved()
                return (None, t)
            keep = t
            if (dtype is not None and t.is_floating_point() and t.dtype == torch.float32
                    and t.untyped_storage().data_ptr() not in skip):
                hit = copies.get(id(t))
                kept = hit[1]() if hit is not None and hit[0]() is t else None
                if kept is not None:
                    keep = kept
                else:
                    keep = t.to(dtype)
                    copies[id(t)] = (weakref.ref(t), weakref.ref(keep))
            if record is not None:  # count what is actually kept, each storage once
                # key by the kept tensor (alive until backward, so its address is unique): a
                # converted copy's source may be freed and its address reused by a later tensor
                ptr = keep.untyped_storage().data_ptr()
                if t.untyped_storage().data_ptr() not in skip:
                    record[ptr] = max(record.get(ptr, 0), _nbytes(keep))
            return (t.dtype if keep is not t else None, keep)

        def unpack(packed):
            orig, t = packed
            # while the graph is replayed, a node's saved tensor is read as stored (its 16-bit copy)
            return t if orig is None or probe[0] else t.to(orig)

        if trace is not None:
            trace.pack = pack
        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def forward(self, *args):
        """Run the wrapped model, saving float32 tensors for backward in the storage format
        (parameters excepted).

        Parameters
        ----------
        *args : torch.Tensor
            The wrapped model's inputs.

        Returns
        -------
        torch.Tensor
            The wrapped model's output.
        """
        with self._hooks(skip=self._param_ptrs()):
            return self.model(*args)

    def _param_ptrs(self) -> set[int]:
        return {p.untyped_storage().data_ptr() for p in self.model.parameters()}

    def backward_step(self, inputs: Sequence[torch.Tensor], target: torch.Tensor | None,
                      loss_fn: Callable[..., torch.Tensor] | None = None) -> float:
        """Forward and backward over the batch in micro-batches; gradients accumulate in ``.grad``.

        Parameters
        ----------
        inputs : sequence of tensors
            Model inputs (first dimension is the batch).
        target : tensor, optional
            Target for ``loss_fn``.
        loss_fn : callable, optional
            ``loss_fn(output, target)`` returning a mean over the batch; default ``output.sum()``.

        Returns
        -------
        float
            The loss of the whole batch (micro-batch losses weighted by their sizes).
        """
        loss, _, _, _ = self._profile_step(list(inputs), target, loss_fn, self._param_ptrs())
        return loss

    def _profile_step(self, inputs, target, loss_fn, skip, replay: bool = False,
                      unmeasured: dict[str, str] | None = None):
        n = inputs[0].shape[0]
        mb = self.micro_batch or n
        total, nodes, per_micro, replays = 0.0, 0, [], []
        # a checkpointed child's saved tensors are recomputed when first read: reading them from
        # the step's graph would run (and consume) the recomputation, so its backward pass is
        # replayed on a second graph, of the same forward run without checkpointing
        checkpointed = [m for m in self.model.modules() if isinstance(m, _Checkpointed)]
        held0 = _grad_bytes(self.model)
        for start in range(0, n, mb):
            sl = slice(start, min(n, start + mb))
            record: dict[int, int] = {}
            probe, nested = [False], 0
            # a node's workspace is measured by calling it, which must unpack its saved tensors
            # as the real backward pass does (widened from 16-bit storage), not as stored
            kernels = KernelMemory(calling=functools.partial(_reading, probe, False)) if replay else None
            tracked = ForwardPeak(kernels) if replay else contextlib.nullcontext()
            with tracked, self._hooks(record, skip, probe):
                out = self.model(*[x[sl] for x in inputs])
                if loss_fn is not None:
                    loss = loss_fn(out, target[sl]) * ((sl.stop - sl.start) / n)
                else:
                    loss = out.float().sum()
            nodes = max(nodes, _count_nodes(loss.grad_fn))
            if replay:
                # gradients an earlier micro-batch created are live beside this one's forward and backward
                earlier = _grad_bytes(self.model) - held0
                if checkpointed:
                    back, nested = self._traced_peak(inputs, target, loss_fn, sl, n, skip, checkpointed, kernels)
                else:
                    with _reading(probe, True):
                        back = backward_peak(loss.grad_fn, skip, held=_outputs((out, inputs, target), skip),
                                             kernels=kernels)
                batch = sum(_outputs((inputs, target), skip).values())  # live beside the forward's new tensors
                replays.append((earlier + back, earlier + tracked.peak + batch))
                if unmeasured is not None:
                    unmeasured.update(kernels.unseen)
            loss.backward()
            total += float(loss.detach())
            per_micro.append(sum(record.values()) + nested)  # nested: region inputs the hooks do not see
        return total, nodes, per_micro, replays

    def _traced_peak(self, inputs, target, loss_fn, sl, n, skip, checkpointed,
                     kernels: KernelMemory) -> tuple[int, int]:
        """Backward peak of one micro-batch with checkpointed children (the same forward run
        without checkpointing, each region's saved tensors deferred until its backward begins,
        when the region runs forward again up to its last saved tensor), and the bytes of region
        inputs the checkpoint keeps outside the saved-tensor hooks."""
        probe = [False]
        traced = KernelMemory(calling=functools.partial(_reading, probe, False))
        trace = _RegionTrace(skip)
        with torch.random.fork_rng(devices=[]):  # the traced run must not move the step's dropout seed
            for m in checkpointed:
                m.trace = trace
            try:
                with ForwardPeak(traced) as trace.forward, self._hooks(None, skip, probe, trace):
                    out = self.model(*[x[sl] for x in inputs])
                    loss = (loss_fn(out, target[sl]) * ((sl.stop - sl.start) / n) if loss_fn is not None
                            else out.float().sum())
            finally:
                for m in checkpointed:
                    m.trace = None
        with _reading(probe, True):
            back = backward_peak(loss.grad_fn, skip, trace.regions, _outputs((out, inputs, target), skip), traced)
        kernels.unseen.update(traced.unseen)
        return back, sum(trace.nested.values())


@contextlib.contextmanager
def _reading(probe: list[bool], as_stored: bool) -> Iterator[None]:
    """Saved tensors unpack as stored (``True``: the replay reads their storage) or widened to
    their original dtype (``False``: as the backward pass uses them) inside the block."""
    old, probe[0] = probe[0], as_stored
    try:
        yield
    finally:
        probe[0] = old


def low_memory(model: nn.Module, checkpoint: Sequence[str] = (), micro_batch: int | None = None,
               storage: str = "fp32", sparse: float | None = None, *, sparse_every: int = 100,
               sparse_prune: float = 0.1, seed: int = 0) -> LowMemoryModel:
    """Wrap ``model`` with activation checkpointing, micro-batching, 16-bit activation storage and
    dynamic sparse reparameterization.

    Parameters
    ----------
    model : torch.nn.Module
        The model; the named children are replaced in place by checkpointed wrappers.
    checkpoint : sequence of str
        Names of direct children to checkpoint (their inner activations are recomputed in
        backward instead of stored).
    micro_batch : int, optional
        Split each batch into slices of this size and accumulate gradients
        (:meth:`LowMemoryModel.backward_step`).
    storage : {"fp32", "bf16", "fp16"}
        Format of the activations saved for backward.
    sparse : float, optional
        Sparsity of the weight matrices (:func:`embstab.recipes.sparse.sparse_candidates`): the
        fraction of their weights that are zero, in ``[0, 1)``, e.g. ``0.9`` keeps a budget of
        10 %, re-allocated between layers during training (:class:`DynamicSparsity`; call
        :meth:`LowMemoryModel.step` instead of ``optimizer.step()``).
    sparse_every : int, default 100
        Optimizer steps between re-allocations of the sparse budget.
    sparse_prune : float, default 0.1
        Target share of the budget pruned and regrown per re-allocation.
    seed : int, default 0
        Seeds the sparse positions (initial and regrown).

    Returns
    -------
    LowMemoryModel

    Raises
    ------
    PrecisionRecipeError
        For an unknown child name, ``micro_batch < 1``, an unknown storage, a sparsity outside
        ``[0, 1)`` or a model without weight matrices to make sparse.
    """
    if storage not in _STORAGE:
        raise PrecisionRecipeError(f"storage must be one of {tuple(_STORAGE)}, got {storage!r}")
    if micro_batch is not None and not (isinstance(micro_batch, int) and micro_batch >= 1):
        raise PrecisionRecipeError(f"micro_batch must be a positive int, got {micro_batch!r}")
    children = dict(model.named_children())
    for name in checkpoint:
        if name not in children:
            raise PrecisionRecipeError(f"cannot checkpoint {name!r}: the model has no child of that name "
                                       f"(children: {', '.join(children) or 'none'})")
    sparsity = None
    if sparse is not None:
        sparsity = DynamicSparsity(sparse_candidates(model), sparse, every=sparse_every, prune_fraction=sparse_prune,
                                   seed=seed)
    for name in checkpoint:
        setattr(model, name, _Checkpointed(children[name]))
    return LowMemoryModel(model, micro_batch, storage, sparsity)


def _mlp(seed: int, width: int = 256, depth: int = 4) -> nn.Sequential:
    torch.manual_seed(seed)
    blocks = [nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
              for _ in range(depth)]
    return nn.Sequential(*blocks, nn.Linear(width, 10))


@register_recipe("low_memory", "Low-memory training: profile by kind; checkpointing, micro-batching, bf16 storage, "
                 "dynamic sparsity",
                 ("memory_profile", "low_memory", "MemoryProfile", "DynamicSparsity"))
def check_low_memory(seed: int = 0) -> CheckResult:
    """Activation and weight bytes under each technique on an MLP, and that checkpointing changes
    no number.

    Parameters
    ----------
    seed : int
        Seed of the model and data.

    Returns
    -------
    CheckResult
        One row per technique: activation and weight bytes, their ratios to the baseline, max
        gradient difference (dynamic sparsity trains other weights, so its difference is large).
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 256, generator=g)
    t = torch.randint(0, 10, (256,), generator=g)
    loss_fn = nn.functional.cross_entropy
    rows, grads = [], {}
    configs = {"baseline": {}, "checkpoint blocks": {"checkpoint": ("0", "1", "2", "3")},
               "micro_batch 64": {"micro_batch": 64}, "bf16 storage": {"storage": "bf16"},
               "sparse 90%": {"sparse": 0.9, "seed": seed}}
    for name, kw in configs.items():
        wrapped = low_memory(_mlp(seed), **kw)
        prof = memory_profile(wrapped, (x, t), loss_fn)
        wrapped.zero_grad()
        wrapped.backward_step([x], t, loss_fn)
        grads[name] = torch.cat([p.grad.flatten() for p in wrapped.parameters()])
        rows.append({"technique": name, "activation_bytes": prof.activations, "weights_bytes": prof.weights})
    table = pd.DataFrame(rows)
    base = table.activation_bytes[0]
    table["ratio"] = table.activation_bytes / base
    table["weights_ratio"] = table.weights_bytes / table.weights_bytes[0]
    table["max_grad_diff"] = [float((grads[k] - grads["baseline"]).abs().max()) for k in configs]
    r = dict(zip(table.technique, table.ratio))
    d = dict(zip(table.technique, table.max_grad_diff))
    claims = {
        # each checkpointed block keeps only its input (one of its four saved tensors)
        "checkpointing stores < 60% of the activations": bool(r["checkpoint blocks"] < 0.6),
        "checkpointing changes no gradient (bit-identical)": d["checkpoint blocks"] == 0.0,
        # slices of the input batch are views: the whole input stays counted, hence above 1/4
        "micro-batch 64 of 256 stores < 40% of the activations": bool(r["micro_batch 64"] < 0.4),
        "micro-batching changes gradients only by float rounding (< 1e-5)": d["micro_batch 64"] < 1e-5,
        "bf16 storage about halves the activations (ratio in [0.4, 0.55])": bool(0.4 <= r["bf16 storage"] <= 0.55),
        # 10 % of the matrices' values plus their int32 column indices; dense biases
        "sparse 90% stores < 25% of the weight bytes (CSR)":
            bool(dict(zip(table.technique, table.weights_ratio))["sparse 90%"] < 0.25),
    }
    return CheckResult("low_memory", table, claims, seed)

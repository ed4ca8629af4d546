"""Peak memory of a training step: predicted from the autograd graph, and measured.

:func:`backward_peak` replays the backward pass on the graph without running it, in the order
torch's engine runs it on CPU (ready nodes by decreasing sequence number, gradient accumulation
first). Live bytes are the tensors saved for backward that a node still to run holds (each
storage once, released when its last holder has run), the gradient buffers in flight (one per
node input, sized from the node's input metadata, freed once the node has run) and the leaf
gradients produced so far (a leaf that already holds a ``.grad``, as in the second micro-batch
of gradient accumulation, has the new gradient summed into it and freed). A node returns all
its gradients before the engine sums them into the waiting buffers, so while it runs its
outputs are counted in full beside its inflow and every occupied buffer: a gradient summed into
a buffer that already holds one is, for that moment, held twice (a packed LSTM's per-time-step
slices each return a zero-padded gradient the size of the whole gate projection, all summed
into one buffer). Memory a backward kernel allocates internally and frees before it returns is
not visible in the graph and is not counted.

:class:`ForwardPeak` follows the forward pass as it runs: tensors no node saves (a layer's
output once the next layer has used it, an LSTM layer's input projection) are in no graph, yet
they are live until the forward code drops them, and the forward pass can be the step's peak.
It counts every storage an op returns from its creation until it is freed; what a kernel
allocates and frees inside one op is not seen.

:func:`measure_peak` measures the same step with the allocator: it runs forward and backward
under ``torch.profiler`` with ``profile_memory=True``, which records every allocation and free of
the CPU allocator, and adds the running sum's maximum to the bytes already live (parameters,
existing gradients, optimizer state, inputs).
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["ForwardPeak", "MeasuredPeak", "backward_peak", "measure_peak"]

_ACCUMULATE_FIRST = 2 ** 64 - 1  # the engine runs gradient accumulation as soon as it is ready


def _meta_bytes(meta) -> int:
    try:
        shape, dtype = tuple(meta.shape), meta.dtype
    except (AttributeError, RuntimeError):  # nested or undefined metadata: nothing we can size
        return 0
    n = 1
    for s in shape:
        n *= int(s)
    return n * dtype.itemsize


def _saved_storages(fn, skip: set[int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for name in dir(fn):
        if not name.startswith("_saved_"):
            continue
        try:
            vals = getattr(fn, name)
        except RuntimeError:  # already freed
            continue
        for v in vals if isinstance(vals, (tuple, list)) else (vals,):
            if isinstance(v, torch.Tensor):
                ptr = v.untyped_storage().data_ptr()
                if ptr not in skip:
                    out[ptr] = max(out.get(ptr, 0), v.untyped_storage().nbytes())
    return out


def backward_peak(root, skip: set[int] | None = None, deferred: Sequence[set[int]] = (),
                  held: dict[int, int] | None = None) -> int:
    """Most bytes live at once while the backward pass from ``root`` runs, replayed on the graph.

    Parameters
    ----------
    root : torch.autograd.graph.Node
        The loss's ``grad_fn``.
    skip : set of int, optional
        Storage addresses not to count (the parameters: they are weights, not activations).
    deferred : sequence of sets of int, optional
        Groups of saved storages that do not exist until the backward pass first reads one of
        the group (a checkpointed region: the graph given is the region run without
        checkpointing, and its saved tensors are recomputed together when the first of its
        nodes runs, then released node by node like any other).
    held : dict, optional
        Storage address -> bytes of tensors live throughout the pass besides the saved ones (a
        checkpointed region's inputs, kept for its recomputation); counted once with any saved
        tensor of the same storage.

    Returns
    -------
    int
        Peak of saved tensors still held + gradient buffers in flight + new leaf gradients (the
        ``.grad`` tensors held before the pass are not included).
    """
    skip = skip or set()
    nodes, stack = [], [root]
    seen: set = set()
    while stack:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        nodes.append(f)
        stack.extend(nf for nf, _ in f.next_functions)
    pending = {f: 0 for f in nodes}
    for f in nodes:
        for nf, _ in f.next_functions:
            if nf is not None:
                pending[nf] += 1
    saved = {f: _saved_storages(f, skip) for f in nodes}
    holders: dict[int, int] = {}
    size: dict[int, int] = {}
    for f, st in saved.items():
        for ptr, b in st.items():
            holders[ptr] = holders.get(ptr, 0) + 1
            size[ptr] = max(size.get(ptr, 0), b)
    for ptr, b in (held or {}).items():  # one holder more, never released
        holders[ptr] = holders.get(ptr, 0) + 1
        size[ptr] = max(size.get(ptr, 0), b)
    group_of = {ptr: g for g, ptrs in enumerate(deferred) for ptr in ptrs
                if ptr in size and ptr not in (held or {})}
    waiting_groups = {g: [p for p, h in group_of.items() if h == g] for g in set(group_of.values())}
    live = sum(b for ptr, b in size.items() if ptr not in group_of)
    buffers: dict = {}  # node -> {input index: bytes of the gradient waiting there}
    leaf_grads = 0
    peak = live
    order = 0
    ready = [(-_priority(root), order, root)]
    while ready:
        _, _, f = heapq.heappop(ready)
        inflow = sum(buffers.pop(f, {}).values())
        waiting = sum(sum(v.values()) for v in buffers.values())
        if type(f).__name__ == "AccumulateGrad":
            # the buffer becomes the leaf's new .grad (stolen, not copied), or else it is summed
            # into the .grad the leaf already holds (in place) and freed
            if getattr(getattr(f, "variable", None), "grad", None) is None:
                leaf_grads += inflow
            continue
        for ptr in saved[f]:  # the first read of a checkpointed region recomputes all of it
            g = group_of.get(ptr)
            if g is not None and g in waiting_groups:
                live += sum(size[p] for p in waiting_groups.pop(g))
        # the node returns all its gradients at once, while its inflow, its saved tensors and the
        # buffers already waiting are still held; only then is each one summed into its buffer
        # (in place), so a gradient reaching an occupied buffer is momentarily there twice
        outflow = 0
        for nf, idx in f.next_functions:
            if nf is None:
                continue
            metas = getattr(nf, "_input_metadata", ())
            b = _meta_bytes(metas[idx]) if idx < len(metas) else 0
            outflow += b
            slot = buffers.setdefault(nf, {})
            slot[idx] = max(slot.get(idx, 0), b)
        peak = max(peak, live + inflow + waiting + outflow + leaf_grads)
        for ptr in saved[f]:  # the engine releases a node's saved tensors once it has run
            holders[ptr] -= 1
            if holders[ptr] == 0:
                live -= size[ptr]
        for nf, _ in f.next_functions:
            if nf is None:
                continue
            pending[nf] -= 1
            if pending[nf] == 0:
                order += 1
                heapq.heappush(ready, (-_priority(nf), order, nf))
    return peak


class ForwardPeak(TorchDispatchMode):
    """Context manager: most bytes of new storage live at once while the code inside runs.

    Every storage an op returns that none of its arguments already held (views and in-place
    results are not new) counts from the op until the storage is freed (a finalizer on the
    storage).

    Attributes
    ----------
    peak : int
        Maximum of the running total so far.
    live : int
        Bytes of the counted storages still alive now.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: set[int] = set()

    def _freed(self, ptr: int, nbytes: int) -> None:
        self._tracked.discard(ptr)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        held = {_storage_ptr(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            ptr = _storage_ptr(t) if isinstance(t, torch.Tensor) else 0
            if ptr and ptr not in held and ptr not in self._tracked:
                storage = t.untyped_storage()
                self._tracked.add(ptr)
                weakref.finalize(storage, self._freed, ptr, storage.nbytes())
                self.live += storage.nbytes()
                self.peak = max(self.peak, self.live)
        return out


def _storage_ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse, nested): not sized
        return 0


def _priority(f) -> int:
    if type(f).__name__ == "AccumulateGrad":
        return _ACCUMULATE_FIRST
    try:
        return int(f._sequence_nr())
    except (AttributeError, RuntimeError):
        return 0


@dataclass
class MeasuredPeak:
    """Peak allocation of one forward/backward step, measured by the CPU allocator.

    Attributes
    ----------
    peak : int
        ``baseline + step_peak``: the most bytes live at once.
    baseline : int
        Bytes live before the step that it keeps using (parameters, existing gradients,
        optimizer state, inputs and target).
    step_peak : int
        Maximum of the running sum of the allocations and frees the step made.
    events : int
        Allocation and free events recorded.
    """

    peak: int
    baseline: int
    step_peak: int
    events: int


def _tensor_bytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if isinstance(t, torch.Tensor):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                total += t.untyped_storage().nbytes()
    return total


def measure_peak(model: nn.Module, batch: torch.Tensor | Sequence[torch.Tensor],
                 loss_fn: Callable[..., torch.Tensor] | None = None,
                 optimizer: torch.optim.Optimizer | None = None) -> MeasuredPeak:
    """Run one forward/backward step of ``model`` on ``batch`` and measure its peak allocation.

    Parameters
    ----------
    model : torch.nn.Module
        A model on CPU; a :class:`embstab.recipes.LowMemoryModel` runs its
        :meth:`~embstab.recipes.LowMemoryModel.backward_step` (micro-batches, checkpoint
        recomputation and packed storage all show in the measurement).
    batch : tensor or sequence of tensors
        Model inputs; with ``loss_fn`` the last element is the target.
    loss_fn : callable, optional
        ``loss_fn(output, target)``; without it the loss is ``output.float().sum()``.
    optimizer : torch.optim.Optimizer, optional
        Its state counts as live memory (the step does not call it).

    Returns
    -------
    MeasuredPeak
        Gradients are left in ``.grad`` as after any backward pass.
    """
    from torch.profiler import ProfilerActivity, profile

    inputs = list(batch) if isinstance(batch, (list, tuple)) else [batch]
    target = inputs.pop() if loss_fn is not None else None
    live = list(model.parameters()) + [p.grad for p in model.parameters() if p.grad is not None]
    if optimizer is not None:
        live += [v for st in optimizer.state.values() for v in st.values() if isinstance(v, torch.Tensor)]
    live += inputs + ([target] if target is not None else [])
    baseline = _tensor_bytes(live)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        if hasattr(model, "backward_step"):  # a low-memory model runs its own micro-batched step
            model.backward_step(inputs, target, loss_fn)
        else:
            out = model(*inputs)
            loss = loss_fn(out, target) if loss_fn is not None else out.float().sum()
            loss.backward()
            del loss, out
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and "CPU" in str(e.device_type()))
    running = top = 0
    for _, nbytes in events:
        running += nbytes
        top = max(top, running)
    return MeasuredPeak(baseline + top, baseline, top, len(events))

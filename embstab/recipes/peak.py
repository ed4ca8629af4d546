"""Peak memory of a training step: predicted from the autograd graph, and measured.

:func:`backward_peak` replays the backward pass on the graph, in the order torch's engine runs
it on CPU (ready nodes by decreasing sequence number, gradient accumulation first). Live bytes
are the tensors saved for backward that a node still to run holds (each storage once, released
when its last holder has run), the tensors the step holds throughout (the batch, the model's
output), the gradients in flight and the leaf gradients produced so far (a leaf that already
holds a ``.grad``, as in the second micro-batch of gradient accumulation, has the new gradient
summed into it and freed). What a node allocates while it runs -- the gradients it returns and
the workspace of its kernels (a convolution's backward unfolds its input again, and first
copies an expanded gradient, as a sum's backward returns, to a dense one) -- is not in the
graph: each node is called once on zero gradients of the layouts that reach it and measured
with the allocator (:class:`~embstab.recipes.workspace.KernelMemory`, cached per node type,
saved tensors and layouts). Its outputs tell which gradients are new storage and which are
views of its input (a concatenation's backward returns slices of one gradient, a sum's an
expanded scalar), so each gradient storage is counted once however many buffers hold views of
it. The engine frees a node's inputs when it returns and then sums each gradient into its
buffer: in place if the waiting gradient is dense and nothing else holds its storage, or else
into a new tensor, three held for that moment.

A checkpointed region (:class:`Recomputed`) is replayed on the step run without checkpointing:
its nodes' saved tensors come into being when the first of them runs, as the checkpoint runs
the region forward again -- up to its last saved tensor, where it stops -- beside the
gradients in flight. The recomputation's transients count, which is why checkpointing a
recurrent layer saves little: its forward stacks the per-step outputs into a fresh tensor while
they are still held, so the region's forward peak, repeated in the backward pass on top of the
gradients, is as high as what checkpointing saved.

:class:`ForwardPeak` follows the forward pass as it runs: tensors no node saves (a layer's
output once the next layer has used it, an LSTM layer's input projection) are in no graph, yet
they are live until the forward code drops them, and the forward pass can be the step's peak.
It counts every storage an op returns from its creation until it is freed, and while an op
runs, its kernel's workspace (measured once per op and argument layout, cached).

Ops whose workspace cannot be measured (a Python ``autograd.Function``'s backward, ops off the
CPU, anything met while another profiler runs) are named in the
:class:`~embstab.recipes.workspace.KernelMemory`'s ``unseen``: the prediction is then a bound
from below.

:func:`measure_peak` measures the same step with the allocator: it runs forward and backward
under ``torch.profiler`` with ``profile_memory=True``, which records every allocation and free of
the CPU allocator, and adds the running sum's maximum to the bytes already live (parameters,
existing gradients, optimizer state, inputs).
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from embstab.recipes.workspace import KernelMemory, is_dense

__all__ = ["ForwardPeak", "KernelMemory", "MeasuredPeak", "Recomputed", "backward_peak", "measure_peak"]

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


def _fits(layout, f, idx: int) -> bool:
    """Whether a gradient of ``layout`` has the shape and dtype input ``idx`` of node ``f`` expects."""
    metas = getattr(f, "_input_metadata", ())
    if idx >= len(metas):
        return True
    try:
        return tuple(metas[idx].shape) == tuple(layout[0]) and metas[idx].dtype == layout[2]
    except (AttributeError, RuntimeError):  # nested or undefined metadata: nothing to compare
        return True


def _input_bytes(f, idx: int) -> int:
    """Bytes of a dense gradient for input ``idx`` of node ``f``."""
    metas = getattr(f, "_input_metadata", ())
    return _meta_bytes(metas[idx]) if idx < len(metas) else 0


class _Gradients:
    """The gradients in flight during a replayed backward pass, each storage counted once however
    many buffers hold views of it (a concatenation's backward returns slices of one gradient)."""

    def __init__(self) -> None:
        self.size: dict[int, int] = {}  # storage id -> bytes
        self.refs: dict[int, int] = {}  # storage id -> tensors holding it
        self.buffers: dict = {}  # node -> {input index: (storage id, layout or None: dense)}
        self.live = 0
        self.high = 0  # most of ``live`` since last set, while gradients are summed into buffers
        self._next = 0

    def new(self, nbytes: int) -> int:
        self._next += 1
        self.size[self._next], self.refs[self._next] = nbytes, 0
        self.live += nbytes
        return self._next

    def hold(self, sid: int) -> None:
        self.refs[sid] += 1

    def drop(self, sid: int) -> None:
        self.refs[sid] -= 1
        if self.refs[sid] == 0:
            self.live -= self.size.pop(sid)
            del self.refs[sid]

    def put(self, f, idx: int, sid: int, layout, dense: int) -> None:
        """Sum a gradient (already held) into input ``idx`` of node ``f``, as the engine does: the
        first one is moved in; a later one is added in place to the waiting one if that is dense
        and nothing else holds its storage, or else both are added into a new dense tensor."""
        slot = self.buffers.setdefault(f, {})
        if idx not in slot:
            slot[idx] = (sid, layout)
            return
        old, old_layout = slot[idx]
        if (old_layout is None or is_dense(old_layout)) and self.refs[old] == 1:
            self.drop(sid)
        else:
            total = self.new(dense)
            self.hold(total)
            self.high = max(self.high, self.live)
            slot[idx] = (total, None)
            self.drop(old)
            self.drop(sid)


def _saved_storages(fn, skip: set[int]) -> dict[int, int]:
    """Storage address -> bytes of the tensors ``fn`` saved, skipped ones left out (a skipped
    tensor is recorded under address 0 with 0 bytes: the node reads a saved tensor all the same)."""
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
                else:
                    out.setdefault(0, 0)
    return out


@dataclass
class Recomputed:
    """A checkpointed region of a graph recorded without checkpointing.

    Attributes
    ----------
    nodes : set of torch.autograd.graph.Node
        The backward nodes created inside the region. Their saved tensors do not exist until
        the first of them runs: the checkpoint then runs the region forward again and keeps what
        they save (a new copy even of a tensor that a node outside the region saves too, such as
        the region's output), each released once its last holder has run.
    height : int
        Most bytes the recomputation holds at once beyond what was live before it: the region's
        forward peak up to its last saved tensor, where the checkpoint stops recomputing
        (:attr:`ForwardPeak.window_peak`). Its transients, such as a recurrent layer's stacked
        outputs, sit beside the gradients in flight.
    inputs : dict of int to int
        Storage address -> bytes of the region's inputs as the checkpoint keeps them. The
        recomputation reuses them as they are; they are released with the checkpoint once the
        last of the region's nodes that read saved tensors has run.
    """

    nodes: set
    height: int = 0
    inputs: dict[int, int] = field(default_factory=dict)


def _graph(root) -> tuple[list, dict]:
    """The nodes of the backward graph from ``root`` and, per node, how many edges reach it."""
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
    return nodes, pending


def _saved_tensors(nodes: list, skip: set[int], held: dict[int, int], regions: Sequence[Recomputed]) -> tuple:
    """What the nodes save, keyed by storage: ``saved`` per node, each checkpointed node's region,
    the region's readers still to run, the holders and size of each storage, and the storages
    each region recomputes."""
    saved = {f: _saved_storages(f, skip) for f in nodes}
    region_of: dict = {}
    readers: dict[int, int] = {}  # region -> its nodes still to run that read saved tensors
    for g, region in enumerate(regions):
        for f in region.nodes:
            if f in saved:
                region_of[f] = g
                readers[g] = readers.get(g, 0) + bool(saved[f])
                # a recomputed tensor is a storage of its own, apart from the forward's original
                saved[f] = {p if p in region.inputs else (g, p): b for p, b in saved[f].items()}
    holders: dict = {}
    size: dict = {}
    for f, st in saved.items():
        for ptr, b in st.items():
            holders[ptr] = holders.get(ptr, 0) + 1
            size[ptr] = max(size.get(ptr, 0), b)
    kept = [held] + [region.inputs for region in regions]  # the checkpoints' inputs: one holder more each
    for ptrs in kept:
        for ptr, b in ptrs.items():
            holders[ptr] = holders.get(ptr, 0) + 1
            size[ptr] = max(size.get(ptr, 0), b)
    pending_regions = {g: {p for f, h in region_of.items() if h == g for p in saved[f] if isinstance(p, tuple)}
                       for g in set(region_of.values())}
    return saved, region_of, readers, holders, size, pending_regions


def _accumulate(f, slots: dict, grads: _Gradients, live: int, leaf_grads: int, peak: int) -> tuple[int, int]:
    """An ``AccumulateGrad`` node runs: its gradients become (or add into) the leaf's ``.grad``;
    the new peak and the bytes of new leaf gradients."""
    for sid, layout in slots.values():
        if getattr(getattr(f, "variable", None), "grad", None) is None:
            # the gradient becomes the leaf's .grad: taken over if it is dense and nothing
            # else holds its storage, else copied to a dense one
            metas = getattr(f, "_input_metadata", ())
            dense = _meta_bytes(metas[0]) if metas else 0
            if (layout is None or is_dense(layout)) and grads.refs[sid] == 1 and grads.size[sid] == dense:
                grads.live -= dense
                grads.size[sid] = 0
            else:
                peak = max(peak, live + grads.live + leaf_grads + dense)
            leaf_grads += dense
        grads.drop(sid)  # (or it is summed into the .grad the leaf already holds, in place)
    return peak, leaf_grads


def backward_peak(root, skip: set[int] | None = None, regions: Sequence[Recomputed] = (),
                  held: dict[int, int] | None = None, kernels: KernelMemory | None = None) -> int:
    """Most bytes live at once while the backward pass from ``root`` runs, replayed on the graph.

    Parameters
    ----------
    root : torch.autograd.graph.Node
        The loss's ``grad_fn``.
    skip : set of int, optional
        Storage addresses not to count (the parameters: they are weights, not activations).
    regions : sequence of Recomputed, optional
        Checkpointed regions (the graph given is the step run without checkpointing): their
        nodes' saved tensors come into being when the first of the region's nodes runs.
    held : dict, optional
        Storage address -> bytes of tensors live throughout the pass besides the saved ones;
        counted once with any saved tensor of the same storage.
    kernels : KernelMemory, optional
        Measures what each node allocates (:meth:`~embstab.recipes.workspace.KernelMemory.node`:
        the node called once on zero gradients of the layouts that reach it, cached per node
        type, saved tensors and layouts); a new one if not given. Its ``unseen`` names the
        nodes it could not call; for those a dense gradient per input is assumed and no
        workspace, so the result is then a lower bound.

    Returns
    -------
    int
        Peak of saved and held tensors + gradients in flight + new leaf gradients + the running
        node's allocations (the ``.grad`` tensors held before the pass are not included).
    """
    kernels = kernels if kernels is not None else KernelMemory()
    nodes, pending = _graph(root)
    saved, region_of, readers, holders, size, pending_regions = _saved_tensors(nodes, skip or set(), held or {},
                                                                               regions)
    live = sum(b for ptr, b in size.items() if not isinstance(ptr, tuple))
    grads = _Gradients()
    leaf_grads = 0
    peak = live
    order = 0
    ready = [(-_priority(root), order, root)]
    while ready:
        _, _, f = heapq.heappop(ready)
        slots = grads.buffers.pop(f, {})
        if type(f).__name__ == "AccumulateGrad":
            peak, leaf_grads = _accumulate(f, slots, grads, live, leaf_grads, peak)
            continue
        g = region_of.get(f)
        if g is not None and g in pending_regions and saved[f]:  # the recomputation starts at a read
            # the first node of a checkpointed region to run recomputes the region's forward,
            # beside everything already held; what its nodes save stays
            peak = max(peak, live + grads.live + leaf_grads + regions[g].height)
            live += sum(size[p] for p in pending_regions.pop(g))
        # the node is called once (cached per type, saved tensors and gradient layouts) to see
        # what it allocates: the gradients it returns in new storage and its kernels' workspace,
        # all live at once beside its inflow, its saved tensors and the gradients waiting
        run = kernels.node(f, [slots[i][1] if i in slots else None for i in range(max(slots, default=-1) + 1)])
        outputs, made, allocated, reduced = [], {}, 0, []
        for i, (nf, idx) in enumerate(f.next_functions):
            if nf is None:
                continue
            dense = _input_bytes(nf, idx)
            out = run.outputs[i] if run is not None and i < len(run.outputs) else None
            if run is not None and out is None:  # no gradient for this input
                continue
            if out is None:  # not measured: a new dense gradient of the input's shape
                sid, layout = grads.new(dense), None
                made[i] = sid
                allocated += dense
            elif not _fits(out.layout, nf, idx):
                # the engine sums a broadcast gradient down to the input's shape (a bias's
                # gradient comes back as the whole output's) or casts it: a new dense tensor
                reduced.append((nf, idx, dense))
                continue
            else:
                kind, ref, nbytes = out.source
                layout = out.layout
                if kind == "input" and ref in slots:  # a view of the gradient it was given
                    sid = slots[ref][0]
                elif kind == "output" and ref in made:  # a view of another of its outputs
                    sid = made[ref]
                else:  # new storage, or a view of the loss's own starting gradient
                    sid = made[i] = grads.new(nbytes)
            grads.hold(sid)
            outputs.append((nf, idx, sid, layout))
        if run is not None:
            allocated = run.peak
        peak = max(peak, live + grads.live - sum(grads.size[sid] for sid in made.values()) + leaf_grads + allocated)
        for nf, idx, dense in reduced:
            sid = grads.new(dense)
            grads.hold(sid)
            outputs.append((nf, idx, sid, None))
        for sid, _ in slots.values():  # the gradients it was given are freed when it returns
            grads.drop(sid)
        # then each gradient it returned is summed into its buffer: one reaching an occupied
        # buffer is summed into the waiting one in place, if that is dense and held nowhere else,
        # or else both are added into a new tensor, three held at that moment
        grads.high = grads.live
        for nf, idx, sid, layout in outputs:
            grads.put(nf, idx, sid, layout, _input_bytes(nf, idx))
        peak = max(peak, live + grads.high + leaf_grads)
        released = list(saved[f])  # the engine releases a node's saved tensors once it has run
        if g is not None and saved[f]:
            readers[g] -= 1
            if readers[g] == 0:  # and with the region's last reader goes its checkpoint
                released += list(regions[g].inputs)
        for ptr in released:
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
    storage). While an op runs, its workspace (what its kernel allocates and frees inside,
    measured once per op and shapes by ``kernels``) counts on top of the storages live after it.

    Parameters
    ----------
    kernels : KernelMemory, optional
        Measures and caches the ops' workspace; a new one if not given. Its ``unseen`` names
        the ops it could not measure.

    Attributes
    ----------
    peak : int
        Maximum of the running total so far.
    live : int
        Bytes of the counted storages still alive now.
    window_peak : int
        Maximum of the running total since :meth:`open_window` (the whole run if never called).
    """

    def __init__(self, kernels: KernelMemory | None = None) -> None:
        super().__init__()
        self.kernels = kernels if kernels is not None else KernelMemory()
        self.live = 0
        self.peak = 0
        self.window_peak = 0
        self._tracked: set[int] = set()

    def open_window(self) -> int:
        """Restart :attr:`window_peak` from the bytes live now, and return them.

        Returns
        -------
        int
            :attr:`live` at this moment (a window's own peak is ``window_peak`` minus it).
        """
        self.window_peak = self.live
        return self.live

    def _bump(self, total: int) -> None:
        self.peak = max(self.peak, total)
        self.window_peak = max(self.window_peak, total)

    def _freed(self, ptr: int, nbytes: int) -> None:
        self._tracked.discard(ptr)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out, workspace = self.kernels.run_op(func, args, kwargs)
        held = {_storage_ptr(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            ptr = _storage_ptr(t) if isinstance(t, torch.Tensor) else 0
            if ptr and ptr not in held and ptr not in self._tracked:
                storage = t.untyped_storage()
                self._tracked.add(ptr)
                weakref.finalize(storage, self._freed, ptr, storage.nbytes())
                self.live += storage.nbytes()
        self._bump(self.live + workspace)
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

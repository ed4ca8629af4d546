"""Memory a kernel allocates and frees inside one op: measured once per op and layout, cached.

The autograd graph and the forward pass show which tensors an op returns and which ones a
backward node keeps, but not what a kernel allocates for itself while it runs: a CPU convolution
unfolds its input (im2col) into a buffer several times the input's size, its backward unfolds it
again and first copies a non-dense incoming gradient to a dense one. :class:`KernelMemory` runs
such a call once under ``torch.profiler`` with ``profile_memory=True`` -- the same allocator
events :func:`embstab.recipes.peak.measure_peak` reads:

* a forward op (as a dispatch mode sees it) is measured as it runs, and its *workspace* kept:
  the most bytes live at once inside the call beyond what the call leaves allocated (its
  outputs);
* a backward node is called on zero gradients of the layouts that reach it, and the call's
  peak kept (its new gradients and its workspace) with the layout of each gradient it returns
  and whether that is new storage or a view of a gradient it was given (:class:`NodeRun`).

Results are cached per op or node type, argument shapes, strides and dtypes (for a node: its
saved tensors' and its gradients') and thread count, so a layer repeated over time steps or
training steps is measured once.

What cannot be measured is named in :attr:`KernelMemory.unseen` instead of guessed: a backward
node of a Python ``autograd.Function`` (its backward is arbitrary Python, which may have side
effects), ops on a device other than the CPU, nodes that fail on zero gradients, and every op
met while another profiler is already running (two profilers cannot run at once). A peak
predicted with unseen ops is a lower bound.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.utils._pytree import tree_flatten

__all__ = ["KernelMemory", "Layout", "NodeRun", "Output", "clear_workspace_cache", "dense_layout", "is_dense",
           "layout_of"]

#: A gradient's memory layout: ``(shape, stride, dtype)`` (a sum's backward returns an
#: expanded gradient, stride 0, which many backward kernels first copy to a dense one).
Layout = tuple

_CACHE: OrderedDict[tuple, object] = OrderedDict()
_CACHE_SIZE = 50_000  # keys are small tuples; enough for every shape of a packed LSTM over many batches


def clear_workspace_cache() -> None:
    """Forget every measured workspace (the next profile measures its ops again)."""
    _CACHE.clear()


def _spec(x) -> object:
    """What an argument contributes to a cache key: layout for a tensor, the value otherwise."""
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            return ("T", tuple(x.shape), x.dtype, x.layout, x.device.type)
        return ("T", tuple(x.shape), tuple(x.stride()), x.dtype, x.device.type)
    if isinstance(x, (list, tuple)):
        return tuple(_spec(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _spec(v)) for k, v in x.items()))
    if x is None or isinstance(x, (bool, int, float, str, torch.dtype, torch.device, torch.layout,
                                   torch.memory_format)):
        return x
    return type(x).__name__  # e.g. a generator: its state does not change the memory an op uses


def layout_of(t: torch.Tensor) -> Layout:
    """The layout of a strided tensor.

    Parameters
    ----------
    t : torch.Tensor

    Returns
    -------
    Layout
    """
    return tuple(t.shape), tuple(t.stride()), t.dtype


def dense_layout(shape: Sequence[int], dtype: torch.dtype) -> Layout:
    """The layout of a new contiguous tensor.

    Parameters
    ----------
    shape : sequence of int
    dtype : torch.dtype

    Returns
    -------
    Layout
    """
    shape = tuple(int(s) for s in shape)
    stride, step = [], 1
    for s in reversed(shape):
        stride.append(step)
        step *= max(s, 1)
    return shape, tuple(reversed(stride)), dtype


def is_dense(layout: Layout) -> bool:
    """Whether a tensor of this layout covers its elements exactly once, without gaps (what the
    autograd engine needs to sum a second gradient into it in place).

    Parameters
    ----------
    layout : Layout

    Returns
    -------
    bool
    """
    shape, stride, _ = layout
    if not all(shape):
        return True
    step = 1
    for st, size in sorted((st, s) for s, st in zip(shape, stride) if s != 1):
        if st != step:
            return False
        step *= size
    return True


def _blank(layout: Layout) -> torch.Tensor:
    shape, stride, dtype = layout
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0
    return torch.zeros(extent, dtype=dtype).as_strided(shape, stride)


@dataclass(frozen=True)
class Output:
    """One gradient a backward node returned.

    Attributes
    ----------
    layout : Layout
    source : tuple
        ``(kind, index, bytes)``: ``("new", j, bytes)`` for a storage the node allocated (``j``:
        this output), ``("input", k, bytes)`` for a view of the storage of its k-th incoming
        gradient, ``("output", j, bytes)`` for a view of the storage of its j-th output; bytes
        of the storage.
    """

    layout: Layout
    source: tuple


@dataclass(frozen=True)
class NodeRun:
    """What one call of a backward node allocated.

    Attributes
    ----------
    peak : int
        Most bytes live at once inside the call beyond what was live before it: the gradients
        it returns in new storage and its kernels' workspace.
    outputs : tuple of Output or None
        Per output, in ``next_functions`` order (None: no gradient computed).
    """

    peak: int
    outputs: tuple


def _cpu_only(tensors) -> bool:
    return all(t.device.type == "cpu" for t in tensors if isinstance(t, torch.Tensor))


def _profiler_busy() -> bool:
    return bool(torch.autograd._profiler_enabled())


def _measured(run: Callable[[], object]) -> tuple[object, int, int]:
    """Run ``run()`` under the CPU allocator's profiler: its result, the running allocation's
    maximum and what is still allocated when it returns (its result, kept alive until the
    profiler has stopped)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = run()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and "CPU" in str(e.device_type()))
    running = top = 0
    for _, nbytes in events:
        running += nbytes
        top = max(top, running)
    return out, top, max(running, 0)


def _remember(key: tuple, value: object) -> None:
    _CACHE[key] = value
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)


class KernelMemory:
    """Workspace of the ops and backward nodes of one profiled step, measured or taken from the cache.

    Parameters
    ----------
    calling : callable, optional
        Returns a context manager entered around each backward node's call (a model that packs
        its saved tensors uses it to unpack them as the real backward pass would; reading them
        for the graph replay may need them as stored).

    Attributes
    ----------
    unseen : dict of str to str
        Op or node name -> why its workspace could not be measured (not counted in the peak).
    measured : int
        Ops and nodes measured by this instance (the rest came from the cache).
    """

    def __init__(self, calling: Callable[[], contextlib.AbstractContextManager] | None = None) -> None:
        self.calling = calling or contextlib.nullcontext
        self.unseen: dict[str, str] = {}
        self.measured = 0

    def run_op(self, func, args: tuple, kwargs: dict) -> tuple[object, int]:
        """Run a forward op (as a dispatch mode sees it) and return its result and workspace in bytes.

        Parameters
        ----------
        func : torch._ops.OpOverload
            The op.
        args, kwargs
            Its arguments.

        Returns
        -------
        tuple
            ``(result, workspace)``; the workspace is 0 for an op that cannot be measured (named
            in :attr:`unseen`).
        """
        flat = tree_flatten((args, kwargs))[0]
        name = str(func)
        if not _cpu_only(flat):
            self.unseen[name] = "not on the CPU"
            return func(*args, **kwargs), 0
        key = ("op", name, _spec(args), _spec(kwargs), torch.get_num_threads())
        hit = _CACHE.get(key)
        if hit is not None:
            return func(*args, **kwargs), hit
        if _profiler_busy():
            self.unseen[name] = "another profiler was running"
            return func(*args, **kwargs), 0
        out, top, end = _measured(lambda: func(*args, **kwargs))
        extra = max(0, top - end)
        _remember(key, extra)
        self.measured += 1
        return out, extra

    def node(self, f, grads: Sequence[Layout | None] = ()) -> NodeRun | None:
        """Call backward node ``f`` once on zero gradients and measure what the call allocates.

        Parameters
        ----------
        f : torch.autograd.graph.Node
            A node of a graph whose saved tensors are still held (the call reads them; nothing
            is released or accumulated).
        grads : sequence of Layout or None, optional
            Layout of the gradient reaching each of the node's inputs (an expanded gradient, as
            a sum's backward returns, makes many kernels copy it to a dense one); None or
            missing: dense, of the input's shape.

        Returns
        -------
        NodeRun or None
            None for a node that cannot be called safely (named in :attr:`unseen`).
        """
        name = type(f).__name__
        if isinstance(f, torch.autograd.function.BackwardCFunction):  # Python backward: may have effects
            self.unseen[name] = "a Python autograd.Function backward"
            return None
        try:
            metas = [(tuple(m.shape), m.dtype, m.device) for m in f._input_metadata]
        except (AttributeError, RuntimeError):  # nested or undefined metadata
            self.unseen[name] = "gradient shapes unknown"
            return None
        if not all(d.type == "cpu" for _, _, d in metas):
            self.unseen[name] = "not on the CPU"
            return None
        layouts = tuple(grads[i] if i < len(grads) and grads[i] is not None and grads[i][0] == s and grads[i][2] == d
                        else dense_layout(s, d) for i, (s, d, _) in enumerate(metas))
        saved = []
        for attr in sorted(a for a in dir(f) if a.startswith("_saved_")):
            try:
                saved.append((attr, _spec(getattr(f, attr))))
            except RuntimeError:  # already released: the node cannot run again
                self.unseen[name] = "saved tensors released"
                return None
        key = ("node", name, tuple(saved), layouts, tuple(nf is None for nf, _ in f.next_functions),
               torch.get_num_threads())
        hit = _CACHE.get(key)
        if isinstance(hit, str):  # a call that failed before fails again
            self.unseen[name] = hit
            return None
        if hit is not None:
            return hit
        if _profiler_busy():
            self.unseen[name] = "another profiler was running"
            return None
        blanks = [_blank(lay) for lay in layouts]
        given = {b.untyped_storage().data_ptr(): k for k, b in enumerate(blanks)}

        def call():
            # the engine runs a node with gradient recording off
            with torch.no_grad(), self.calling():
                return f(*blanks)

        try:
            out, top, _ = _measured(call)
        except RuntimeError as err:  # e.g. a node that cannot run on zero gradients
            self.unseen[name] = f"call failed: {(str(err).splitlines() or [''])[0][:80]}"
            _remember(key, self.unseen[name])
            return None
        outs = out if isinstance(out, (tuple, list)) else (out,)
        made: dict[int, int] = {}
        described = []
        for j, t in enumerate(outs):
            if not isinstance(t, torch.Tensor):
                described.append(None)
                continue
            ptr, nbytes = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
            if ptr in given:
                source = ("input", given[ptr], nbytes)
            elif ptr in made:
                source = ("output", made[ptr], nbytes)
            else:
                made[ptr] = j
                source = ("new", j, nbytes)
            described.append(Output(layout_of(t), source))
        run = NodeRun(top, tuple(described))
        _remember(key, run)
        self.measured += 1
        return run

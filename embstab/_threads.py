"""A context manager for torch's intra-op thread count (used by the torch trainers and the task models)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from embstab.errors import ConfigError

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run torch ops on ``n`` intra-op threads inside the block, then restore the previous count.

    ``None`` leaves torch's setting alone. Small models are as fast on one thread as on several on
    an idle machine, and one thread avoids the large slow-down that OpenMP spin-waiting causes when
    the cores are shared with other jobs (30x measured on 2 busy cores). Results are reproducible
    for a fixed thread count.
    """
    if n is None:
        yield
        return
    if int(n) < 1:
        raise ConfigError(f"threads must be >= 1, got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)

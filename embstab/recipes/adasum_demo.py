"""Least-squares data-parallel SGD with :class:`~embstab.recipes.adasum.AdasumOptimizer` over gloo.

Run with ``torchrun --nproc-per-node 4 -m embstab.recipes.adasum_demo --out w.npy``; rank 0 saves the
final weights, which equal :func:`~embstab.recipes.adasum.simulate_data_parallel` on the same problem.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from embstab.recipes.adasum import AdasumOptimizer, least_squares_grad_fn, least_squares_problem

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv``, train on this rank's worker slot, and save rank 0's weights to ``--out``.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv``).
    """
    import torch.distributed as dist

    ap = argparse.ArgumentParser(description="Adasum least-squares demo; run with "
                                 "`torchrun --nproc-per-node 4 -m embstab.recipes.adasum_demo --out w.npy`")
    ap.add_argument("--out", required=True)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    X, y, _ = least_squares_problem(d=20, n=1024, seed=args.seed)
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    gf = least_squares_grad_fn(Xt, yt, world, args.batch, args.seed)  # same index stream on every rank
    w = torch.nn.Parameter(torch.zeros(X.shape[1], dtype=torch.float64))
    opt = AdasumOptimizer(torch.optim.SGD([w], lr=args.lr))
    for step in range(args.steps):
        opt.zero_grad()
        w.grad = gf([w.detach()], rank, step)[0]
        opt.step()
    if rank == 0:
        np.save(args.out, w.detach().numpy())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

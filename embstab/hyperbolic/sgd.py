"""Riemannian SGD refinement of hyperbolic embeddings on geoopt.

Minimises a distortion loss between d̂ = e^θ·d_M(x_i, x_j) and the target y = σ·d_G(i, j) over
points on geoopt's Poincaré ball or Lorentz hyperboloid, optionally warm-started from the
combinatorial construction or h-MDS (whose τ/s becomes σ). There is no ranking loss, as in
the original; MAP is evaluated afterwards with :func:`embstab.hyperbolic.evaluate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from embstab._limits import check_learning_rate
from embstab.errors import ConfigError, ShapeError
from embstab.hyperbolic.embedding import HyperbolicEmbedding
from embstab.hyperbolic.errors import HyperbolicError
from embstab.hyperbolic.graph import Graph, as_graph
from embstab.hyperbolic.manifolds import Manifold, ProductManifold, combine_distances, get_manifold
from embstab.hyperbolic.product import ProductEmbedding, parse_factors

__all__ = ["LOSSES", "fit_product_sgd", "fit_sgd", "pair_loss"]

#: Per-pair loss terms on the ratio t = d̂/y (and ``mse`` on d̂ − y).
LOSSES = ("rel2", "sym", "abs", "square", "log", "mse")

#: Largest number of nodes for which all pairs are materialised.
MAX_ALL_PAIRS_NODES = 5000


def pair_loss(d_hat, y, loss: str = "rel2"):
    """The per-pair loss of the menu of losses, on torch tensors.

    ``rel2``: (d̂/y−1)²; ``sym``: (d̂/y−1)² + (y/d̂−1)²; ``abs``: |d̂/y−1|;
    ``square``: |(d̂/y)²−1|; ``log``: (ln (d̂/y)²)²; ``mse``: (d̂−y)².

    Parameters
    ----------
    d_hat : torch.Tensor
        Decoded embedding distances of the pairs.
    y : torch.Tensor
        Target graph distances (> 0), same shape.
    loss : str, default "rel2"
        One of the names above.

    Returns
    -------
    torch.Tensor
        The loss per pair, same shape as ``d_hat``.

    Raises
    ------
    HyperbolicError
        If ``loss`` is not one of the names above.
    """
    import torch

    t = d_hat / y
    if loss == "rel2":
        return (t - 1) ** 2
    if loss == "sym":
        return (t - 1) ** 2 + (1 / t.clamp_min(1e-12) - 1) ** 2
    if loss == "abs":
        return (t - 1).abs()
    if loss == "square":
        return (t * t - 1).abs()
    if loss == "log":
        return torch.log((t * t).clamp_min(1e-24)) ** 2
    if loss == "mse":
        return (d_hat - y) ** 2
    raise HyperbolicError(f"loss must be one of {LOSSES}, got {loss!r}")


def _pairs(graph_or_d: Graph | np.ndarray, subsample: int | None,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(i, j, d_ij) training pairs and n: all i<j pairs, or per node its neighbours then random
    others up to ``subsample``."""
    if isinstance(graph_or_d, Graph):
        n = graph_or_d.n_nodes
        if subsample is None and n > MAX_ALL_PAIRS_NODES:
            raise HyperbolicError(f"{n} nodes is too many for all pairs; pass subsample=m")
        if subsample is None:
            d = graph_or_d.shortest_paths(np.arange(n))
        else:
            ii, jj, dd = [], [], []
            for start in range(0, n, 256):
                rows = np.arange(start, min(n, start + 256))
                block = graph_or_d.shortest_paths(rows)
                for a, drow in zip(rows, block):
                    nb = graph_or_d.neighbors(a)[:subsample]
                    extra = rng.choice(n, size=min(n, max(0, subsample - len(nb)) + 1),
                                       replace=False)
                    cand = np.unique(np.concatenate([nb, extra]))
                    cand = cand[cand != a][:subsample]
                    ii.append(np.full(len(cand), a)); jj.append(cand); dd.append(drow[cand])
            return np.concatenate(ii), np.concatenate(jj), np.concatenate(dd), n
    else:
        d = np.asarray(graph_or_d, dtype=np.float64)
        if d.ndim != 2 or d.shape[0] != d.shape[1]:
            raise ShapeError(f"distances must be a square matrix, got shape {d.shape}")
        n = d.shape[0]
    i, j = np.triu_indices(n, k=1)
    dij = d[i, j]
    if not np.all(np.isfinite(dij)):
        raise HyperbolicError("some distances are infinite (is the graph disconnected?)")
    return i, j, dij, n


def _prepare(graph: Any, nodes: Any, loss: str, optimizer: str, epochs: int, batch_size: int, lr: float,
             subsample: Any, seed: int):
    """What both SGD entry points start from: checked options, the seeded generator, the graph,
    its training pairs and the node labels."""
    import torch

    _check_options(loss, optimizer, epochs, batch_size, lr)
    gen = torch.Generator().manual_seed(int(seed))
    graph = graph if isinstance(graph, np.ndarray) else as_graph(graph)
    pairs = _training_pairs(graph, subsample, seed)
    if isinstance(graph, Graph) and nodes is None:
        nodes = graph.labels
    return gen, graph, pairs, nodes


def fit_sgd(graph: Any, dim: int = 2, *, manifold: str | Manifold = "poincare",
            loss: str = "rel2", init: str | HyperbolicEmbedding | None = None,
            scale: float | None = None, epochs: int = 100, lr: float = 0.1,
            batch_size: int = 1024, optimizer: str = "adam", learn_scale: bool = False,
            weighting: str | None = None, subsample: int | None = None, seed: int = 0,
            nodes: Sequence[Any] | None = None, progress: bool = True) -> HyperbolicEmbedding:
    """Fit (or refine) a hyperbolic embedding by Riemannian optimisation of a distortion loss.

    Parameters
    ----------
    graph : Graph, networkx.Graph or numpy.ndarray
        The graph (targets are its shortest paths) or an ``(n, n)`` distance matrix.
    dim : int, default 2
        Dimension of H^dim (ignored with a warm-start embedding, which fixes it).
    manifold : {"poincare", "lorentz"} or Manifold, default "poincare"
        The model trained in, on its geoopt manifold (curvature −1).
    loss : {"rel2", "sym", "abs", "square", "log", "mse"}, default "rel2"
        Per-pair term, see :func:`pair_loss`.
    init : {"comb", "hmds"} or HyperbolicEmbedding, optional
        Warm start: the 2-D/r-D construction at 53 bits with the bit-budget τ, h-MDS with the
        automatic scale, or a given embedding. Default: points within 1e-3 of the origin.
    scale : float, optional
        σ, the target scale (y = σ·d_G). Default: the warm start's τ/s, else 1.
    epochs, lr, batch_size : int, float, int
        Optimisation length, learning rate and pairs per step.
    optimizer : {"adam", "sgd"}, default "adam"
        geoopt ``RiemannianAdam`` or ``RiemannianSGD``.
    learn_scale : bool, default False
        Learn the log-scale θ (with 1e-2·lr).
    weighting : {None, "exp"}, default None
        "exp": pair weight 5 if d ≤ 2, 0.01 if d > 4, else 1.
    subsample : int, optional
        Per node, its neighbours then random nodes up to this many pairs (large graphs).
    seed : int, default 0
        Seeds a local torch generator and NumPy generator (no global reseeding).
    nodes : sequence, optional
        Labels (default: the graph's).
    progress : bool, default True
        tqdm bar over epochs.

    Returns
    -------
    HyperbolicEmbedding
        float64 coordinates in the chosen model, ``scale = σ·e^{-θ}`` so decoded distances
        approximate d_G. ``metadata["loss_history"]`` holds the mean loss per epoch.
    """
    import geoopt
    import torch

    man = get_manifold(manifold)
    if not man.hyperbolic:
        raise HyperbolicError(f"manifold must be 'poincare' or 'lorentz', got {manifold!r}")
    gen, graph, (i, j, dij, n), nodes = _prepare(graph, nodes, loss, optimizer, epochs, batch_size, lr, subsample,
                                                 seed)

    start = _initial_embedding(graph, init, dim, n)
    sigma = float(scale) if scale is not None else (start.scale if start is not None else 1.0)
    if start is not None:
        if len(start) != n:
            raise HyperbolicError(f"the warm start has {len(start)} points for {n} nodes")
        dim = start.dim
        ball = start.poincare64(check=True)  # refuses points float64 would put on the boundary
        same = start.manifold == man and not start.multiprecision
        x0 = torch.as_tensor(np.array(start.coords, dtype=np.float64) if same else man.from_poincare(ball))
        # the warm start reproduces τ·d_G; to use another σ, rescaling is not an isometry,
        # so we keep the points and let θ absorb σ/τ
        theta0 = math.log(sigma / start.scale)
    else:
        x0 = man.initial_points(n, dim, gen)
        theta0 = 0.0
    geo = man.geoopt()
    x = geoopt.ManifoldParameter(geo.projx(x0), manifold=geo)
    theta = torch.nn.Parameter(torch.tensor(theta0, dtype=torch.float64))
    groups = [{"params": [x], "lr": lr}]
    if learn_scale:
        groups.append({"params": [theta], "lr": lr * 1e-2})
    opt = _optimizer(groups, optimizer, lr)
    dist = lambda a, b: man.torch_distance(x[a], x[b])
    history = _train(dist, opt, theta, i, j, dij, sigma, loss, weighting, epochs, batch_size, gen,
                     desc=f"sgd ({man.name})", progress=progress)
    coords = x.detach().numpy().copy()
    theta_v = float(theta.detach())
    out_scale = sigma / math.exp(theta_v)
    meta = {"method": "sgd", "manifold": man.name, "loss": loss, "epochs": epochs, "lr": lr,
            "optimizer": optimizer, "sigma": sigma, "theta": theta_v, "seed": seed,
            "init": init if isinstance(init, str) or init is None else "embedding",
            "loss_history": history}
    return HyperbolicEmbedding(coords, manifold=man, scale=out_scale, nodes=nodes, metadata=meta)


def fit_product_sgd(graph: Any, factors: str | Sequence[Any] = "H2,H2", *,
                    combine: str = "l2", loss: str = "rel2", scale: float = 1.0,
                    epochs: int = 100, lr: float = 0.1, batch_size: int = 1024,
                    optimizer: str = "adam", learn_scale: bool = False,
                    weighting: str | None = None, subsample: int | None = None, seed: int = 0,
                    nodes: Sequence[Any] | None = None, progress: bool = True) -> ProductEmbedding:
    """Fit an embedding in a product of hyperbolic, Euclidean and spherical factors.

    The distance of a pair combines the factor distances (``combine="l2"``: √(Σ d_k²), the
    product metric; ``"l1"``: Σ d_k); every factor is a geoopt manifold parameter optimised by
    the same Riemannian optimiser and loss menu as :func:`fit_sgd`.

    Parameters
    ----------
    graph : Graph, networkx.Graph or numpy.ndarray
        The graph (targets are its shortest paths) or an ``(n, n)`` distance matrix.
    factors : str or sequence, default "H2,H2"
        E.g. ``"H2,H2,S1"`` or ``[("poincare", 2), ("sphere", 1)]``; kinds ``H``/``poincare``,
        ``L``/``lorentz``, ``E``/``euclidean``, ``S``/``sphere`` (see
        :func:`embstab.hyperbolic.product.parse_factors`).
    combine : {"l2", "l1"}, default "l2"
    loss, scale, epochs, lr, batch_size, optimizer, learn_scale, weighting, subsample, seed, nodes, progress
        As for :func:`fit_sgd` (``scale`` is σ; no warm start).

    Returns
    -------
    ProductEmbedding
        float64 coordinates per factor, ``scale = σ·e^{-θ}``; ``metadata["loss_history"]``.

    Notes
    -----
    Initialisation draws, per factor in order, points within 1e-3 of the origin (hyperbolic and
    Euclidean factors; for ``factors="H<d>"`` exactly :func:`fit_sgd`'s start, so the two give
    the same result) or uniformly on the sphere.
    """
    import geoopt
    import torch

    spec = parse_factors(factors)
    if combine not in ("l2", "l1"):
        raise HyperbolicError(f"combine must be 'l2' or 'l1', got {combine!r}")
    if not scale > 0:
        raise HyperbolicError(f"scale must be positive, got {scale}")
    gen, graph, (i, j, dij, n), nodes = _prepare(graph, nodes, loss, optimizer, epochs, batch_size, lr, subsample,
                                                 seed)
    product = ProductManifold(spec, combine)
    params = []
    for man, dim in product.factors:  # one parameter per factor, each on its geoopt manifold
        geo = man.geoopt()
        params.append(geoopt.ManifoldParameter(geo.projx(man.initial_points(n, dim, gen)), manifold=geo))
    theta = torch.nn.Parameter(torch.tensor(0.0, dtype=torch.float64))
    groups = [{"params": params, "lr": lr}]
    if learn_scale:
        groups.append({"params": [theta], "lr": lr * 1e-2})
    opt = _optimizer(groups, optimizer, lr)

    def dist(ia: Any, ib: Any) -> Any:
        d = [man.torch_distance(p[ia], p[ib]) for (man, _), p in zip(product.factors, params)]
        return combine_distances(torch.stack(d), combine)

    history = _train(dist, opt, theta, i, j, dij, float(scale), loss, weighting, epochs,
                     batch_size, gen, desc="sgd (product)", progress=progress)
    theta_v = float(theta.detach())
    meta = {"method": "sgd", "manifold": "product", "loss": loss, "epochs": epochs, "lr": lr,
            "optimizer": optimizer, "sigma": float(scale), "theta": theta_v, "seed": seed,
            "combine": combine, "loss_history": history}
    return ProductEmbedding([p.detach().numpy().copy() for p in params], spec, combine=combine,
                            scale=float(scale) / math.exp(theta_v), nodes=nodes, metadata=meta)


def _check_options(loss: str, optimizer: str, epochs: int, batch_size: int, lr: float) -> None:
    if loss not in LOSSES:
        raise HyperbolicError(f"loss must be one of {LOSSES}, got {loss!r}")
    if optimizer not in ("adam", "sgd"):
        raise HyperbolicError(f"optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    if epochs < 1 or batch_size < 1:
        raise HyperbolicError("epochs and batch_size must be ≥ 1")
    try:  # the bounds every trainer of embstab applies (an lr of 1e308 overflows the first step)
        check_learning_rate(lr)
    except ConfigError as exc:
        raise HyperbolicError(str(exc)) from None


def _training_pairs(graph: Graph | np.ndarray, subsample: int | None,
                    seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """:func:`_pairs` from a NumPy generator seeded by ``seed``, refusing zero distances."""
    i, j, dij, n = _pairs(graph, subsample, np.random.default_rng(seed))
    if np.any(dij <= 0):
        raise HyperbolicError("training pairs need positive distances (duplicate nodes?)")
    return i, j, dij, n


def _optimizer(groups: list, optimizer: str, lr: float) -> Any:
    import geoopt

    return (geoopt.optim.RiemannianAdam(groups) if optimizer == "adam"
            else geoopt.optim.RiemannianSGD(groups, lr=lr, stabilize=10))


def _train(dist: Any, opt: Any, theta: Any, i: np.ndarray, j: np.ndarray, dij: np.ndarray,
           sigma: float, loss: str, weighting: str | None, epochs: int, batch_size: int,
           gen: Any, *, desc: str, progress: bool) -> list[float]:
    """The optimisation loop shared by :func:`fit_sgd` and :func:`fit_product_sgd`.

    ``dist(idx_i, idx_j)`` gives the model distances of a batch of pairs; returns the mean loss
    per epoch. Pairs are reshuffled every epoch from ``gen`` (deterministic under the seed).
    """
    import torch

    ti = torch.as_tensor(i, dtype=torch.int64)
    tj = torch.as_tensor(j, dtype=torch.int64)
    y = torch.as_tensor(sigma * dij, dtype=torch.float64)
    d_raw = torch.as_tensor(dij, dtype=torch.float64)
    w = torch.ones_like(y)
    if weighting == "exp":
        w = torch.where(d_raw <= 2, 5.0, torch.where(d_raw > 4, 0.01, 1.0)).to(torch.float64)
    elif weighting is not None:
        raise HyperbolicError(f"weighting must be None or 'exp', got {weighting!r}")
    history: list[float] = []
    m = len(y)
    for _ in tqdm(range(epochs), desc=desc, disable=not progress, mininterval=1):
        perm = torch.randperm(m, generator=gen)
        total = 0.0
        for b in range(0, m, batch_size):
            idx = perm[b:b + batch_size]
            opt.zero_grad()
            dh = torch.exp(theta) * dist(ti[idx], tj[idx])
            lv = (w[idx] * pair_loss(dh, y[idx], loss)).mean()
            lv.backward()
            opt.step()
            total += lv.item() * len(idx)
        history.append(total / m)
        if not math.isfinite(history[-1]):
            raise HyperbolicError("the loss became NaN/inf; lower lr or use a warm start")
    return history


def _initial_embedding(graph: Any, init: Any, dim: int, n: int) -> HyperbolicEmbedding | None:
    if init is None or isinstance(init, HyperbolicEmbedding):
        return init
    if init == "comb":
        if not isinstance(graph, Graph):
            raise HyperbolicError("init='comb' needs a graph, not a distance matrix")
        from embstab.hyperbolic.combinatorial import embed_combinatorial

        # the original's warm start: double precision with the bit-budget τ
        return embed_combinatorial(graph, dim=dim, bits=53, precision_bits=53).astype_float64()
    if init == "hmds":
        from embstab.hyperbolic.hmds import hmds

        return hmds(graph, dim)
    raise HyperbolicError(f"init must be None, 'comb', 'hmds' or a HyperbolicEmbedding, "
                          f"got {init!r}")

"""Communication-efficient exchange: Maurey sparsification, top-k, quantized messages, round-robin mirror descent.

Maurey sparsification sends ``s`` draws ``i_t ~ |w_i| / |w|_1`` and their signs plus one float scale:
``Q_s(w) = (|w|_1 / s) sum_t sign(w_{i_t}) e_{i_t}``, unbiased with
``E |Q_s(w) - w|^2 = (|w|_1^2 - |w|_2^2) / s``, in ``s (ceil(log2 d) + 1) + 32`` bits instead of ``32 d``.
:func:`round_robin` runs p-norm stochastic mirror descent (``p = 1 + 1/ln d``) machine after machine,
each handing a compressed iterate to the next and a compressed average to the server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from embstab.errors import ConfigError
from embstab.recipes.registry import CheckResult, register_recipe

__all__ = ["CommunicationError", "RoundRobinResult", "maurey_sparsify", "maurey_dense", "topk_sparsify",
           "message_bits", "pnorm_link", "pnorm_mirror_descent", "round_robin", "check_communication"]


#: Bad sparsification or exchange parameters.
#: A :class:`~embstab.errors.ConfigError` under the name this module has always raised.
CommunicationError = ConfigError


def _rng(generator: np.random.Generator | int | None) -> np.random.Generator:
    return generator if isinstance(generator, np.random.Generator) else np.random.default_rng(generator or 0)


def maurey_sparsify(w: Any, s: int, generator: np.random.Generator | int | None = None
                    ) -> tuple[np.ndarray, np.ndarray, float]:
    """Draw the ``s`` atoms of a Maurey sparsification.

    Parameters
    ----------
    w : array-like, shape (d,)
        Vector to send.
    s : int
        Number of draws (>= 1).
    generator : numpy Generator or int, optional
        Randomness.

    Returns
    -------
    (indices, signs, scale)
        ``s`` indices, their signs (±1) and ``|w|_1 / s``; see :func:`maurey_dense`.
    """
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    if not (isinstance(s, (int, np.integer)) and s >= 1):
        raise CommunicationError(f"s must be a positive int, got {s!r}")
    l1 = float(np.abs(w).sum())
    if l1 == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0), 0.0
    idx = _rng(generator).choice(w.size, size=int(s), p=np.abs(w) / l1)
    return idx.astype(np.int64), np.sign(w[idx]), l1 / s


def maurey_dense(indices: np.ndarray, signs: np.ndarray, scale: float, d: int) -> np.ndarray:
    """The dense vector ``scale * sum_t signs_t e_{indices_t}``.

    Parameters
    ----------
    indices : numpy.ndarray
        Int coordinates drawn (repeats add up).
    signs : numpy.ndarray
        ``+1``/``-1`` per draw.
    scale : float
        The common magnitude.
    d : int
        Dimension of the vector.

    Returns
    -------
    numpy.ndarray
        ``(d,)`` float64 vector.
    """
    out = np.zeros(d)
    np.add.at(out, indices, scale * signs)
    return out


def topk_sparsify(w: Any, k: int) -> np.ndarray:
    """Keep the ``k`` largest-magnitude entries (biased; ties by lower index).

    Parameters
    ----------
    w : array-like
        The vector (flattened, as float64).
    k : int
        Entries to keep, at least 1.

    Returns
    -------
    numpy.ndarray
        ``w`` with every other entry set to 0.

    Raises
    ------
    CommunicationError
        ``k`` is not a positive int.
    """
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    if not (isinstance(k, (int, np.integer)) and k >= 1):
        raise CommunicationError(f"k must be a positive int, got {k!r}")
    out = np.zeros_like(w)
    keep = np.argsort(-np.abs(w), kind="stable")[:k]
    out[keep] = w[keep]
    return out


def message_bits(s: int, d: int) -> int:
    """Bits of one sparse message: ``s`` (index, sign) pairs plus a 32-bit scale.

    Parameters
    ----------
    s : int
        Number of (index, sign) pairs.
    d : int
        Dimension (each index takes ``ceil(log2(d))`` bits, each sign 1).

    Returns
    -------
    int
        ``s * (ceil(log2(d)) + 1) + 32``.
    """
    return int(s) * (math.ceil(math.log2(d)) + 1) + 32


def pnorm_link(v: np.ndarray, p: float) -> np.ndarray:
    """Gradient of ``0.5 |v|_p^2``: ``sign(v) |v|^(p-1) / |v|_p^(p-2)`` (the mirror map).

    Parameters
    ----------
    v : numpy.ndarray
        The vector.
    p : float
        The norm's exponent.

    Returns
    -------
    numpy.ndarray
        The gradient, zeros for a zero ``v``.
    """
    nrm = float(np.sum(np.abs(v) ** p) ** (1 / p))
    if nrm == 0:
        return np.zeros_like(v)
    return np.sign(v) * np.abs(v) ** (p - 1) / nrm ** (p - 2)


def pnorm_mirror_descent(w0: np.ndarray, X: np.ndarray, y: np.ndarray, lr: float, p: float | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """One pass of p-norm stochastic mirror descent on the squared loss ``0.5 (x.w - y)^2``.

    Parameters
    ----------
    w0 : numpy.ndarray
        Starting iterate.
    X, y : numpy.ndarray
        Samples (rows) and targets.
    lr : float
        Dual step.
    p : float, optional
        Norm (default ``1 + 1/ln d``).

    Returns
    -------
    (last, average)
        Last iterate and the average iterate over the pass.
    """
    d = X.shape[1]
    p = p or 1 + 1 / math.log(d)
    q = p / (p - 1)
    theta = pnorm_link(np.asarray(w0, dtype=np.float64), p)
    w = pnorm_link(theta, q)
    avg = np.zeros(d)
    for i in range(X.shape[0]):
        g = (X[i] @ w - y[i]) * X[i]
        theta = theta - lr * g
        w = pnorm_link(theta, q)
        avg += w
    return w, avg / X.shape[0]


@dataclass
class RoundRobinResult:
    """Outcome of :func:`round_robin`.

    Attributes
    ----------
    w : numpy.ndarray
        The output (mean of the machines' received averages).
    bits : int
        Total bits sent (hand-offs plus messages to the server).
    messages : int
        Messages sent.
    """

    w: np.ndarray
    bits: int
    messages: int


def _send(w: np.ndarray, compress: Any, s: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    d = w.size
    if compress is None:
        return w, 32 * d
    if compress == "maurey":
        return maurey_dense(*maurey_sparsify(w, s, rng), d), message_bits(s, d)
    if compress == "topk":
        return topk_sparsify(w, s), message_bits(s, d) + 32 * s - s  # values replace signs: 32-bit each
    from embstab.lowprec import get_format, quantize
    fmt = get_format(compress)
    bits = getattr(fmt, "bits", None) or (1 + getattr(fmt, "exp", 8) + getattr(fmt, "man", 23))
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    return quantize(torch.from_numpy(w), fmt, rounding="stochastic", generator=gen).numpy(), int(bits) * d


def round_robin(shards: list[tuple[np.ndarray, np.ndarray]], lr: float, compress: Any = "maurey", s: int = 256,
                one_shot: bool = False, p: float | None = None,
                generator: np.random.Generator | int | None = None) -> RoundRobinResult:
    """Round-robin (or one-shot) distributed mirror descent with compressed messages.

    Parameters
    ----------
    shards : list of (X, y)
        One shard per machine.
    lr : float
        Mirror-descent step.
    compress : {"maurey", "topk", None} or lowprec format
        Message compression (None: dense 32-bit; a format: stochastic rounding through lowprec,
        ``bits x d`` per message).
    s : int
        Atoms (Maurey) or kept entries (top-k).
    one_shot : bool
        Every machine starts from zero and only sends its average (no hand-off).
    p : float, optional
        Mirror-descent norm.
    generator : numpy Generator or int, optional
        Randomness of the sparsification.

    Returns
    -------
    RoundRobinResult
    """
    if compress not in (None, "maurey", "topk") and not hasattr(compress, "__dataclass_fields__") and not isinstance(compress, str):
        raise CommunicationError(f"unknown compression {compress!r}")
    if not shards:
        raise CommunicationError("round_robin needs at least one shard")
    rng = _rng(generator)
    d = shards[0][0].shape[1]
    w = np.zeros(d)
    outs, bits, msgs = [], 0, 0
    for j, (X, y) in enumerate(shards):
        last, avg = pnorm_mirror_descent(np.zeros(d) if one_shot else w, X, y, lr, p)
        a, b = _send(avg, compress, s, rng)
        outs.append(a)
        bits, msgs = bits + b, msgs + 1
        if not one_shot and j + 1 < len(shards):
            w, b = _send(last, compress, s, rng)
            bits, msgs = bits + b, msgs + 1
    return RoundRobinResult(np.mean(outs, axis=0), bits, msgs)


@register_recipe("communication", "Sublinear communication: Maurey sparsification, top-k, round-robin p-norm mirror descent",
                 ("maurey_sparsify", "message_bits", "topk_sparsify", "round_robin", "pnorm_mirror_descent"))
def check_communication(seed: int = 0) -> CheckResult:
    """Unbiasedness and bit counts of Maurey messages; round-robin vs one-shot on a sparse regression.

    Setup: d = 4096, 8 machines x 500 samples, 8-sparse ``w*`` with ``|w*|_1 = 4``, noise 0.5, lr 0.016.
    Excess risk is ``|w - w*|^2``.

    Parameters
    ----------
    seed : int, default 0
        Seed of the data and the Maurey draws.

    Returns
    -------
    CheckResult
        One row per method (excess risk, bits sent, dense-message equivalents) and the claims.
    """
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(200) * (rng.random(200) < 0.3)
    s = 50
    n_draws = 4000
    draws = np.stack([maurey_dense(*maurey_sparsify(v, s, rng), v.size) for _ in range(n_draws)])
    # Coordinate j of a draw is (|v|_1 / s) sign(v_j) Binomial(s, |v_j| / |v|_1), so its mean over
    # the draws has standard error sqrt((|v|_1 |v_j| - v_j^2) / (s n_draws)): about 0.025 for the
    # largest |v_j| here, so a fixed 0.05 tolerance is a 2-sigma test that some coordinate failed
    # at 70 of 400 seeds. Judge the largest standardized deviation instead: an unbiased sampler
    # exceeds 5 with probability < 1e-4 over <= 100 nonzero coordinates (largest seen over seeds
    # 0-99 and 1000-1299: 4.2).
    l1 = np.abs(v).sum()
    nz = v != 0
    stderr = np.sqrt((l1 * np.abs(v[nz]) - v[nz] ** 2) / (s * n_draws))
    bias_z = float((np.abs(draws.mean(0)[nz] - v[nz]) / stderr).max())
    bias_zero = float(np.abs(draws.mean(0)[~nz]).max(initial=0.0))
    var = float(np.mean(np.sum((draws - v) ** 2, axis=1)))
    var_ref = (np.abs(v).sum() ** 2 - np.sum(v ** 2)) / s

    d, m, n = 4096, 8, 500
    w_star = np.zeros(d)
    w_star[rng.choice(d, 8, replace=False)] = 0.5 * rng.choice([-1, 1], 8)
    X = rng.standard_normal((m * n, d))
    y = X @ w_star + 0.5 * rng.standard_normal(m * n)
    shards = [(X[j * n:(j + 1) * n], y[j * n:(j + 1) * n]) for j in range(m)]
    rows = []
    for name, kw in (("round-robin dense", dict(compress=None)), ("one-shot dense", dict(compress=None, one_shot=True)),
                     ("round-robin maurey s=16", dict(compress="maurey", s=16)),
                     ("round-robin maurey s=256", dict(compress="maurey", s=256)),
                     ("round-robin maurey s=1024", dict(compress="maurey", s=1024)),
                     ("round-robin topk s=256", dict(compress="topk", s=256))):
        r = round_robin(shards, 0.016, generator=seed, **kw)
        rows.append({"method": name, "excess_risk": float(np.sum((r.w - w_star) ** 2)), "bits": r.bits,
                     "dense_messages": r.bits / (32 * d)})
    t = pd.DataFrame(rows).set_index("method")
    risk = t["excess_risk"]
    claims = {
        "Maurey is unbiased (every coordinate's mean over 4000 draws within 5 standard errors of w; "
        "zeros never drawn)": bias_z < 5 and bias_zero == 0,
        "Maurey variance matches (|w|_1^2 - |w|_2^2)/s within 5%": abs(var / var_ref - 1) < 0.05,
        "a s=256 message is 3,360 bits and the run sends 15 (50,400 bits)":
            message_bits(256, d) == 3360 and int(t.loc["round-robin maurey s=256", "bits"]) == 50_400,
        "one-shot averaging is >= 10x worse than the round-robin hand-off":
            risk["one-shot dense"] >= 10 * risk["round-robin dense"],
        "Maurey s=1024 within 1.5x of dense; s=16 worse than s=256":
            risk["round-robin maurey s=1024"] <= 1.5 * risk["round-robin dense"]
            and risk["round-robin maurey s=16"] > risk["round-robin maurey s=256"],
        "the zero predictor (risk 2.0) is beaten by every round-robin run": bool((risk.drop("one-shot dense") < 2.0).all()),
    }
    return CheckResult("communication", t.reset_index(), {k: bool(v) for k, v in claims.items()}, seed)

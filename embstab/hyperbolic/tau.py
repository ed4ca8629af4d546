"""The scale τ of the combinatorial construction and the bits it needs.

Every construction embeds τ·d_G; decoded distances are d_B/τ. Three rules pick τ: a target
distortion ε, a bit budget ("auto": the deepest node uses 1/1.3 of the representable radius), or
a given τ.
"""

from __future__ import annotations

import math

from embstab._numbers import is_integer
from embstab.hyperbolic.errors import PrecisionError
from embstab.hyperbolic.graph import RootedTree

__all__ = ["tau_for_eps", "tau_for_bits", "choose_tau", "bits_needed", "check_precision", "check_precision_bits",
           "GUARD_BITS", "MAX_PRECISION_BITS"]

#: Extra bits beyond −log₂(1−‖x‖) of the deepest node, so neighbouring deep points stay distinct.
GUARD_BITS = 8
#: The most working bits any method runs at and any file may ask for: where probing a forest's
#: precision gives up, and the bound of an explicit precision (at 2**20 bits a 5-node tree takes
#: 17 s on one core, and the time grows faster than the bits).
MAX_PRECISION_BITS = 2 ** 20


def check_precision_bits(bits: object, what: str = "precision_bits") -> int:
    """Refuse a working precision that is not an integer from 2 to :data:`MAX_PRECISION_BITS`.

    One rule for ``embed(precision=...)`` (``--precision-bits``), a multiprecision
    :class:`~embstab.hyperbolic.HyperbolicEmbedding` and the ``precision_bits`` of a file's header:
    a negative precision gave NaN distances, a billion bits tens of gigabytes.

    Parameters
    ----------
    bits : int
        The precision asked for.
    what : str, default "precision_bits"
        The name of the setting, for the message.

    Returns
    -------
    int
        ``bits``, when it is in range.

    Raises
    ------
    PrecisionError
        If ``bits`` is not an integer from 2 to :data:`MAX_PRECISION_BITS`.
    """
    if not is_integer(bits) or not 2 <= bits <= MAX_PRECISION_BITS:
        raise PrecisionError(f"{what}={bits!r} is not a number of bits from 2 to {MAX_PRECISION_BITS} (the most "
                             "embstab computes at; the time grows faster than the bits)")
    return int(bits)


def tau_for_eps(eps: float, max_degree: int, min_weight: float = 1.0) -> float:
    """τ for worst-case distortion ≈ 1+ε (the comb.jl rule, ≈ ((1+ε)/ε)·2 ln(2.4Δ/π)).

    Parameters
    ----------
    eps : float
        Target distortion slack, > 0.
    max_degree : int
        Δ, tree edges at the busiest node (children plus parent).
    min_weight : float, default 1.0
        Smallest edge weight.

    Returns
    -------
    float
        The scale τ.

    Raises
    ------
    PrecisionError
        If ``eps`` is not > 0.
    """
    if not eps > 0:
        raise PrecisionError(f"eps must be > 0, got {eps}")
    delta = max(int(max_degree), 2)  # a path (Δ ≤ 2) still needs the two opposite directions
    beta = math.pi / (1.2 * delta)
    v = -2.0 * math.log(math.tan(beta / 2))
    alpha = 2 * math.pi / delta - 2 * beta
    nu = -2.0 * math.log(math.tan(alpha / 2)) / min_weight
    lead = (1 + eps) / eps * v
    return lead / min_weight if lead > min_weight * nu else nu


def tau_for_bits(bits: int, height: float) -> float:
    """τ that puts the deepest node at 1/1.3 of the radius representable with ``bits`` bits.

    m = ln((1+ρ)/(1−ρ)) with ρ = 1 − 2^−bits (≈ (bits+1)·ln 2), τ = m/(1.3·L). Uses the weighted
    height L (the original code used hops; identical for unweighted trees).

    Parameters
    ----------
    bits : int
        Bit budget, ≥ 2.
    height : float
        Weighted height L of the tree, > 0.

    Returns
    -------
    float
        The scale τ.

    Raises
    ------
    PrecisionError
        If ``bits`` < 2 or the height is 0.
    """
    if bits < 2:
        raise PrecisionError(f"a bit budget needs at least 2 bits, got {bits}")
    if height <= 0:
        raise PrecisionError("the tree has height 0 (a single node); τ is arbitrary")
    m = (bits + 1) * math.log(2.0) + math.log1p(-(2.0 ** -(bits + 1)))  # ln((2−2^−p)/2^−p)
    return m / (1.3 * height)


def choose_tau(tree: RootedTree, eps: float | None = None, bits: int | None = None,
               tau: float | None = None) -> float:
    """Pick τ by exactly one rule: given ``tau``, target ``eps``, or bit budget ``bits``.

    With none given, ε = 0.1 (the original default).

    Parameters
    ----------
    tree : RootedTree
        The tree (its degree, weights and height feed the rules).
    eps : float, optional
        Target distortion slack (:func:`tau_for_eps`).
    bits : int, optional
        Bit budget (:func:`tau_for_bits`).
    tau : float, optional
        τ itself, > 0.

    Returns
    -------
    float
        The scale τ.

    Raises
    ------
    PrecisionError
        If more than one rule is given, or its value is out of range.
    """
    given = [x is not None for x in (eps, bits, tau)]
    if sum(given) > 1:
        raise PrecisionError("give at most one of eps, bits and tau")
    if tau is not None:
        if not tau > 0:
            raise PrecisionError(f"tau must be > 0, got {tau}")
        return float(tau)
    if bits is not None:
        return tau_for_bits(int(bits), tree.height)
    return tau_for_eps(0.1 if eps is None else float(eps), tree.max_degree, tree.min_weight)


def bits_needed(tau: float, height: float, guard: int = 0) -> int:
    """Bits per coordinate to represent a node at distance τ·L from the origin.

    round(1.4427·τ·L) + ``guard``, as in Sala et al.'s table. The exact need is
    −log₂(1−‖x‖) = log₂(e^{τL}+1) − 1, so this still keeps at least half a bit of headroom.

    Parameters
    ----------
    tau : float
        The scale τ.
    height : float
        Weighted height L of the deepest node.
    guard : int, default 0
        Extra bits added.

    Returns
    -------
    int
        Bits needed (at least 1 + ``guard``).
    """
    return max(1, round(tau * height / math.log(2.0))) + int(guard)


def check_precision(tau: float, height: float, precision_bits: int,
                    guard: int = GUARD_BITS) -> None:
    """Refuse a working precision that cannot hold the deepest node at distance τ·L.

    Parameters
    ----------
    tau : float
        The scale τ.
    height : float
        Weighted height L of the deepest node.
    precision_bits : int
        The working precision in bits.
    guard : int, default GUARD_BITS
        Guard bits required on top of :func:`bits_needed`.

    Raises
    ------
    PrecisionError
        If ``precision_bits`` is lower than ``bits_needed(tau, height, guard)``.
    """
    need = bits_needed(tau, height, guard)
    if precision_bits < need:
        raise PrecisionError(
            f"precision_bits={precision_bits} is too low for tau={tau:.4g} on a tree of height "
            f"{height:g}: the deepest node needs {need} bits ({need - guard} + {guard} guard); "
            f"raise precision_bits to at least {need}, or lower tau (e.g. bits={precision_bits})")


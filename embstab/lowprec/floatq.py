"""Rounding to :class:`FloatFormat` values, bit-exactly.

Fast path (every element whose magnitude is at least the target's smallest normal, plus zeros
and specials): the fp32/fp64 bit pattern is rounded in place with integer arithmetic — add a
rounding increment below the kept mantissa bits, then clear them. A carry out of the mantissa
bumps the exponent, which is the correct next value, so this is exact for every binade.

Exact path (the few elements in the target's subnormal range, or below fp32's normal range when
the target has a wider exponent than fp32): scale by a power of two so the target grid becomes
the integers and round in float64 (:func:`embstab.lowprec.rounding.round_integer`).

Both paths use the same definitions, so nearest rounding is identical on every device.
"""

from __future__ import annotations

import math
import types
from functools import lru_cache

import torch

import embstab.lowprec.native as cpu_kernel
from embstab.lowprec.rounding import kernel_seed, round_integer, scale_pow2, sr_bits, uniform_bits
from embstab.lowprec.formats import FloatFormat

__all__ = ["quantize_float", "quantize_float_reference", "native_dtype"]

# source dtype -> (int view dtype, stored mantissa bits, exponent of the smallest normal)
_SOURCE = {torch.float32: (torch.int32, 23, -126), torch.float64: (torch.int64, 52, -1022)}


def _fix_threshold(fmt: FloatFormat, src_emin: int) -> float | None:
    """Magnitude below which the bit trick is not exact (None when it is exact everywhere)."""
    if fmt.emin == src_emin and fmt.subnormals and fmt.man_bits > 0:
        return None  # same subnormal grid as the source: the bit trick already handles it
    # (without mantissa bits the format has no subnormals, and the bit trick's ties-away rule
    # for its normal range must not decide the 0 / min_normal tie, which goes to even 0)
    return math.ldexp(1.0, max(fmt.emin, src_emin))


def _round_bits(x: torch.Tensor, d: int, man_bits: int, rounding: str, r: torch.Tensor | None) -> torch.Tensor:
    """Round the bit patterns of ``x`` to ``d`` fewer mantissa bits (normal range; no overflow policy).

    An increment below the kept bits, then clearing them: a carry out of the mantissa bumps the
    exponent, which is the correct next value in every binade. In-place integer ops on one
    fresh buffer keep this to a few passes over memory.
    """
    if d <= 0:
        return x.clone()
    b = x.view(_SOURCE[x.dtype][0])
    if rounding == "nearest" and man_bits == 0:
        # no mantissa bit to be even: the significand is always 1 (odd), so ties go away
        # from zero, as in the float64 reference and ml_dtypes' e8m0 cast
        t = b + 2 ** (d - 1)
    elif rounding == "nearest":
        t = b >> d
        t &= 1
        t += b
        t += 2 ** (d - 1) - 1
    elif rounding == "nearest_away":
        t = b + 2 ** (d - 1)
    elif rounding == "nearest_up":  # ties toward +inf: away for positives, toward zero for negatives
        t = (b >= 0).to(b.dtype)
        t += b
        t += 2 ** (d - 1) - 1
    elif rounding == "toward_zero":
        t = b.clone()
    else:  # stochastic: a uniform integer below the kept bits carries with probability = fraction
        t = r + b
    t &= -(2 ** d)
    return t.view(x.dtype)


def _overflow_policy(fmt: FloatFormat, rounding: str, dtype: torch.dtype) -> str:
    """What rounding results beyond ``fmt.max`` become, for results held in ``dtype``."""
    # An RTZ result never rounds up past max, so it only overflows when the input was already
    # beyond the format's range; IEEE keeps such finite values at max under truncation.
    policy = fmt.overflow
    if rounding == "toward_zero" and policy == "inf":
        policy = "saturate_finite"
    if fmt.max > torch.finfo(dtype).max:
        return "wider"  # the format outranges the dtype: results beyond it become Inf like a cast
    if policy == "inf" and fmt.emax == -_SOURCE[dtype][2] + 1:
        return "wider"  # same exponent range as the dtype (bf16, tf32): the carry already gives Inf
    return policy


def _bit_round_eager(x: torch.Tensor, fmt: FloatFormat, rounding: str,
                     r: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`_bit_round` for eager mode: the same results in fewer passes over memory.

    Ops run in place on the one result buffer, and the rare cases (non-finite inputs, overflow,
    the target's subnormal range) are found with one cheap test each and then fixed on the
    affected elements only. Returns the rounded tensor and the mask of subnormal-range elements
    the caller must still settle exactly (or None).
    """
    _, man, src_emin = _SOURCE[x.dtype]
    y = _round_bits(x, man - fmt.man_bits, fmt.man_bits, rounding, r)
    vmax = fmt.max
    policy = _overflow_policy(fmt, rounding, x.dtype)
    if policy in ("saturate", "saturate_finite"):
        y.clamp_(-vmax, vmax)  # NaN stays NaN; Inf inputs are set right below
    elif policy != "wider":
        over = y.abs() > vmax
        if bool(over.any()):
            y[over] = torch.copysign(torch.tensor(math.inf), y[over]) if policy == "inf" else math.nan
    lo, hi = torch.aminmax(x)  # one read pass (isfinite().all() is several times slower)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # NaN patterns may carry into other codes: keep them NaN; Inf inputs follow the policy
        bad = ~torch.isfinite(x)
        v = x[bad]
        if policy == "nan":
            v = torch.full_like(v, math.nan)
        elif policy == "saturate" and not fmt.has_inf:
            v = torch.where(v.isinf(), torch.copysign(torch.tensor(vmax, dtype=v.dtype), v), v)
        y[bad] = v
    thr = _fix_threshold(fmt, src_emin)
    # (two bool masks are cheaper than an abs pass: a quarter of the bytes each)
    fix = None if thr is None else torch.lt(x, thr).logical_and_(torch.gt(x, -thr))
    if fmt.specials == "fnuz":
        y.add_(0.0)  # no negative zero: -0 + 0 = +0 under round-to-nearest
    return y, fix


def _bit_round(x: torch.Tensor, fmt: FloatFormat, rounding: str,
               r: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Fast path: round the bit pattern, then apply the overflow policy and NaN passthrough.

    Returns the rounded tensor and the mask of elements still to settle (or None): for
    stochastic rounding the subnormal-range ties (see :func:`_sr_subnormal`), otherwise
    elements for the exact path. Pure function of its inputs (no data-dependent Python
    branches), so it is what the compiled path compiles; eager mode uses :func:`_bit_round_eager`.
    """
    _, man, src_emin = _SOURCE[x.dtype]
    d = man - fmt.man_bits
    y = _round_bits(x, d, fmt.man_bits, rounding, r)
    vmax = fmt.max
    policy = _overflow_policy(fmt, rounding, x.dtype)
    if policy == "wider":
        pass
    elif policy in ("saturate", "saturate_finite"):
        y = y.clamp(-vmax, vmax)
        if fmt.has_inf:
            y = torch.where(x.abs() == math.inf, x, y)  # (vectorised, unlike isinf)
    elif policy == "inf":
        y = torch.where(y.abs() > vmax, torch.copysign(torch.full_like(y, math.inf), y), y)
    else:  # "nan": overflow and infinite inputs become NaN
        y = torch.where(y.abs() > vmax, torch.full_like(y, math.nan), y)
    # NaN patterns may carry into other codes; keep them NaN (x != x, not isnan: inductor
    # vectorises the comparison but runs isnan element by element)
    y = torch.where(x != x, x, y)
    thr = _fix_threshold(fmt, src_emin)
    fix = None
    if thr is not None:
        ax = x.abs()
        if rounding == "stochastic" and r is not None and _inline_ok(fmt, x.dtype):
            tiny = ax < thr
            sub, ties = _sr_subnormal(x, ax, r, fmt, d)
            y = torch.where(tiny, sub, y)
            fix = tiny & ties
        elif rounding != "stochastic" and _inline_ok(fmt, x.dtype):
            # Below min_normal the grid is uniform (step 2**qexp): scale it to the integers and
            # round there with the one rounding ladder. Power-of-two scalings are exact here, so
            # this is exact and branch-free (what the compiled loop needs).
            y = torch.where(ax < thr, _subnormal_grid(x, fmt, rounding), y)
        else:
            fix = (ax < thr) & (ax > 0)
    if fmt.specials == "fnuz":
        y = y + 0.0  # no negative zero: -0 + 0 = +0 under round-to-nearest
    return y, fix


def _subnormal_grid(x: torch.Tensor, fmt: FloatFormat, rounding: str) -> torch.Tensor:
    """Deterministic rounding onto the uniform grid below ``min_normal`` (step ``2**qexp``).

    Scales the grid to the integers and rounds there with the one rounding ladder
    (:func:`~embstab.lowprec.rounding.round_integer`); exact where :func:`_inline_ok` holds.
    """
    qexp = fmt.emin - (fmt.man_bits if fmt.subnormals else 0)
    k = round_integer(x * math.ldexp(1.0, -qexp), rounding, None)
    return torch.copysign(k * math.ldexp(1.0, qexp), x)


def _sr_subnormal(x: torch.Tensor, ax: torch.Tensor, r: torch.Tensor, fmt: FloatFormat,
                  d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact SR on the uniform subnormal grid, reusing each element's d random bits.

    With fs = frac * 2**d and F = floor(fs), round up iff r < F. When r == F and fs is not an
    integer the outcome depends on random bits beyond the d drawn ones, so those elements
    (probability 2**-d each) are returned as ties and settled by :func:`_settle_ties`.
    Overall P(up) = F / 2**d + (fs - F) / 2**d = frac, exactly.
    """
    qexp = fmt.emin - (fmt.man_bits if fmt.subnormals else 0)
    ys = ax * math.ldexp(1.0, -qexp)
    k0 = torch.floor(ys)
    fs = (ys - k0) * math.ldexp(1.0, d)
    big_f = torch.floor(fs)
    rf = r.to(x.dtype)
    sub = torch.copysign((k0 + (rf < big_f).to(x.dtype)) * math.ldexp(1.0, qexp), x)
    return sub, (rf == big_f) & (fs != big_f)


def _inline_ok(fmt: FloatFormat, dtype: torch.dtype) -> bool:
    """Whether the subnormal-range grid and its scale factor are exact in ``dtype``."""
    _, man, src_emin = _SOURCE[dtype]
    m_sub = fmt.man_bits if fmt.subnormals else 0
    return fmt.emin > src_emin and fmt.emin - m_sub >= src_emin - man and m_sub - fmt.emin <= -src_emin


def _exact_small(xs: torch.Tensor, fmt: FloatFormat, rounding: str, generator: torch.Generator | None,
                 keep_float64: bool = False) -> torch.Tensor:
    """Exact rounding of finite values by scaling to the target grid (any magnitude, any mode).

    Overflow is not handled here; callers only pass values that cannot overflow or handle it.
    """
    a = xs.double()
    _, e = torch.frexp(a)  # |a| = mant * 2**e with mant in [0.5, 1)
    exp = torch.clamp(e - 1, min=fmt.emin)
    qe = exp - fmt.man_bits
    if not fmt.subnormals:
        qe = torch.where(e - 1 < fmt.emin, torch.full_like(qe, fmt.emin), qe)
    y = scale_pow2(a, -qe)
    q = round_integer(y, rounding, generator)
    out = torch.copysign(scale_pow2(q, qe), a)
    return out if keep_float64 else out.to(xs.dtype)


def _settle_ties(xs: torch.Tensor, fmt: FloatFormat, d: int, generator: torch.Generator | None) -> torch.Tensor:
    """Finish stochastic rounding of subnormal-range elements whose d drawn bits tied with the
    fraction's first d bits: round up with probability equal to the rest of the fraction."""
    qexp = fmt.emin - (fmt.man_bits if fmt.subnormals else 0)
    a = xs.double().abs()
    ys = scale_pow2(a, -qexp)
    k0 = torch.floor(ys)
    fs = scale_pow2(ys - k0, d)
    rest = fs - torch.floor(fs)
    gdev = generator.device if generator is not None else xs.device
    u = torch.rand(xs.shape, generator=generator, device=gdev, dtype=torch.float64).to(xs.device)
    return torch.copysign(scale_pow2(k0 + (u < rest).double(), qexp), xs.double()).to(xs.dtype)


@lru_cache(maxsize=1)
def _native_dtypes() -> dict[FloatFormat, torch.dtype]:
    # Formats whose value set, NaN/Inf codes and overflow policy are exactly a torch dtype's, so
    # a float32 -> dtype -> float32 round trip is round-to-nearest-even onto the format.
    # torch's e4m3fn cast saturates (the format's default policy is NaN, like ml_dtypes), so only
    # the saturating variant is native. Every entry is checked against the float64 reference.
    table = {FloatFormat(8, 7): torch.bfloat16, FloatFormat(5, 10): torch.float16,
             FloatFormat(4, 3, "fn", "saturate"): torch.float8_e4m3fn, FloatFormat(5, 2): torch.float8_e5m2,
             FloatFormat(4, 3, "fnuz"): getattr(torch, "float8_e4m3fnuz", None),
             FloatFormat(5, 2, "fnuz"): getattr(torch, "float8_e5m2fnuz", None)}
    return {f: dt for f, dt in table.items() if dt is not None}


def native_dtype(fmt: FloatFormat, rounding: str, dtype: torch.dtype) -> torch.dtype | None:
    """The torch dtype whose float32 round trip is exactly ``fmt`` under ``rounding``, if any.

    Parameters
    ----------
    fmt : FloatFormat
        The target format.
    rounding : str
        Canonical rounding name; only ``"nearest"`` (torch casts round half to even).
    dtype : torch.dtype
        The input dtype; only float32 (a float64 input would be rounded twice by torch's casts,
        which go through float32).

    Returns
    -------
    torch.dtype or None
        For example ``torch.bfloat16`` for :data:`~embstab.lowprec.BF16`; None otherwise.
    """
    if rounding != "nearest" or dtype != torch.float32:
        return None
    return _native_dtypes().get(fmt)


def quantize_float(x: torch.Tensor, fmt: FloatFormat, rounding: str, generator: torch.Generator | None,
                   compiled: bool = False) -> torch.Tensor:
    """Round a float32/float64 tensor onto ``fmt`` (result in the same dtype).

    The compiled CPU kernel or a native torch cast serves the common cases; otherwise a bit-level
    rounding in torch, with an exact path for the (usually few) subnormal or tied elements.

    Parameters
    ----------
    x : torch.Tensor
        float32 or float64 tensor.
    fmt : FloatFormat
        The target format.
    rounding : str
        Canonical rounding mode (``"stochastic:K"`` takes the exact reference path).
    generator : torch.Generator or None
        Randomness for stochastic rounding.
    compiled : bool, default False
        Use the inductor-compiled rounding loop instead of the CPU kernel, native casts and eager
        torch.

    Returns
    -------
    torch.Tensor
        The rounded values, in ``x``'s shape and dtype.

    Raises
    ------
    TypeError
        If ``x`` is neither float32 nor float64.
    """
    if x.dtype not in _SOURCE:
        raise TypeError(f"quantize_float needs float32 or float64, got {x.dtype}")
    native = None if compiled else native_dtype(fmt, rounding, x.dtype)
    if native in (torch.bfloat16, torch.float16):
        return x.to(native).to(x.dtype)  # the processor's own conversion instructions: fastest
    if not compiled and cpu_kernel.applies(x, fmt, rounding):
        # one vectorised pass (2-4x torch's own fp8 casts, ~5-10x the torch ops below); nearest
        # is bit-identical to them, stochastic draws the CUDA kernel's counter-based stream
        seed = kernel_seed(generator, x.device) if rounding == "stochastic" else 0
        return cpu_kernel.quantize_float32(x, fmt, rounding, seed)
    if native is not None:
        return x.to(native).to(x.dtype)  # one fused pass, as fast as torch's own cast
    src_man = _SOURCE[x.dtype][1]
    if sr_bits(rounding) is not None:
        # few-bit stochastic rounding is a study tool, not a hot path: the exact scaled path
        # serves every format and exponent (compiled is ignored)
        return quantize_float_reference(x, fmt, rounding, generator)
    if fmt.man_bits >= src_man and fmt.emin <= _SOURCE[x.dtype][2] and fmt.emax >= (127 if x.dtype == torch.float32 else 1023) \
            and fmt.specials == "ieee" and fmt.subnormals:
        return x.clone()  # the format contains every value of the source dtype
    x = x.contiguous()
    r = None
    d = src_man - fmt.man_bits
    if rounding == "stochastic" and d > 0:
        r = uniform_bits(tuple(x.shape), d, generator, x.device, dtype=_SOURCE[x.dtype][0])
    sr_grid = rounding == "stochastic" and r is not None and _inline_ok(fmt, x.dtype)
    if compiled:
        y, flag = _compiled(fmt, rounding, x.dtype)(x, r)
        fix = None
        if flag is not None and bool(flag):
            # rare: recompute the mask eagerly (same inputs, same result) rather than make the
            # compiled loop store a bool mask, which stops inductor from vectorising it
            _, fix = _bit_round(x, fmt, rounding, r)
    else:
        y, fix = _bit_round_eager(x, fmt, rounding, r)
    idx = None if fix is None else fix.reshape(-1).nonzero().squeeze(1)
    if idx is not None and idx.numel():
        # one scan of the mask; the exact path then touches only the (usually few) flagged elements
        xs = x.reshape(-1)[idx]
        if sr_grid and not compiled:
            # the same formula as the compiled loop, on the subset: identical results
            vals, ties = _sr_subnormal(xs, xs.abs(), r.reshape(-1)[idx], fmt, d)
            if bool(ties.any()):
                vals[ties] = _settle_ties(xs[ties], fmt, d, generator)
        elif sr_grid:
            vals = _settle_ties(xs, fmt, d, generator)
        elif rounding != "stochastic" and _inline_ok(fmt, x.dtype):
            vals = _subnormal_grid(xs, fmt, rounding)  # few ops: cheap even for many tiny elements
        else:
            vals = _exact_small(xs, fmt, rounding, generator)
        y.reshape(-1)[idx] = vals + 0.0 if fmt.specials == "fnuz" else vals  # y is a fresh contiguous tensor
        # (zeros in the subset come back as the same signed zero; fnuz's -0 is cleared above)
    return y


@lru_cache(maxsize=64)
def _compiled(fmt: FloatFormat, rounding: str, dtype: torch.dtype):
    """``_bit_round`` specialised to one format and mode and compiled by inductor into one fused
    loop (several times faster than eager on CPU, since eager makes ~10 passes over memory)."""

    def fn(x, r):
        y, fix = _bit_round(x, fmt, rounding, r)
        return y, (None if fix is None else fix.any())

    # Dynamo caches compiled graphs per code object and allows only a few variants of each; give
    # every (format, mode, dtype) its own code object so they never evict or exhaust each other.
    code = fn.__code__.replace(co_name=f"quantize_{abs(hash((fmt, rounding, str(dtype))))}")
    unique = types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)
    return torch.compile(unique, dynamic=False, fullgraph=True)


def quantize_float_reference(x: torch.Tensor, fmt: FloatFormat, rounding: str = "nearest",
                             generator: torch.Generator | None = None) -> torch.Tensor:
    """Literal float64 reference: scale every finite element to the target grid, round it to an
    integer, and apply the overflow policy. Slow; used to check the fast path.

    Parameters
    ----------
    x : torch.Tensor
        Float tensor.
    fmt : FloatFormat
        The target format.
    rounding : str, default "nearest"
        Canonical rounding mode.
    generator : torch.Generator, optional
        Randomness for stochastic rounding.

    Returns
    -------
    torch.Tensor
        The rounded values, in ``x``'s shape and dtype.
    """
    x = x.contiguous()
    out = x.clone()
    finite = torch.isfinite(x)
    if finite.any():
        xs = x[finite]
        ys = _exact_small(xs, fmt, rounding, generator, keep_float64=True)
        over = ys.abs() > fmt.max
        policy = fmt.overflow
        if rounding == "toward_zero" and policy == "inf":
            policy = "saturate"
        if policy == "saturate":
            ys = ys.clamp(-fmt.max, fmt.max)
        elif policy == "inf":
            ys = torch.where(over, torch.copysign(torch.full_like(ys, math.inf), ys), ys)
        else:
            ys = torch.where(over, torch.full_like(ys, math.nan), ys)
        out[finite] = ys.to(x.dtype)
    inf = torch.isinf(x)
    if inf.any():
        if fmt.overflow == "saturate" and not fmt.has_inf:
            out[inf] = torch.copysign(torch.full_like(x[inf], fmt.max), x[inf])
        elif fmt.overflow == "nan" or (not fmt.has_inf):
            out[inf] = math.nan
    if fmt.specials == "fnuz":
        out = out + 0.0
    return out

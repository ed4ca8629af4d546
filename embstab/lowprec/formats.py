"""Number-format descriptors: frozen dataclasses that describe a set of values.

Descriptors hold the constants of their format (ranges, E8M0 bias, MXINT8 grid); the arithmetic
each kind of format performs (quantize, encode/decode, storage) is its handler in
:mod:`embstab.lowprec.handlers`, reached through :func:`embstab.lowprec.handler_for`. Keeping the
descriptors plain lets them be hashed, compared, stored in file headers and shared by the CPU and
GPU paths.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Union

from embstab._bits import check_bits
from embstab.errors import ConfigError, UnknownNameError

__all__ = [
    "FloatFormat",
    "FixedFormat",
    "BlockFloatFormat",
    "MXFormat",
    "UniformFormat",
    "Format",
    "PRESETS",
    "E8M0_BIAS",
    "MXINT8_FRAC_BITS",
    "get_format",
    "qtorch_float",
    "BF16", "FP16", "TF32", "FP32",
    "FP8_E4M3FN", "FP8_E4M3", "FP8_E4M3FNUZ", "FP8_E5M2", "FP8_E5M2FNUZ", "FP8_E3M4",
    "FP6_E3M2", "FP6_E2M3", "FP4_E2M1",
    "MXFP8_E4M3", "MXFP8_E5M2", "MXFP6_E3M2", "MXFP6_E2M3", "MXFP4", "MXINT8",
]

#: Bias of the E8M0 shared scale of MX formats: the stored byte is the scale exponent + 127.
E8M0_BIAS = 127
#: MXINT8 elements are ``k * 2**-MXINT8_FRAC_BITS`` with ``|k| <= 127``.
MXINT8_FRAC_BITS = 6

_SPECIALS = ("ieee", "fn", "fnuz", "finite")
_OVERFLOWS = ("saturate", "inf", "nan")


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format with ``exp_bits`` exponent and ``man_bits`` stored mantissa bits.

    Parameters
    ----------
    exp_bits : int
        Exponent field width, 1..11.
    man_bits : int
        Stored mantissa bits (the hidden bit excluded), 0..52. With 0 (powers of two only),
        round-to-nearest sends ties between normal values away from zero (no bit can be even).
    specials : {"ieee", "fn", "fnuz", "finite"}
        How the all-ones exponent is used. ``"ieee"``: Inf and NaN codes (bf16, fp16, e5m2);
        ``"fn"``: no Inf, only S.1…1.1…1 is NaN (OCP e4m3fn, max 448); ``"fnuz"``: no Inf, no −0,
        one NaN code 0x80, bias one larger (e4m3fnuz); ``"finite"``: every code is a finite number
        (OCP MX fp6/fp4 and QPyTorch's ``FloatingPoint``).
    overflow : {"saturate", "inf", "nan"}, optional
        What a finite value that rounds beyond ``max`` (and an infinite input) becomes. The default
        is each family's native behaviour, which is what ml_dtypes does: "inf" for ieee, "nan" for
        fn/fnuz, "saturate" for finite formats (they have neither Inf nor NaN).
    subnormals : bool
        Keep the subnormal grid below ``min_normal``; with False, values below it round onto
        {0, ±min_normal} (with the same rounding mode) instead.
    bias : int, optional
        Exponent bias; defaults to ``2**(exp_bits-1) - 1`` (plus one for fnuz).
    name : str, optional
        Display name.
    """

    exp_bits: int
    man_bits: int
    specials: str = "ieee"
    overflow: str | None = None
    subnormals: bool = True
    bias: int | None = None
    name: str | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.exp_bits, int) and 1 <= self.exp_bits <= 11):
            raise ConfigError(f"exp_bits must be an int in 1..11, got {self.exp_bits!r}")
        if not (isinstance(self.man_bits, int) and 0 <= self.man_bits <= 52):
            raise ConfigError(f"man_bits must be an int in 0..52, got {self.man_bits!r}")
        if self.specials not in _SPECIALS:
            raise ConfigError(f"specials must be one of {_SPECIALS}, got {self.specials!r}")
        if self.specials == "ieee" and self.exp_bits < 2:
            raise ConfigError("an ieee format needs exp_bits >= 2 (the all-ones exponent is reserved)")
        if self.specials == "fn" and self.exp_bits + self.man_bits < 2:
            raise ConfigError("an fn format needs at least 2 exponent+mantissa bits")
        overflow = self.overflow
        if overflow is None:
            overflow = {"ieee": "inf", "fn": "nan", "fnuz": "nan", "finite": "saturate"}[self.specials]
            object.__setattr__(self, "overflow", overflow)
        if overflow not in _OVERFLOWS:
            raise ConfigError(f"overflow must be one of {_OVERFLOWS}, got {overflow!r}")
        if overflow == "inf" and self.specials != "ieee":
            raise ConfigError(f"overflow='inf' needs an ieee format; {self.specials!r} formats have no Inf")
        if overflow == "nan" and self.specials == "finite":
            raise ConfigError("overflow='nan' needs a format with a NaN code; 'finite' formats have none")
        if self.bias is None:
            object.__setattr__(self, "bias", 2 ** (self.exp_bits - 1) - 1 + (self.specials == "fnuz"))
        if self.emin < -1022 or self.emax > 1023:
            raise ConfigError(f"exponent range [{self.emin}, {self.emax}] exceeds float64's")

    # -- derived quantities ------------------------------------------------------------------
    @property
    def bits(self) -> int:
        """Storage bits per value (sign + exponent + mantissa)."""
        return 1 + self.exp_bits + self.man_bits

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest finite binade."""
        top = 2 ** self.exp_bits - 1
        # ieee reserves the all-ones exponent; so does fn without mantissa bits, where that
        # binade's only code is the NaN
        reserved = self.specials == "ieee" or (self.specials == "fn" and self.man_bits == 0)
        return (top - 1 if reserved else top) - self.bias

    @property
    def max(self) -> float:
        """Largest finite value."""
        if self.specials == "fn" and self.man_bits > 0:  # the all-ones code is NaN: the top binade loses one step
            return math.ldexp(2.0 - 2.0 ** (1 - self.man_bits), self.emax)
        return math.ldexp(2.0 - 2.0 ** (-self.man_bits), self.emax)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value (``min_normal`` when subnormals are off)."""
        return math.ldexp(1.0, self.emin - self.man_bits) if self.subnormals else self.min_normal

    @property
    def has_inf(self) -> bool:
        return self.specials == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.specials != "finite"

    @property
    def has_negative_zero(self) -> bool:
        return self.specials != "fnuz"

    @property
    def within_float32(self) -> bool:
        """Whether every value, grid step and the range of the format lie within float32's, so
        float32 arithmetic represents it exactly (what the compiled CPU and CUDA kernels need)."""
        return self.emin >= -126 and self.man_bits <= 23 and self.max <= 3.4028234663852886e38

    def replace(self, **changes) -> FloatFormat:
        """A copy with some fields changed (e.g. ``FP8_E4M3FN.replace(overflow="saturate")``).

        Parameters
        ----------
        **changes
            New values of dataclass fields.

        Returns
        -------
        FloatFormat
            The new format (validated like any other).
        """
        return dataclasses.replace(self, **changes)

    def __str__(self) -> str:
        return self.name or f"e{self.exp_bits}m{self.man_bits}{'' if self.specials == 'ieee' else self.specials}"


@dataclass(frozen=True)
class FixedFormat:
    """Signed fixed point: multiples of ``2**-frac_bits`` held in ``word_bits`` two's-complement bits.

    Parameters
    ----------
    word_bits : int
        Total bits including the sign, 1..53.
    frac_bits : int
        Fractional bits; may be 0 or negative (a step of 2, 4, ... as in integer formats scaled up).
    symmetric : bool
        Drop the most negative code so the range is ``[-max, max]``.
    clamp : bool
        Clamp to the range; with False the grid is unbounded (a pure rounding grid).
    """

    word_bits: int
    frac_bits: int
    symmetric: bool = False
    clamp: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.word_bits, int) and 1 <= self.word_bits <= 53):
            raise ConfigError(f"word_bits must be an int in 1..53, got {self.word_bits!r}")
        if not isinstance(self.frac_bits, int) or abs(self.frac_bits) > 1000:
            raise ConfigError(f"frac_bits must be an int in -1000..1000, got {self.frac_bits!r}")
        if self.symmetric and self.word_bits < 2:
            raise ConfigError("a symmetric fixed-point format needs word_bits >= 2")

    @property
    def bits(self) -> int:
        return self.word_bits

    @property
    def step(self) -> float:
        return math.ldexp(1.0, -self.frac_bits)

    @property
    def max(self) -> float:
        return math.ldexp(2 ** (self.word_bits - 1) - 1, -self.frac_bits)

    @property
    def min(self) -> float:
        low = -(2 ** (self.word_bits - 1)) + (1 if self.symmetric else 0)
        return math.ldexp(low, -self.frac_bits)

    def __str__(self) -> str:
        return f"fixed{self.word_bits}.{self.frac_bits}"


@dataclass(frozen=True)
class BlockFloatFormat:
    """Block floating point (QPyTorch / SWALP): integers sharing one power-of-two exponent per block.

    Per block, ``E = floor(log2(amax))`` and the step is ``2**(E - (word_bits - 2))``; values are
    ``k * step`` with ``|k| <= 2**(word_bits-1) - 1`` (``symmetric=False`` also allows
    ``-2**(word_bits-1)``, as SWALP does).

    Parameters
    ----------
    word_bits : int
        Bits per element including the sign, 2..24.
    axis : int or None
        With ``block_size=None``: ``None`` shares one exponent over the whole tensor; an integer
        ``k`` gives one exponent per index along axis ``k`` (``axis=0`` on an embedding table is
        one exponent per row).
    block_size : int, optional
        Instead of ``axis``: blocks of this many contiguous elements along the last axis (the last
        block of a row may be shorter).
    symmetric : bool
    """

    word_bits: int
    axis: int | None = None
    block_size: int | None = None
    symmetric: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.word_bits, int) and 2 <= self.word_bits <= 24):
            raise ConfigError(f"word_bits must be an int in 2..24, got {self.word_bits!r}")
        if self.block_size is not None:
            if self.axis is not None:
                raise ConfigError("give either axis or block_size, not both")
            if not (isinstance(self.block_size, int) and self.block_size >= 1):
                raise ConfigError(f"block_size must be a positive int, got {self.block_size!r}")

    @property
    def bits(self) -> int:
        return self.word_bits

    def __str__(self) -> str:
        where = f"block{self.block_size}" if self.block_size else ("tensor" if self.axis is None else f"axis{self.axis}")
        return f"bfp{self.word_bits}-{where}"


@dataclass(frozen=True)
class MXFormat:
    """OCP microscaling (MX) format: blocks of ``block_size`` contiguous elements along ``axis``
    sharing an E8M0 power-of-two scale ``2**(floor(log2 amax) - emax_elem)`` (exponent clamped to
    [-127, 127]); elements are ``element`` (an fp8/fp6/fp4 :class:`FloatFormat`, rounded to nearest
    even with saturation) or ``"int8"`` (MXINT8: ``k * 2**-6`` with ``|k| <= 127``).
    """

    element: Union[FloatFormat, str]
    block_size: int = 32
    axis: int = -1
    name: str | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.element, str):
            if self.element != "int8":
                raise ConfigError(f"MX integer elements must be 'int8', got {self.element!r}")
        elif isinstance(self.element, FloatFormat):
            if self.element.overflow != "saturate":
                # MX elements always saturate (spec); store that in the descriptor so it is explicit
                object.__setattr__(self, "element", self.element.replace(overflow="saturate"))
        else:
            raise TypeError(f"element must be a FloatFormat or 'int8', got {type(self.element).__name__}")
        if not (isinstance(self.block_size, int) and self.block_size >= 1):
            raise ConfigError(f"block_size must be a positive int, got {self.block_size!r}")

    @property
    def emax_elem(self) -> int:
        """Exponent of the element format's largest binade (0 for int8, whose grid is k·2^-6)."""
        return 0 if self.element == "int8" else self.element.emax

    @property
    def element_bits(self) -> int:
        return 8 if self.element == "int8" else self.element.bits

    @property
    def bits(self) -> float:
        """Average storage bits per element, the 8-bit shared scale included."""
        return self.element_bits + 8 / self.block_size

    def __str__(self) -> str:
        return self.name or f"mx-{self.element}-{self.block_size}"


@dataclass(frozen=True)
class UniformFormat:
    """The embedding quantizer of smallfry/anchor-stability: ``2**bits`` evenly spaced levels on
    ``[-clip, clip]`` (both ends included). ``bits == 32`` means no rounding, only clipping;
    ``clip = 0`` sends everything to 0.
    """

    bits: int
    clip: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "bits", check_bits(self.bits))
        if not (math.isfinite(self.clip) and self.clip >= 0):
            raise ConfigError(f"clip must be a finite number >= 0, got {self.clip!r}")
        object.__setattr__(self, "clip", float(self.clip))

    @property
    def levels(self) -> int:
        return 2 ** self.bits

    @property
    def step(self) -> float:
        return 2 * self.clip / (2 ** self.bits - 1)

    def __str__(self) -> str:
        return f"uniform{self.bits}(clip={self.clip:.6g})"


Format = Union[FloatFormat, FixedFormat, BlockFloatFormat, MXFormat, UniformFormat]


def qtorch_float(exp: int, man: int) -> FloatFormat:
    """The value set of QPyTorch's ``FloatingPoint(exp, man)``.

    IEEE bias, every exponent code finite (e4m3 max 480, e5m2 max 114688), saturating; with
    ``exp=8`` it keeps fp32's Inf/NaN.

    Parameters
    ----------
    exp : int
        Exponent bits.
    man : int
        Mantissa bits.

    Returns
    -------
    FloatFormat
        The format, named ``qtorch_e{exp}m{man}``.
    """
    if exp == 8:
        return FloatFormat(8, man, "ieee", "inf", name=f"qtorch_e8m{man}")
    return FloatFormat(exp, man, "finite", "saturate", name=f"qtorch_e{exp}m{man}")


BF16 = FloatFormat(8, 7, name="bf16")
FP16 = FloatFormat(5, 10, name="fp16")
TF32 = FloatFormat(8, 10, name="tf32")
FP32 = FloatFormat(8, 23, name="fp32")
FP8_E4M3FN = FloatFormat(4, 3, "fn", name="fp8_e4m3fn")
FP8_E4M3 = FloatFormat(4, 3, "ieee", name="fp8_e4m3")
FP8_E4M3FNUZ = FloatFormat(4, 3, "fnuz", name="fp8_e4m3fnuz")
FP8_E5M2 = FloatFormat(5, 2, "ieee", name="fp8_e5m2")
FP8_E5M2FNUZ = FloatFormat(5, 2, "fnuz", name="fp8_e5m2fnuz")
FP8_E3M4 = FloatFormat(3, 4, "ieee", name="fp8_e3m4")
FP6_E3M2 = FloatFormat(3, 2, "finite", name="fp6_e3m2")
FP6_E2M3 = FloatFormat(2, 3, "finite", name="fp6_e2m3")
FP4_E2M1 = FloatFormat(2, 1, "finite", name="fp4_e2m1")

MXFP8_E4M3 = MXFormat(FP8_E4M3FN, name="mxfp8_e4m3")
MXFP8_E5M2 = MXFormat(FP8_E5M2, name="mxfp8_e5m2")
MXFP6_E3M2 = MXFormat(FP6_E3M2, name="mxfp6_e3m2")
MXFP6_E2M3 = MXFormat(FP6_E2M3, name="mxfp6_e2m3")
MXFP4 = MXFormat(FP4_E2M1, name="mxfp4")
MXINT8 = MXFormat("int8", name="mxint8")

#: Named formats, as accepted by :func:`get_format` and the ``--format`` CLI option.
PRESETS: dict[str, Format] = {
    f.name: f  # type: ignore[misc]
    for f in (BF16, FP16, TF32, FP32, FP8_E4M3FN, FP8_E4M3, FP8_E4M3FNUZ, FP8_E5M2, FP8_E5M2FNUZ, FP8_E3M4,
              FP6_E3M2, FP6_E2M3, FP4_E2M1, MXFP8_E4M3, MXFP8_E5M2, MXFP6_E3M2, MXFP6_E2M3, MXFP4, MXINT8)
}
PRESETS.update({"fp8": FP8_E4M3FN, "fp6": FP6_E3M2, "fp4": FP4_E2M1, "bfloat16": BF16, "half": FP16})


def get_format(name: str | Format) -> Format:
    """A format from its preset name, or the format itself.

    Parameters
    ----------
    name : str or Format
        A preset (``"bf16"``, ``"fp8_e4m3fn"``, ``"mxfp4"``, ...; case-insensitive), ``"bfpN"``
        (N-bit block float with one exponent per row) or a format object, returned as is.

    Returns
    -------
    Format

    Raises
    ------
    UnknownNameError
        For an unknown name (the message suggests the closest preset).
    """
    if not isinstance(name, str):
        return name
    key = name.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    if key.startswith("bfp") and key[3:].isdigit():
        return BlockFloatFormat(int(key[3:]), axis=0)
    raise UnknownNameError("number format", name, [*PRESETS, "bfpN"])

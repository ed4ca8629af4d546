"""What each kind of number format *does*: one handler per format class, found through a registry.

:func:`embstab.lowprec.quantize`, :func:`~embstab.lowprec.encode`/:func:`~embstab.lowprec.decode`,
the memory accounting and compressed storage all ask :func:`handler_for` instead of testing the
format's class, so a new kind of format plugs in by subclassing :class:`FormatHandler` and
decorating it with :func:`register_handler` — no caller changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from embstab.errors import ConfigError
from embstab.lowprec.blockq import (block_integers, block_view, mx_int8_integers, mx_scale_exponents, quantize_block,
                                    quantize_mx)
from embstab.lowprec.codes import BlockCodes, CodeError, float_code_table, float_codes, float_values
from embstab.lowprec.fixedq import fixed_integers, quantize_fixed, quantize_uniform, uniform_levels
from embstab.lowprec.floatq import quantize_float
from embstab.lowprec.formats import (E8M0_BIAS, MXINT8_FRAC_BITS, BlockFloatFormat, FixedFormat, FloatFormat,
                                     MXFormat, UniformFormat)
from embstab.lowprec.rounding import scale_pow2

__all__ = ["FormatHandler", "RowCodes", "StorageError", "register_handler", "handler_for", "code_dtype",
           "check_encodable"]


class StorageError(ConfigError):
    """A format cannot be used for compressed embedding storage (as it is configured)."""


@dataclass(frozen=True)
class RowCodes:
    """An embedding matrix stored as small integer codes, row by row.

    Attributes
    ----------
    codes : numpy.ndarray
        Non-negative int64 indices into ``table``, shape ``(n, dim)``.
    table : numpy.ndarray
        float64 value of every code (length ``2**width``).
    width : int
        Bits per stored code.
    scales : numpy.ndarray or None
        Per-block power-of-two exponents, shape ``(n, blocks per row)``: a value is
        ``table[code] * 2**scale``. None when there is no shared scale.
    block : int or None
        Elements per block along the row (None: one block per row).
    """

    codes: np.ndarray
    table: np.ndarray
    width: int
    scales: np.ndarray | None = None
    block: int | None = None


def code_dtype(bits: int) -> torch.dtype:
    """Smallest torch integer dtype :func:`~embstab.lowprec.encode` uses for ``bits``-bit codes.

    Parameters
    ----------
    bits : int

    Returns
    -------
    torch.dtype
        uint8 up to 8 bits, int32 up to 31, int64 beyond.
    """
    return torch.uint8 if bits <= 8 else (torch.int32 if bits <= 31 else torch.int64)


class FormatHandler(ABC):
    """Behaviour of one format class: every handler implements quantize, encode and decode.

    Every method takes the (resolved) format descriptor as ``fmt``; tensors are float32/float64
    work tensors (see :func:`embstab.lowprec.quantize.to_work_tensor`), ``rounding`` a canonical
    rounding name and ``generator`` a ``torch.Generator`` or None.
    """

    #: Whether NaN/Inf inputs have codes (only float formats have special codes).
    encodes_nonfinite = False
    #: Whether :meth:`encode` returns :class:`BlockCodes` (codes plus shared exponents).
    block_codes = False

    @abstractmethod
    def quantize(self, x: torch.Tensor, fmt: Any, rounding: str, generator: torch.Generator | None,
                 compiled: bool = False) -> torch.Tensor:
        """``x`` rounded onto ``fmt`` (same dtype).

        Parameters
        ----------
        x : torch.Tensor
            float32 or float64 tensor.
        fmt : Format
            A format of the type this handler serves.
        rounding : str
            Canonical rounding mode.
        generator : torch.Generator or None
            Randomness for stochastic rounding.
        compiled : bool, default False
            Use a compiled rounding loop where the format has one.

        Returns
        -------
        torch.Tensor
            The rounded values, shaped like ``x``.
        """

    @abstractmethod
    def encode(self, x: torch.Tensor, fmt: Any, rounding: str, generator: torch.Generator | None) -> Any:
        """Integer codes of ``x`` rounded onto ``fmt``.

        Parameters
        ----------
        x : torch.Tensor
            float32 or float64 tensor (checked encodable by the caller).
        fmt : Format
            A format of the type this handler serves.
        rounding : str
            Canonical rounding mode.
        generator : torch.Generator or None
            Randomness for stochastic rounding.

        Returns
        -------
        torch.Tensor or BlockCodes
            The codes (see :func:`embstab.lowprec.encode`).
        """

    @abstractmethod
    def decode(self, codes: Any, fmt: Any) -> torch.Tensor:
        """float64 values of ``codes`` (with the shape of the encoded input).

        Parameters
        ----------
        codes : torch.Tensor or BlockCodes
            Codes made by :meth:`encode`.
        fmt : Format
            The format they were encoded with.

        Returns
        -------
        torch.Tensor
            float64 values.
        """

    def bits_per_entry(self, fmt: Any, dim: int | None = None) -> float:
        """Storage bits per element, shared scales included.

        Parameters
        ----------
        fmt : Format
            A format of the type this handler serves.
        dim : int, optional
            Row length, where it matters (block scales shared along a row).

        Returns
        -------
        float
            Bits per element (``fmt.bits`` unless a handler says otherwise).
        """
        return float(fmt.bits)

    def code_table(self, fmt: Any) -> np.ndarray:
        """float64 value of every element code (index = code).

        Parameters
        ----------
        fmt : Format
            A format of the type this handler serves.

        Returns
        -------
        numpy.ndarray
            float64 table of length ``2**bits``.

        Raises
        ------
        StorageError
            If the format has no finite code table (the default).
        """
        raise StorageError(f"{fmt} has no finite code table")

    def for_storage(self, fmt: Any) -> tuple[Any, int]:
        """The variant of ``fmt`` used to store embedding rows, and its bits per stored code.

        Parameters
        ----------
        fmt : Format
            A format of the type this handler serves.

        Returns
        -------
        tuple of (Format, int)
            The storage format and its code width in bits.

        Raises
        ------
        StorageError
            If embeddings cannot be stored in this kind of format (the default).
        """
        raise StorageError(f"cannot compress embeddings with {type(fmt).__name__}")

    def row_codes(self, X: np.ndarray, fmt: Any, rounding: str, generator: torch.Generator | None) -> RowCodes:
        """Codes of a 2-D float32/float64 matrix, row by row (``fmt`` from :meth:`for_storage`).

        Parameters
        ----------
        X : numpy.ndarray
            ``(n, dim)`` matrix (copied, never modified).
        fmt : Format
            The format asked for; its storage variant is used.
        rounding : str
            Canonical rounding mode.
        generator : torch.Generator or None
            Randomness for stochastic rounding.

        Returns
        -------
        RowCodes
            int64 codes, their value table and the code width.

        Raises
        ------
        StorageError
            If embeddings cannot be stored in this kind of format.
        """
        fmt, width = self.for_storage(fmt)
        codes = self.encode(torch.from_numpy(np.array(X, copy=True)), fmt, rounding, generator)
        return RowCodes(codes.numpy().astype(np.int64), self.code_table(fmt), width)


_HANDLERS: dict[type, FormatHandler] = {}


def register_handler(format_type: type):
    """Class decorator: make an instance of the decorated :class:`FormatHandler` serve ``format_type``.

    Parameters
    ----------
    format_type : type
        The format descriptor class.

    Returns
    -------
    callable
        The decorator (returns the handler class unchanged).
    """

    def deco(cls: type[FormatHandler]) -> type[FormatHandler]:
        _HANDLERS[format_type] = cls()
        return cls

    return deco


def handler_for(fmt: Any) -> FormatHandler:
    """The handler of a format descriptor.

    Parameters
    ----------
    fmt : Format
        A resolved format (see :func:`embstab.lowprec.get_format`).

    Returns
    -------
    FormatHandler

    Raises
    ------
    TypeError
        If ``fmt`` is not an instance of a registered format class.
    """
    for klass in type(fmt).__mro__:
        if klass in _HANDLERS:
            return _HANDLERS[klass]
    raise TypeError(f"fmt must be a number format or a preset name, got {type(fmt).__name__}")


@register_handler(FloatFormat)
class FloatHandler(FormatHandler):
    """Binary floating point: bit patterns ``sign | exponent | mantissa`` as codes."""

    encodes_nonfinite = True

    def quantize(self, x, fmt, rounding, generator, compiled=False):
        return quantize_float(x, fmt, rounding, generator, compiled=compiled)

    def encode(self, x, fmt, rounding, generator):
        return float_codes(quantize_float(x, fmt, rounding, generator), fmt).to(code_dtype(fmt.bits))

    def decode(self, codes, fmt):
        return float_values(codes, fmt)

    def code_table(self, fmt):
        return float_code_table(fmt)

    def for_storage(self, fmt):
        if fmt.bits == 32:
            return fmt, 32  # fp32: stored as float32 values, not codes
        if fmt.bits > 16:
            raise StorageError(f"{fmt} has {fmt.bits} bits; compressed storage holds formats of at most 16 bits")
        # embeddings are finite: saturate rather than turn large values into Inf/NaN
        return (fmt if fmt.overflow == "saturate" else fmt.replace(overflow="saturate")), fmt.bits


@register_handler(FixedFormat)
class FixedHandler(FormatHandler):
    """Fixed point: the integer ``k`` of ``k * 2**-frac_bits`` as code."""

    def quantize(self, x, fmt, rounding, generator, compiled=False):
        return quantize_fixed(x, fmt, rounding, generator)

    def encode(self, x, fmt, rounding, generator):
        k, _ = fixed_integers(x, fmt, rounding, generator)
        return k.long()

    def decode(self, codes, fmt):
        return scale_pow2(codes.double(), -fmt.frac_bits)


@register_handler(UniformFormat)
class UniformHandler(FormatHandler):
    """Evenly spaced levels on ``[-clip, clip]``: the level index as code."""

    def quantize(self, x, fmt, rounding, generator, compiled=False):
        return quantize_uniform(x, fmt, rounding, generator)

    def encode(self, x, fmt, rounding, generator):
        if fmt.bits >= 32:  # no grid: the float32 bit pattern of the clipped value
            return x.float().clamp(-fmt.clip, fmt.clip).view(torch.int32)
        if fmt.clip == 0:
            return torch.full(x.shape, (2 ** fmt.bits - 1) // 2, dtype=code_dtype(fmt.bits))
        return uniform_levels(x, fmt, rounding, generator).to(code_dtype(fmt.bits))

    def decode(self, codes, fmt):
        if fmt.bits >= 32:
            return codes.to(torch.int32).view(torch.float32).double()
        return codes.double() * (2 * fmt.clip / (2 ** fmt.bits - 1)) - fmt.clip

    def code_table(self, fmt):
        if fmt.bits > 24:
            raise StorageError(f"{fmt} has no level grid (clipping only)")
        # the same arithmetic as decode, so stored tables and decoded codes agree bit for bit
        return self.decode(torch.arange(2 ** fmt.bits), fmt).numpy()

    def for_storage(self, fmt):
        return fmt, fmt.bits


class _SharedScaleHandler(FormatHandler):
    """Block float and MX: integer element codes plus one power-of-two exponent per block."""

    block_codes = True

    def decode(self, codes, fmt):
        view_vals = self._element_values(codes.codes, fmt)
        vals = scale_pow2(view_vals, self._scale_exponents(codes.exponents, fmt))
        ref = torch.empty(codes.shape, dtype=torch.float64)
        _, _, restore = block_view(ref, fmt.block_size, fmt.axis)
        return restore(vals)

    def row_codes(self, X, fmt, rounding, generator):
        fmt, width = self.for_storage(fmt)
        bc = self.encode(torch.from_numpy(np.array(X, copy=True)), fmt, rounding, generator)
        n_rows, d = X.shape
        c = bc.codes.reshape(n_rows, -1)[:, :d].numpy().astype(np.int64)
        scales = self._scale_exponents(bc.exponents, fmt).reshape(n_rows, -1).numpy().astype(np.int64)
        offset = self._code_offset(fmt)
        return RowCodes(c + offset, self.code_table(fmt), width, scales, fmt.block_size)

    def _code_offset(self, fmt) -> int:
        """Added to signed element codes so stored codes index :meth:`code_table` from 0."""
        return 0


@register_handler(BlockFloatFormat)
class BlockFloatHandler(_SharedScaleHandler):
    """QPyTorch/SWALP block float: codes are integers ``k``, exponents the per-block step exponent."""

    def quantize(self, x, fmt, rounding, generator, compiled=False):
        return quantize_block(x, fmt, rounding, generator)

    def encode(self, x, fmt, rounding, generator):
        view, dims, _ = block_view(x, fmt.block_size, fmt.axis)
        k, se, _ = block_integers(view, dims, fmt, rounding, generator)
        return BlockCodes(k.to(torch.int32), se.to(torch.int32), tuple(x.shape), fmt)

    def _element_values(self, codes, fmt):
        return codes.double()

    def _scale_exponents(self, exponents, fmt):
        return exponents.long()

    def bits_per_entry(self, fmt, dim=None):
        # a 16-bit exponent per block; a row of dim entries holds ceil(dim / block_size) blocks
        if fmt.block_size is None:
            return fmt.word_bits + (16.0 / dim if dim else 0.0)
        blocks = -(-dim // fmt.block_size) if dim else None
        return fmt.word_bits + (16.0 * blocks / dim if dim else 16.0 / fmt.block_size)

    def code_table(self, fmt):
        return np.arange(2 ** fmt.word_bits, dtype=np.float64) - self._code_offset(fmt)

    def _code_offset(self, fmt):
        return 2 ** (fmt.word_bits - 1)

    def for_storage(self, fmt):
        if fmt.block_size is None and fmt.axis not in (0, -2):
            raise StorageError("block float formats are applied per row: use axis=0 or a block_size")
        return fmt, fmt.word_bits


@register_handler(MXFormat)
class MXHandler(_SharedScaleHandler):
    """OCP MX: element codes (fp bit patterns, or int8 ``k``) and E8M0 scale bytes."""

    def quantize(self, x, fmt, rounding, generator, compiled=False):
        return quantize_mx(x, fmt, rounding, generator)

    def encode(self, x, fmt, rounding, generator):
        view, _, _ = block_view(x, fmt.block_size, fmt.axis)
        s, _ = mx_scale_exponents(view, fmt)
        v = scale_pow2(view.double(), -s)
        if fmt.element == "int8":
            codes = mx_int8_integers(v, rounding, generator).to(torch.int8)
        else:
            codes = float_codes(quantize_float(v, fmt.element, rounding, generator), fmt.element).to(torch.uint8)
        return BlockCodes(codes, (s + E8M0_BIAS).to(torch.uint8), tuple(x.shape), fmt)

    def _element_values(self, codes, fmt):
        if fmt.element == "int8":
            return scale_pow2(codes.double(), -MXINT8_FRAC_BITS)
        return float_values(codes, fmt.element)

    def _scale_exponents(self, exponents, fmt):
        return exponents.long() - E8M0_BIAS

    def bits_per_entry(self, fmt, dim=None):
        if not dim:
            return fmt.bits  # full blocks: element bits + 8 / block_size
        return fmt.element_bits + 8.0 * -(-dim // fmt.block_size) / dim  # the last block may be partial

    def code_table(self, fmt):
        if fmt.element == "int8":
            return scale_pow2(torch.arange(256, dtype=torch.float64) - 128, -MXINT8_FRAC_BITS).numpy()
        return float_code_table(fmt.element)

    def _code_offset(self, fmt):
        return 128 if fmt.element == "int8" else 0

    def for_storage(self, fmt):
        if fmt.axis not in (-1, 1):
            raise StorageError("MX blocks run along each row: use axis=-1")
        return fmt, fmt.element_bits


def check_encodable(x: torch.Tensor, fmt: Any) -> None:
    """Raise :class:`CodeError` if ``x`` holds NaN/Inf and ``fmt`` has no codes for them.

    Parameters
    ----------
    x : torch.Tensor
        Values about to be encoded.
    fmt : Format
        The target format.

    Raises
    ------
    CodeError
        If a non-finite value has no code in ``fmt``.
    """
    if not handler_for(fmt).encodes_nonfinite and not bool(torch.isfinite(x).all()):
        raise CodeError(f"{fmt} has no codes for NaN or Inf")


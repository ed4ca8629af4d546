"""Contract every number format honours, checked over every preset and one of each other kind.

A new kind of format plugs in through a :class:`~embstab.lowprec.FormatHandler`; adding it to
``FORMATS`` below runs it through the same checks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embstab.lowprec import (PRESETS, BlockCodes, BlockFloatFormat, CodeError, FixedFormat, FloatFormat, MXFormat,
                             StorageError, UniformFormat, decode, encode, handler_for, quantize)
from embstab.compress import bits_per_entry

FORMATS = list(dict.fromkeys(PRESETS.values())) + [
    FixedFormat(8, 4), FixedFormat(6, 2, symmetric=True), UniformFormat(4, 1.5), UniformFormat(1, 0.5),
    BlockFloatFormat(8, axis=0), BlockFloatFormat(6, block_size=16), MXFormat(FloatFormat(3, 2, "finite"), 16),
]
IDS = [str(f) for f in FORMATS]


def _inputs(fmt) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 48, generator=g) * torch.logspace(-6, 3, 48)
    if isinstance(fmt, FloatFormat):  # reach the whole range: subnormals and overflow
        x = x * (fmt.max / 16)
    return x


def _same(a: torch.Tensor, b: torch.Tensor, bitwise: bool = True) -> bool:
    """Equal bit for bit (or by value: -0 == +0), NaN equal to NaN."""
    a, b = a.float(), b.float()
    eq = (a.view(torch.int32) == b.view(torch.int32)) if bitwise else (a == b)
    return bool((eq | (a.isnan() & b.isnan())).all())


def _signed_codes(fmt) -> bool:
    """Whether codes keep the sign of zero (float bit patterns do; integers do not)."""
    return isinstance(fmt, FloatFormat) or (isinstance(fmt, MXFormat) and fmt.element != "int8")


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_quantize_is_idempotent(fmt):
    x = _inputs(fmt)
    for mode in ("nearest", "stochastic"):
        q = quantize(x, fmt, mode, generator=1)
        assert q.shape == x.shape and q.dtype == x.dtype
        assert _same(quantize(q, fmt, mode, generator=2), q), mode


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_encode_decode_round_trip_equals_quantize(fmt):
    x = _inputs(fmt)
    q = quantize(x, fmt)
    if isinstance(fmt, FloatFormat) and not fmt.has_nan:
        x = x.clamp(-fmt.max, fmt.max)  # nothing to encode an overflow NaN with
        q = quantize(x, fmt)
    codes = encode(x, fmt)
    assert isinstance(codes, BlockCodes) == handler_for(fmt).block_codes
    assert _same(decode(codes, fmt), q, _signed_codes(fmt))
    assert _same(quantize(decode(codes, fmt), fmt), q, _signed_codes(fmt))


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_codes_fit_the_declared_storage_bits(fmt):
    x = _inputs(fmt).clamp(-1e4, 1e4)
    if isinstance(fmt, FloatFormat) and not fmt.has_nan:
        x = x.clamp(-fmt.max, fmt.max)
    codes = encode(x, fmt)
    bits = bits_per_entry(fmt, x.shape[1])
    if isinstance(codes, BlockCodes):
        c = codes.codes.long()
        elem_bits = fmt.element_bits if isinstance(fmt, MXFormat) else fmt.word_bits
        assert int(c.min()) >= -(2 ** (elem_bits - 1)) and int(c.max()) < 2 ** elem_bits
        n_blocks = codes.exponents.numel()
        assert bits > elem_bits and bits * x.numel() >= elem_bits * x.numel() + 8 * n_blocks - 1e-6
    else:
        c = codes.long()
        assert bits == fmt.bits
        if isinstance(fmt, FixedFormat):
            assert int(c.min()) >= -(2 ** (fmt.bits - 1)) and int(c.max()) < 2 ** (fmt.bits - 1)
        else:
            assert int(c.min()) >= 0 and int(c.max()) < 2 ** fmt.bits


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_code_table_holds_fixed_points_and_matches_decode(fmt):
    handler = handler_for(fmt)
    try:
        table = handler.code_table(fmt)
    except (StorageError, CodeError):
        assert isinstance(fmt, (FixedFormat, FloatFormat))  # fixed point and > 16-bit floats have none
        return
    finite = table[np.isfinite(table)]
    assert finite.dtype == np.float64 and len(finite) >= 2
    levels = np.unique(finite)
    assert np.all(np.diff(levels) > 0)
    if not handler.block_codes:
        assert len(table) == 2 ** fmt.bits
        assert np.array_equal(decode(torch.arange(len(table)), fmt, torch.float64).numpy(), table, equal_nan=True)
        v = torch.from_numpy(levels)
        assert torch.equal(quantize(v, fmt), v)  # every level is its own rounding


@pytest.mark.parametrize("fmt", FORMATS, ids=IDS)
def test_row_storage_reproduces_quantize_or_refuses_clearly(fmt):
    handler = handler_for(fmt)
    X = (_inputs(fmt)[:, :40] / 1e3).double().numpy()
    try:
        stored, width = handler.for_storage(fmt)
    except StorageError as exc:
        assert str(exc)
        return
    if width == 32:
        assert stored.bits == 32  # fp32 rows are stored as float32 values, not codes
        return
    rc = handler.row_codes(X, fmt, "nearest", None)
    assert rc.width == width and rc.codes.shape == X.shape
    assert rc.codes.min() >= 0 and rc.codes.max() < 2 ** width and len(rc.table) <= 2 ** width
    vals = rc.table[rc.codes]
    if rc.scales is not None:
        per = rc.block or X.shape[1]
        vals = vals * np.exp2(np.repeat(rc.scales, per, axis=1)[:, :X.shape[1]])
    ref = quantize(X, stored)
    assert np.array_equal(vals, ref)


def test_unknown_format_class_is_a_clear_type_error():
    with pytest.raises(TypeError, match="number format"):
        handler_for(object())

"""Opt-in long checks (``pytest -m slow``): the compiled kernel and exhaustive fp32 sweeps."""

from __future__ import annotations

import pytest
import torch
from tqdm.auto import tqdm

from embstab.lowprec import BF16, FP8_E4M3FN, FP16, FloatFormat, native, quantize

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("fmt", [BF16, FP16, FloatFormat(4, 3, "finite"), FP8_E4M3FN, FloatFormat(3, 2, "finite", subnormals=False),
                                 FloatFormat(5, 20)],  # e5m20: only 3 random bits, so subnormal SR ties are common
                         ids=str)
@pytest.mark.parametrize("mode", ["nearest", "nearest_away", "toward_zero", "stochastic"])
def test_compiled_equals_eager_bit_for_bit(fmt, mode):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1 << 18, generator=g) * torch.logspace(-30, 30, 1 << 18)
    x[:3] = torch.tensor([float("inf"), float("nan"), -0.0])
    a = quantize(x, fmt, mode, generator=5, compiled=True)
    with native.disabled():  # the compiled loop draws torch's stream, as the torch eager path does
        b = quantize(x, fmt, mode, generator=5)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))


@pytest.mark.parametrize("fmt,cast", [(BF16, torch.bfloat16), (FP16, torch.float16)], ids=["bf16", "fp16"])
def test_every_fp32_pattern_matches_native_cast(fmt, cast):
    chunk = 1 << 26
    base = torch.arange(chunk, dtype=torch.int64)
    for start in tqdm(range(0, 1 << 32, chunk), desc=f"all fp32 -> {fmt}", leave=False):
        bits = (base + start).to(torch.int64)
        x = torch.where(bits >= 1 << 31, bits - (1 << 32), bits).to(torch.int32).view(torch.float32)
        got = quantize(x, fmt, compiled=True)
        ref = x.to(cast).float()
        same = (got.view(torch.int32) == ref.view(torch.int32)) | (torch.isnan(got) & torch.isnan(ref))
        assert bool(same.all()), f"mismatch in chunk starting at {start:#x}"

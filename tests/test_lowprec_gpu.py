"""GPU kernels: import cleanly everywhere; run against the CPU path only where a GPU is present."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from embstab.lowprec import BF16, FP8_E4M3FN, FP8_E5M2, MXFP4, MXINT8, FloatFormat, quantize
from embstab.lowprec import gpu


def test_module_imports_and_reports_availability_without_gpu():
    assert isinstance(gpu.available(), bool)
    assert gpu.kernel_source_path().is_file()
    if not gpu.available():
        with pytest.raises(gpu.GPUUnavailableError, match="unavailable"):
            gpu._module()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_kernel_source_compiles_to_ptx(tmp_path):
    out = subprocess.run(["nvcc", "-ptx", "-arch=sm_80", str(gpu.kernel_source_path()), "-o", str(tmp_path / "k.ptx")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert "quantize_float_kernel" in ptx and "quantize_mx_kernel" in ptx


needs_gpu = pytest.mark.skipif(not (torch.cuda.is_available() and gpu.available()), reason="needs a CUDA GPU and cupy")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("fmt", [BF16, FP8_E4M3FN, FP8_E5M2, FloatFormat(3, 2, "finite"),
                                 FP8_E4M3FN.replace(overflow="saturate")], ids=str)
def test_cuda_nearest_is_bit_identical_to_cpu(fmt):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1 << 20, generator=g) * torch.logspace(-20, 20, 1 << 20)
    x[:4] = torch.tensor([float("inf"), float("-inf"), float("nan"), -0.0])
    ref = quantize(x, fmt)
    got = gpu.quantize_float_cuda(x.cuda(), fmt).cpu()
    assert torch.equal(got.view(torch.int32)[3:], ref.view(torch.int32)[3:]) and torch.isnan(got[2])
    assert torch.equal(quantize(x.cuda(), fmt).cpu().view(torch.int32)[3:], ref.view(torch.int32)[3:])


@pytest.mark.gpu
@needs_gpu
def test_cuda_stochastic_unbiased_and_seeded():
    x = torch.full((1 << 20,), 1 + 2 ** -9, device="cuda")  # p = 1/4 of a bf16 step
    a = gpu.quantize_float_cuda(x, BF16, "stochastic", seed=1)
    assert torch.equal(a, gpu.quantize_float_cuda(x, BF16, "stochastic", seed=1))
    p = float((a > 1).float().mean())
    assert abs(p - 0.25) < 5 * (0.25 * 0.75 / (1 << 20)) ** 0.5


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("fmt", [MXFP4, MXINT8], ids=str)
def test_cuda_mx_matches_cpu(fmt):
    x = torch.randn(512, 300, generator=torch.Generator().manual_seed(1))
    assert torch.equal(gpu.quantize_mx_cuda(x.cuda(), fmt).cpu(), quantize(x, fmt))

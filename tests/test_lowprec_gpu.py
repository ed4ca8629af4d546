"""GPU kernels: import cleanly everywhere; run against the CPU path only where a GPU is present."""

from __future__ import annotations

import importlib.resources
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from embstab.errors import OptionalDependencyError
from embstab.lowprec import BF16, FP8_E4M3FN, FP8_E5M2, MXFP4, MXINT8, FixedFormat, FloatFormat, quantize
from embstab.lowprec import gpu, native, nvrtc

# A source checkout tests its own kernels/ (an editable install elsewhere may resolve
# embstab.kernels to another tree); an installed package tests the shipped ones.
_CHECKOUT_KERNELS = Path(__file__).resolve().parents[1] / "kernels"


@pytest.fixture
def kernel_sources(monkeypatch):
    if (_CHECKOUT_KERNELS / "quantize.cu").is_file():
        monkeypatch.setenv("EMBSTAB_KERNELS_DIR", str(_CHECKOUT_KERNELS))
    sources = gpu.kernel_sources()
    assert "quantize.cu" in sources
    return sources


def test_module_imports_and_reports_availability_without_gpu():
    assert isinstance(gpu.available(), bool)
    if not gpu.available():
        with pytest.raises(gpu.GPUUnavailableError, match="unavailable"):
            gpu._module()


def test_kernels_ship_inside_the_package(monkeypatch):
    monkeypatch.delenv("EMBSTAB_KERNELS_DIR", raising=False)
    shipped = importlib.resources.files("embstab.kernels")
    assert (shipped / "quantize.cu").is_file()
    assert "quantize_float_kernel" in gpu.kernel_source_path().read_text()
    monkeypatch.setenv("EMBSTAB_KERNELS_DIR", "/nonexistent/kernels")
    assert str(gpu.kernel_source_path()) == "/nonexistent/kernels/quantize.cu"


def _nvrtc_or_skip():
    try:
        return nvrtc.find_library()
    except OptionalDependencyError as exc:
        pytest.skip(f"NVRTC is not installed ({exc}); pip install nvidia-cuda-nvrtc (CUDA 13) "
                    "or nvidia-cuda-nvrtc-cu12")


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
def test_every_kernel_compiles_under_nvrtc(kernel_sources, arch):
    """cupy.RawModule compiles with NVRTC: no libc headers, no NAN/INFINITY macros, no hex floats."""
    _nvrtc_or_skip()
    for name, source in kernel_sources.items():
        out = nvrtc.compile_ptx(source, arch=arch, name=name)
        assert f".target sm_{arch[-2:]}" in out.ptx, name
        for kernel in ("quantize_float_kernel", "quantize_float4x2_kernel", "quantize_mx_kernel") if name == "quantize.cu" else ():
            assert f".entry {kernel}" in out.ptx


def test_nvrtc_reports_the_compile_log():
    _nvrtc_or_skip()
    with pytest.raises(nvrtc.NVRTCError, match=r"stdint\.h"):
        nvrtc.compile_ptx("#include <stdint.h>\n", name="bad.cu")
    with pytest.raises(nvrtc.NVRTCError, match="INFINITY"):
        nvrtc.compile_ptx("__device__ float f() { return INFINITY; }\n", name="bad.cu")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_kernel_source_compiles_to_ptx_with_nvcc(kernel_sources, tmp_path, arch):
    for name, source in kernel_sources.items():
        (tmp_path / name).write_text(source)
        out = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", str(tmp_path / name), "-o", str(tmp_path / "k.ptx")],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert all(k in ptx for k in ("quantize_float_kernel", "quantize_float4x2_kernel", "quantize_mx_kernel"))


class _FakeKernels:
    """Stands in for cupy + a GPU: records calls, returns a marker result."""

    def __init__(self, monkeypatch, available=True):
        self.calls = []
        monkeypatch.setattr(gpu, "_on_cuda", lambda t: True)
        monkeypatch.setattr(gpu, "available", lambda: available)
        monkeypatch.setattr(gpu, "quantize_float_cuda", self._record("float"))
        monkeypatch.setattr(gpu, "quantize_mx_cuda", self._record("mx"))

    def _record(self, kind):
        def run(x, fmt, rounding, seed):
            self.calls.append((kind, fmt, rounding, seed))
            return torch.full_like(x, 7.0)
        return run


def test_quantize_dispatches_float32_cuda_tensors_to_the_kernels(monkeypatch):
    fake = _FakeKernels(monkeypatch)
    x = torch.randn(4, 64)
    assert torch.equal(quantize(x, "bf16"), torch.full_like(x, 7.0))
    assert fake.calls[-1] == ("float", BF16, "nearest", 0)
    quantize(x, "mxfp4", "stochastic", generator=3)
    kind, fmt, rounding, seed = fake.calls[-1]
    assert (kind, fmt, rounding) == ("mx", MXFP4, "stochastic") and seed > 0
    quantize(x, "mxfp4", "stochastic", generator=3)
    assert fake.calls[-1][3] == seed  # the kernel seed comes from the generator: reproducible


@pytest.mark.parametrize("case", ["float64", "fixed", "toward_zero", "mx_1d", "beyond_fp32"])
def test_quantize_falls_back_to_torch_where_no_kernel_applies(monkeypatch, case):
    fake = _FakeKernels(monkeypatch)
    x = torch.randn(4, 64)
    fmt, rounding = "bf16", "nearest"
    if case == "float64":
        x = x.double()
    elif case == "fixed":
        fmt = FixedFormat(8, 4)
    elif case == "toward_zero":
        rounding = "toward_zero"
    elif case == "mx_1d":
        x, fmt = x.flatten(), "mxfp4"
    else:
        fmt = FloatFormat(11, 10)  # exponent range beyond fp32: the kernel cannot represent it
    monkeypatch.setattr(gpu, "_on_cuda", lambda t: False)
    ref = quantize(x, fmt, rounding)
    monkeypatch.setattr(gpu, "_on_cuda", lambda t: True)
    assert torch.equal(quantize(x, fmt, rounding), ref) and fake.calls == []


def test_quantize_uses_torch_when_the_kernels_are_unavailable(monkeypatch):
    fake = _FakeKernels(monkeypatch, available=False)
    x = torch.randn(1000)
    assert torch.equal(quantize(x, "bf16"), x.to(torch.bfloat16).float()) and fake.calls == []


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
@pytest.mark.parametrize("cols", [300, 320])  # a partial block at each row's end, or none
def test_cuda_mx_matches_cpu(fmt, cols):
    x = torch.randn(512, cols, generator=torch.Generator().manual_seed(1))
    assert torch.equal(gpu.quantize_mx_cuda(x.cuda(), fmt).cpu(), quantize(x, fmt))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("fmt", [BF16, FP8_E4M3FN, FloatFormat(3, 2, "finite", subnormals=False),
                                 FloatFormat(8, 7, subnormals=False)], ids=str)
def test_cuda_stochastic_equals_the_cpu_kernel_for_a_seed(fmt):
    """The CUDA and CPU kernels share the counter-based stream: one seed, one result on both."""
    if not native.available():
        pytest.skip(f"compiled CPU kernel unavailable: {native.why_unavailable()}")
    x = torch.randn(1 << 20, generator=torch.Generator().manual_seed(2)) * torch.logspace(-20, 20, 1 << 20)
    got = gpu.quantize_float_cuda(x.cuda(), fmt, "stochastic", seed=77).cpu()
    ref = native.quantize_float32(x, fmt, "stochastic", seed=77)
    same = (got.view(torch.int32) == ref.view(torch.int32)) | (got.isnan() & ref.isnan())
    assert bool(same.all())


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
@pytest.mark.parametrize("n", [1 << 20, (1 << 20) + 3, 5, 4 * 512 + 2, 4 * 256 + 1])
def test_cuda_eight_wide_kernel_equals_the_scalar_one(monkeypatch, rounding, n):
    """16-byte loads change nothing: same bits as one element per thread, the n % 4 tail included
    (met in either of a thread's two groups), and a tensor that is not 16-byte aligned takes the
    scalar kernel."""
    x = (torch.randn(n + 1, generator=torch.Generator().manual_seed(3)) * 100).cuda()
    got = gpu.quantize_float_cuda(x[:n], FP8_E4M3FN, rounding, seed=5)
    shifted = gpu.quantize_float_cuda(x[1:], FP8_E4M3FN, rounding, seed=5)  # 4-byte offset: scalar kernel
    bits = lambda t: t.view(torch.int32)  # noqa: E731  (values beyond 448 become NaN: compare bits)
    monkeypatch.setattr(gpu, "VECTOR_LOADS", False)
    assert torch.equal(bits(got), bits(gpu.quantize_float_cuda(x[:n], FP8_E4M3FN, rounding, seed=5)))
    assert torch.equal(bits(shifted), bits(gpu.quantize_float_cuda(x[1:].clone(), FP8_E4M3FN, rounding, seed=5)))
    assert n < 1 << 20 or bool(torch.isnan(got).any())  # the overflow case is in the large inputs

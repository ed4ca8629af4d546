"""Straight-through Quantizer and the LowPrecisionOptimizer (incl. the bf16 least-squares check)."""

from __future__ import annotations

import pytest
import torch

from embstab.lowprec import BF16, FP16, FixedFormat, LowPrecisionOptimizer, Quantizer, quantizer


def test_backward_contract_of_qpytorch():
    q = Quantizer(FixedFormat(5, 4), FixedFormat(5, 4))
    x = torch.linspace(-0.3, 0.3, 7, requires_grad=True)
    q(x).sum().backward()
    assert torch.all(x.grad == 0.9375)  # the ones-gradient is itself clamped to the format's max


def test_hooks_always_apply_and_clamped_gradients_can_be_zeroed():
    x = torch.tensor([0.5, 3.0], requires_grad=True)
    quantizer(FixedFormat(5, 4), None, backward_hooks=[lambda g: 2 * g])(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    x.grad = None
    y = quantizer(FixedFormat(5, 4), None, clamping_grad_zero=True)(x)
    assert y.tolist() == [0.5, 0.9375]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="clamping FixedFormat"):
        quantizer(BF16, clamping_grad_zero=True)


def test_forward_quantizes_values_and_stochastic_backward_is_seeded():
    x = torch.randn(1000, requires_grad=True)
    q = Quantizer("fp8_e4m3fn", "fp8_e5m2", backward_rounding="stochastic", generator=3)
    y = q(x)
    assert torch.equal(y, torch.as_tensor(x.detach().numpy()).to(torch.float8_e4m3fn).float())
    (y * 0.3).sum().backward()
    assert set(torch.unique(x.grad).tolist()) <= {0.25, 0.3125}


def _least_squares(update: str, lr: float, steps: int, seed: int = 0, device: str = "cpu") -> float:
    g = torch.Generator().manual_seed(seed)
    n, d = 2000, 32
    X = torch.randn(n, d, generator=g)
    w_star = 10 + 3 * torch.randn(d, generator=g)
    y = X @ w_star
    X, y, w_star = X.to(device), y.to(device), w_star.to(device)
    w = torch.nn.Parameter(torch.zeros(d, device=device))
    opt = LowPrecisionOptimizer(torch.optim.SGD([w], lr=lr), weight=BF16, update=update, generator=seed)
    for _ in range(steps):
        idx = torch.randint(0, n, (64,), generator=g)
        loss = 0.5 * ((X[idx] @ w - y[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.equal(w.detach(), w.detach().to(torch.bfloat16).float())  # weights stay bf16 values
    return float((w.detach() - w_star).norm() / w_star.norm())


def test_bf16_least_squares_nearest_stalls_stochastic_and_kahan_do_not():
    rn = _least_squares("nearest", 1e-2, 1500)
    sr = _least_squares("stochastic", 1e-2, 1500)
    kahan = _least_squares("kahan", 1e-2, 1500)
    rn_small_lr = _least_squares("nearest", 1e-3, 1500)
    assert rn >= 10 * sr and rn >= 10 * kahan, (rn, sr, kahan)
    assert sr < 1e-2 and kahan < 1e-2
    assert rn_small_lr > rn  # a smaller step is cancelled more often


def test_few_bit_stochastic_updates_stall_once_steps_fall_below_2_to_the_minus_k():
    """Hardware-like SR keeps exact SR's accuracy with enough bits and stalls like nearest with
    too few: an update smaller than 2**-K of the grid step never rounds up."""
    sr = _least_squares("stochastic", 1e-2, 1500)
    sr8 = _least_squares("stochastic:8", 1e-2, 1500)
    sr1 = _least_squares("sr:1", 1e-2, 1500)
    rn = _least_squares("nearest", 1e-2, 1500)
    assert sr8 < 2 * sr + 1e-3, (sr8, sr)
    assert sr1 > 5 * sr8, (sr1, sr8)
    assert sr1 > 0.5 * rn  # one random bit is little better than no randomness here
    with pytest.raises(ValueError, match="stochastic:K"):
        LowPrecisionOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1), update="toward_zero")


def test_state_gradient_and_memory_accounting():
    w = torch.nn.Parameter(torch.randn(64))
    opt = LowPrecisionOptimizer(torch.optim.Adam([w], lr=1e-2), weight=FP16, grad=FP16, state=BF16,
                                grad_scale=1024.0, update="kahan")
    for _ in range(3):
        opt.zero_grad()
        (w ** 2).sum().backward()
        opt.step()
    for key in ("exp_avg", "exp_avg_sq"):
        s = opt.state[w][key]
        assert torch.equal(s, s.to(torch.bfloat16).float())
    assert torch.equal(w.detach(), w.detach().half().float())
    b = opt.bytes_per_parameter()
    assert b == {"weight": 2.0, "grad": 2.0, "state": 4.0, "compensation": 2.0, "accumulator": 0.0, "total": 10.0}


def test_grad_scale_is_undone():
    def run(scale):
        w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
        opt = LowPrecisionOptimizer(torch.optim.SGD([w], lr=0.25), grad=FP16, grad_scale=scale)
        opt.zero_grad()
        (w * torch.tensor([0.5, 0.25])).sum().backward()
        opt.step()
        return w.detach()
    assert torch.equal(run(1.0), run(512.0))  # QPyTorch would have stepped 512x further


def test_native_bf16_parameters_and_accumulator():
    w = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    opt = LowPrecisionOptimizer(torch.optim.SGD([w], lr=1e-3), accumulator="fp32", update="nearest")
    for _ in range(10):
        opt.zero_grad()
        w.sum().backward()
        opt.step()
    assert w.dtype == torch.bfloat16
    assert torch.allclose(opt._acc[w], torch.full((4,), 0.99))  # the fp32 accumulator keeps the small steps
    assert torch.all(w.float() == 0.98828125)  # bf16 nearest to 0.99


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bf16_least_squares_on_cuda_through_the_kernels():
    """The same training on a GPU, where the weights are rounded by the CUDA kernels: nearest
    stalls, stochastic rounding and Kahan summation converge, and a seed gives one result."""
    from embstab.lowprec import gpu

    if not gpu.available():
        pytest.skip("the CUDA kernels need cupy")
    rn = _least_squares("nearest", 1e-2, 1500, device="cuda")
    sr = _least_squares("stochastic", 1e-2, 1500, device="cuda")
    kahan = _least_squares("kahan", 1e-2, 1500, device="cuda")
    assert rn >= 10 * sr and rn >= 10 * kahan, (rn, sr, kahan)
    assert sr < 1e-2 and kahan < 1e-2
    assert _least_squares("stochastic", 1e-2, 300, seed=4, device="cuda") == _least_squares("stochastic", 1e-2, 300,
                                                                                           seed=4, device="cuda")

"""R2D2's h and h^-1 against the closed forms of Pohlen et al. 2018, and the properties a learner relies on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import offpolicy_reference as reference
from menger.losses.value_rescaling import DEFAULT_EPS, inverse_value_rescale, value_rescale

EPSILONS = [DEFAULT_EPS, 0.0, 0.1]


def wide_range(dtype=torch.float64) -> torch.Tensor:
    """0, +-1e-8 ... +-1e8 on a log grid, and a few ordinary values: Atari returns span 1e-2 to 1e6."""
    magnitudes = torch.logspace(-8, 8, 401, dtype=torch.float64)
    values = torch.cat([-magnitudes.flip(0), torch.zeros(1, dtype=torch.float64), magnitudes])
    return torch.cat([values, torch.tensor([0.5, -1.0, 1.0, 3.0, -21.0])]).to(dtype)


@pytest.mark.parametrize("eps", EPSILONS)
def test_h_and_its_inverse_match_the_papers_closed_forms(eps):
    x = torch.tensor(np.random.default_rng(0).normal(0.0, 1.0, 200) * np.logspace(-3, 5, 200))
    np.testing.assert_allclose(value_rescale(x, eps).numpy(), reference.h(x.numpy(), eps), rtol=1e-12, atol=1e-12)
    # The printed h^-1 loses ~1e-13 absolute to cancellation in float64 itself, hence the atol.
    np.testing.assert_allclose(
        inverse_value_rescale(x, eps).numpy(), reference.h_inverse(x.numpy(), eps), rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_the_inverse_undoes_h_over_a_wide_range(eps, dtype):
    x = wide_range(dtype)
    rtol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(inverse_value_rescale(value_rescale(x, eps), eps), x, rtol=rtol, atol=rtol * 1e-3)
    if eps > 0 or dtype == torch.float64:  # at eps = 0, h^-1(1e8) = 1e16 + 2e8: beyond float32's digits
        torch.testing.assert_close(value_rescale(inverse_value_rescale(x, eps), eps), x, rtol=rtol, atol=rtol * 1e-3)


@pytest.mark.parametrize("eps", EPSILONS)
def test_h_is_odd_strictly_increasing_and_zero_at_zero(eps):
    x = wide_range().unique()  # sorted
    h = value_rescale(x, eps)
    assert (h[1:] > h[:-1]).all(), "h must be strictly increasing, or an argmax over h(Q) is not one over Q"
    torch.testing.assert_close(value_rescale(-x, eps), -h, rtol=0, atol=0)
    assert value_rescale(torch.zeros(1), eps).item() == 0.0
    assert (inverse_value_rescale(h, eps)[1:] > inverse_value_rescale(h, eps)[:-1]).all()


def test_h_compresses_large_values_and_keeps_small_ones():
    """h(x) ~ x / 2 near 0 and ~ eps x + sqrt(x) far away: a return of 1e6 becomes ~2e3."""
    assert value_rescale(torch.tensor(1e-6, dtype=torch.float64)).item() == pytest.approx(0.5e-6 + 1e-9, rel=1e-6)
    assert value_rescale(torch.tensor(1e6, dtype=torch.float64)).item() == pytest.approx(1e3 + np.sqrt(1e6 + 1) - 1)


@pytest.mark.parametrize("eps", EPSILONS)
def test_gradients_are_the_derivatives_everywhere_including_zero(eps):
    x = torch.tensor([-50.0, -1.0, 0.0, 1e-9, 2.0, 1e4], dtype=torch.float64, requires_grad=True)
    h = value_rescale(x, eps)
    (grad,) = torch.autograd.grad(h.sum(), x)
    torch.testing.assert_close(grad, 1.0 / (2.0 * torch.sqrt(x.detach().abs() + 1.0)) + eps)
    (inverse_grad,) = torch.autograd.grad(inverse_value_rescale(h, eps).sum(), h)
    torch.testing.assert_close(inverse_grad, 1.0 / grad)  # the inverse function's derivative
    assert torch.autograd.gradcheck(lambda y: inverse_value_rescale(value_rescale(y, eps), eps), (x,))


def test_float32_keeps_its_digits_where_the_printed_inverse_loses_them():
    """Near 0 the closed form as printed subtracts nearly equal float32 numbers twice; the form we use does not."""
    x64 = torch.tensor([1e-4, 1e-3, 0.05, -0.2], dtype=torch.float64)
    exact = inverse_value_rescale(x64)
    ours = inverse_value_rescale(x64.float()).double()
    printed = torch.tensor(reference.h_inverse(x64.float().numpy(), np.float32(DEFAULT_EPS)), dtype=torch.float64)
    assert ((ours - exact).abs() / exact.abs()).max() < 1e-6
    assert ((printed - exact).abs() / exact.abs()).max() > 1e-3


def test_a_negative_eps_is_refused():
    with pytest.raises(ValueError, match="eps"):
        value_rescale(torch.zeros(1), -1e-3)
    with pytest.raises(ValueError, match="eps"):
        inverse_value_rescale(torch.zeros(1), -1e-3)

"""GAE against the explicit sum of Schulman et al. 2016, and the properties the learners rely on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import losses_reference as reference
from loss_test_data import assert_close, random_unroll
from menger.losses import gae


def run_gae(unroll, lam, dtype=torch.float64):
    return gae(
        unroll.torch("rewards", dtype),
        unroll.torch("values", dtype),
        unroll.torch("bootstrap_value", dtype),
        unroll.torch("discounts", dtype),
        lam,
    )


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_matches_the_papers_sum(unroll, dtype, lam):
    advantages, returns = run_gae(unroll, lam, dtype)
    expected_advantages, expected_returns = reference.gae(
        unroll.rewards, unroll.values, unroll.bootstrap_value, unroll.discounts, lam
    )
    assert_close(advantages, expected_advantages, dtype)
    assert_close(returns, expected_returns, dtype)


def test_lambda_zero_is_the_one_step_td_error(unroll):
    advantages, _ = run_gae(unroll, lam=0.0)
    next_values = np.concatenate([unroll.values[1:], unroll.bootstrap_value[None]])
    td_error = unroll.rewards + unroll.discounts * next_values - unroll.values
    np.testing.assert_allclose(advantages.numpy(), td_error, rtol=1e-12, atol=1e-12)


def test_lambda_one_returns_are_the_n_step_returns(unroll):
    _, returns = run_gae(unroll, lam=1.0)
    expected = reference.n_step_returns(unroll.rewards, unroll.bootstrap_value, unroll.discounts)
    np.testing.assert_allclose(returns.numpy(), expected, rtol=1e-10, atol=1e-10)


def test_nothing_crosses_an_episode_end():
    unroll = random_unroll(seed=3, T=8, B=2, done_probability=0.0)
    discounts = unroll.torch("discounts")
    discounts[3, 0] = 0.0  # env 0's episode ends at step 3
    rewards, values = unroll.torch("rewards"), unroll.torch("values")
    before, _ = gae(rewards, values, unroll.torch("bootstrap_value"), discounts, 0.9)
    rewards[4:, 0] += 100.0
    values[4:, 0] -= 50.0
    after, _ = gae(rewards, values, unroll.torch("bootstrap_value"), discounts, 0.9)
    torch.testing.assert_close(after[:4, 0], before[:4, 0], rtol=0, atol=0)
    assert not torch.allclose(after[4:, 0], before[4:, 0])


def test_targets_carry_no_gradient_and_inputs_are_untouched(unroll):
    inputs = [unroll.torch(name).requires_grad_() for name in ("rewards", "values", "bootstrap_value", "discounts")]
    copies = [x.detach().clone() for x in inputs]
    advantages, returns = gae(*inputs, lam=0.95)
    assert not advantages.requires_grad and not returns.requires_grad
    for x, copy in zip(inputs, copies):
        torch.testing.assert_close(x.detach(), copy, rtol=0, atol=0)


def test_shape_errors_name_the_tensor():
    T, B = 4, 3
    with pytest.raises(ValueError, match="bootstrap_value"):
        gae(torch.zeros(T, B), torch.zeros(T, B), torch.zeros(T, B), torch.zeros(T, B), 0.95)
    with pytest.raises(ValueError, match="values"):
        gae(torch.zeros(T, B), torch.zeros(T, B + 1), torch.zeros(B), torch.zeros(T, B), 0.95)
    with pytest.raises(ValueError, match="lam"):
        gae(torch.zeros(T, B), torch.zeros(T, B), torch.zeros(B), torch.zeros(T, B), 1.5)

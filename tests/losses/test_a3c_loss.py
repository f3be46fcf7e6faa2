"""A3C's loss on n-step returns, against the NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import losses_reference as reference
from loss_test_data import TOLERANCES, random_unroll
from menger.losses import a3c_loss, gae


def learner_inputs(unroll, dtype=torch.float64):
    logp = unroll.torch("target_logp", dtype).requires_grad_()
    values = unroll.torch("values", dtype).requires_grad_()
    entropy = torch.tensor(np.random.default_rng(0).uniform(0, 2, unroll.rewards.shape), dtype=dtype,
                           requires_grad=True)
    _, returns = gae(unroll.torch("rewards", dtype), values.detach(), unroll.torch("bootstrap_value", dtype),
                     unroll.torch("discounts", dtype), 1.0)
    return logp, values, entropy, returns


def test_a3c_matches_the_reference(unroll, dtype):
    logp, values, entropy, returns = learner_inputs(unroll, dtype)
    loss, stats = a3c_loss(logp, values, entropy, returns, unroll.torch("mask", dtype), value_coef=0.7,
                           entropy_coef=0.02)
    expected = reference.a3c(unroll.target_logp, unroll.values, unroll.bootstrap_value, entropy.detach().numpy(),
                             unroll.rewards, unroll.discounts, unroll.mask, 0.7, 0.02)
    assert loss.dtype == dtype and set(stats) == {"policy_loss", "value_loss", "entropy"}
    np.testing.assert_allclose(loss.item(), expected, **TOLERANCES[dtype])


def test_a3c_gradients_treat_the_returns_as_constants():
    unroll = random_unroll(seed=11, T=6, B=3)
    logp, values, entropy, returns = learner_inputs(unroll)
    mask = unroll.torch("mask")
    loss, _ = a3c_loss(logp, values, entropy, returns, mask, value_coef=0.5, entropy_coef=0.1)
    loss.backward()
    count = mask.sum()
    advantages = returns - values.detach()
    torch.testing.assert_close(logp.grad, -advantages * mask / count)
    torch.testing.assert_close(values.grad, 0.5 * (values.detach() - returns) * mask / count)
    torch.testing.assert_close(entropy.grad, -0.1 * mask / count)


def test_a3c_masked_entries_change_nothing_even_when_not_finite():
    unroll = random_unroll(seed=12, T=5, B=4)
    logp, values, entropy, returns = learner_inputs(unroll)
    mask = unroll.torch("mask")
    loss, _ = a3c_loss(logp, values, entropy, returns, mask)
    poisoned = logp.detach().clone()
    poisoned[mask == 0] = float("nan")
    poisoned.requires_grad_()
    loss_poisoned, _ = a3c_loss(poisoned, values, entropy, returns, mask)
    loss_poisoned.backward()
    assert torch.equal(loss, loss_poisoned) and torch.isfinite(poisoned.grad).all()


def test_a3c_refuses_inputs_of_another_shape():
    unroll = random_unroll(seed=13, T=4, B=2)
    logp, values, entropy, returns = learner_inputs(unroll)
    with pytest.raises(ValueError, match="values has shape"):
        a3c_loss(logp, values[:-1], entropy, returns)

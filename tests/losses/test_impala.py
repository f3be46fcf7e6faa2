"""IMPALA and APPO losses on V-trace targets, against the NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import losses_reference as reference
from loss_test_data import TOLERANCES, random_unroll
from menger.losses import VTraceReturns, appo_loss, impala_loss, vtrace


def learner_inputs(unroll, dtype=torch.float64):
    """target_logp, values, entropy as the learner's network would give them (with gradient), and the targets."""
    target_logp = unroll.torch("target_logp", dtype).requires_grad_()
    values = unroll.torch("values", dtype).requires_grad_()
    entropy_values = np.random.default_rng(0).uniform(0, 2, unroll.rewards.shape)
    entropy = torch.tensor(entropy_values, dtype=dtype, requires_grad=True)
    targets = vtrace(
        unroll.torch("behaviour_logp", dtype), target_logp, unroll.torch("rewards", dtype), values,
        unroll.torch("bootstrap_value", dtype), unroll.torch("discounts", dtype),
    )
    return target_logp, values, entropy, targets


def test_impala_matches_the_reference(unroll, dtype):
    target_logp, values, entropy, targets = learner_inputs(unroll, dtype)
    mask = unroll.torch("mask", dtype)
    loss, stats = impala_loss(target_logp, values, entropy, targets, mask, value_coef=0.7, entropy_coef=0.02)
    vs, pg_advantages, _, _ = reference.vtrace(
        unroll.behaviour_logp, unroll.target_logp, unroll.rewards, unroll.values, unroll.bootstrap_value,
        unroll.discounts,
    )
    expected = reference.impala(
        unroll.target_logp, unroll.values, entropy.detach().numpy(), vs, pg_advantages, unroll.mask, 0.7, 0.02
    )
    assert loss.dtype == dtype and set(stats) == {"policy_loss", "value_loss", "entropy"}
    np.testing.assert_allclose(loss.item(), expected, **TOLERANCES[dtype])


def test_impala_gradients_treat_the_targets_as_constants():
    unroll = random_unroll(seed=9, T=6, B=3)
    target_logp, values, entropy, targets = learner_inputs(unroll)
    mask = unroll.torch("mask")
    loss, _ = impala_loss(target_logp, values, entropy, targets, mask, value_coef=0.5, entropy_coef=0.1)
    loss.backward()
    count = mask.sum()
    torch.testing.assert_close(target_logp.grad, -targets.pg_advantages * mask / count)
    torch.testing.assert_close(values.grad, 0.5 * (values.detach() - targets.vs) * mask / count)
    torch.testing.assert_close(entropy.grad, -0.1 * mask / count)


def test_impala_masked_entries_change_nothing():
    unroll = random_unroll(seed=10, T=5, B=4)
    target_logp, values, entropy, targets = learner_inputs(unroll)
    mask = unroll.torch("mask")
    masked = mask == 0
    assert masked.any()
    loss, _ = impala_loss(target_logp, values, entropy, targets, mask)
    poisoned_targets = VTraceReturns(*(field.masked_fill(masked, float("nan")) for field in targets))
    poisoned_inputs = [
        x.detach().masked_fill(masked, float("inf")).requires_grad_() for x in (target_logp, values, entropy)
    ]
    poisoned_loss, _ = impala_loss(*poisoned_inputs, poisoned_targets, mask)
    poisoned_loss.backward()
    torch.testing.assert_close(poisoned_loss, loss, rtol=1e-12, atol=1e-12)
    assert all(torch.isfinite(x.grad).all() and (x.grad[masked] == 0).all() for x in poisoned_inputs)


@pytest.mark.parametrize("normalize_advantages", [True, False])
def test_appo_is_ppo_on_the_unweighted_vtrace_advantage(unroll, dtype, normalize_advantages):
    target_logp, values, entropy, _ = learner_inputs(unroll, dtype)
    # clip_pg_rho above 1 makes pg_advantages carry rhos != 1, which APPO must divide out again
    targets = vtrace(
        unroll.torch("behaviour_logp", dtype), target_logp, unroll.torch("rewards", dtype), values,
        unroll.torch("bootstrap_value", dtype), unroll.torch("discounts", dtype), clip_pg_rho=3.0,
    )
    mask = unroll.torch("mask", dtype)
    loss, stats = appo_loss(
        target_logp, unroll.torch("behaviour_logp", dtype), values, entropy, targets, mask,
        clip=0.15, value_coef=0.6, entropy_coef=0.03, normalize_advantages=normalize_advantages,
    )
    vs, _, _, advantages = reference.vtrace(
        unroll.behaviour_logp, unroll.target_logp, unroll.rewards, unroll.values, unroll.bootstrap_value,
        unroll.discounts, pg_rho_bar=3.0,
    )
    expected_loss, expected_stats = reference.ppo(
        unroll.target_logp, unroll.behaviour_logp, advantages, unroll.values, None, vs, entropy.detach().numpy(),
        unroll.mask, 0.15, 0.6, 0.03, None, normalize_advantages,
    )
    tolerance = TOLERANCES[dtype] if dtype == torch.float64 else dict(rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(loss.item(), expected_loss, **tolerance)
    for name, value in expected_stats.items():
        np.testing.assert_allclose(stats[name].item(), value, **tolerance, err_msg=name)


def test_appo_survives_a_target_probability_that_underflows():
    unroll = random_unroll(seed=12, T=4, B=2)
    behaviour_logp = unroll.torch("behaviour_logp", torch.float32)
    target_logp = (behaviour_logp - 200.0).requires_grad_()  # pi/mu = e^-200 is 0 in float32
    values = unroll.torch("values", torch.float32).requires_grad_()
    targets = vtrace(
        behaviour_logp, target_logp, unroll.torch("rewards", torch.float32), values,
        unroll.torch("bootstrap_value", torch.float32), unroll.torch("discounts", torch.float32),
    )
    assert (targets.rhos == 0).all()
    loss, stats = appo_loss(target_logp, behaviour_logp, values, torch.zeros_like(values), targets)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(v) for v in stats.values())
    assert torch.isfinite(target_logp.grad).all() and torch.isfinite(values.grad).all()


def test_shapes_must_match_the_targets():
    unroll = random_unroll(seed=1, T=4, B=3)
    target_logp, values, entropy, targets = learner_inputs(unroll)
    with pytest.raises(ValueError, match="values"):
        impala_loss(target_logp, values[:-1], entropy, targets)
    with pytest.raises(ValueError, match="mask"):
        appo_loss(target_logp, target_logp.detach(), values, entropy, targets, torch.ones(3, 4))

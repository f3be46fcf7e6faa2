"""V-trace against eq. 1 of Espeholt et al. 2018 written as its explicit sum, plus the on-policy and clipping cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import losses_reference as reference
from loss_test_data import assert_close, random_unroll
from menger.losses import gae, vtrace

CLIPS = [
    dict(),
    dict(clip_rho=0.5, clip_pg_rho=2.0, clip_c=0.9),
    dict(clip_rho=math.inf, clip_pg_rho=math.inf, clip_c=math.inf),
    dict(lam=0.8),
]


def run_vtrace(unroll, dtype=torch.float64, target_logp=None, **clips):
    return vtrace(
        unroll.torch("behaviour_logp", dtype),
        unroll.torch("target_logp", dtype) if target_logp is None else target_logp.to(dtype),
        unroll.torch("rewards", dtype),
        unroll.torch("values", dtype),
        unroll.torch("bootstrap_value", dtype),
        unroll.torch("discounts", dtype),
        **clips,
    )


def run_reference(unroll, target_logp=None, clip_rho=1.0, clip_pg_rho=1.0, clip_c=1.0, lam=1.0):
    return reference.vtrace(
        unroll.behaviour_logp,
        unroll.target_logp if target_logp is None else target_logp,
        unroll.rewards,
        unroll.values,
        unroll.bootstrap_value,
        unroll.discounts,
        rho_bar=clip_rho,
        pg_rho_bar=clip_pg_rho,
        c_bar=clip_c,
        lam=lam,
    )


@pytest.mark.parametrize("clips", CLIPS, ids=["paper", "mixed", "unclipped", "lambda"])
def test_matches_the_papers_sum(unroll, dtype, clips):
    returns = run_vtrace(unroll, dtype, **clips)
    vs, pg_advantages, pg_rhos, _ = run_reference(unroll, **clips)
    assert_close(returns.vs, vs, dtype)
    assert_close(returns.pg_advantages, pg_advantages, dtype)
    assert_close(returns.rhos, pg_rhos, dtype)


def test_on_policy_is_the_n_step_return_and_gae_lambda_one(unroll):
    on_policy = unroll.torch("behaviour_logp")
    returns = run_vtrace(unroll, target_logp=on_policy)
    n_step = reference.n_step_returns(unroll.rewards, unroll.bootstrap_value, unroll.discounts)
    np.testing.assert_allclose(returns.vs.numpy(), n_step, rtol=1e-10, atol=1e-10)
    advantages, gae_returns = gae(
        unroll.torch("rewards"), unroll.torch("values"), unroll.torch("bootstrap_value"), unroll.torch("discounts"), 1.0
    )
    torch.testing.assert_close(returns.vs, gae_returns, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(returns.pg_advantages, advantages, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(returns.rhos, torch.ones_like(returns.rhos), rtol=0, atol=0)


def test_large_ratios_clipped_at_one_act_as_on_policy(unroll):
    """pi/mu >= e^3 everywhere: with every clip at 1, each rho and c is exactly 1, the on-policy case."""
    far_target = unroll.torch("behaviour_logp") + 3.0 + torch.rand(unroll.rewards.shape, dtype=torch.float64)
    clipped = run_vtrace(unroll, target_logp=far_target)
    on_policy = run_vtrace(unroll, target_logp=unroll.torch("behaviour_logp"))
    torch.testing.assert_close(clipped.vs, on_policy.vs, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(clipped.pg_advantages, on_policy.pg_advantages, rtol=1e-12, atol=1e-12)


def test_large_ratios_unclipped_follow_the_reference():
    unroll = random_unroll(seed=11, T=9, B=3)
    far_target = unroll.behaviour_logp + 4.0
    unclipped = dict(clip_rho=math.inf, clip_pg_rho=math.inf, clip_c=math.inf)
    returns = run_vtrace(unroll, target_logp=torch.tensor(far_target), **unclipped)
    vs, pg_advantages, _, _ = run_reference(unroll, target_logp=far_target, **unclipped)
    np.testing.assert_allclose(returns.vs.numpy(), vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(returns.pg_advantages.numpy(), pg_advantages, rtol=1e-10, atol=1e-10)
    on_policy = run_vtrace(unroll, target_logp=unroll.torch("behaviour_logp"))
    assert not torch.allclose(returns.vs, on_policy.vs), "unclipped ratios of e^4 must change the targets"


def test_only_the_policy_gradient_clip_moves_pg_advantages_not_vs(unroll):
    base = run_vtrace(unroll)
    wider_pg = run_vtrace(unroll, clip_pg_rho=5.0)
    torch.testing.assert_close(wider_pg.vs, base.vs, rtol=0, atol=0)
    ratios = torch.exp(unroll.torch("target_logp") - unroll.torch("behaviour_logp"))
    torch.testing.assert_close(wider_pg.pg_advantages / wider_pg.rhos, base.pg_advantages / base.rhos)
    torch.testing.assert_close(wider_pg.rhos, ratios.clamp(max=5.0))


def test_targets_carry_no_gradient_and_inputs_are_untouched(unroll):
    names = ("behaviour_logp", "target_logp", "rewards", "values", "bootstrap_value", "discounts")
    inputs = [unroll.torch(name).requires_grad_() for name in names]
    copies = [x.detach().clone() for x in inputs]
    returns = vtrace(*inputs)
    assert not any(field.requires_grad for field in returns)
    for x, copy in zip(inputs, copies):
        torch.testing.assert_close(x.detach(), copy, rtol=0, atol=0)


def test_bad_arguments_say_what_to_fix():
    T, B = 3, 2
    zeros = [torch.zeros(T, B)] * 4
    with pytest.raises(ValueError, match="clip_rho"):
        vtrace(*zeros, torch.zeros(B), torch.zeros(T, B), clip_rho=0.0)
    with pytest.raises(ValueError, match="target_logp"):
        vtrace(torch.zeros(T, B), torch.zeros(T + 1, B), *zeros[:2], torch.zeros(B), torch.zeros(T, B))

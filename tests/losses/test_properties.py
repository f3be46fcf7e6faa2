"""Edge cases every loss must survive: empty masks, one sample, random shapes and masks (fixed seeds)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from loss_test_data import random_unroll
from menger.losses import appo_loss, gae, impala_loss, masked_mean, ppo_loss, vtrace


def losses_of(unroll, mask, dtype=torch.float64):
    """Each loss of the package on one unroll, with gradients into its network outputs."""
    target_logp = unroll.torch("target_logp", dtype).requires_grad_()
    values = unroll.torch("values", dtype).requires_grad_()
    entropy = torch.full_like(values, 0.5).requires_grad_()
    behaviour_logp = unroll.torch("behaviour_logp", dtype)
    rewards, bootstrap = unroll.torch("rewards", dtype), unroll.torch("bootstrap_value", dtype)
    discounts = unroll.torch("discounts", dtype)
    targets = vtrace(behaviour_logp, target_logp, rewards, values, bootstrap, discounts)
    advantages, returns = gae(rewards, values, bootstrap, discounts, 0.95)
    losses = {
        "ppo": ppo_loss(target_logp, behaviour_logp, advantages, values, values.detach(), returns, entropy, mask,
                        value_clip=0.2, entropy_coef=0.01),
        "impala": impala_loss(target_logp, values, entropy, targets, mask),
        "appo": appo_loss(target_logp, behaviour_logp, values, entropy, targets, mask),
    }
    return losses, (target_logp, values, entropy)


def test_masked_mean_of_an_empty_mask_is_zero_with_zero_gradient():
    x = torch.randn(3, 4, requires_grad=True)
    mean = masked_mean(x, torch.zeros(3, 4))
    mean.backward()
    assert mean.item() == 0.0 and (x.grad == 0).all()
    assert masked_mean(torch.zeros(0)).item() == 0.0


def test_masked_mean_ignores_masked_values_and_accepts_bool_masks():
    x = torch.tensor([1.0, float("nan"), 3.0])
    torch.testing.assert_close(masked_mean(x, torch.tensor([1.0, 0.0, 1.0])), torch.tensor(2.0))
    torch.testing.assert_close(masked_mean(x, torch.tensor([True, False, True])), torch.tensor(2.0))
    with pytest.raises(ValueError, match="mask"):
        masked_mean(x, torch.ones(2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_all_masked_batch_gives_zero_loss_and_zero_gradient(dtype):
    unroll = random_unroll(seed=5, T=6, B=3)
    mask = torch.zeros(6, 3, dtype=dtype)
    losses, outputs = losses_of(unroll, mask, dtype)
    for name, (loss, stats) in losses.items():
        assert loss.item() == 0.0, name
        assert all(value.item() == 0.0 for value in stats.values()), name
        for output in outputs:
            output.grad = None
        loss.backward()
        assert all(output.grad is None or (output.grad == 0).all() for output in outputs), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_single_sample_is_finite(dtype):
    unroll = random_unroll(seed=6, T=1, B=1)
    losses, outputs = losses_of(unroll, torch.ones(1, 1, dtype=dtype), dtype)
    for name, (loss, stats) in losses.items():
        loss.backward()
        assert torch.isfinite(loss) and all(torch.isfinite(v) for v in stats.values()), name
    assert all(torch.isfinite(output.grad).all() for output in outputs)


def test_tiny_values_stay_finite():
    """Rewards, values and log-ratio differences near float32's resolution: normalisation divides by ~0."""
    shape = (4, 2)
    tiny = torch.full(shape, 1e-30)
    new_logp = torch.full(shape, -1e-7, requires_grad=True)
    loss, stats = ppo_loss(new_logp, torch.zeros(shape), tiny, tiny.clone().requires_grad_(), tiny, tiny, tiny)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(v) for v in stats.values())
    assert torch.isfinite(new_logp.grad).all()


@pytest.mark.parametrize("seed", range(12))
def test_random_shapes_and_masks_give_finite_losses(seed):
    rng = np.random.default_rng(seed)
    T, B = int(rng.integers(1, 12)), int(rng.integers(1, 6))
    unroll = random_unroll(seed=seed, T=T, B=B, done_probability=float(rng.uniform(0, 1)))
    mask = torch.tensor(rng.random((T, B)) < rng.uniform(0, 1), dtype=torch.float32)
    losses, outputs = losses_of(unroll, mask, torch.float32)
    total = sum(loss for loss, _ in losses.values())
    total.backward()
    assert torch.isfinite(total)
    assert all(torch.isfinite(value) for _, stats in losses.values() for value in stats.values())
    assert all(torch.isfinite(output.grad).all() for output in outputs)

"""PPO's loss against the formulas of Schulman et al. 2017, and the behaviour of clipping, masks and normalisation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import losses_reference as reference
from loss_test_data import TOLERANCES
from menger.losses import ppo_loss

INPUTS = ("new_logp", "old_logp", "advantages", "new_values", "old_values", "returns", "entropy")
DIFFERENTIABLE = ("new_logp", "new_values", "entropy")


def random_batch(seed: int, shape: tuple[int, ...], dtype=torch.float64) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    old_logp = -rng.exponential(1.0, shape)
    old_values = rng.normal(0.0, 1.0, shape)
    arrays = dict(
        new_logp=old_logp + rng.normal(0.0, 0.3, shape),
        old_logp=old_logp,
        advantages=rng.normal(0.5, 2.0, shape),
        new_values=old_values + rng.normal(0.0, 0.5, shape),
        old_values=old_values,
        returns=rng.normal(0.0, 1.5, shape),
        entropy=rng.uniform(0.0, 2.0, shape),
        mask=(rng.random(shape) > 0.3).astype(np.float64),
    )
    batch = {name: torch.tensor(array, dtype=dtype) for name, array in arrays.items()}
    for name in DIFFERENTIABLE:
        batch[name].requires_grad_()
    return batch


def call(batch, **options):
    return ppo_loss(*(batch[name] for name in INPUTS), batch["mask"], **options)


def call_reference(batch, clip=0.2, value_coef=0.5, entropy_coef=0.0, value_clip=None, normalize_advantages=True):
    arrays = {name: tensor.detach().double().numpy() for name, tensor in batch.items()}
    return reference.ppo(
        *(arrays[name] for name in ("new_logp", "old_logp", "advantages", "new_values", "old_values", "returns")),
        arrays["entropy"], arrays["mask"], clip, value_coef, entropy_coef, value_clip, normalize_advantages,
    )


OPTIONS = [
    dict(),
    dict(clip=0.1, value_coef=1.0, entropy_coef=0.01, value_clip=0.2),
    dict(normalize_advantages=False, entropy_coef=0.05),
]


@pytest.mark.parametrize("shape", [(1,), (37,), (6, 5)], ids=["N1", "N37", "T6xB5"])
@pytest.mark.parametrize("options", OPTIONS, ids=["defaults", "value_clip", "raw_advantages"])
def test_matches_the_papers_formulas(shape, options, dtype):
    batch = random_batch(seed=sum(shape), shape=shape, dtype=dtype)
    batch["mask"].view(-1)[0] = 1.0
    loss, stats = call(batch, **options)
    expected_loss, expected_stats = call_reference(batch, **options)
    assert loss.dtype == dtype
    np.testing.assert_allclose(loss.item(), expected_loss, **TOLERANCES[dtype])
    for name, value in expected_stats.items():
        np.testing.assert_allclose(stats[name].item(), value, **TOLERANCES[dtype], err_msg=name)


def test_without_a_mask_every_entry_counts():
    batch = random_batch(seed=5, shape=(4, 3))
    loss_without, _ = ppo_loss(*(batch[name] for name in INPUTS))
    batch["mask"] = torch.ones(4, 3, dtype=torch.float64)
    loss_with_ones, _ = call(batch)
    torch.testing.assert_close(loss_without, loss_with_ones)


def test_clipped_samples_get_exactly_zero_policy_gradient():
    old_logp = torch.zeros(4, dtype=torch.float64)
    # ratios 1.5 (A > 0: clipped), 0.5 (A < 0: clipped), 1.5 (A < 0: not clipped), 1.05 (inside the region)
    new_logp = torch.log(torch.tensor([1.5, 0.5, 1.5, 1.05], dtype=torch.float64)).requires_grad_()
    advantages = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    zeros = torch.zeros(4, dtype=torch.float64)
    loss, stats = ppo_loss(new_logp, old_logp, advantages, zeros, zeros, zeros, zeros, normalize_advantages=False)
    loss.backward()
    assert new_logp.grad[0] == 0 and new_logp.grad[1] == 0
    # d/dlogp of -ratio * A is -ratio * A, over N = 4 samples
    torch.testing.assert_close(new_logp.grad[2:], torch.tensor([1.5 / 4, -1.05 / 4], dtype=torch.float64))
    assert stats["clip_fraction"].item() == pytest.approx(3 / 4)


def test_value_clipping_takes_the_larger_error_and_stops_its_gradient():
    old_values = torch.tensor([0.0, 0.0], dtype=torch.float64)
    new_values = torch.tensor([1.0, 0.1], dtype=torch.float64, requires_grad=True)
    returns = torch.tensor([2.0, 2.0], dtype=torch.float64)
    zeros = torch.zeros(2, dtype=torch.float64)
    loss, stats = ppo_loss(
        zeros, zeros, zeros, new_values, old_values, returns, zeros, value_coef=1.0, value_clip=0.2,
        normalize_advantages=False,
    )
    loss.backward()
    # sample 0: V clipped to 0.2 has error 0.5 * 1.8^2 > 0.5 * 1^2, and no gradient; sample 1 is inside the clip
    expected = (0.5 * 1.8**2 + 0.5 * 1.9**2) / 2
    assert stats["value_loss"].item() == pytest.approx(expected)
    torch.testing.assert_close(new_values.grad, torch.tensor([0.0, (0.1 - 2.0) / 2], dtype=torch.float64))


def test_value_clip_without_old_values_is_refused():
    x = torch.zeros(3)
    with pytest.raises(ValueError, match="old_values"):
        ppo_loss(x, x, x, x, None, x, x, value_clip=0.2)


@pytest.mark.parametrize("options", OPTIONS, ids=["defaults", "value_clip", "raw_advantages"])
def test_masked_entries_change_nothing_even_when_not_finite(options):
    batch = random_batch(seed=8, shape=(5, 4))
    loss, stats = call(batch, **options)
    loss.backward()
    grads = {name: batch[name].grad.clone() for name in DIFFERENTIABLE}

    poisoned = random_batch(seed=8, shape=(5, 4))
    masked = poisoned["mask"] == 0
    assert masked.any() and not masked.all()
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for index, name in enumerate(INPUTS):
            junk = [np.nan, np.inf, -np.inf, 1e30][index % 4]
            poisoned[name][masked] = torch.tensor(rng.normal(0, 50, int(masked.sum())) + junk)
    poisoned_loss, poisoned_stats = call(poisoned, **options)
    poisoned_loss.backward()

    torch.testing.assert_close(poisoned_loss, loss, rtol=1e-12, atol=1e-12)
    for name in stats:
        torch.testing.assert_close(poisoned_stats[name], stats[name], rtol=1e-12, atol=1e-12)
    for name in DIFFERENTIABLE:
        torch.testing.assert_close(poisoned[name].grad, grads[name], rtol=1e-12, atol=1e-12)
        assert (poisoned[name].grad[masked] == 0).all()


def test_advantage_normalisation_uses_only_the_real_entries():
    batch = random_batch(seed=13, shape=(40,))
    real = batch["mask"] != 0
    with torch.no_grad():
        batch["advantages"][~real] = 1e6  # would dominate the mean and std if they were counted
    normalised, _ = call(batch)

    real_advantages = batch["advantages"][real]
    by_hand = batch["advantages"].clone()
    by_hand[real] = (real_advantages - real_advantages.mean()) / (real_advantages.std(unbiased=False) + 1e-8)
    batch["advantages"] = by_hand
    prenormalised, _ = call(batch, normalize_advantages=False)
    torch.testing.assert_close(normalised, prenormalised, rtol=1e-12, atol=1e-12)


def test_stats_are_detached_scalars_and_kl_is_zero_on_policy():
    batch = random_batch(seed=2, shape=(3, 3))
    with torch.no_grad():
        batch["new_logp"].copy_(batch["old_logp"])
    _, stats = call(batch)
    assert set(stats) == {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"}
    assert all(value.shape == () and not value.requires_grad for value in stats.values())
    assert stats["approx_kl"].item() == 0.0 and stats["clip_fraction"].item() == 0.0


def test_gradients_match_finite_differences():
    batch = random_batch(seed=21, shape=(3, 2))
    others = {name: batch[name].detach() for name in INPUTS + ("mask",) if name not in DIFFERENTIABLE}

    def loss_of(new_logp, new_values, entropy):
        inputs = dict(others, new_logp=new_logp, new_values=new_values, entropy=entropy)
        return call(inputs, value_clip=0.3, entropy_coef=0.1)[0]

    assert torch.autograd.gradcheck(loss_of, tuple(batch[name] for name in DIFFERENTIABLE))


def test_inputs_are_untouched():
    batch = random_batch(seed=4, shape=(6,))
    copies = {name: tensor.detach().clone() for name, tensor in batch.items()}
    call(batch, value_clip=0.1)[0].backward()
    for name, tensor in batch.items():
        torch.testing.assert_close(tensor.detach(), copies[name], rtol=0, atol=0)


def test_mismatched_shapes_are_named():
    batch = random_batch(seed=1, shape=(4, 3))
    batch["returns"] = torch.zeros(12, dtype=torch.float64)
    with pytest.raises(ValueError, match="returns"):
        call(batch)


def test_no_gradient_flows_into_the_data():
    """Advantages and returns are often computed from the same network; they must act as constants."""
    batch = random_batch(seed=17, shape=(4, 2))
    for name in ("old_logp", "advantages", "old_values", "returns"):
        batch[name].requires_grad_()
    call(batch, value_clip=0.2)[0].backward()
    for name in ("old_logp", "advantages", "old_values", "returns"):
        assert batch[name].grad is None, f"{name} received a gradient"
    assert all(batch[name].grad is not None for name in DIFFERENTIABLE)

"""SAC's critic, actor and temperature losses and the squashed Gaussian against offpolicy_reference, and where
their gradients may and may not go."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import offpolicy_reference as reference
from loss_test_data import GAMMA, TOLERANCES, assert_close
from menger.losses.sac import (
    sac_actor_loss,
    sac_critic_loss,
    sac_critic_targets,
    sac_temperature_loss,
    squash,
    squashed_gaussian_logp,
)

CRITIC_INPUTS = ("q1", "q2", "rewards", "discounts", "next_q1_target", "next_q2_target", "next_logp")


def random_sac_batch(seed: int, B: int = 24, dtype=torch.float64) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    arrays = dict(
        q1=rng.normal(0.0, 2.0, B),
        q2=rng.normal(0.0, 2.0, B),
        rewards=rng.normal(0.0, 1.0, B),
        discounts=GAMMA * (rng.random(B) > 0.2),
        next_q1_target=rng.normal(0.0, 2.0, B),
        next_q2_target=rng.normal(0.0, 2.0, B),
        next_logp=rng.normal(-1.0, 1.0, B),
        q1_pi=rng.normal(0.0, 2.0, B),
        q2_pi=rng.normal(0.0, 2.0, B),
        logp_pi=rng.normal(-1.0, 1.0, B),
        weights=rng.uniform(0.1, 1.0, B),
        mask=(rng.random(B) > 0.25).astype(np.float64),
    )
    arrays["mask"][0] = 1.0
    batch = {name: torch.tensor(array, dtype=dtype) for name, array in arrays.items()}
    for name in ("q1", "q2", "q1_pi", "q2_pi", "logp_pi"):
        batch[name].requires_grad_()
    return batch, arrays


def call_critic(batch, alpha, **extra):
    return sac_critic_loss(*(batch[name] for name in CRITIC_INPUTS), alpha, batch["weights"], batch["mask"], **extra)


# ----- critic --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.0, 0.2, torch.tensor(1.3)], ids=["alpha0", "alpha0.2", "alpha_tensor"])
def test_critic_loss_matches_the_soft_bellman_backup(dtype, alpha):
    batch, arrays = random_sac_batch(seed=1, dtype=dtype)
    loss, stats = call_critic(batch, alpha)
    expected_loss, expected_targets, expected_stats = reference.sac_critic(
        *(arrays[name] for name in CRITIC_INPUTS), float(alpha), arrays["weights"], arrays["mask"]
    )
    assert loss.dtype == dtype
    np.testing.assert_allclose(loss.item(), expected_loss, **TOLERANCES[dtype])
    for name, value in expected_stats.items():
        np.testing.assert_allclose(stats[name].item(), value, **TOLERANCES[dtype], err_msg=name)
    targets = sac_critic_targets(*(batch[name] for name in CRITIC_INPUTS[2:]), alpha)
    assert_close(targets, expected_targets, dtype)


def test_critic_targets_by_hand():
    """min(3, 1) - 0.5 * (-2) = 2 for the first item; the second item's episode ended, so y = r exactly."""
    targets = sac_critic_targets(
        torch.tensor([1.0, 4.0]), torch.tensor([0.9, 0.0]), torch.tensor([3.0, torch.inf]),
        torch.tensor([1.0, torch.nan]), torch.tensor([-2.0, 0.0]), 0.5,
    )
    torch.testing.assert_close(targets, torch.tensor([1.0 + 0.9 * 2.0, 4.0]))


def test_the_reference_detects_a_target_from_one_critic_or_the_wrong_sign():
    _, arrays = random_sac_batch(seed=2)
    r, gamma, q1_next, q2_next, logp_next = (arrays[name] for name in CRITIC_INPUTS[2:])
    _, expected, _ = reference.sac_critic(*(arrays[name] for name in CRITIC_INPUTS), 0.2, arrays["weights"],
                                          arrays["mask"])
    one_critic = r + gamma * (q1_next - 0.2 * logp_next)
    entropy_sign_flipped = r + gamma * (np.minimum(q1_next, q2_next) + 0.2 * logp_next)
    for wrong in (one_critic, entropy_sign_flipped):
        assert not np.allclose(wrong, expected, atol=1e-3)


def test_critic_targets_carry_no_gradient():
    batch, _ = random_sac_batch(seed=3)
    for name in CRITIC_INPUTS[2:] + ("weights",):
        batch[name].requires_grad_()
    log_alpha = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    loss, _ = call_critic(batch, log_alpha.exp())
    loss.backward()
    assert log_alpha.grad is None
    for name in CRITIC_INPUTS[2:] + ("weights",):
        assert batch[name].grad is None, f"{name} received a gradient"
    targets = sac_critic_targets(*(batch[name] for name in CRITIC_INPUTS[2:]), math.exp(-1.0))
    real = batch["mask"] != 0
    count = real.sum()
    for name in ("q1", "q2"):  # d/dQ of w 0.5 (Q - y)^2 over the N real items
        expected = torch.where(real, batch["weights"] * (batch[name] - targets) / count, torch.zeros_like(targets))
        torch.testing.assert_close(batch[name].grad, expected.detach())


def test_critic_loss_gradients_match_finite_differences():
    batch, _ = random_sac_batch(seed=4, B=5)

    def loss_of(q1, q2):
        return call_critic(dict(batch, q1=q1, q2=q2), 0.3)[0]

    assert torch.autograd.gradcheck(loss_of, (batch["q1"], batch["q2"]))


def test_masked_items_change_nothing_even_when_not_finite():
    batch, _ = random_sac_batch(seed=5)
    loss, stats = call_critic(batch, 0.2)
    loss.backward()
    poisoned, _ = random_sac_batch(seed=5)
    masked = poisoned["mask"] == 0
    assert masked.any()
    with torch.no_grad():
        for index, name in enumerate(CRITIC_INPUTS + ("weights",)):
            poisoned[name][masked] = [torch.nan, torch.inf, -torch.inf][index % 3]
    poisoned_loss, poisoned_stats = call_critic(poisoned, 0.2)
    poisoned_loss.backward()
    torch.testing.assert_close(poisoned_loss, loss, rtol=0, atol=0)
    for name in ("q1", "q2"):
        torch.testing.assert_close(poisoned[name].grad, batch[name].grad, rtol=0, atol=0)
    for name in stats:
        torch.testing.assert_close(poisoned_stats[name], stats[name], rtol=0, atol=0)


def test_critic_arguments_are_checked():
    batch, _ = random_sac_batch(seed=6, B=4)
    with pytest.raises(ValueError, match="next_logp"):
        call_critic(dict(batch, next_logp=torch.zeros(5, dtype=torch.float64)), 0.2)
    with pytest.raises(ValueError, match="alpha"):
        call_critic(batch, -0.1)


# ----- actor ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.05, 1.0])
def test_actor_loss_matches_eq_12(dtype, alpha):
    batch, arrays = random_sac_batch(seed=7, dtype=dtype)
    loss, stats = sac_actor_loss(batch["q1_pi"], batch["q2_pi"], batch["logp_pi"], alpha, batch["mask"])
    expected_loss, expected_stats = reference.sac_actor(arrays["q1_pi"], arrays["q2_pi"], arrays["logp_pi"], alpha,
                                                        arrays["mask"])
    np.testing.assert_allclose(loss.item(), expected_loss, **TOLERANCES[dtype])
    for name, value in expected_stats.items():
        np.testing.assert_allclose(stats[name].item(), value, **TOLERANCES[dtype], err_msg=name)


def test_the_actor_gradient_goes_through_the_smaller_critic_and_the_log_prob_only():
    q1_pi = torch.tensor([1.0, 5.0], dtype=torch.float64, requires_grad=True)
    q2_pi = torch.tensor([2.0, 3.0], dtype=torch.float64, requires_grad=True)
    logp_pi = torch.tensor([-1.0, -2.0], dtype=torch.float64, requires_grad=True)
    log_alpha = torch.tensor(math.log(0.5), dtype=torch.float64, requires_grad=True)
    loss, _ = sac_actor_loss(q1_pi, q2_pi, logp_pi, log_alpha.exp())
    loss.backward()
    torch.testing.assert_close(q1_pi.grad, torch.tensor([-0.5, 0.0], dtype=torch.float64))
    torch.testing.assert_close(q2_pi.grad, torch.tensor([0.0, -0.5], dtype=torch.float64))
    torch.testing.assert_close(logp_pi.grad, torch.tensor([0.25, 0.25], dtype=torch.float64))
    assert log_alpha.grad is None


class Critic(torch.nn.Module):
    def __init__(self, obs_dim: int, action_dim: int):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(obs_dim + action_dim, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))

    def forward(self, obs, action):
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)


def test_one_sac_step_sends_each_loss_to_its_own_parameters():
    """Critic targets from target critics and the actor's next action: the critic loss reaches neither. The actor
    loss reaches the actor (through the reparameterised action) and never the target critics or log_alpha."""
    torch.manual_seed(0)
    B, obs_dim, action_dim = 6, 3, 2
    low, high = torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 4.0])
    actor = torch.nn.Linear(obs_dim, 2 * action_dim)
    critics = [Critic(obs_dim, action_dim) for _ in range(2)]
    target_critics = [Critic(obs_dim, action_dim) for _ in range(2)]
    log_alpha = torch.zeros((), requires_grad=True)
    obs, next_obs, actions = torch.randn(B, obs_dim), torch.randn(B, obs_dim), torch.rand(B, action_dim)

    def sample(o):
        mean, log_std = actor(o).chunk(2, dim=-1)
        u = mean + log_std.exp() * torch.randn_like(mean)
        return squash(u, low, high), squashed_gaussian_logp(u, mean, log_std, low, high)

    def grads(modules):
        return [p.grad for m in modules for p in m.parameters()]

    next_actions, next_logp = sample(next_obs)  # deliberately with a graph: the loss must cut it
    next_q1, next_q2 = (critic(next_obs, next_actions) for critic in target_critics)
    rewards, discounts = torch.randn(B), torch.full((B,), 0.99)
    critic_loss, _ = sac_critic_loss(critics[0](obs, actions), critics[1](obs, actions), rewards, discounts,
                                     next_q1, next_q2, next_logp, log_alpha.exp())
    critic_loss.backward()
    assert all(g is not None for g in grads(critics))
    assert all(g is None for g in grads(target_critics + [actor])) and log_alpha.grad is None

    for critic in critics:
        critic.zero_grad(set_to_none=True)
    pi_actions, logp_pi = sample(obs)
    actor_loss, _ = sac_actor_loss(critics[0](obs, pi_actions), critics[1](obs, pi_actions), logp_pi, log_alpha.exp())
    actor_loss.backward()
    assert all(g is not None and g.abs().sum() > 0 for g in grads([actor]))
    assert all(g is None for g in grads(target_critics)) and log_alpha.grad is None

    actor.zero_grad(set_to_none=True)
    temperature_loss, _ = sac_temperature_loss(log_alpha, logp_pi, target_entropy=-float(action_dim))
    temperature_loss.backward()
    assert log_alpha.grad is not None and all(g is None for g in grads([actor]))


# ----- temperature ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("log_alpha", [-2.0, 0.0, 0.7])
def test_temperature_loss_matches_the_reference(dtype, log_alpha):
    batch, arrays = random_sac_batch(seed=8, dtype=dtype)
    loss, stats = sac_temperature_loss(torch.tensor(log_alpha, dtype=dtype), batch["logp_pi"], -3.0, batch["mask"])
    expected_loss, expected_stats = reference.sac_temperature(log_alpha, arrays["logp_pi"], -3.0, arrays["mask"])
    np.testing.assert_allclose(loss.item(), expected_loss, **TOLERANCES[dtype])
    for name, value in expected_stats.items():
        np.testing.assert_allclose(stats[name].item(), value, **TOLERANCES[dtype], err_msg=name)


@pytest.mark.parametrize("entropy, alpha_grows", [(-5.0, True), (1.0, False)], ids=["too_certain", "too_random"])
def test_alpha_grows_while_the_entropy_is_below_its_target(entropy, alpha_grows):
    log_alpha = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    logp_pi = torch.full((10,), -entropy, dtype=torch.float64, requires_grad=True)
    loss, stats = sac_temperature_loss(log_alpha, logp_pi, target_entropy=-2.0)
    loss.backward()
    assert stats["entropy"].item() == pytest.approx(entropy)
    assert (log_alpha.grad.item() < 0) == alpha_grows  # gradient descent moves log_alpha against the gradient
    torch.testing.assert_close(log_alpha.grad, -(torch.tensor(-entropy - 2.0, dtype=torch.float64)))
    assert logp_pi.grad is None


def test_temperature_arguments_are_checked():
    with pytest.raises(ValueError, match="log_alpha"):
        sac_temperature_loss(torch.zeros(1), torch.zeros(3), -1.0)
    with pytest.raises(ValueError, match="mask"):
        sac_temperature_loss(torch.zeros(()), torch.zeros(3), -1.0, torch.ones(4))


# ----- the squashed Gaussian -----------------------------------------------------------------------------


def random_gaussian(seed: int, B: int = 9, D: int = 3, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    mean, log_std = rng.normal(0.0, 1.0, (B, D)), rng.uniform(-1.5, 0.5, (B, D))
    u = mean + np.exp(log_std) * rng.normal(0.0, 1.0, (B, D))
    return u, mean, log_std


BOUNDS = [(-1.0, 1.0), (np.array([-2.0, 0.0, -0.5]), np.array([3.0, 10.0, 0.5]))]


@pytest.mark.parametrize("low, high", BOUNDS, ids=["unit", "box"])
def test_squashed_logp_matches_eq_21(dtype, low, high):
    u, mean, log_std = random_gaussian(seed=9)
    bounds = [torch.as_tensor(b, dtype=dtype) for b in (low, high)]
    logp = squashed_gaussian_logp(*(torch.tensor(x, dtype=dtype) for x in (u, mean, log_std)), *bounds)
    assert logp.shape == (9,)
    assert_close(logp, reference.squashed_gaussian_logp(u, mean, log_std, low, high), dtype)


@pytest.mark.parametrize("low, high", BOUNDS, ids=["unit", "box"])
def test_squashed_logp_is_the_change_of_variables_of_the_squash(low, high):
    """log pi(a) = log N(u) - log |det da/du|, with the Jacobian of squash taken by autograd."""
    u, mean, log_std = (torch.tensor(x) for x in random_gaussian(seed=10))
    low, high = torch.as_tensor(low, dtype=torch.float64), torch.as_tensor(high, dtype=torch.float64)
    jacobian = torch.autograd.functional.jacobian(lambda v: squash(v, low, high).sum(0), u)  # [D, B, D]
    jacobian_diagonal = jacobian.diagonal(dim1=0, dim2=2)  # da_bi / du_bi, [B, D]
    gaussian = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).sum(-1)
    expected = gaussian - jacobian_diagonal.abs().log().sum(-1)
    torch.testing.assert_close(squashed_gaussian_logp(u, mean, log_std, low, high), expected)


@pytest.mark.parametrize("mean, std", [(0.3, 0.8), (-0.5, 1.0)])
def test_the_density_on_the_box_integrates_to_one(mean, std):
    low, high = -2.0, 3.0
    a = torch.linspace(low, high, 200_001, dtype=torch.float64)[1:-1]
    u = torch.atanh(2.0 * (a - low) / (high - low) - 1.0)
    full = lambda x: torch.full_like(u, x)  # noqa: E731
    density = squashed_gaussian_logp(u[:, None], full(mean)[:, None], full(math.log(std))[:, None], low, high).exp()
    assert torch.trapezoid(density, a).item() == pytest.approx(1.0, abs=1e-4)
    without_tanh_correction = density * (1.0 - torch.tanh(u) ** 2)  # a mutant that forgets log(1 - tanh^2)
    assert abs(torch.trapezoid(without_tanh_correction, a).item() - 1.0) > 0.1
    without_box_correction = density * (high - low) / 2.0  # a mutant that forgets the affine rescale
    assert abs(torch.trapezoid(without_box_correction, a).item() - 1.0) > 0.1


def test_the_stable_tanh_correction_stays_finite_where_the_direct_one_is_infinite():
    u = torch.tensor([[-60.0], [-20.0], [0.0], [12.0], [60.0]])
    zeros = torch.zeros_like(u)
    logp32 = squashed_gaussian_logp(u, zeros, zeros)
    direct = torch.log(1.0 - torch.tanh(u) ** 2)
    assert torch.isinf(direct[[0, 1, 3, 4]]).all(), "float32 tanh rounds to +-1 here"
    assert torch.isfinite(logp32).all()
    # -log(1 - tanh(u)^2) -> 2 |u| - 2 log 2 for large |u|, exactly what float64 gives
    logp64 = squashed_gaussian_logp(u.double(), zeros.double(), zeros.double())
    torch.testing.assert_close(logp32.double(), logp64, rtol=1e-6, atol=1e-4)
    u.requires_grad_()
    squashed_gaussian_logp(u, zeros, zeros).sum().backward()
    assert torch.isfinite(u.grad).all()


def test_squashed_logp_gradients_match_finite_differences():
    tensors = tuple(torch.tensor(x).requires_grad_() for x in random_gaussian(seed=11, B=3, D=2))
    assert torch.autograd.gradcheck(lambda u, m, s: squashed_gaussian_logp(u, m, s, -2.0, 5.0), tensors)


def test_squash_maps_onto_the_box():
    low, high = torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 10.0])
    a = squash(torch.tensor([[-100.0, -100.0], [0.0, 0.0], [100.0, 100.0]]), low, high)
    torch.testing.assert_close(a, torch.tensor([[-1.0, 0.0], [0.0, 5.0], [1.0, 10.0]]))
    with pytest.raises(ValueError, match="high > low"):
        squash(torch.zeros(2), torch.tensor([0.0, 1.0]), torch.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="log_std"):
        squashed_gaussian_logp(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3))

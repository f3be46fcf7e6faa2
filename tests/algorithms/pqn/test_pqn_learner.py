"""PQN's learner on hand-made batches: one update's bookkeeping, invalid steps, and a fit of the Q(lambda)
values of a two-state chain."""

from __future__ import annotations

import math
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from menger.algorithms.pqn.learning import PQNLearner
from menger.algorithms.pqn.network import PQNNetwork, linear_epsilon

T, B = 8, 4
OBS, ACTIONS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2)


def config(**overrides):
    fields = dict(lr=3e-3, lr_schedule="constant", adam_eps=1e-8, gamma=0.9, lam=0.5, epochs=2, minibatches=2,
                  max_grad_norm=10.0, loss="mse", epsilon_start=1.0, epsilon_end=0.05)
    return SimpleNamespace(**dict(fields, **overrides))


def make_learner(seed=0, total_frames=None, **overrides):
    torch.manual_seed(seed)
    net = PQNNetwork(OBS, ACTIONS, hidden=(32, 32))
    return PQNLearner(net, config(**overrides), device=torch.device("cpu"), total_frames=total_frames, amp=False,
                      seed=seed, epsilon_frames=1000)


def random_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(T + 1, B, 4, generator=g), "actions": torch.randint(0, 2, (T, B), generator=g),
            "rewards": torch.randn(T, B, generator=g), "dones": (torch.rand(T, B, generator=g) < 0.2).float(),
            "valid": torch.ones(T, B), "logp": torch.zeros(T, B)}


def snapshot(learner):
    return [p.detach().clone() for p in learner.params]


def test_one_update_trains_and_sets_the_schedules_epsilon():
    learner = make_learner()
    assert float(learner.policy.epsilon) == 1.0
    assert all(p is not learner.policy.epsilon for p in learner.params)  # not trained
    before = snapshot(learner)
    stats = learner.update(random_batch(), frames=500)
    assert set(stats) == {"loss", "q_mean", "target_mean", "grad_norm", "lr", "epsilon"}
    assert all(math.isfinite(v) for v in stats.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, snapshot(learner)))
    assert stats["epsilon"] == pytest.approx(linear_epsilon(500, 1.0, 0.05, 1000))
    assert float(learner.policy.epsilon) == pytest.approx(stats["epsilon"])
    assert learner.updates == 1


def test_invalid_steps_are_not_regressed():
    learner = make_learner()
    batch = dict(random_batch(), valid=torch.zeros(T, B))
    before = snapshot(learner)
    stats = learner.update(batch, frames=0)
    assert all(math.isfinite(v) for v in stats.values())
    assert all(torch.equal(a, b) for a, b in zip(before, snapshot(learner)))


def test_updates_are_deterministic():
    first, second = make_learner(seed=3), make_learner(seed=3)
    for frames in (0, 100, 200):
        first.update(random_batch(frames), frames)
        second.update(random_batch(frames), frames)
    assert all(torch.equal(a, b) for a, b in zip(snapshot(first), snapshot(second)))


def chain_batch():
    """Episodes of two steps, s0 then s1, back to back in every env. Any action moves s0 to s1 with reward 0; at
    s1 action 0 earns 1, action 1 earns 0, and the episode ends. Env b takes action b // 2 at s0 and b % 2 at s1,
    so each action at s0 is followed by each action at s1 equally often."""
    s0, s1 = torch.tensor([1.0, 0, 0, 0]), torch.tensor([0, 1.0, 0, 0])
    at_s1 = torch.arange(T + 1) % 2 == 1
    obs = torch.where(at_s1[:, None, None], s1, s0).expand(T + 1, B, 4).clone()
    env = torch.arange(B)
    actions = torch.where(at_s1[:T, None], env % 2, env // 2)
    rewards = (at_s1[:T, None] & (actions == 0)).float()
    dones = at_s1[:T, None].float().expand(T, B).clone()
    return {"obs": obs, "actions": actions, "rewards": rewards, "dones": dones, "valid": torch.ones(T, B),
            "logp": torch.zeros(T, B)}


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_fits_the_lambda_values_of_a_two_state_chain(lam):
    gamma, updates, frames_per_update = 0.9, 300, T * B
    # the LR decays to 0 so that Adam settles on the fixed point instead of jittering around it
    learner = make_learner(gamma=gamma, lam=lam, lr=1e-2, lr_schedule="linear",
                           total_frames=updates * frames_per_update)
    batch = chain_batch()
    for update in range(updates):
        learner.update(batch, frames=update * frames_per_update)
    q = learner.policy(batch["obs"][:2, 0]).detach()  # rows: s0, s1
    # Q(s1, .) = its reward; Q(s0, a) = gamma [(1 - lam) max Q(s1) + lam r(a')], a' half 0 and half 1
    expected = torch.tensor([[gamma * (1 - lam / 2)] * 2, [1.0, 0.0]])
    assert torch.allclose(q, expected, atol=0.02), q

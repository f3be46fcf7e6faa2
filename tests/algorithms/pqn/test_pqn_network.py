"""PQN's network: LayerNorm in the torso, epsilon-greedy acting that respects action masks, and an epsilon
that travels with the parameters."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from menger.algorithms.pqn.network import PQNNetwork, linear_epsilon

BOX = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
MASKED = gym.spaces.Dict({"observation": BOX, "action_mask": gym.spaces.Box(0, 1, (4,), np.int8)})


def make(obs_space=BOX, actions=4):
    torch.manual_seed(0)
    return PQNNetwork(obs_space, gym.spaces.Discrete(actions), hidden=(16, 16))


def layer_norms(net):
    return [m for m in net.modules() if isinstance(m, nn.LayerNorm)]


def test_flat_box_normalises_every_hidden_layer():
    assert [m.normalized_shape for m in layer_norms(make())] == [(16,), (16,)]


def test_dict_observation_normalises_the_encoders_features():
    assert [m.normalized_shape for m in layer_norms(make(MASKED))] == [(16,)]


def test_deterministic_act_is_greedy():
    net, obs = make(), torch.randn(32, 4)
    out = net.act(obs, None, deterministic=True)
    q = net(obs)
    assert torch.equal(out.action, q.argmax(-1))
    assert torch.allclose(out.value, q.max(-1).values)
    assert torch.allclose(out.logp, out.value)


def test_zero_epsilon_is_greedy():
    net, obs = make(), torch.randn(32, 4)
    net.set_epsilon(0.0)
    assert torch.equal(net.act(obs, generator=torch.Generator().manual_seed(0)).action, net(obs).argmax(-1))


def test_epsilon_one_is_uniform_and_seeded():
    net, obs = make(), torch.randn(4000, 4)
    actions = net.act(obs, generator=torch.Generator().manual_seed(0)).action
    again = net.act(obs, generator=torch.Generator().manual_seed(0)).action
    assert torch.equal(actions, again)
    frequencies = torch.bincount(actions, minlength=4) / 4000
    assert torch.all((frequencies - 0.25).abs() < 0.03), frequencies


def test_exploration_picks_only_legal_actions():
    net, rows = make(MASKED), 4000
    mask = torch.tensor([1, 0, 1, 0], dtype=torch.float32).repeat(rows, 1)
    obs = {"observation": torch.randn(rows, 4), "action_mask": mask}
    actions = net.act(obs, generator=torch.Generator().manual_seed(1)).action
    frequencies = torch.bincount(actions, minlength=4) / rows
    assert frequencies[1] == 0 and frequencies[3] == 0
    assert abs(float(frequencies[0]) - 0.5) < 0.03
    assert set(net.act(obs, deterministic=True).action.tolist()) <= {0, 2}


def test_epsilon_is_a_frozen_parameter():
    net = make()
    names = dict(net.named_parameters())
    assert "epsilon" in names and not names["epsilon"].requires_grad
    net.set_epsilon(0.3)
    assert float(names["epsilon"]) == pytest.approx(0.3)
    assert "epsilon" in net.state_dict()


def test_linear_epsilon():
    assert linear_epsilon(0, 1.0, 0.1, 100) == 1.0
    assert linear_epsilon(50, 1.0, 0.1, 100) == pytest.approx(0.55)
    assert linear_epsilon(100, 1.0, 0.1, 100) == pytest.approx(0.1)
    assert linear_epsilon(10**9, 1.0, 0.1, 100) == pytest.approx(0.1)
    assert linear_epsilon(0, 1.0, 0.1, 0) == pytest.approx(0.1)

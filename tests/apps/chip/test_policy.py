import numpy as np
import torch

from menger.apps.chip.env import ChipPlacementEnv
from menger.apps.chip.policy import ChipPolicyNet


def test_policy_shapes_and_gradient():
    env = ChipPlacementEnv(netlist="macro_tiles_10x10", grid_bound=24)
    net = ChipPolicyNet(env.observation_space, env.action_space, channels=8, layers=2)
    obs, _ = env.reset()
    batch = {key: torch.as_tensor(np.stack([value, value]), dtype=torch.float32) for key, value in obs.items()}
    logits, value = net(batch)
    assert logits.shape == (2, env.action_space.n) and value.shape == (2,)
    (logits.sum() + value.sum()).backward()
    assert all(p.grad is not None for p in net.parameters())

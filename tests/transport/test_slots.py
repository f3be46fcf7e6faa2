"""Unroll slots: a batch gathers slots along the env axis; Dict observations get one buffer per key."""
import gymnasium as gym
import torch

from menger.transport import UnrollBuffers, UnrollSpec


def test_gather_concatenates_slots_along_envs():
    spec = UnrollSpec(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), unroll_length=4, envs_per_actor=2)
    buffers = UnrollBuffers(spec, num_slots=3, shared=False)
    for slot in range(3):
        buffers.slot(slot)["rewards"].fill_(slot)
        buffers.slot(slot)["obs"].fill_(10 + slot)
    batch = buffers.gather([2, 0])
    assert batch["rewards"].shape == (4, 4)
    assert batch["obs"].shape == (5, 4, 3)
    assert torch.equal(batch["rewards"][:, :2], torch.full((4, 2), 2.0))
    assert torch.equal(batch["rewards"][:, 2:], torch.zeros(4, 2))
    buffers.slot(2)["rewards"].fill_(99)  # the batch is a copy: slots can be reused at once
    assert batch["rewards"][0, 0] == 2


def test_dict_observations_get_one_buffer_per_key():
    space = gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (2,)), "action_mask": gym.spaces.MultiBinary(3)})
    spec = UnrollSpec(space, gym.spaces.Discrete(3), unroll_length=2, envs_per_actor=1)
    batch = UnrollBuffers(spec, 1, shared=False).gather([0])
    assert set(batch["obs"]) == {"x", "action_mask"}
    assert batch["obs"]["action_mask"].shape == (3, 1, 3)

"""Unit tests of the runtime's pieces with fakes: slots, the parameter server, the policy, the config."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from menger.config import ConfigError
from menger.experiment import ModelConfig, load_experiment
from menger.models import build_policy
from menger.params import SharedParameters
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


def test_parameter_server_versions_and_copies():
    model = torch.nn.Linear(3, 2)
    server = SharedParameters(model, shared=False)
    server.publish(model, 7)
    clone = torch.nn.Linear(3, 2)
    assert server.read_into(clone) == 7 and server.version() == 7
    for a, b in zip(model.parameters(), clone.parameters()):
        assert torch.equal(a, b)


def test_action_mask_is_honoured():
    space = gym.spaces.Dict({"obs": gym.spaces.Box(-1, 1, (4,)), "action_mask": gym.spaces.MultiBinary(5)})
    policy = build_policy(space, gym.spaces.Discrete(5), ModelConfig())
    mask = torch.zeros(256, 5)
    mask[:, 3] = 1
    mask[::2, 1] = 1
    obs = {"obs": torch.randn(256, 4), "action_mask": mask}
    out = policy.act(obs, generator=torch.Generator().manual_seed(0))
    assert bool((mask.gather(1, out.action[:, None]) == 1).all())


def test_gaussian_policy_logp_matches_torch_distribution():
    policy = build_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (2,)), ModelConfig(init_log_std=-0.3))
    obs = torch.randn(8, 3)
    out = policy.act(obs, generator=torch.Generator().manual_seed(0))
    mean, _, _ = policy(obs)
    ref = torch.distributions.Normal(mean, policy.log_std.exp()).log_prob(out.action).sum(-1)
    assert torch.allclose(out.logp, ref, atol=1e-5)


def test_lstm_evaluate_matches_stepwise_act():
    policy = build_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), ModelConfig(lstm_size=8))
    obs = torch.randn(5, 2, 3)
    dones = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 1]], dtype=torch.float32)
    state = policy.initial_state(2)
    logps, actions = [], []
    for t in range(4):
        out = policy.act(obs[t], state, generator=torch.Generator().manual_seed(t))
        actions.append(out.action)
        logps.append(out.logp)
        state = out.state * (1 - dones[t]).unsqueeze(-1)
    ev = policy.evaluate(obs, torch.stack(actions), policy.initial_state(2), dones)
    assert torch.allclose(ev.logp, torch.stack(logps), atol=1e-5)


def test_unknown_key_is_named_with_a_suggestion():
    with pytest.raises(ConfigError, match="ppo.lr"):
        load_experiment("cartpole-ppo", ["ppo.lrr=0.1"])


def test_unknown_preset_suggests_the_closest():
    with pytest.raises(ConfigError, match="cartpole-ppo"):
        load_experiment("cartpole-pop")


def test_stop_section_needs_a_condition():
    with pytest.raises(ConfigError, match="stop"):
        load_experiment("ppo", ["stop.env_frames=null"])


@pytest.mark.parametrize("encoder, convs", [("cnn", 3), ("cnn_shallow", 2)])
def test_image_encoders_have_the_papers_layouts_and_move_parameters_as_plain_vectors(encoder, convs):
    frames = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    policy = build_policy(frames, gym.spaces.Discrete(6), ModelConfig(encoder=encoder, hidden=(256,)))
    assert sum(isinstance(m, torch.nn.Conv2d) for m in policy.modules()) == convs
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    scaled = obs.float() / 255.0
    out_uint8, values_uint8, _ = policy(obs)
    policy.encoder.scale = 1.0  # the same frames, already scaled: the encoder must only scale uint8 input
    out_float, values_float, _ = policy(scaled)
    torch.testing.assert_close(values_uint8, values_float, rtol=1e-4, atol=1e-5)
    # the parameter server moves flat vectors: channels-last activations must not leak into parameter layout
    server = SharedParameters(policy, shared=False)
    server.publish(policy, 1)
    clone = build_policy(frames, gym.spaces.Discrete(6), ModelConfig(encoder=encoder, hidden=(256,)))
    assert server.read_into(clone) == 1
    policy.encoder.scale = 1.0 / 255.0
    torch.testing.assert_close(clone(obs)[1], policy(obs)[1])

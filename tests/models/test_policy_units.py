"""The policy network: masked logits, Gaussian log-probabilities, the LSTM's evaluate against stepwise act, the
image encoders' layouts."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from menger.experiment import ModelConfig
from menger.models import build_policy
from menger.params import SharedParameters


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


@pytest.mark.parametrize("shape, dtype, channels_last, layout", [
    ((4, 84, 84), np.uint8, False, "nature"),   # the Atari preset's stack of frames
    ((84, 84, 3), np.uint8, True, "nature"),    # a gymnasium RGB frame
    ((7, 7, 3), np.uint8, True, "small"),       # a grid world's view: Atari's 8x8 kernel does not fit
    ((10, 10, 4), np.bool_, True, "small"),     # MinAtar's channels of flags
])
def test_the_auto_encoder_fits_the_image_it_is_given(shape, dtype, channels_last, layout):
    from menger.models.encoders import ImageCNN

    high = 255 if dtype == np.uint8 else 1
    space = gym.spaces.Box(0, high, shape, dtype)
    policy = build_policy(space, gym.spaces.Discrete(3), ModelConfig(hidden=(32,)))
    assert isinstance(policy.encoder, ImageCNN) and policy.encoder.channels_last == channels_last
    assert policy.encoder.conv[0].kernel_size == ImageCNN.LAYOUTS[layout][0][1:2] * 2
    obs = torch.as_tensor(np.stack([space.sample() for _ in range(5)]))
    logits, values, _ = policy(obs)
    assert logits.shape == (5, 3) and torch.isfinite(values).all()
    assert policy.encoder.conv[0].in_channels == (shape[-1] if channels_last else shape[0])


def test_an_encoder_asked_for_by_name_that_does_not_fit_the_image_says_what_does():
    with pytest.raises(ValueError, match="smaller than the 36x36.*model.encoder=auto"):
        build_policy(gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), gym.spaces.Discrete(3),
                     ModelConfig(encoder="cnn", hidden=(32,)))


def test_the_auto_encoder_reads_a_dicts_image_entry_with_a_cnn_and_the_others_as_vectors():
    """A grid world's observation: a 7x7x3 view, a Discrete direction and a vector (SB3's CombinedExtractor)."""
    from menger.models.encoders import ImageCNN

    space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "direction": gym.spaces.Discrete(4),
                             "x": gym.spaces.Box(-1, 1, (2,), np.float32)})
    policy = build_policy(space, gym.spaces.Discrete(3), ModelConfig(hidden=(32,)))
    cnns = [m for m in policy.encoder.modules() if isinstance(m, ImageCNN)]
    assert len(cnns) == 1 and cnns[0].channels_last
    assert policy.encoder.net[0].in_features == cnns[0].out_dim + 4 + 2  # CNN features, one-hot direction, x
    obs = {"image": torch.randint(0, 256, (5, 7, 7, 3), dtype=torch.uint8), "direction": torch.arange(5.0) % 4,
           "x": torch.zeros(5, 2)}
    logits, values, _ = policy(obs)
    assert logits.shape == (5, 3) and torch.isfinite(values).all()
    flat = build_policy(space, gym.spaces.Discrete(3), ModelConfig(encoder="mlp", hidden=(32,)))
    assert not any(isinstance(m, ImageCNN) for m in flat.modules())  # asked for by name: an MLP over every entry

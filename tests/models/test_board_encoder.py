"""The board encoder (`model.encoder: board`): size-keeping 3x3 convolutions over PettingZoo's [H, W, C] board,
then the MLP over the planes and the other entries."""
import numpy as np
import pytest
import torch
from gymnasium import spaces

from menger.config import ConfigError
from menger.experiment import ModelConfig
from menger.models import build_policy
from menger.models.encoders import BoardCNN

BOARD = spaces.Dict({"observation": spaces.Box(0, 1, (6, 7, 2), np.int8),
                     "action_mask": spaces.Box(0, 1, (7,), np.int8),
                     "agent_id": spaces.Box(0, 1, (2,), np.float32)})


def _obs(n=4, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((n, 7), np.int8)
    mask[:, 3] = 0
    return {"observation": torch.from_numpy(rng.integers(0, 2, (n, 6, 7, 2)).astype(np.float32)),
            "action_mask": torch.from_numpy(mask),
            "agent_id": torch.eye(2)[torch.arange(n) % 2]}


def test_the_convolutions_keep_the_board_and_see_a_pattern_the_same_wherever_it_lies():
    encoder = BoardCNN(BOARD, channels=(8, 8), hidden=(16,))
    board = torch.zeros(1, 6, 7, 2)
    board[0, 1:4, 2, 0] = 1  # three in a column, away from the edges
    shifted = torch.roll(board, shifts=2, dims=2)  # the same three, two columns to the right
    planes = encoder.conv(board.permute(0, 3, 1, 2))
    moved = encoder.conv(shifted.permute(0, 3, 1, 2))
    assert planes.shape == (1, 8, 6, 7)  # padding 1, stride 1: one feature vector per cell
    torch.testing.assert_close(moved[..., 4], planes[..., 2])
    assert encoder(_obs()).shape == (4, 16)


def test_a_policy_on_a_board_masks_illegal_moves_reads_the_agent_id_and_trains_its_convolutions():
    cfg = ModelConfig(encoder="board", board_channels=(8, 8), hidden=(32,), activation="relu")
    policy = build_policy(BOARD, spaces.Discrete(7), cfg, "ppo")
    assert isinstance(policy.encoder, BoardCNN)
    obs = _obs(64)
    out = policy.act(obs, generator=torch.Generator().manual_seed(0))
    assert not (out.action == 3).any()  # the masked column is never played
    other = {**obs, "agent_id": 1 - obs["agent_id"]}
    assert not torch.allclose(policy.action_params(obs, None)[0], policy.action_params(other, None)[0])
    loss = policy.action_params(obs, None)[0].logsumexp(-1).mean()
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.encoder.conv.parameters())


def test_what_is_no_board_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="'observation' entry"):
        BoardCNN(spaces.Dict({"board": BOARD["observation"]}), (8,), (16,))
    with pytest.raises(ValueError, match=r"needs a board \[H, W, C\]"):
        BoardCNN(spaces.Box(0, 1, (42,)), (8,), (16,))
    with pytest.raises(ConfigError, match="model.board_channels"):
        ModelConfig(encoder="board", board_channels=())


def _mirror(obs):
    return {**obs, "observation": obs["observation"].flip(2), "action_mask": obs["action_mask"].flip(-1)}


def test_a_mirrored_policy_plays_the_mirror_image_of_a_board_as_the_mirror_image_of_its_move():
    cfg = ModelConfig(encoder="board", board_channels=(8, 8), hidden=(32,), activation="relu", board_mirror=True)
    policy = build_policy(BOARD, spaces.Discrete(7), cfg, "ppo")
    plain = build_policy(BOARD, spaces.Discrete(7), ModelConfig(encoder="board", board_channels=(8, 8), hidden=(32,),
                                                                activation="relu"), "ppo")
    for p in policy.parameters():  # weights that tell left from right: the output layers' orthogonal init does not
        torch.nn.init.normal_(p, std=0.3)
    plain.load_state_dict(policy.state_dict())  # the same parameters: only the mirroring differs
    obs = _obs(16)
    obs["action_mask"][:, 3] = 1
    obs["action_mask"][:, 0] = 0  # a mask that is not its own mirror image
    logits, value, _ = policy(obs)
    m_logits, m_value, _ = policy(_mirror(obs))
    torch.testing.assert_close(m_logits, logits.flip(-1))
    torch.testing.assert_close(m_value, value)
    p_logits, p_value, _ = plain(obs)
    assert not torch.allclose(plain(_mirror(obs))[0], p_logits.flip(-1), atol=1e-3)  # without it, no symmetry
    # what it computes: the mean of the plain network's heads on the board and on its mirror image
    mirror_logits, mirror_value, _ = plain(_mirror(obs))
    expected = 0.5 * (p_logits.masked_fill(obs["action_mask"] < 0.5, 0) + mirror_logits.flip(-1).masked_fill(
        obs["action_mask"] < 0.5, 0))
    legal = obs["action_mask"] > 0.5
    torch.testing.assert_close(logits[legal], expected[legal])
    torch.testing.assert_close(value, 0.5 * (p_value + mirror_value))
    assert not (policy.act(obs, deterministic=True).action == 0).any()  # masks still hold
    actions = policy.act(obs, generator=torch.Generator().manual_seed(0)).action
    unroll = {k: v.unsqueeze(0).expand(2, *v.shape) for k, v in obs.items()}
    out = policy.evaluate(unroll, actions.unsqueeze(0), torch.zeros(0), torch.zeros(1, 16))
    out.logp.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.encoder.conv.parameters())


def test_a_mirror_that_does_not_fit_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="model.board_mirror=true mirrors the board of model.encoder=board"):
        ModelConfig(encoder="mlp", board_mirror=True)
    cfg = ModelConfig(encoder="board", board_channels=(8,), hidden=(16,), board_mirror=True)
    with pytest.raises(ValueError, match="one action per column"):
        build_policy(spaces.Dict({"observation": BOARD["observation"]}), spaces.Discrete(6), cfg, "ppo")
    with pytest.raises(ValueError, match="no recurrent core"):
        build_policy(BOARD, spaces.Discrete(7), ModelConfig(encoder="board", board_channels=(8,), hidden=(16,),
                                                            board_mirror=True, lstm_size=8), "ppo")
    with pytest.raises(ValueError, match="algo apex builds its own network"):
        build_policy(BOARD, spaces.Discrete(7), cfg, "apex")

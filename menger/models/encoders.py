"""Observation encoders: a batch of observations [N, ...] -> features [N, D].

The observation Dict's reserved keys, the contract with the envs (and multi-agent adapters) that produce them:

* `MASK_KEY` ("action_mask"): one flag per logit; it masks the action head and is never an encoder input.
* `AGENT_KEY` ("agent_id"): a one-hot float32 Box [K] of the row's agent among the K agents a network serves.
  With shared parameters (one network, `model.agents=0`) it is an input like any other entry; with independent
  ones (`model.agents=K`) it picks the row's network (`menger.models.agents.AgentBank`) and is no input.
* `CRITIC_KEY` ("critic_state"): a float32 Box (any shape) that only the value function sees: the global state,
  or every teammate's observation (a centralised critic, as in MAPPO). Menger's encoders leave it out of the
  policy's path; the value MLP reads it beside the policy's own inputs.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

MASK_KEY = "action_mask"
AGENT_KEY = "agent_id"
CRITIC_KEY = "critic_state"
BOARD_KEY = "observation"  # a Dict observation's board, for the board encoder (PettingZoo's classic games' name)


def mlp(sizes: list[int], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers of the given sizes, each followed by ``activation`` (the last one too)."""
    layers: list[nn.Module] = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(n_in, n_out), activation()]
    return nn.Sequential(*layers)


class MLPEncoder(nn.Module):
    """Flattens every observation entry but the action mask, concatenates them, and applies an MLP. The critic
    state (`CRITIC_KEY`) is an input only where `critic` is set (the value MLP of a centralised critic)."""

    def __init__(self, obs_space: gym.Space, hidden: tuple[int, ...], activation: str = "tanh",
                 critic: bool = False, images: bool = False):
        super().__init__()
        self.keys = _entry_keys(obs_space, critic)
        # a Discrete entry (a state's index, rock-paper-scissors' last move) is read one-hot, as SB3 and RLlib do
        self.one_hot = {k: int(space.n) for k in self.keys
                        if isinstance(space := _entry_space(obs_space, k), gym.spaces.Discrete)}
        # `images`: a Dict's image entries ([C, H, W] or [H, W, C]) go through the CNN that fits each, as SB3's
        # CombinedExtractor does, and their features join the other entries
        image_keys = [k for k in self.keys if k and images and _is_image(_entry_space(obs_space, k))]
        self.cnns = nn.ModuleList(_image_cnn(obs_space[k], "cnn", None, fit=True) for k in image_keys)
        self.cnn_of = {k: i for i, k in enumerate(image_keys)}
        in_dim = sum(self.cnns[self.cnn_of[k]].out_dim if k in self.cnn_of else
                     self.one_hot.get(k) or int(np.prod(_entry_space(obs_space, k).shape)) for k in self.keys)
        act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
        self.net = mlp([in_dim, *hidden], act)
        self.out_dim = hidden[-1] if hidden else in_dim

    def _entry(self, x: torch.Tensor, key: str) -> torch.Tensor:
        if key in self.cnn_of:
            return self.cnns[self.cnn_of[key]](x)
        n = self.one_hot.get(key)
        return x.flatten(1) if n is None else nn.functional.one_hot(x.reshape(-1).long(), n).float()

    def forward(self, obs) -> torch.Tensor:
        if isinstance(obs, dict):
            x = torch.cat([self._entry(obs[k], k) for k in self.keys], dim=1)
        else:
            x = self._entry(obs, "")
        return self.net(x)


class ImageCNN(nn.Module):
    """A convolutional encoder on [N, C, H, W] frames, or [N, H, W, C] ones (`channels_last`, as gymnasium's
    image spaces and MinAtar have them), then one ReLU layer; uint8 frames are scaled by 1/255.

    Three layouts, all from the papers Menger follows:
    - ``nature``: Mnih et al. 2015 (DQN Nature): 32 8x8/4, 64 4x4/2, 64 3x3/1, then `hidden` (512);
    - ``shallow``: Mnih et al. 2013, the IMPALA paper's "shallow" model: 16 8x8/4, 32 4x4/2, then `hidden`
      (256); about 3x fewer operations, which is what a CPU learner can afford for Atari;
    - ``small``: Young and Tian 2019 (MinAtar): 16 3x3/1, then `hidden` (128), for images smaller than the
      36x36 the others need (a 7x7 grid world, MinAtar's 10x10).
    """

    LAYOUTS = {"nature": ((32, 8, 4), (64, 4, 2), (64, 3, 1)), "shallow": ((16, 8, 4), (32, 4, 2)),
               "small": ((16, 3, 1),)}
    SMALLEST = {"nature": 36, "shallow": 20, "small": 3}  # height and width the layout's kernels need

    def __init__(self, obs_space: gym.Space, hidden: int = 512, layout: str = "nature", channels_last: bool = False):
        super().__init__()
        self.channels_last = channels_last
        if channels_last:
            height, width, channels = obs_space.shape
        else:
            channels, height, width = obs_space.shape
        if min(height, width) < self.SMALLEST[layout]:
            raise ValueError(f"an image of {height}x{width} is smaller than the {self.SMALLEST[layout]}x"
                             f"{self.SMALLEST[layout]} that the {layout!r} CNN's kernels need; use model.encoder=auto, "
                             "which picks the small CNN for it")
        layers: list[nn.Module] = []
        for out_channels, kernel, stride in self.LAYOUTS[layout]:
            layers += [nn.Conv2d(channels, out_channels, kernel, stride=stride), nn.ReLU()]
            channels = out_channels
        self.conv = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            n_flat = self.conv(torch.zeros(1, layers[0].in_channels, height, width)).shape[1]
        self.fc = nn.Sequential(nn.Linear(n_flat, hidden), nn.ReLU())
        self.out_dim = hidden
        self.scale = 1.0 / 255.0 if obs_space.dtype == np.uint8 else 1.0
        for layer in self.modules():  # orthogonal, gain sqrt(2) for ReLU, zero bias: the Atari A2C/PPO practice
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.orthogonal_(layer.weight, gain=np.sqrt(2.0))
                nn.init.zeros_(layer.bias)

    def forward(self, obs) -> torch.Tensor:
        # channels-last frames make the CPU convolutions (oneDNN) 1.3-1.7x faster, forward and backward; the
        # weights stay contiguous so parameter vectors and checkpoints need no special layout
        frames = obs.permute(0, 3, 1, 2) if self.channels_last else obs
        frames = frames.contiguous(memory_format=torch.channels_last)
        if frames.dtype == torch.bool:
            frames = frames.float()
        return self.fc(self.conv(frames * self.scale))


class BoardCNN(nn.Module):
    """Board games' encoder: 3x3 convolutions that keep the board's size (padding 1, stride 1, so every cell keeps
    its place and a pattern is seen the same wherever it lies), over the board's [H, W, C] planes as PettingZoo's
    classic games give them (channels last; the Dict's "observation" entry), then an MLP over the flattened planes
    and the other entries (an agent_id). An MLP on the raw planes must learn each threat anew on every square."""

    def __init__(self, obs_space: gym.Space, channels: tuple[int, ...], hidden: tuple[int, ...],
                 activation: str = "relu"):
        super().__init__()
        self.board_key = BOARD_KEY if isinstance(obs_space, gym.spaces.Dict) else ""
        if self.board_key and BOARD_KEY not in obs_space.spaces:
            raise ValueError(f"model.encoder=board reads the board from the observation's {BOARD_KEY!r} entry; "
                             f"{obs_space} has none: name the board's entry {BOARD_KEY!r} or use model.encoder=mlp")
        board = _entry_space(obs_space, self.board_key)
        if not isinstance(board, gym.spaces.Box) or len(board.shape) != 3:
            raise ValueError(f"model.encoder=board needs a board [H, W, C] (channels last, as PettingZoo's classic "
                             f"games have it); got {board}: use model.encoder=mlp, or cnn for [C, H, W] images")
        height, width, planes = board.shape
        self.height, self.width = height, width
        act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
        layers: list[nn.Module] = []
        for out in channels:
            layers += [nn.Conv2d(planes, out, 3, padding=1), act()]
            planes = out
        self.conv = nn.Sequential(*layers)
        self.others = [k for k in _entry_keys(obs_space) if k != self.board_key]
        in_dim = planes * height * width + sum(int(np.prod(obs_space[k].shape)) for k in self.others)
        self.net = mlp([in_dim, *hidden], act)
        self.out_dim = hidden[-1] if hidden else in_dim

    def forward(self, obs) -> torch.Tensor:
        board = obs[self.board_key] if self.board_key else obs
        parts = [self.conv(board.float().permute(0, 3, 1, 2)).flatten(1)]
        parts += [obs[k].flatten(1) for k in self.others]
        return self.net(torch.cat(parts, dim=1))


def _is_image(space: gym.Space) -> bool:
    """An entry the small CNN can read: [C, H, W] or [H, W, C] with H and W of 3 or more."""
    if not (isinstance(space, gym.spaces.Box) and len(space.shape) == 3):
        return False
    height, width = space.shape[:2] if image_channels_last(space.shape) else space.shape[1:]
    return min(height, width) >= ImageCNN.SMALLEST["small"]


def _entry_keys(space: gym.Space, critic: bool = False) -> list[str]:
    if isinstance(space, gym.spaces.Dict):
        keys = [k for k in space.spaces if k != MASK_KEY and (critic or k != CRITIC_KEY)]
        if not keys:
            raise ValueError(f"the observation {space} has no entry a network can read (action_mask and "
                             "critic_state are no inputs of the policy); give it an observation entry")
        return keys
    return [""]


def has_critic_state(space: gym.Space) -> bool:
    """Whether the observation carries a centralised critic's input (`CRITIC_KEY`)."""
    return isinstance(space, gym.spaces.Dict) and CRITIC_KEY in space.spaces


def without(space: gym.Space, *keys: str) -> gym.Space:
    """A Dict observation space without `keys` (the space as it is where it has none of them)."""
    if not isinstance(space, gym.spaces.Dict) or not any(key in space.spaces for key in keys):
        return space
    return gym.spaces.Dict({k: v for k, v in space.spaces.items() if k not in keys})


def _entry_space(space: gym.Space, key: str) -> gym.Space:
    return space[key] if key else space


def _image_cnn(space: gym.spaces.Box, kind: str, hidden: int | None, fit: bool) -> ImageCNN:
    """`kind`'s CNN on `space` ([C, H, W] or [H, W, C]); with `fit`, MinAtar's small one where the image is smaller
    than the kernels of `kind` need."""
    channels_last = image_channels_last(space.shape)
    height, width = space.shape[:2] if channels_last else space.shape[1:]
    layout = "nature" if kind == "cnn" else "shallow"
    if fit and min(height, width) < ImageCNN.SMALLEST[layout]:  # too small for Atari's kernels: MinAtar's
        layout = "small"
    default = {"nature": 512, "shallow": 256, "small": 128}[layout]
    return ImageCNN(space, hidden=hidden or default, layout=layout, channels_last=channels_last)


def image_channels_last(shape: tuple[int, ...]) -> bool:
    """Whether an image's channels are its last axis: unless its first axis is smaller than both others (the
    Atari preset's stack of 4 84x84 frames, [C, H, W]), gymnasium's [H, W, C] (RGB frames, grid worlds, MinAtar)."""
    return not (shape[0] < shape[1] and shape[0] < shape[2])


def build_encoder(obs_space: gym.Space, kind: str, hidden: tuple[int, ...], activation: str,
                  critic: bool = False, board_channels: tuple[int, ...] = (64, 64)) -> nn.Module:
    is_image = isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 3
    auto = kind == "auto"
    if auto:
        kind = "cnn" if is_image else "mlp"
    if kind in ("cnn", "cnn_shallow"):
        if not is_image:
            raise ValueError(f"model.encoder={kind} needs an image observation [C, H, W] or [H, W, C]; got {obs_space}")
        return _image_cnn(obs_space, kind, hidden[-1] if hidden else None, fit=auto)
    if kind == "board":
        return BoardCNN(obs_space, tuple(board_channels), hidden, activation)
    if kind == "mlp":  # auto: a Dict's image entries go through the CNN that fits each first
        return MLPEncoder(obs_space, hidden, activation, critic, images=auto)
    raise ValueError(f"unknown model.encoder {kind!r}; use auto, mlp, cnn, cnn_shallow or board")

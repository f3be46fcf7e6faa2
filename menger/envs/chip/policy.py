"""Policy/value network for ChipPlacement-v0: convolutions over the grid feature maps (with the current
macro's features broadcast as extra channels) give one logit per grid cell; a pooled head gives the value.
The runtime applies `action_mask` to the logits, so the network does not."""

from __future__ import annotations

import torch
from torch import nn


class ChipPolicyNet(nn.Module):
    """forward(obs dict of float32 [N, ...]) -> (logits [N, num_actions], value [N])."""

    def __init__(self, observation_space, action_space, channels: int = 32, layers: int = 3):
        super().__init__()
        maps_shape = observation_space["grid_maps"].shape  # (maps, rows, cols)
        self.features = observation_space["macro_features"].shape[0]
        if maps_shape[1] * maps_shape[2] != action_space.n:
            raise ValueError(f"grid maps {maps_shape[1]}x{maps_shape[2]} do not match Discrete({action_space.n}); "
                             "the action grid and the observation grid must be the same")
        body, width = [], maps_shape[0] + self.features
        for _ in range(layers):
            body += [nn.Conv2d(width, channels, 3, padding=1), nn.ReLU()]
            width = channels
        self.body = nn.Sequential(*body)
        self.logits = nn.Conv2d(channels, 1, 1)
        self.value = nn.Sequential(nn.Linear(channels + self.features, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        maps = obs["grid_maps"]
        features = obs["macro_features"]
        broadcast = features[:, :, None, None].expand(-1, -1, maps.shape[2], maps.shape[3])
        hidden = self.body(torch.cat([maps, broadcast], dim=1))
        logits = self.logits(hidden).flatten(1)
        pooled = hidden.mean(dim=(2, 3))
        return logits, self.value(torch.cat([pooled, features], dim=1)).squeeze(-1)

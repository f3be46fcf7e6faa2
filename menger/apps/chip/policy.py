"""Policy/value network for ChipPlacement-v0: convolutions over the grid feature maps (with the current
macro's features broadcast as extra channels) give one logit per grid cell; a pooled head gives the value.
The runtime applies `action_mask` to the logits, so the network does not.

A linear 1×1 path from the input maps adds to the logits; it starts as −cost_prior × the greedy-cost map
and the convolutional head starts at zero, so the untrained policy samples near the greedy placer's choice
(its deterministic action is the greedy cell) and training learns where departing from it pays. Both
paths are ordinary trainable weights; cost_prior=0 starts from a uniform policy instead."""

from __future__ import annotations

import torch
from torch import nn

from menger.apps.chip.env import GRID_MAPS


class ChipPolicyNet(nn.Module):
    """forward(obs dict of float32 [N, ...]) -> (logits [N, num_actions], value [N])."""

    def __init__(self, observation_space, action_space, channels: int = 32, layers: int = 3,
                 cost_prior: float = 0.0):
        super().__init__()
        maps_shape = observation_space["grid_maps"].shape  # (maps, rows, cols)
        self.features = observation_space["macro_features"].shape[0]
        if maps_shape[1] * maps_shape[2] != action_space.n:
            raise ValueError(f"grid maps {maps_shape[1]}x{maps_shape[2]} do not match Discrete({action_space.n}); "
                             "the action grid and the observation grid must be the same")
        if maps_shape[0] != len(GRID_MAPS):
            raise ValueError(f"grid_maps has {maps_shape[0]} channels, ChipPolicyNet reads {len(GRID_MAPS)} "
                             f"({', '.join(GRID_MAPS)}); build the observation with ChipPlacementEnv")
        body, width = [], maps_shape[0] + self.features
        for _ in range(layers):
            body += [nn.Conv2d(width, channels, 3, padding=1), nn.ReLU()]
            width = channels
        self.body = nn.Sequential(*body)
        self.logits = nn.Conv2d(channels, 1, 1)
        self.prior = nn.Conv2d(maps_shape[0], 1, 1)
        with torch.no_grad():
            self.logits.weight.zero_()
            self.logits.bias.zero_()
            self.prior.weight.zero_()
            self.prior.bias.zero_()
            self.prior.weight[0, GRID_MAPS.index("greedy_cost")] = -float(cost_prior)
        self.value = nn.Sequential(nn.Linear(channels + self.features, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        maps = obs["grid_maps"]
        features = obs["macro_features"]
        broadcast = features[:, :, None, None].expand(-1, -1, maps.shape[2], maps.shape[3])
        hidden = self.body(torch.cat([maps, broadcast], dim=1))
        logits = (self.logits(hidden) + self.prior(maps)).flatten(1)
        pooled = hidden.mean(dim=(2, 3))
        return logits, self.value(torch.cat([pooled, features], dim=1)).squeeze(-1)

"""Policy/value network for GpuSharing-v0: one shared network scores every node from its own row.

Each node's row (``env.node_features``) describes the node, the task and what placing the task there would do.
A small MLP embeds every row, the masked mean of the embeddings gives each node the cluster's picture, and a
second MLP turns (row embedding, cluster picture) into the node's logit. What is learnt for one node holds for
all, and the network takes a cluster of any size: it trains on clusters of a hundred nodes and schedules the
production trace's 1,213.

With ``fgd_prior`` > 0 each logit also gets ``fgd_prior`` times the node's FGD score (0 to 1), with the
learnt part starting near zero, so the untrained policy's greedy action is FGD's node (one FGD score point is
``fgd_prior / 100`` logits). Training starts from the strongest published heuristic and has only to learn where
to depart from it. With ``residual_bound`` > 0 the learnt part is squashed into (-bound, bound) logits, so the
policy can only reorder nodes whose FGD scores lie within ``2 * bound / (fgd_prior / 100)`` points of each other:
it departs from FGD among near-equals and never for a node FGD scores far lower. The runtime applies
``action_mask`` to the logits.
"""

from __future__ import annotations

import torch
from torch import nn

from menger.apps.gpucluster.env import FGD_SCORE_FEATURE, NODES_KEY
from menger.models.encoders import MASK_KEY, mlp


class NodeScorerNet(nn.Module):
    """forward(obs) -> (logits [B, N], value [B])."""

    def __init__(self, observation_space, action_space, hidden: int = 64, fgd_prior: float = 1000.0,
                 value_scale: float = 10.0, residual_bound: float = 0.0):
        super().__init__()
        if residual_bound < 0:
            raise ValueError(f"residual_bound must be >= 0 (0: the learnt part is unbounded), got {residual_bound}.")
        self.residual_bound = float(residual_bound)
        features = observation_space[NODES_KEY].shape[-1]
        self.embed = mlp([features, hidden, hidden])
        head = nn.Linear(hidden, 1)
        self.score = nn.Sequential(mlp([2 * hidden, hidden]), head)
        self.register_buffer("fgd_prior", torch.tensor(float(fgd_prior)))
        if fgd_prior > 0:  # FGD decides at first, ties fall to sampling (or the first node, greedily)
            nn.init.zeros_(head.bias)
            nn.init.zeros_(head.weight)
        self.value_embed = mlp([features, hidden])
        self.value = nn.Sequential(mlp([2 * hidden, hidden]), nn.Linear(hidden, 1))
        self.value_scale = value_scale

    def forward(self, obs) -> tuple[torch.Tensor, torch.Tensor]:
        rows = obs[NODES_KEY].float()
        mask = obs[MASK_KEY].float()[..., None]
        embedded = self.embed(rows)
        pooled = _masked_mean(embedded, mask)
        logits = self.score(torch.cat([embedded, pooled[:, None, :].expand_as(embedded)], dim=-1)).squeeze(-1)
        if self.residual_bound > 0:
            logits = self.residual_bound * torch.tanh(logits / self.residual_bound)
        logits = logits + self.fgd_prior * rows[..., FGD_SCORE_FEATURE]
        value_rows = self.value_embed(rows)
        summary = torch.cat([_masked_mean(value_rows, torch.ones_like(mask)), value_rows.amax(dim=1)], dim=-1)
        return logits, self.value_scale * self.value(summary).squeeze(-1)


def _masked_mean(rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (rows * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)

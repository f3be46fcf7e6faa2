"""Policy/value network for ClusterScheduling-v0 that scores each job slot with one shared network.

A flat MLP over DeepRM's image must learn separately, for each of the M slots, that a short job is worth
starting; here the image is read back into what a scheduler looks at (each slot's duration, demand,
earliest start and the room it would leave, the cluster's reservations, the backlog) and one small
network scores every slot from its own features and the shared context. What is learnt for one slot
holds for all of them, and swapping two slots swaps their logits. Nothing is added to the observation:
every feature is read from the image itself. The runtime applies ``action_mask`` to the logits.

With ``sjf_prior`` > 0 each slot's logit also gets a learnable linear term in (starts now, duration),
initialised so that the untrained policy's greedy action is shortest-job-first over the jobs that can
start now, and waiting when none can. Training then starts from SJF's behaviour and has only to learn
where to depart from it (DeepRM's point: holding long jobs back when the cluster is busy) instead of
rediscovering SJF from thousands of episodes. ``sjf_prior=0`` starts from a near-uniform policy.

The value has its own trunk and its output is multiplied by ``value_scale``: returns are sums of
slowdowns (hundreds at high load), which a unit-scale linear head would take thousands of Adam steps
to reach.
"""

from __future__ import annotations

import torch
from torch import nn

from menger.models.encoders import MASK_KEY, mlp

_IMAGE_KEY = "obs"  # the image's entry when the env observes {"obs", "action_mask"}


class ImageReader(nn.Module):
    """Turns DeepRM images [N, T_h, W] back into scheduler features; no parameters.

    The column layout is the one ``observation.ImageEncoder`` draws: per resource, ``res_slot`` columns
    of reservations then ``res_slot`` columns per job slot; then the backlog cells; then the column of
    steps since the last arrival.
    """

    def __init__(self, image_shape: tuple[int, int], num_slots: int, num_resources: int, res_slot: int):
        super().__init__()
        self.horizon, width = image_shape
        self.num_slots, self.num_resources, self.res_slot = num_slots, num_resources, res_slot
        self.block_columns = num_resources * (1 + num_slots) * res_slot
        self.backlog_cells = (width - 1 - self.block_columns) * self.horizon
        if self.backlog_cells < 0:
            raise ValueError(
                f"An image {width} columns wide cannot hold {num_resources} resources x (1 + {num_slots} slots) x "
                f"res_slot={res_slot} columns; set the network's num_resources and res_slot kwargs to the env's.")
        self.slot_features = 5 + 2 * num_resources
        self.context_features = self.horizon * num_resources + 4

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(slot features [N, M, F], context [N, C], slot present [N, M] bool) of an image batch.

        A slot's features: starts now, duration / T_h, fits in the horizon, earliest start / T_h (T_h when
        it fits nowhere), present, demand / res_slot per resource, room left now after starting it.
        """
        batch, horizon = image.shape[0], self.horizon
        blocks = image[:, :, :self.block_columns].reshape(
            batch, horizon, self.num_resources, 1 + self.num_slots, self.res_slot)
        units = blocks.sum(-1)  # [N, T_h, d, 1 + M]
        used = units[..., 0]  # [N, T_h, d]
        demand = units[:, 0, :, 1:].transpose(1, 2)  # [N, M, d]
        duration = (units[..., 1:].amax(2) > 0).sum(1).float()  # [N, M]
        present = duration > 0
        offset = self._earliest_offset(used, demand, duration)
        fits = offset < horizon
        room_now = (self.res_slot - used[:, 0, None, :] - demand) / self.res_slot  # [N, M, d]
        slots = torch.cat([  # the first two are what the SJF prior reads
            (offset == 0)[..., None].float(), duration[..., None] / horizon,
            fits[..., None].float(), torch.where(fits, offset, torch.full_like(offset, horizon))[..., None] / horizon,
            present[..., None].float(), demand / self.res_slot, room_now,
        ], dim=-1)
        backlog = image[:, :, self.block_columns:-1].sum((1, 2)) / max(self.backlog_cells, 1)
        waiting = present.float().mean(1)
        short_waiting = (present & (duration <= horizon / 4)).float().mean(1)
        context = torch.cat([used.flatten(1) / self.res_slot, backlog[:, None], image[:, 0, -1, None],
                             waiting[:, None], short_waiting[:, None]], dim=1)
        return slots, context, present

    def _earliest_offset(self, used: torch.Tensor, demand: torch.Tensor, duration: torch.Tensor) -> torch.Tensor:
        """[N, M] earliest start in the horizon where the job fits for its whole duration, else T_h.

        A start o works when no row in o .. o + T_j - 1 is too full; counting too-full rows with a cumulative
        sum tests every start at once.
        """
        horizon = self.horizon
        too_full = (used[:, :, None, :] + demand[:, None, :, :] > self.res_slot).any(-1)  # [N, T_h, M]
        counts = torch.nn.functional.pad(too_full.float().cumsum(1), (0, 0, 1, 0))  # [N, T_h + 1, M]
        starts = torch.arange(horizon, device=used.device, dtype=duration.dtype)[None, :, None]
        ends = starts + duration[:, None, :]  # [N, T_h, M]
        in_horizon = ends <= horizon
        ends_index = ends.clamp(max=horizon).long()
        blocked = counts.gather(1, ends_index) - counts[:, :horizon, :]
        works = in_horizon & (blocked == 0) & (duration[:, None, :] > 0)
        first = torch.where(works, starts.expand_as(works), torch.full_like(works, horizon, dtype=duration.dtype))
        return first.amin(1)


class SlotPolicyNet(nn.Module):
    """forward(obs) -> (logits [N, M + 1], value [N]); the last logit is the void action (wait).

    Each slot's logit comes from its features, the shared context and the mean over present slots, so a
    slot is judged against the others; the void logit and the value see the context and those summaries.
    """

    def __init__(self, observation_space, action_space, hidden: int = 64, num_resources: int = 2,
                 res_slot: int = 10, value_scale: float = 100.0, sjf_prior: float = 1.0):
        super().__init__()
        image_space = observation_space[_IMAGE_KEY] if MASK_KEY in getattr(observation_space, "spaces", {}) \
            else observation_space
        self.reader = ImageReader(image_space.shape, action_space.n - 1, num_resources, res_slot)
        slot_in, context_in = self.reader.slot_features, self.reader.context_features
        self.context = mlp([context_in, hidden])
        self.slot = mlp([slot_in + hidden, hidden, hidden])
        self.score = nn.Sequential(mlp([2 * hidden, hidden]), nn.Linear(hidden, 1))
        self.wait = nn.Sequential(mlp([2 * hidden, hidden]), nn.Linear(hidden, 1))
        self.prior = _sjf_prior(sjf_prior)
        if sjf_prior > 0:  # let the prior decide at first; the learnt scores start near zero
            for head in (self.score[-1], self.wait[-1]):
                nn.init.zeros_(head.bias)
                head.weight.data.mul_(0.01)
        self.value_context = mlp([context_in, hidden])
        self.value_slot = mlp([slot_in + hidden, hidden])
        self.value = nn.Sequential(mlp([3 * hidden, hidden]), nn.Linear(hidden, 1))
        self.value_scale = value_scale

    def forward(self, obs) -> tuple[torch.Tensor, torch.Tensor]:
        image = obs[_IMAGE_KEY] if isinstance(obs, dict) else obs
        slots, context, present = self.reader(image)
        context_h = self.context(context)
        slot_h = self.slot(torch.cat([slots, _per_slot(context_h, slots)], dim=-1))
        pooled = _present_mean(slot_h, present)
        slot_logits = self.score(torch.cat([slot_h, _per_slot(pooled, slots)], dim=-1)).squeeze(-1)
        slot_logits = slot_logits + self.prior(slots[..., _PRIOR_FEATURES]).squeeze(-1)
        wait_logit = self.wait(torch.cat([context_h, pooled], dim=-1))
        logits = torch.cat([slot_logits, wait_logit], dim=-1)
        return logits, self._value(slots, context, present)

    def _value(self, slots: torch.Tensor, context: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        context_h = self.value_context(context)
        slot_h = self.value_slot(torch.cat([slots, _per_slot(context_h, slots)], dim=-1))
        summary = torch.cat([context_h, _present_mean(slot_h, present), slot_h.amax(1)], dim=-1)
        return self.value_scale * self.value(summary).squeeze(-1)


_PRIOR_FEATURES = slice(0, 2)  # ImageReader's slot features: starts now, duration / T_h


def _sjf_prior(strength: float) -> nn.Linear:
    """logit = strength * (12.5 * starts_now - 10 * duration / T_h - 2.5), against 0 for waiting.

    A short job that can start now scores about 9, a long one 2.5 to 5, a job that cannot start now
    below -3: greedy choice is SJF among the jobs that start now, and waiting when none can.
    """
    prior = nn.Linear(2, 1)
    with torch.no_grad():
        prior.weight.copy_(torch.tensor([[12.5, -10.0]]) * strength)
        prior.bias.fill_(-2.5 * strength)
    return prior


def _per_slot(vector: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    return vector[:, None, :].expand(-1, slots.shape[1], -1)


def _present_mean(slot_h: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    weights = present.float()[..., None]
    return (slot_h * weights).sum(1) / weights.sum(1).clamp(min=1.0)

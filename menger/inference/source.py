"""Where an actor's actions come from: its own copy of the parameters (this module), or a central service.

The actor drives an `menger.core.ActionSource` with this loop (`Actor.unroll`)::

    version = source.refresh()                  # before each unroll: the version its actions will come from
    for t in range(T):
        out = source.act(obs_t, state)          # ActOutput(action [B], logp [B], state): all B envs at once

so the actor does not branch on where inference runs: `LocalActions` (Menger, IMPALA) or a central service's
client (`CentralActions`, `RayCentralActions`: SEED RL) is chosen once, in `make_actor`.
"""
from __future__ import annotations

import torch

from menger.models.policy import ActOutput


class LocalActions:
    """Inference on the actor's own cached copy of the parameters, copied only when their version moved."""

    def __init__(self, policy, params, generator: torch.Generator):
        self.policy, self.params, self.generator = policy, params, generator
        self.version = -1

    def refresh(self) -> int:
        if self.params.version() != self.version:
            self.version = self.params.read_into(self.policy)
        return self.version

    def act(self, obs, state: torch.Tensor | None) -> ActOutput:
        return self.policy.act(obs, state, generator=self.generator)

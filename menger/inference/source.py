"""Where an actor's actions come from: its own copy of the parameters, or a central inference service.

The actor drives an `ActionSource` with this loop (`Actor.unroll`)::

    version = source.refresh()                  # before each unroll: the version its actions will come from
    for t in range(T):
        out = source.act(obs_t, state)          # ActOutput(action [B], logp [B], state): all B envs at once

so the actor does not branch on where inference runs: `LocalActions` (Menger, IMPALA) or
`menger.inference.central.CentralActions` (SEED RL) is chosen once, in `make_actor`, by `runtime.inference`.
"""
from __future__ import annotations

from typing import Protocol

import torch

from menger.models.policy import ActOutput


class ActionSource(Protocol):
    def refresh(self) -> int:
        """Make sure the next actions come from the newest parameters; returns their version (a lower bound)."""

    def act(self, obs, state: torch.Tensor | None) -> ActOutput:
        """Actions, their behaviour log-probabilities and the next recurrent state for one batch of B envs."""


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

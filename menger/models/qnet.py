"""Ape-X's network: an encoder, then dueling value and advantage heads (or one Q head), acting epsilon-greedily.

    q = QNetwork(obs_space, action_space, hidden=(256, 256), activation="relu")
    q.explore([i] * B, N, base=0.4, alpha=7)             # each of its B envs with copy i's 0.4^(1 + 7 i / (N - 1))
    q.anneal(1.0, frames / decay_frames)                  # early in a run: from 1.0 down to those
    out = q.act(obs, None, generator=g)                   # ActOutput(action, logp=Q(s, a), state, value=max Q(s, .))

Acting returns the value of the action taken (in `logp`'s place: the slot's per-step float) and the greedy
value, which is all an actor needs for Ape-X's initial priorities |R + D max_a Q(s', a) - Q(s, a)|.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from menger.losses import dueling
from menger.models.actions import MASKED_LOGIT, ActionCodec
from menger.models.encoders import MASK_KEY, build_encoder
from menger.models.policy import ActOutput


def apex_epsilon(actor_id: int, num_actors: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's per-actor exploration: eps_i = base^(1 + alpha i / (N - 1)); a single actor gets base."""
    if num_actors <= 1:
        return base
    return base ** (1.0 + alpha * actor_id / (num_actors - 1))


def epsilon_greedy(q: torch.Tensor, epsilon: torch.Tensor, mask: torch.Tensor | None = None,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Each row of Q values [N, A]: with probability `epsilon` (a scalar or one per row) an action drawn uniformly
    among its legal ones (`mask` > 0.5), else the greedy one. Two draws from `generator`, in this order: whether
    each row explores, then the noise whose argmax is the uniform pick."""
    greedy = q.argmax(-1)
    explore = torch.rand(q.shape[0], generator=generator).to(q.device) < epsilon
    noise = torch.rand(q.shape, generator=generator).to(q.device)
    if mask is not None:
        noise = noise.masked_fill(mask < 0.5, -1.0)
    return torch.where(explore, noise.argmax(-1), greedy)


class QNetwork(nn.Module):
    lstm_size = 0  # feed-forward: no recurrent state travels with its unrolls
    algo = "apex"  # for the error messages of an action space it cannot act in

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, *, encoder: str = "auto",
                 hidden: tuple[int, ...] = (256, 256), activation: str = "relu", dueling: bool = True,
                 board_channels: tuple[int, ...] = (64, 64)):
        super().__init__()
        # a MultiDiscrete, MultiBinary or Tuple/Dict of discrete components acts in one joint Discrete
        self.codec = ActionCodec(action_space, "q", self.algo)
        self.obs_space, self.action_space = obs_space, self.codec.space
        self.discrete, self.num_actions = True, int(self.action_space.n)
        self.has_mask = isinstance(obs_space, gym.spaces.Dict) and MASK_KEY in obs_space.spaces
        if self.has_mask and int(np.prod(obs_space[MASK_KEY].shape)) != self.num_actions:
            raise ValueError(f"the observation's action_mask has {int(np.prod(obs_space[MASK_KEY].shape))} entries, "
                             f"but the Q network has {self.num_actions} actions ({action_space}): a mask over joint "
                             "actions needs one flag per combination; use ppo, impala or appo to mask MultiDiscrete "
                             "components")
        self.encoder = build_encoder(obs_space, encoder, tuple(hidden), activation, board_channels=board_channels)
        self.dueling = dueling
        self.advantage = nn.Linear(self.encoder.out_dim, self.num_actions)
        self.value = nn.Linear(self.encoder.out_dim, 1) if dueling else None
        self.epsilon = torch.zeros(1)  # per env of the acting batch (row r explores with epsilon[r % len])
        self.settled = self.epsilon  # where `anneal` takes the epsilons in the end

    def explore(self, copies: list[int], num_copies: int, base: float, alpha: float) -> None:
        """Act with Ape-X's epsilon of copy `copies[r]` (of `num_copies`) for row r of each batch."""
        self.epsilon = self.settled = torch.tensor([apex_epsilon(i, num_copies, base, alpha) for i in copies])

    def anneal(self, start: float, progress: float) -> None:
        """Act with epsilons `progress` (0 to 1) of the way from `start` to the ones `explore` set."""
        done = min(max(float(progress), 0.0), 1.0)
        self.epsilon = start + (self.settled - start) * done

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(0)

    def forward(self, obs) -> torch.Tensor:
        """Q(s, .) [N, A]; illegal actions (an `action_mask` entry) get a value no legal one can lose to."""
        return self._q(obs, self.encoder(obs))

    def _q(self, obs, features: torch.Tensor) -> torch.Tensor:
        """The heads on `features`: dueling (or plain) Q values, illegal actions masked."""
        q = self.advantage(features)
        if self.value is not None:
            q = dueling(self.value(features), q)
        if self.has_mask:
            q = q.masked_fill(obs[MASK_KEY] < 0.5, MASKED_LOGIT)
        return q

    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        q = self.forward(obs)
        action = self._epsilon_greedy(q, obs, deterministic, generator)
        q_taken = q.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return ActOutput(action, q_taken, state, q.max(-1).values)

    def _epsilon_greedy(self, q: torch.Tensor, obs, deterministic: bool, generator) -> torch.Tensor:
        if deterministic or not bool((self.epsilon > 0).any()):
            return q.argmax(-1)
        n = q.shape[0]
        epsilon = self.epsilon if len(self.epsilon) == n else self.epsilon[torch.arange(n) % len(self.epsilon)]
        return epsilon_greedy(q, epsilon, obs[MASK_KEY] if self.has_mask else None, generator)



class RecurrentQNetwork(QNetwork):
    """R2D2's network: the encoder, an LSTM core, then the dueling heads; acts one step at a time with its state,
    and is unrolled over stored sequences by the learner (burn-in first, without gradient)::

        state = q.initial_state(B)                              # [2, B, H]: (h, c), zeros at an episode start
        out = q.act(obs, state, generator=g)                    # out.state: the state after this step
        with torch.no_grad():
            start = q.burn_in(obs[:K], stored_state, dones[:K]) # the state at step K of a replayed sequence
        values, _ = q.unroll(obs[K:], start, dones[K:])         # [L - K, B, A], with gradient

    `dones[t]` says the episode ended at step t: the state is zeroed before step t + 1, as the actor does.
    """

    algo = "r2d2"

    def __init__(self, obs_space: gym.Space, action_space: gym.Space, *, lstm_size: int, encoder: str = "auto",
                 hidden: tuple[int, ...] = (256, 256), activation: str = "relu", dueling: bool = True,
                 board_channels: tuple[int, ...] = (64, 64)):
        super().__init__(obs_space, action_space, encoder=encoder, hidden=hidden, activation=activation,
                         dueling=dueling, board_channels=board_channels)
        if lstm_size < 1:
            raise ValueError(f"a recurrent Q network needs model.lstm_size >= 1, got {lstm_size}")
        self.lstm_size = lstm_size
        self.core = nn.LSTMCell(self.encoder.out_dim, lstm_size)
        self.advantage = nn.Linear(lstm_size, self.num_actions)
        self.value = nn.Linear(lstm_size, 1) if dueling else None

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(2, batch, self.lstm_size)

    def step(self, obs, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: (Q(s, .) [N, A], the next state [2, N, H])."""
        h, c = self.core(self.encoder(obs), (state[0], state[1]))
        return self._q(obs, h), torch.stack([h, c])

    def forward(self, obs, state: torch.Tensor | None = None) -> torch.Tensor:
        batch = (next(iter(obs.values())) if isinstance(obs, dict) else obs).shape[0]
        return self.step(obs, self.initial_state(batch) if state is None else state)[0]

    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        batch = (next(iter(obs.values())) if isinstance(obs, dict) else obs).shape[0]
        q, state = self.step(obs, self.initial_state(batch) if state is None or state.numel() == 0 else state)
        action = self._epsilon_greedy(q, obs, deterministic, generator)
        return ActOutput(action, q.gather(-1, action.unsqueeze(-1)).squeeze(-1), state, q.max(-1).values)

    def unroll(self, obs, state: torch.Tensor, dones: torch.Tensor,
               detach_at: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Q over L steps [L, B, A] from `state`, obs [L, B, ...], dones [L, B]; and the state after the last.

        `detach_at` [B]: row b's state is detached before its step detach_at[b], so its earlier steps (its burn-in)
        pass no gradient on; the learner leaves their values out of the loss."""
        steps = dones.shape[0]
        features = self.encoder(_flatten(obs)).view(steps, dones.shape[1], -1)
        h, c = state[0], state[1]
        cuts = set(detach_at.tolist()) if detach_at is not None else set()
        hs = []
        for t in range(steps):
            if t in cuts:
                cut = (detach_at == t).unsqueeze(-1)
                h, c = torch.where(cut, h.detach(), h), torch.where(cut, c.detach(), c)
            h, c = self.core(features[t], (h, c))
            hs.append(h)
            keep = (1.0 - dones[t].float()).unsqueeze(-1)
            h, c = h * keep, c * keep
        q = self._q(_flatten(obs), torch.stack(hs).flatten(0, 1))
        return q.view(steps, dones.shape[1], -1), torch.stack([h, c])

    @torch.no_grad()
    def burn_in(self, obs, state: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
        """The state after unrolling `dones.shape[0]` steps from `state` with no gradient (R2D2's burn-in: the
        stored state is stale, a few steps of the current network refresh it)."""
        if dones.shape[0] == 0:
            return state
        return self.unroll(obs, state, dones)[1]


def _flatten(obs):
    if isinstance(obs, dict):
        return {k: v.flatten(0, 1) for k, v in obs.items()}
    return obs.flatten(0, 1)

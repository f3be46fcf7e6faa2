"""The policy network: encoder -> optional LSTM core -> action head and value head.

Two entry points, one for each side of the data path:

* `act` (actors): one step for a batch of B envs, sampling actions with a seeded generator.
* `evaluate` (learner): a whole unroll [T+1, B] at once, giving log-probabilities, entropies and values.

Discrete actions (categorical, with an optional `action_mask` observation entry) and Box actions (diagonal
Gaussian with a state-independent log-std) are supported.
"""
from __future__ import annotations

import importlib
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from menger.models.encoders import MASK_KEY, MLPEncoder, build_encoder
from menger.models.normalize import ObsNormalizer

MASKED_LOGIT = -1e9


class ActOutput(NamedTuple):
    action: torch.Tensor
    logp: torch.Tensor  # the behaviour log-probability (apex: the value of the action taken)
    state: torch.Tensor
    value: torch.Tensor | None = None  # apex: the greedy value max_a Q(s, a), for initial priorities


class EvalOutput(NamedTuple):
    logp: torch.Tensor  # [T, B]
    entropy: torch.Tensor  # [T, B]
    values: torch.Tensor  # [T+1, B]


def obs_to_tensors(obs, device: torch.device | str = "cpu"):
    """Numpy (or dict of numpy) batch -> float32 tensors on `device`, without a copy where possible."""
    if isinstance(obs, dict):
        return {k: obs_to_tensors(v, device) for k, v in obs.items()}
    t = obs if isinstance(obs, torch.Tensor) else torch.from_numpy(np.asarray(obs))
    if t.dtype != torch.uint8:  # images stay uint8 until the encoder scales them
        t = t.float()
    return t.to(device, non_blocking=True)


def _load_network(spec: str):
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"model.network must look like 'package.module:ClassName'; got {spec!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"model.network {spec!r} could not be loaded: {exc}") from exc


class Policy(nn.Module):
    def __init__(self, obs_space: gym.Space, action_space: gym.Space, *, encoder: str = "auto",
                 hidden: tuple[int, ...] = (64, 64), activation: str = "tanh", lstm_size: int = 0,
                 network: str | None = None, network_kwargs: dict | None = None, init_log_std: float = 0.0,
                 separate_value: bool = True, obs_clip: float | None = None):
        """`obs_clip`: normalise observations by running statistics the trainer writes in (`ObsNormalizer`),
        clipped to +-obs_clip; None: the network sees them as they come."""
        super().__init__()
        self.obs_space, self.action_space = obs_space, action_space
        self.obs_normalizer = None if obs_clip is None else _obs_normalizer(obs_space, obs_clip)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if not self.discrete and not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"unsupported action space {action_space}: Menger supports Discrete and Box actions")
        self.has_mask = isinstance(obs_space, gym.spaces.Dict) and MASK_KEY in obs_space.spaces
        self.lstm_size = lstm_size
        self.custom, self.core, self.value_encoder = None, None, None
        if network:
            if lstm_size:
                raise ValueError("model.lstm_size cannot be combined with a custom model.network")
            self.custom = _load_network(network)(obs_space, action_space, **(network_kwargs or {}))
            if not self.discrete:
                raise ValueError("a custom model.network is supported for Discrete actions only")
            return
        self.encoder = build_encoder(obs_space, encoder, tuple(hidden), activation)
        # A separate value encoder (as CleanRL and SB3 do for MLPs) stabilises PPO on small control tasks.
        self.value_encoder = (
            build_encoder(obs_space, "mlp", tuple(hidden), activation)
            if separate_value and not lstm_size and isinstance(self.encoder, MLPEncoder) else None
        )
        feat = self.encoder.out_dim
        self.core = nn.LSTMCell(feat, lstm_size) if lstm_size else None
        if lstm_size:
            feat = lstm_size
        n_out = action_space.n if self.discrete else int(np.prod(action_space.shape))
        self.pi = nn.Linear(feat, n_out)
        self.v = nn.Linear(self.value_encoder.out_dim if self.value_encoder is not None else feat, 1)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((n_out,), float(init_log_std)))
        _orthogonal_init(self)

    # ----- shared pieces -------------------------------------------------------------------
    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(2, batch, self.lstm_size) if self.lstm_size else torch.zeros(0)

    def _heads(self, obs, features: torch.Tensor):
        out = self.pi(features)
        src = self.value_encoder(obs) if self.value_encoder is not None else features
        return out, self.v(src).squeeze(-1)

    def _masked(self, logits: torch.Tensor, obs) -> torch.Tensor:
        if self.has_mask:
            logits = logits.masked_fill(obs[MASK_KEY] < 0.5, MASKED_LOGIT)
        return logits

    def logp_entropy(self, out: torch.Tensor, actions: torch.Tensor):
        if self.discrete:
            logp_all = torch.log_softmax(out, dim=-1)
            logp = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            probs = logp_all.exp()
            entropy = -(probs * logp_all.clamp_min(MASKED_LOGIT)).sum(-1)
            return logp, entropy
        std = self.log_std.exp()
        z = (actions - out) / std
        logp = (-0.5 * z.pow(2) - self.log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
        entropy = (0.5 + 0.5 * np.log(2 * np.pi) + self.log_std).sum().expand(out.shape[:-1])
        return logp, entropy

    def _normalized(self, obs):
        return obs if self.obs_normalizer is None else self.obs_normalizer(obs)

    def forward(self, obs, state: torch.Tensor | None = None):
        """One step: (action-distribution parameters [N, A], value [N], next core state)."""
        obs = self._normalized(obs)
        if self.custom is not None:
            logits, value = self.custom(obs)
            return self._masked(logits, obs), value, state
        features = self.encoder(obs)
        if self.core is not None:
            h, c = self.core(features, (state[0], state[1]))
            features, state = h, torch.stack([h, c])
        out, value = self._heads(obs, features)
        return (self._masked(out, obs) if self.discrete else out), value, state

    def action_params(self, obs, state: torch.Tensor | None = None):
        """The action head alone (no value): what acting needs, about a third cheaper with a separate value MLP."""
        if self.custom is not None or self.value_encoder is None:
            out, _, state = self.forward(obs, state)
            return out, state
        out = self.pi(self.encoder(self._normalized(obs)))
        return (self._masked(out, obs) if self.discrete else out), state

    # ----- actor side ----------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        out, state = self.action_params(obs, state)
        if self.discrete:
            logp_all = torch.log_softmax(out, dim=-1)
            if deterministic:
                action = out.argmax(-1)
            else:  # Gumbel-max: one fused sample for the whole batch, seeded by the actor's generator
                u = torch.rand(out.shape, generator=generator).clamp_(1e-10, 1.0)
                action = (logp_all - torch.log(-torch.log(u))).argmax(-1)
            logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            return ActOutput(action, logp, state)
        if deterministic:
            action = out
        else:
            action = out + self.log_std.exp() * torch.randn(out.shape, generator=generator)
        logp, _ = self.logp_entropy(out, action)
        return ActOutput(action, logp, state)

    # ----- learner side --------------------------------------------------------------------
    def evaluate(self, obs, actions: torch.Tensor, state0: torch.Tensor, dones: torch.Tensor) -> EvalOutput:
        """Score an unroll. obs: [T+1, B, ...]; actions: [T, B, ...]; dones: [T, B] (episode ended at t)."""
        t1, batch = dones.shape[0] + 1, dones.shape[1]
        flat = _flatten_time(obs)
        if self.core is None:
            out, values, _ = self.forward(flat)
            out = _unflatten_time(out, t1, batch)
            values = values.view(t1, batch)
        else:
            features = self.encoder(self._normalized(flat)).view(t1, batch, -1)
            h, c = state0[0], state0[1]
            hs = []
            for t in range(t1):
                h, c = self.core(features[t], (h, c))
                hs.append(h)
                if t < t1 - 1:
                    keep = (1.0 - dones[t].float()).unsqueeze(-1)
                    h, c = h * keep, c * keep
            hs = torch.stack(hs)
            out, values = self._heads(None, hs.flatten(0, 1))
            out, values = out.view(t1, batch, -1), values.view(t1, batch)
            if self.discrete:
                out = self._masked(out.flatten(0, 1), flat).view(t1, batch, -1)
        logp, entropy = self.logp_entropy(out[:-1], actions)
        return EvalOutput(logp, entropy, values)


def _obs_normalizer(obs_space: gym.Space, clip: float) -> ObsNormalizer:
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"env.normalize.obs needs Box observations; this env's are {obs_space}. Unset "
                         "env.normalize.obs, or flatten them: env.wrappers=['gymnasium.wrappers:FlattenObservation']")
    if np.dtype(obs_space.dtype) == np.uint8:
        raise ValueError(f"env.normalize.obs with uint8 image observations {obs_space}: images are already scaled "
                         "(the CNN divides by 255); unset env.normalize.obs")
    return ObsNormalizer(obs_space.shape, clip)


def _flatten_time(obs):
    if isinstance(obs, dict):
        return {k: v.flatten(0, 1) for k, v in obs.items()}
    return obs.flatten(0, 1)


def _unflatten_time(x: torch.Tensor, t: int, b: int) -> torch.Tensor:
    return x.view(t, b, *x.shape[1:])


def _orthogonal_init(policy: Policy) -> None:
    for module in policy.modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(module.weight, gain=np.sqrt(2))
            nn.init.zeros_(module.bias)
    nn.init.orthogonal_(policy.pi.weight, gain=0.01)
    nn.init.orthogonal_(policy.v.weight, gain=1.0)

"""The policy network: encoder -> optional LSTM core -> action head and value head.

Two entry points, one for each side of the data path:

* `act` (actors): one step for a batch of B envs, sampling actions with a seeded generator.
* `evaluate` (learner): a whole unroll [T+1, B] at once, giving log-probabilities, entropies and values.

The action head is `menger.models.actions.ActionHead`: a categorical for Discrete actions (with an optional
`action_mask` observation entry, also for MultiDiscrete: one flag per class of every dimension), a diagonal
Gaussian with a state-independent log-std for Box actions, and the product of such factors for MultiDiscrete,
MultiBinary and a Tuple or Dict of them.

A custom network (`model.network: package.module:Class`, built as `Class(obs_space, action_space, **kwargs)`)
is one of two kinds:

* an *encoder*, when it has a `features_dim` attribute: `forward(obs) -> features [N, features_dim]`. Menger
  puts its LSTM core (model.lstm_size), the action head and the value head on top: any action space.
* a *policy network* otherwise: `forward(obs) -> (params [N, P], value [N])`, `P = num_action_params(space)`:
  the logits of Discrete actions, the mean of Box ones (Menger owns the log-std), the concatenation of the
  components' for the others. No LSTM core: give the network a `features_dim` for one.

A centralised critic (MAPPO): an observation Dict with a `critic_state` entry (`encoders.CRITIC_KEY`) gives the
value function its own MLP over the policy's inputs and that entry, outside the LSTM core when there is one; the
policy's encoder (Menger's, or a custom encoder, which is built for and handed the observation without it) never
sees it. A whole custom policy network (its own value head) is refused with such an observation.
"""
from __future__ import annotations

import importlib
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from menger.models.actions import MASKED_LOGIT, ActionCodec, ActionHead
from menger.models.encoders import CRITIC_KEY, MASK_KEY, BoardCNN, MLPEncoder, build_encoder, has_critic_state, without
from menger.models.normalize import ObsNormalizer


class ActOutput(NamedTuple):
    action: torch.Tensor
    logp: torch.Tensor  # the behaviour log-probability (apex: the value of the action taken)
    state: torch.Tensor
    value: torch.Tensor | None = None  # apex: the greedy value max_a Q(s, a), for initial priorities
    extras: dict[str, torch.Tensor] | None = None  # [B, ...] rows of the slot fields an algorithm adds (alphazero)


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


def num_action_params(action_space: gym.Space) -> int:
    """P, the width of the action-distribution parameters a custom policy network returns for `action_space`."""
    return ActionHead(ActionCodec(action_space).leaves).num_params


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
                 separate_value: bool = True, obs_clip: float | None = None,
                 board_channels: tuple[int, ...] = (64, 64), board_mirror: bool = False, squash_mean: bool = False):
        """`obs_clip`: normalise observations by running statistics the trainer writes in (`ObsNormalizer`),
        clipped to +-obs_clip; None: the network sees them as they come. `board_mirror`: the board encoder's
        policy is the same on a board and on its mirror image, with the actions (one per column) mirrored too.
        `squash_mean`: Gaussian means tanh-squashed into the action bounds (`ActionHead`)."""
        super().__init__()
        self.codec = ActionCodec(action_space, "policy")  # refuses what no policy-gradient head can act in
        self.obs_space, self.action_space = obs_space, self.codec.space
        self.head = ActionHead(self.codec.leaves, squash_mean)
        self.obs_normalizer = None if obs_clip is None else _obs_normalizer(obs_space, obs_clip)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        self.has_mask = isinstance(obs_space, gym.spaces.Dict) and MASK_KEY in obs_space.spaces
        if self.has_mask and self.head.categorical_only:
            _check_mask(obs_space[MASK_KEY], self.head.num_params, action_space)
        self.masks = self.has_mask and self.head.categorical_only
        self.lstm_size = lstm_size
        self.mirror = board_mirror
        if board_mirror and network:
            raise ValueError(f"model.board_mirror=true mirrors the board encoder's board; model.network={network!r} "
                             "is a network of your own: mirror the board in it, or unset model.board_mirror")
        self.critic = has_critic_state(obs_space)  # a centralised critic: the value function alone reads it
        if self.critic and not separate_value:
            raise ValueError(f"the observation has a {CRITIC_KEY!r} entry, which only the value function may see, so "
                             "the value needs its own MLP: set model.separate_value=true (or drop the entry)")
        self.custom, self.core, self.value_encoder = None, None, None
        if network:
            # an encoder is built for the observation without the critic's input, and handed it so
            user = _load_network(network)(without(obs_space, CRITIC_KEY), action_space, **(network_kwargs or {}))
            if getattr(user, "features_dim", None) is None:  # a whole policy network: its own heads
                if self.critic:
                    raise ValueError(f"model.network {network!r} returns (params, value), but the observation has a "
                                     f"{CRITIC_KEY!r} entry for a centralised critic, which Menger builds: give the "
                                     "network a `features_dim` attribute and return features [N, features_dim] of "
                                     "the observation without that entry; Menger adds the heads and the critic MLP")
                if lstm_size:
                    raise ValueError(f"model.network {network!r} returns (params, value), so it cannot sit in front "
                                     "of Menger's LSTM core (model.lstm_size); give it a `features_dim` attribute and "
                                     "return features [N, features_dim]: Menger then adds the core and the heads")
                self.custom = user
                if self.head.num_gaussian:
                    self.log_std = nn.Parameter(torch.full((self.head.num_gaussian,), float(init_log_std)))
                self._check_custom(network)
                return
            self.encoder, separate_value = user, self.critic
        else:
            self.encoder = build_encoder(obs_space, encoder, tuple(hidden), activation,
                                         board_channels=board_channels)
        # A separate value encoder (as CleanRL and SB3 do for MLPs) stabilises PPO on small control tasks. A
        # centralised critic's is always there: an MLP over the policy's inputs and the critic state, beside the
        # LSTM core (if any), so the value reads the global state at every step without a memory of its own.
        self.value_encoder = (
            build_encoder(obs_space, "mlp", tuple(hidden), activation, critic=self.critic)
            if self.critic or (separate_value and not lstm_size and isinstance(self.encoder, MLPEncoder)) else None
        )
        feat = int(self.encoder.features_dim if network else self.encoder.out_dim)
        self.core = nn.LSTMCell(feat, lstm_size) if lstm_size else None
        if lstm_size:
            feat = lstm_size
        self.pi = nn.Linear(feat, self.head.num_params)
        self.v = nn.Linear(self.value_encoder.out_dim if self.value_encoder is not None else feat, 1)
        if self.head.num_gaussian:
            self.log_std = nn.Parameter(torch.full((self.head.num_gaussian,), float(init_log_std)))
        _orthogonal_init(self, skip=self.encoder if network else None)
        if board_mirror:
            self.column_board_key("model.board_mirror", action_space)

    def column_board_key(self, setting: str, action_space: gym.Space | None = None) -> str:
        """The board encoder's observation entry ("" for a bare board) when the actions are the board's columns,
        so that the board and its actions can be mirrored together (`model.board_mirror`, AlphaZero's
        `alphazero.mirror`); a ValueError naming `setting` when they cannot."""
        action_space = self.codec.env_space if action_space is None else action_space
        if not isinstance(self.encoder, BoardCNN) or self.core is not None:
            raise ValueError(f"{setting}=true needs model.encoder=board and no recurrent core "
                             "(model.lstm_size=0): it mirrors the board the board encoder reads")
        width = self.encoder.width
        if not (isinstance(action_space, gym.spaces.Discrete) and action_space.n == width):
            raise ValueError(f"{setting}=true mirrors one action per column of the board [H, W={width}, C]; "
                             f"the actions are {action_space}: it fits games played by columns (Connect Four), "
                             f"so unset {setting} for this one")
        return self.encoder.board_key

    def _check_custom(self, network: str) -> None:
        """One forward on zeros: a network whose outputs do not fit the action space fails here, saying so."""
        zeros = gym.vector.utils.create_empty_array(self.obs_space, 2, fn=np.zeros)
        obs = obs_to_tensors(zeros)
        if isinstance(obs, dict):  # as actors hand Dict observations over: every entry float32
            obs = {key: value.float() for key, value in obs.items()}
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            out = self.custom(obs)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(f"model.network {network!r} must return (params [N, P], value [N]), or have a "
                             "`features_dim` attribute and return features; it returned "
                             f"{type(out).__name__}")
        params, value = out
        if tuple(params.shape) != (2, self.head.num_params) or tuple(value.shape) != (2,):
            raise ValueError(f"model.network {network!r} returned params {tuple(params.shape)} and value "
                             f"{tuple(value.shape)} for 2 observations; {self.codec.env_space} needs params "
                             f"(2, {self.head.num_params}) (logits of discrete components, means of Box ones: "
                             "menger.models.num_action_params) and value (2,)")

    # ----- shared pieces -------------------------------------------------------------------
    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(2, batch, self.lstm_size) if self.lstm_size else torch.zeros(0)

    def _features(self, obs) -> torch.Tensor:
        """The policy's encoder on the observation without the critic's input."""
        if self.critic:
            obs = {key: value for key, value in obs.items() if key != CRITIC_KEY}
        return self.encoder(obs)

    def _mirrored_heads(self, obs):
        """The heads on the board and on its mirror image in one batch, averaged: the mirror's logits read with
        the columns reversed, so a move and its mirror image get one logit (and the two boards one value)."""
        key = self.encoder.board_key
        n = len(obs[key] if key else obs)
        if key:  # [N, H, W, C]: dim 2 is the board's columns
            both = {k: torch.cat([v, v.flip(2) if k == key else v]) for k, v in obs.items()}
        else:
            both = torch.cat([obs, obs.flip(2)])
        out, value = self._heads(both, self._features(both))
        return 0.5 * (out[:n] + out[n:].flip(-1)), 0.5 * (value[:n] + value[n:])

    def _heads(self, obs, features: torch.Tensor):
        out = self.pi(features)
        src = self.value_encoder(obs) if self.value_encoder is not None else features
        return out, self.v(src).squeeze(-1)

    def _masked(self, logits: torch.Tensor, obs) -> torch.Tensor:
        if self.masks:
            logits = logits.masked_fill(obs[MASK_KEY] < 0.5, MASKED_LOGIT)
        return logits

    @property
    def _log_std(self) -> torch.Tensor | None:
        return self.log_std if self.head.num_gaussian else None

    def logp_entropy(self, out: torch.Tensor, actions: torch.Tensor):
        """log pi(actions) and the entropy, each [...]: sums over the factors of the action distribution."""
        return self.head.log_prob_entropy(out, self._log_std, actions)

    def _normalized(self, obs):
        return obs if self.obs_normalizer is None else self.obs_normalizer(obs)

    def forward(self, obs, state: torch.Tensor | None = None):
        """One step: (action-distribution parameters [N, P], value [N], next core state)."""
        obs = self._normalized(obs)
        if self.custom is not None:
            out, value = self.custom(obs)
            return self._masked(out, obs), value, state
        if self.mirror:
            out, value = self._mirrored_heads(obs)
            return self._masked(out, obs), value, state
        features = self._features(obs)
        if self.core is not None:
            h, c = self.core(features, (state[0], state[1]))
            features, state = h, torch.stack([h, c])
        out, value = self._heads(obs, features)
        return self._masked(out, obs), value, state

    def action_params(self, obs, state: torch.Tensor | None = None):
        """The action head alone (no value): what acting needs, about a third cheaper with a separate value MLP."""
        if self.custom is not None or self.value_encoder is None or self.mirror:
            out, _, state = self.forward(obs, state)
            return out, state
        features = self._features(self._normalized(obs))  # a centralised critic's input is not needed here
        if self.core is not None:
            h, c = self.core(features, (state[0], state[1]))
            features, state = h, torch.stack([h, c])
        return self._masked(self.pi(features), obs), state

    # ----- actor side ----------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        """Actions in `self.action_space` (`self.codec.to_env` turns them into the env's), sampled with
        `generator` (categoricals by Gumbel-max: one fused draw per factor), or each factor's mode."""
        out, state = self.action_params(obs, state)
        action, logp = self.head.sample(out, self._log_std, generator, deterministic)
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
            flat = self._normalized(flat)
            features = self._features(flat).view(t1, batch, -1)
            h, c = state0[0], state0[1]
            hs = []
            for t in range(t1):
                h, c = self.core(features[t], (h, c))
                hs.append(h)
                if t < t1 - 1:
                    keep = (1.0 - dones[t].float()).unsqueeze(-1)
                    h, c = h * keep, c * keep
            hs = torch.stack(hs)
            out, values = self._heads(flat, hs.flatten(0, 1))
            out = self._masked(out, flat).view(t1, batch, -1)
            values = values.view(t1, batch)
        logp, entropy = self.logp_entropy(out[:-1].flatten(0, 1), actions.flatten(0, 1))
        return EvalOutput(logp.view(t1 - 1, batch), entropy.view(t1 - 1, batch), values)


def _check_mask(mask_space: gym.Space, logits: int, action_space: gym.Space) -> None:
    size = int(np.prod(mask_space.shape))
    if size != logits:
        raise ValueError(f"the observation's action_mask has {size} entries, but {action_space} has {logits} "
                         "logits: give one flag per action (Discrete(n): n; MultiDiscrete(nvec): sum(nvec), the "
                         "dimensions' classes one after another)")


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


def _orthogonal_init(policy: Policy, skip: nn.Module | None = None) -> None:
    """Orthogonal weights, zero biases (the PPO practice); a user's encoder (`skip`) keeps its own."""
    theirs = set(skip.modules()) if skip is not None else set()
    for module in policy.modules():
        if isinstance(module, (nn.Linear, nn.Conv2d)) and module not in theirs:
            nn.init.orthogonal_(module.weight, gain=np.sqrt(2))
            nn.init.zeros_(module.bias)
    nn.init.orthogonal_(policy.pi.weight, gain=0.01)
    nn.init.orthogonal_(policy.v.weight, gain=1.0)

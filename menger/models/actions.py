"""Action spaces: what a network acts in, how its actions reach the env, and the policy gradient's distribution.

    codec = ActionCodec(env.single_action_space, "policy")  # refuses a space the family cannot act in
    codec.space                                             # what the network emits and an unroll slot stores
    env_actions = codec.to_env(network_actions)             # [N, ...] numpy -> what VecEnv.step takes
    head = ActionHead(codec.leaves)                         # ppo, impala, appo: a product of distributions
    action, logp = head.sample(params, log_std, generator)  # params [N, head.num_params]
    logp, entropy = head.log_prob_entropy(params, log_std, action)

A space is cut into *leaves*, each one distribution: Discrete and MultiDiscrete are categoricals (one per
dimension), MultiBinary independent Bernoullis, Box a diagonal Gaussian; a Tuple or Dict of those (one level)
is the product of its components' leaves. The product's log-probability and entropy are the sums over its
factors, its deterministic action each factor's mode.

What each family acts in (`codec.space`; an algorithm names its family in its registry entry,
`menger.algorithms.Algorithm.actions`):

* policy (ppo, impala, appo): Discrete and Box as they are; MultiDiscrete and MultiBinary (and a
  Tuple/Dict of only discrete components) as one flat MultiDiscrete of int64 indices; anything with a Box
  component as one flat float32 Box, a discrete component's index written as a float (exact below 2**24).
* q (apex, r2d2, pqn): one joint Discrete over every combination of the components (mixed radix, the
  first component the most significant), as long as it has at most `MAX_JOINT_ACTIONS` actions.
* box (sac): a Box, or a Tuple/Dict of Boxes concatenated into one flat Box.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch

MASKED_LOGIT = -1e9
MAX_JOINT_ACTIONS = 4096  # Q-learning over a joint Discrete: one Q value per combination of the components
FAMILIES = ("policy", "q", "box")
_FAMILY_EXAMPLE = {"policy": "ppo", "q": "apex", "box": "sac"}  # who the messages name when no algorithm is given


class Leaf(NamedTuple):
    """One factor of the product. categorical: `sizes` holds each dimension's class count (Discrete: one);
    bernoulli and gaussian: `sizes` is (number of entries,)."""

    kind: str                 # "categorical", "bernoulli" or "gaussian"
    key: object               # None for a whole space; the index (Tuple) or key (Dict) of its component
    space: gym.Space
    sizes: tuple[int, ...]

    @property
    def width(self) -> int:
        """Entries in the flat action."""
        return len(self.sizes) if self.kind == "categorical" else self.sizes[0]

    @property
    def num_params(self) -> int:
        """Entries in the distribution's parameter vector (logits or means)."""
        return sum(self.sizes) if self.kind == "categorical" else self.sizes[0]


def _leaf(space: gym.Space, key, where: str) -> Leaf:
    if isinstance(space, gym.spaces.Discrete):
        return Leaf("categorical", key, space, (int(space.n),))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return Leaf("categorical", key, space, tuple(int(n) for n in np.asarray(space.nvec).ravel()))
    if isinstance(space, gym.spaces.MultiBinary):
        return Leaf("bernoulli", key, space, (int(np.prod(space.shape)),))
    if isinstance(space, gym.spaces.Box):
        return Leaf("gaussian", key, space, (int(np.prod(space.shape)),))
    if isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict)):
        raise ValueError(f"action space {where} nests {type(space).__name__} in a Tuple/Dict; Menger acts in one "
                         "level of Tuple/Dict (of Discrete, MultiDiscrete, MultiBinary and Box): flatten the inner "
                         "one into its parent (gymnasium.wrappers.FlattenObservation's idea, for actions)")
    raise ValueError(f"unsupported action space {where}: {space}. Menger acts in Discrete, MultiDiscrete, MultiBinary "
                     "and Box spaces, and in a Tuple or Dict of them")


def action_leaves(space: gym.Space) -> list[Leaf]:
    """The factors of `space`'s distribution, in the order of its components."""
    if isinstance(space, gym.spaces.Tuple):
        return [_leaf(sub, i, f"{space}[{i}]") for i, sub in enumerate(space.spaces)]
    if isinstance(space, gym.spaces.Dict):
        return [_leaf(sub, key, f"{space}[{key!r}]") for key, sub in space.spaces.items()]
    return [_leaf(space, None, str(space))]


def _index_sizes(leaves: list[Leaf]) -> tuple[int, ...]:
    """The class count of every entry of a flat action of discrete leaves (a bit has two)."""
    return tuple(n for leaf in leaves for n in (leaf.sizes if leaf.kind == "categorical" else (2,) * leaf.width))


def _flat_box(leaves: list[Leaf]) -> gym.spaces.Box:
    """The flat float32 Box of the leaves' entries (a discrete entry's bounds are its index range)."""
    low, high = [], []
    for leaf in leaves:
        if leaf.kind == "gaussian":
            low.append(np.asarray(leaf.space.low, np.float64).ravel())
            high.append(np.asarray(leaf.space.high, np.float64).ravel())
        elif leaf.kind == "bernoulli":
            low.append(np.zeros(leaf.width))
            high.append(np.ones(leaf.width))
        else:
            low.append(np.zeros(leaf.width))
            high.append(np.asarray(leaf.sizes, np.float64) - 1)
    return gym.spaces.Box(np.concatenate(low).astype(np.float32), np.concatenate(high).astype(np.float32),
                          dtype=np.float32)


class ActionCodec:
    """What a network of one family ("policy", "q" or "box") acts in for the env's `env_space`, and the way back
    to the env. `family` may also be an algorithm's name (its registry entry says its family); `name` is what
    the error messages call the algorithm."""

    def __init__(self, env_space: gym.Space, family: str = "policy", name: str | None = None):
        if family not in FAMILIES:  # an algorithm's name
            from menger.registry import get

            family, name = get(family).actions, name or family
        self.env_space, self.family, self.algo = env_space, family, name or _FAMILY_EXAMPLE[family]
        self.leaves = action_leaves(env_space)
        self.whole = isinstance(env_space, (gym.spaces.Discrete, gym.spaces.Box))  # no flat encoding needed
        self.joint_sizes: tuple[int, ...] = ()
        if family == "q":
            self.space = self._joint_space()
        elif family == "box":
            self.space = self._sac_space()
        elif self.whole:
            self.space = env_space
        elif all(leaf.kind != "gaussian" for leaf in self.leaves):
            self.space = gym.spaces.MultiDiscrete(_index_sizes(self.leaves))
        else:
            self.space = _flat_box(self.leaves)

    def _joint_space(self) -> gym.spaces.Discrete:
        if isinstance(self.env_space, gym.spaces.Discrete):
            return self.env_space
        if isinstance(self.env_space, gym.spaces.Box):
            raise ValueError(f"{self.algo} needs Discrete actions, got {self.env_space}; use algo sac for Box actions")
        boxes = [leaf for leaf in self.leaves if leaf.kind == "gaussian"]
        if boxes:
            raise ValueError(f"{self.algo} needs discrete actions; {self.env_space} has the Box component "
                             f"{boxes[0].space}: use algo sac for Box actions, or ppo, impala or appo for a mix of "
                             "discrete and continuous components")
        self.joint_sizes = _index_sizes(self.leaves)
        joint = math.prod(self.joint_sizes)
        if joint > MAX_JOINT_ACTIONS:
            raise ValueError(f"{self.algo} flattens {self.env_space} into one Discrete of {joint} joint actions, more "
                             f"than the {MAX_JOINT_ACTIONS} a Q network's head should hold (one Q value per "
                             "combination); use algo ppo, impala or appo, whose product distribution scores each "
                             "component on its own, or make the space smaller")
        return gym.spaces.Discrete(joint)

    def _sac_space(self) -> gym.spaces.Box:
        discrete = [leaf for leaf in self.leaves if leaf.kind != "gaussian"]
        if self.whole and discrete:
            raise ValueError(f"sac needs a bounded Box action space, got {self.env_space}; use apex for Discrete "
                             "actions")
        if discrete:
            raise ValueError(f"sac needs continuous (Box) actions; {self.env_space} has the discrete component "
                             f"{discrete[0].space}: use apex or r2d2 for discrete actions, or ppo, impala or appo "
                             "for a mix of discrete and continuous components")
        return self.env_space if self.whole else _flat_box(self.leaves)

    # ----- network actions -> env actions ----------------------------------------------------------------
    def to_env(self, actions: np.ndarray):
        """The batch of N network actions as `VecEnv.step` takes it: an array [N, ...] for Discrete, Box,
        MultiDiscrete and MultiBinary spaces (Box entries clipped to the bounds), a list of N tuples or dicts
        for Tuple and Dict spaces."""
        actions = np.asarray(actions)
        if self.joint_sizes:
            actions = self.unravel(actions)
        if self.whole:
            return self._leaf_to_env(self.leaves[0], actions.reshape(len(actions), -1) if
                                     isinstance(self.env_space, gym.spaces.Box) else actions)
        parts, at = [], 0
        flat = actions.reshape(len(actions), -1)
        for leaf in self.leaves:
            parts.append(self._leaf_to_env(leaf, flat[:, at:at + leaf.width]))
            at += leaf.width
        if len(self.leaves) == 1 and self.leaves[0].key is None:  # MultiDiscrete, MultiBinary
            return parts[0]
        if isinstance(self.env_space, gym.spaces.Tuple):
            return [tuple(part[i] for part in parts) for i in range(len(flat))]
        keys = [leaf.key for leaf in self.leaves]
        return [dict(zip(keys, (part[i] for part in parts))) for i in range(len(flat))]

    def unravel(self, joint: np.ndarray) -> np.ndarray:
        """Joint Discrete indices [N] -> each component's index [N, K] (mixed radix, the first the most
        significant)."""
        return np.stack(np.unravel_index(np.asarray(joint, np.int64), self.joint_sizes), axis=-1)

    def ravel(self, components: np.ndarray) -> np.ndarray:
        """Each component's index [N, K] -> the joint Discrete index [N] (`unravel`'s inverse)."""
        return np.ravel_multi_index(tuple(np.asarray(components, np.int64).T), self.joint_sizes)

    @staticmethod
    def _leaf_to_env(leaf: Leaf, values: np.ndarray):
        space, n = leaf.space, len(values)
        if isinstance(space, gym.spaces.Box):
            clipped = np.clip(values.reshape(n, *space.shape), space.low, space.high)
            return clipped.astype(space.dtype, copy=False)
        if isinstance(space, gym.spaces.Discrete):
            index = values.reshape(n).astype(np.int64, copy=False)
            return index + int(space.start) if space.start else index
        if isinstance(space, gym.spaces.MultiDiscrete):
            index = values.reshape(n, *space.shape).astype(space.dtype, copy=False)
            return index + space.start if np.any(space.start) else index
        return values.reshape(n, *space.shape).astype(space.dtype)  # MultiBinary


def _finite_bounds(space: gym.spaces.Box) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(mid, half-width, True where both bounds are finite) over a Box's flat entries; None when none is."""
    low = np.asarray(space.low, dtype=np.float64).ravel()
    high = np.asarray(space.high, dtype=np.float64).ravel()
    finite = np.isfinite(low) & np.isfinite(high)
    if not finite.any():
        return None
    low, high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)  # unbounded entries: left as they are
    mid, half = (high + low) / 2, (high - low) / 2
    return (torch.as_tensor(mid, dtype=torch.float32), torch.as_tensor(half, dtype=torch.float32),
            torch.as_tensor(finite))


class ActionHead:
    """The policy gradient's action distribution over `leaves`: a product of categoricals, Bernoullis and one
    diagonal Gaussian per Box leaf, its parameters one flat vector [N, num_params] (logits and means, in leaf
    order); the Gaussians' log-stds are the caller's: [num_gaussian] for every row, or [N, num_gaussian], one
    row each (a bank of independent agents' networks, `menger.models.agents`).

    Actions: [N] int64 for a lone Discrete leaf, [N, d] for a lone Box, else the flat [N, width] of `codec.space`.
    """

    def __init__(self, leaves: list[Leaf], squash_mean: bool = False):
        """`squash_mean`: each Gaussian's mean is mid + half * tanh(param) over the dimensions of its Box with
        finite bounds (the others as they are), so it stays inside the bounds; the noise is added after it and
        the env clips the sample, as for an unsquashed mean (`model.squash_mean`)."""
        self.leaves = leaves
        self.squash_mean = squash_mean
        self._bounds = [_finite_bounds(leaf.space) if squash_mean and leaf.kind == "gaussian" else None
                        for leaf in leaves]
        self.num_params = sum(leaf.num_params for leaf in leaves)
        self.num_gaussian = sum(leaf.width for leaf in leaves if leaf.kind == "gaussian")
        self.single = len(leaves) == 1 and leaves[0].key is None and isinstance(
            leaves[0].space, (gym.spaces.Discrete, gym.spaces.Box))  # actions keep the space's own shape
        self.categorical_only = all(leaf.kind == "categorical" for leaf in leaves)
        self.discrete = self.single and leaves[0].kind == "categorical"  # one Discrete: actions [N]
        self.float_actions = any(leaf.kind == "gaussian" for leaf in leaves)

    # ----- per leaf -------------------------------------------------------------------------------------
    def _split(self, params: torch.Tensor, actions: torch.Tensor | None = None):
        """(leaf, its params (a Gaussian's mean, squashed with `squash_mean`), its actions [N, width] or None,
        its log-std slice) for each leaf."""
        p_at = a_at = g_at = 0
        if actions is not None and self.single:
            actions = actions.reshape(actions.shape[0], -1)
        for leaf, bounds in zip(self.leaves, self._bounds):
            mine = params[..., p_at:p_at + leaf.num_params]
            if bounds is not None:
                mid, half, finite = bounds
                squashed = mid.to(mine.device, mine.dtype) + half.to(mine.device, mine.dtype) * torch.tanh(mine)
                mine = torch.where(finite.to(mine.device), squashed, mine)
            acts = None if actions is None else actions[..., a_at:a_at + leaf.width]
            yield leaf, mine, acts, slice(g_at, g_at + (leaf.width if leaf.kind == "gaussian" else 0))
            p_at += leaf.num_params
            a_at += leaf.width
            g_at += leaf.width if leaf.kind == "gaussian" else 0

    @staticmethod
    def _padded_logp(leaf: Leaf, logits: torch.Tensor) -> torch.Tensor:
        """Log-softmax per dimension: [N, K, max class count], padded classes at MASKED_LOGIT."""
        if len(leaf.sizes) == 1:
            return torch.log_softmax(logits, dim=-1).unsqueeze(-2)
        width = max(leaf.sizes)
        if all(n == width for n in leaf.sizes):
            return torch.log_softmax(logits.unflatten(-1, (len(leaf.sizes), width)), dim=-1)
        rows = [torch.nn.functional.pad(part, (0, width - part.shape[-1]), value=MASKED_LOGIT)
                for part in logits.split(list(leaf.sizes), dim=-1)]
        return torch.log_softmax(torch.stack(rows, dim=-2), dim=-1)

    def log_prob_entropy(self, params: torch.Tensor, log_std: torch.Tensor | None,
                         actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum over the leaves of log pi(a) and of the entropies; params [..., P], actions [..., width]."""
        if self.discrete:  # the common case, kept short: it runs on every minibatch
            logp_all = torch.log_softmax(params, dim=-1)
            logp = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            return logp, -(logp_all.exp() * logp_all.clamp_min(MASKED_LOGIT)).sum(-1)
        logp = entropy = 0
        for leaf, p, a, g in self._split(params, actions):
            if leaf.kind == "categorical":
                logp_all = self._padded_logp(leaf, p)
                logp = logp + logp_all.gather(-1, a.long().unsqueeze(-1)).squeeze(-1).sum(-1)
                entropy = entropy - (logp_all.exp() * logp_all.clamp_min(MASKED_LOGIT)).sum((-1, -2))
            elif leaf.kind == "bernoulli":
                logp = logp + (a.to(p.dtype) * p - torch.nn.functional.softplus(p)).sum(-1)
                entropy = entropy + (torch.nn.functional.softplus(p) - p * torch.sigmoid(p)).sum(-1)
            else:
                s = log_std[..., g]
                z = (a - p) / s.exp()
                logp = logp + (-0.5 * z.pow(2) - s - 0.5 * math.log(2 * math.pi)).sum(-1)
                entropy = entropy + (0.5 + 0.5 * math.log(2 * math.pi) + s).sum(-1).expand(p.shape[:-1])
        return logp, entropy

    def sample(self, params: torch.Tensor, log_std: torch.Tensor | None, generator: torch.Generator | None = None,
               deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions, log-probabilities) for params [N, P]: sampled with `generator` (categoricals by Gumbel-max,
        one fused draw per leaf), or each factor's mode."""
        if self.discrete:  # the common case, kept short: it runs on every step of every actor
            logp_all = torch.log_softmax(params, dim=-1)
            if deterministic:
                action = logp_all.argmax(-1)
            else:
                u = torch.rand(params.shape, generator=generator).clamp_(1e-10, 1.0).to(params.device)
                action = (logp_all - torch.log(-torch.log(u))).argmax(-1)
            return action, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        parts, logp = [], 0
        for leaf, p, _, g in self._split(params):
            if leaf.kind == "categorical":
                logp_all = self._padded_logp(leaf, p)
                if deterministic:
                    index = logp_all.argmax(-1)
                else:
                    u = torch.rand(logp_all.shape, generator=generator).clamp_(1e-10, 1.0).to(p.device)
                    index = (logp_all - torch.log(-torch.log(u))).argmax(-1)
                logp = logp + logp_all.gather(-1, index.unsqueeze(-1)).squeeze(-1).sum(-1)
                parts.append(index)
            elif leaf.kind == "bernoulli":
                if deterministic:
                    bits = (p > 0).to(p.dtype)
                else:
                    bits = (torch.rand(p.shape, generator=generator).to(p.device) < torch.sigmoid(p)).to(p.dtype)
                logp = logp + (bits * p - torch.nn.functional.softplus(p)).sum(-1)
                parts.append(bits.long())
            else:
                s = log_std[..., g]
                if deterministic:
                    a = p
                else:
                    a = p + s.exp() * torch.randn(p.shape, generator=generator).to(p.device)
                z = (a - p) / s.exp()
                logp = logp + (-0.5 * z.pow(2) - s - 0.5 * math.log(2 * math.pi)).sum(-1)
                parts.append(a)
        if self.single:
            leaf = self.leaves[0]
            if leaf.kind == "categorical":
                return parts[0].squeeze(-1), logp
            return parts[0].reshape(*parts[0].shape[:-1], *leaf.space.shape), logp
        if self.float_actions:
            return torch.cat([part.to(params.dtype) for part in parts], dim=-1), logp
        return torch.cat(parts, dim=-1), logp

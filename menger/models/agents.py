"""Independent parameters for K agents (`model.agents=K`): K copies of the policy network, one per agent.

Each row of a batch belongs to one agent, the argmax of its one-hot `agent_id` entry (`encoders.AGENT_KEY`, [K]);
its actions, log-probabilities, entropies and values are those of that agent's own `Policy`, which is built for
the observation without `agent_id` (a constant for it) and which no other agent's rows train: a loss on agent
0's rows gives agent 1's parameters a gradient of exactly zero.

`AgentBank` has what actors, learners, central inference, evaluation and export use of a `Policy`: `act`
(seeded sampling, one draw for the whole batch as a single network's), `evaluate` ([T+1, B] unrolls; a column may
change agents from step to step), `forward`, `logp_entropy`, `initial_state`, `codec`, `head`, `obs_space`,
`action_space` and `lstm_size` (0: the bank is feed-forward). Every agent's network runs on every row and each
row takes its own agent's outputs (`torch.where`): K small MLPs cost K forwards, with no data-dependent
indexing, so the bank traces for `menger export` as it is.

The Gaussian log-stds of Box actions are per agent, so the bank's distribution parameters carry each row's
log-std after its means (`RowHead`), and the head takes no separate log-std.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from menger.models.actions import ActionHead
from menger.models.encoders import AGENT_KEY, without
from menger.models.policy import ActOutput, EvalOutput, Policy, _flatten_time


class RowHead:
    """`ActionHead` over params [N, P + G]: the P distribution parameters, then the row's G Gaussian log-stds."""

    num_gaussian = 0  # no log-std beside the parameters: each row's rides in them

    def __init__(self, head: ActionHead):
        self.inner = head
        self.width = head.num_params
        self.num_params = head.num_params + head.num_gaussian
        self.leaves, self.single, self.discrete = head.leaves, head.single, head.discrete
        self.categorical_only, self.float_actions = head.categorical_only, head.float_actions

    def _split(self, params: torch.Tensor):
        if not self.inner.num_gaussian:
            return params, None
        return params[..., :self.width], params[..., self.width:]

    def log_prob_entropy(self, params: torch.Tensor, log_std: torch.Tensor | None, actions: torch.Tensor):
        means, log_std = self._split(params)
        return self.inner.log_prob_entropy(means, log_std, actions)

    def sample(self, params: torch.Tensor, log_std: torch.Tensor | None = None,
               generator: torch.Generator | None = None, deterministic: bool = False):
        means, log_std = self._split(params)
        return self.inner.sample(means, log_std, generator, deterministic)


def check_agent_space(obs_space: gym.Space, agents: int) -> None:
    """Refuse an observation that cannot say which of `agents` networks a row belongs to."""
    fix = (f"give the observation a Dict entry {AGENT_KEY!r}: a one-hot float32 Box({agents},) of the row's agent "
           "(a multi-agent env adapter adds it for independent parameters), or set model.agents=0 for one network "
           "shared by every row")
    if not (isinstance(obs_space, gym.spaces.Dict) and AGENT_KEY in obs_space.spaces):
        raise ValueError(f"model.agents={agents} picks each row's network by its {AGENT_KEY!r} entry, but the "
                         f"observation is {obs_space}; {fix}")
    space = obs_space[AGENT_KEY]
    if not isinstance(space, gym.spaces.Box) or tuple(space.shape) != (agents,):
        raise ValueError(f"model.agents={agents} needs the {AGENT_KEY!r} entry to be a one-hot Box({agents},), one "
                         f"entry per agent; it is {space}: set model.agents to its number of agents, or {fix}")


def _pick(parts: list[torch.Tensor], index: torch.Tensor) -> torch.Tensor:
    """Row i of parts[index[i]]: every row from its own agent's output, with no gradient to the others."""
    picked = parts[0]
    for k, part in enumerate(parts[1:], start=1):
        picked = torch.where((index == k).view(-1, *([1] * (part.dim() - 1))), part, picked)
    return picked


class AgentBank(nn.Module):
    def __init__(self, obs_space: gym.Space, action_space: gym.Space, agents: int, **policy_kwargs):
        """`agents` networks, each `Policy(obs_space without agent_id, action_space, **policy_kwargs)`."""
        super().__init__()
        if agents < 1:
            raise ValueError(f"model.agents={agents}: an agent bank needs at least one agent")
        check_agent_space(obs_space, agents)
        if policy_kwargs.get("lstm_size"):
            raise ValueError(f"model.agents={agents} with model.lstm_size={policy_kwargs['lstm_size']}: independent "
                             "agents' networks are feed-forward; unset model.lstm_size, or share one recurrent "
                             "network (model.agents=0, with the agent id as an input)")
        self.agents = nn.ModuleList(Policy(without(obs_space, AGENT_KEY), action_space, **policy_kwargs)
                                    for _ in range(agents))
        first = self.agents[0]
        self.codec, self.obs_space, self.action_space = first.codec, obs_space, first.action_space
        self.head = RowHead(first.head)
        self.lstm_size = 0
        self.obs_normalizer = None

    def agent_index(self, obs) -> torch.Tensor:
        """Each row's agent [N]: the argmax of its one-hot agent id."""
        return obs[AGENT_KEY].argmax(-1)

    def initial_state(self, batch: int) -> torch.Tensor:
        return torch.zeros(0)

    def _with_log_std(self, agent: Policy, out: torch.Tensor) -> torch.Tensor:
        if not self.head.inner.num_gaussian:
            return out
        return torch.cat([out, agent.log_std.expand(out.shape[0], -1)], dim=-1)

    def forward(self, obs, state: torch.Tensor | None = None):
        """One step: (each row's agent's action-distribution parameters and log-stds [N, P + G], value [N], state)."""
        index = self.agent_index(obs)
        outs, values = [], []
        for agent in self.agents:
            out, value, _ = agent(obs)
            outs.append(self._with_log_std(agent, out))
            values.append(value)
        return _pick(outs, index), _pick(values, index), state

    def action_params(self, obs, state: torch.Tensor | None = None):
        """The action heads alone (no value), each row from its agent's network."""
        index = self.agent_index(obs)
        outs = [self._with_log_std(agent, agent.action_params(obs)[0]) for agent in self.agents]
        return _pick(outs, index), state

    def logp_entropy(self, out: torch.Tensor, actions: torch.Tensor):
        return self.head.log_prob_entropy(out, None, actions)

    @torch.no_grad()
    def act(self, obs, state: torch.Tensor | None = None, *, deterministic: bool = False,
            generator: torch.Generator | None = None) -> ActOutput:
        """As `Policy.act`: one seeded draw for the whole batch, each row with its agent's distribution."""
        out, state = self.action_params(obs, state)
        action, logp = self.head.sample(out, None, generator, deterministic)
        return ActOutput(action, logp, state)

    def evaluate(self, obs, actions: torch.Tensor, state0: torch.Tensor, dones: torch.Tensor) -> EvalOutput:
        """Score an unroll. obs: [T+1, B, ...]; actions: [T, B, ...]; dones: [T, B]."""
        t1, batch = dones.shape[0] + 1, dones.shape[1]
        out, values, _ = self.forward(_flatten_time(obs))
        out = out.view(t1, batch, -1)
        logp, entropy = self.logp_entropy(out[:-1].flatten(0, 1), actions.flatten(0, 1))
        return EvalOutput(logp.view(t1 - 1, batch), entropy.view(t1 - 1, batch), values.view(t1, batch))


def agent_one_hot(index, agents: int) -> np.ndarray:
    """The `agent_id` entries [N, agents] (float32) of agent indices [N]: what an env adapter writes."""
    return np.eye(agents, dtype=np.float32)[np.asarray(index, np.int64)]

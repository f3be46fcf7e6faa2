"""The actor: B envs, batched inference on cached parameters, unrolls of T steps written in place.

Loop (see `Actor.run`)::

    obs = envs.reset()
    while running:
        slot = wait for a grant from the learner         # back-pressure; answers snapshot requests meanwhile
        if params.version() != my_version: pull           # only when the version moved
        for t in range(T): act on all B envs at once, write obs/action/logp/reward/done into the slot
        send (slot, UnrollMeta(actor, incarnation, sequence, policy_version, frames, finished episodes))

In sync mode the learner grants a slot only after publishing new parameters, so every unroll of an update
acted with the newest parameters. In async mode an actor holds `slots_per_actor` grants and never waits for
an update. Messages are tiny tuples; the unroll itself stays in shared memory.

The actor talks to the learner only through its *port* (`menger.core.ActorPort`): the local one
(`menger.transport.local.ActorLinks`: a pipe, shared-memory slots, `SharedParameters`) or Ray's
(`menger.transport.ray.RayPort`), so the same `Actor` runs under every launcher. A Ray actor is driven one
`Actor.unroll` per remote call instead of by `Actor.run`. Its actions come from an `ActionSource`: its own
cached parameters (`LocalActions`), or a central inference service's client (`runtime.inference.mode: central`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from menger.core import ActionSource, ActorPort, GrantedPort, UnrollMeta
from menger.inference.source import LocalActions
from menger.models.normalize import UnrollMoments


class Actor:
    def __init__(self, actor_id: int, incarnation: int, envs, policy, port: ActorPort, *, unroll_length: int,
                 seed: int, learner_timeout_s: float = 300.0, restore: dict | None = None,
                 actions: ActionSource | None = None, sequence_period: int = 0,
                 moments: UnrollMoments | None = None, gradient=None,
                 exploration: Callable[[int], None] | None = None, action_source: Callable | None = None):
        """`sequence_period` (r2d2): the recurrent state at every this many steps of an unroll goes into its slot's
        `core_states`, the stored state of the sequence that starts there. `moments` (`env.normalize`): each
        unroll's tag carries the moments of what it saw, for the trainer's running statistics. `gradient` (a3c
        with a parameter server: `menger.learners.a3c.A3CGradient`): the actor is an actor-learner, and writes
        the gradient of each unroll's loss into the slot before its tag goes out. `exploration` (Ape-X's
        annealed epsilons): called with the env frames this actor has stepped before each of its unrolls.
        `action_source` (alphazero: a search): builds the actor's own `ActionSource` with `LocalActions`'s
        arguments (policy, the port's parameters, the actor's generator), in place of `LocalActions`."""
        self.actor_id, self.incarnation = actor_id, incarnation
        self.envs, self.policy, self.port = envs, policy, port
        self.unroll_length = unroll_length
        self.sequence_period = sequence_period
        self.moments = moments
        self.gradient = gradient
        self.exploration = exploration
        self.learner_timeout_s = learner_timeout_s
        self.num_envs = envs.num_envs
        self.generator = torch.Generator().manual_seed(seed)
        self.version = -1
        self.sequence = 0
        self.codec = policy.codec  # the network's actions -> the env's (clipped Box entries, joint indices, tuples)
        self.slots = [port.slot(i) for i in range(port.num_slots())]
        self.state = policy.initial_state(self.num_envs)
        # central (SEED RL), the algorithm's own (a search), or on the actor's cached parameters
        self.actions = actions or (action_source or LocalActions)(policy, port.params, self.generator)
        self.episode_return = np.zeros(self.num_envs, np.float64)
        self.episode_length = np.zeros(self.num_envs, np.int64)
        if restore is not None:
            self._restore(restore)
        else:
            self.obs = envs.reset(seed=seed)

    # ----- the loop ------------------------------------------------------------------------
    def run(self) -> None:
        """The local loop: wait for a grant, fill the slot, hand it back (the port's pipe)."""
        port: GrantedPort = self.port
        while True:
            slot = port.wait_for_grant(self.actor_id, self.snapshot, self.learner_timeout_s)
            if slot is None:
                return
            port.submit(slot, self.unroll(slot))

    def unroll(self, slot: int) -> UnrollMeta:
        """One unroll into `slot`, on the newest parameters the port knows of (copied only when they moved)."""
        self.version = self.actions.refresh()
        if self.exploration is not None:  # the unroll count comes back with a restored actor: so does its epsilon
            self.exploration(self.sequence * self.unroll_length * self.num_envs)
        return self._fill(slot)

    def _fill(self, slot: int) -> UnrollMeta:
        view = self.slots[slot]
        obs_views = _obs_views(view)
        _write_obs(obs_views, 0, self.obs)
        recurrent = bool(self.state.numel())
        if recurrent:
            view["core_state"].copy_(self.state)
        stored = view.get("core_states")  # r2d2: the state at each sequence's first step
        restarts = view["restarts"].numpy() if "restarts" in view else None
        actions, logp, rewards = view["actions"].numpy(), view["logp"].numpy(), view["rewards"].numpy()
        dones, valid = view["dones"].numpy(), view["valid"].numpy()
        values = view["values"].numpy() if "values" in view else None  # apex: greedy values for priorities
        terminated = view["terminated"].numpy() if "terminated" in view else None  # replay: not truncations
        truncation_ends = getattr(self.envs, "autoreset_mode", None) != AutoresetMode.NEXT_STEP  # no last obs to bootstrap
        # Where the recurrent state restarts: after an episode's end, where the next observation is the new
        # episode's first; with NEXT_STEP autoreset that is after the (invalid) reset step, so the episode's last
        # observation is still seen with its own state (what a truncation bootstraps from).
        finished_returns: list[float] = []
        finished_lengths: list[int] = []
        finished_envs: list[int] = []
        finished_infos: list[tuple[tuple[str, float], ...]] = []  # env.info_keys: what each episode reported
        faulty = 0  # episodes a fault ended: counted, kept out of the returns and the stop rule
        for t in range(self.unroll_length):
            if stored is not None and t % self.sequence_period == 0 and t // self.sequence_period < len(stored):
                stored[t // self.sequence_period].copy_(self.state)
            out = self.actions.act(_obs_input(obs_views, t), self.state if recurrent else None)
            action = out.action.numpy()
            result = self.envs.step(self.codec.to_env(action))
            self.port.beat(self.actor_id, (t + 1) * self.num_envs)  # before writing: the fence for stale actors
            actions[t] = action
            logp[t] = out.logp.numpy()
            if values is not None:
                values[t] = out.value.numpy()
            for key, rows in (out.extras or {}).items():  # alphazero: the search's targets beside the step
                view[key][t].copy_(rows)
            rewards[t] = result.reward
            ended = result.terminated | result.truncated
            dones[t] = ended | ~result.valid
            valid[t] = result.valid
            if terminated is not None:
                terminated[t] = (result.terminated | result.truncated) if truncation_ends else result.terminated
            _write_obs(obs_views, t + 1, result.obs)
            all_valid = result.valid.all()
            if all_valid:  # the common step: nothing to mask
                self.episode_return += result.reward
                self.episode_length += 1
            else:
                self.episode_return += np.where(result.valid, result.reward, 0.0)
                self.episode_length += result.valid
            if ended.any():
                idx = np.flatnonzero(ended)
                finished_returns += self.episode_return[idx].tolist()
                finished_lengths += self.episode_length[idx].tolist()
                rows = idx.tolist()
                finished_envs += rows
                if result.episode_info is not None:
                    finished_infos += [tuple(result.episode_info.get(row, {}).items()) for row in rows]
                self.episode_return[idx] = 0.0
                self.episode_length[idx] = 0
            if not all_valid:  # a rebuilt env or a dropped value cut an episode short: its return is not a
                cut = ~result.valid & (self.episode_length > 0)  # true one, so it is not counted as one
                faulty += int(cut.sum())
                self.episode_return[cut] = 0.0
                self.episode_length[cut] = 0
            if out.state is not None and recurrent:
                restart = dones[t] if truncation_ends else 1.0 - valid[t]
                if restarts is not None:
                    restarts[t] = restart
                self.state = out.state * torch.from_numpy(1.0 - restart).float().unsqueeze(-1)
            self.obs = result.obs
        if values is not None:  # the value of the state after the last step, for the last windows' priorities
            last = self.actions.act(_obs_input(obs_views, self.unroll_length), self.state if recurrent else None)
            values[self.unroll_length] = last.value.numpy()
        if self.gradient is not None:  # on the parameters it acted with: the tag's version is the gradient's base
            self.gradient.compute(view)
        self.port.beat(self.actor_id, 0)
        self.sequence += 1
        env_stats = tuple(sorted(getattr(self.envs, "stats", {}).items()))
        obs_moments, return_moments = None, None
        if self.moments is not None:
            next_obs = obs_views[1:].numpy() if self.moments.obs else None
            obs_moments, return_moments = self.moments.of_unroll(next_obs, rewards, dones, valid)
        results = tuple(self.envs.pop_results()) if hasattr(self.envs, "pop_results") else ()
        return UnrollMeta(self.actor_id, self.incarnation, self.sequence, self.version,
                          self.unroll_length * self.num_envs, tuple(finished_returns), tuple(finished_lengths),
                          env_stats, faulty_episodes=faulty, invalid_frames=int(valid.size - valid.sum()),
                          obs_moments=obs_moments, return_moments=return_moments, match_results=results,
                          episode_envs=tuple(finished_envs), episode_infos=tuple(finished_infos))

    # ----- exact resume ------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Everything needed to continue bit for bit (for envs that can be snapshotted; see VecEnv.get_state)."""
        obs = {k: np.array(v) for k, v in self.obs.items()} if isinstance(self.obs, dict) else np.array(self.obs)
        return {"env": self.envs.get_state(), "obs": obs, "core_state": self.state.clone(),
                "generator": self.generator.get_state(), "episode_return": self.episode_return.copy(),
                "episode_length": self.episode_length.copy(), "sequence": self.sequence,
                "discounted_return": None if self.moments is None else self.moments.returns.copy()}

    def _restore(self, snap: dict) -> None:
        self.envs.reset(seed=0)
        if snap.get("env") is not None:
            self.envs.set_state(snap["env"])
            self.obs = snap["obs"]
        else:  # this env cannot be snapshotted: its episodes restart (said in the learner's log)
            self.obs = self.envs.reset(seed=int(self.generator.initial_seed()) + self.incarnation)
        self.state = snap["core_state"].clone() if snap.get("core_state") is not None else self.state
        self.generator.set_state(snap["generator"])
        self.episode_return = np.asarray(snap["episode_return"], np.float64).copy()
        self.episode_length = np.asarray(snap["episode_length"], np.int64).copy()
        self.sequence = int(snap["sequence"])
        if self.moments is not None and snap.get("discounted_return") is not None:
            self.moments.returns = np.asarray(snap["discounted_return"], np.float64).copy()


def _obs_views(view: dict) -> dict | torch.Tensor:
    if "obs" in view:
        return view["obs"]
    return {name[4:]: t for name, t in view.items() if name.startswith("obs.")}


def _write_obs(obs_views, t: int, obs) -> None:
    if isinstance(obs_views, dict):
        for key, tensor in obs_views.items():
            tensor[t].numpy()[...] = obs[key]
    else:
        obs_views[t].numpy()[...] = obs


def _obs_input(obs_views, t: int):
    """The policy's input for step t, read straight from the slot (uint8 images stay uint8)."""
    if isinstance(obs_views, dict):
        return {k: v[t].float() for k, v in obs_views.items()}
    return _as_input(obs_views[t])


def _as_input(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype in (torch.float32, torch.uint8) else x.float()

"""Central inference (SEED RL, Espeholt et al. 2020): one batched forward for many actors on the learner's device.

Each actor owns one request slot in shared memory. The service is a thread in the learner's process:

    wait for a first request (the `wakeup` semaphore; a deadline, so `close` is always heard)
    collect more until `max_requests` are in, or `timeout_s` has passed since the first
    copy the newest parameters if their version moved (the seqlocked `SharedParameters`: never torn)
    one forward over every waiting actor's B envs; sample on the CPU with the service's seeded generator
    write action / logp / next state into each slot, set its reply number, wake its actor (its semaphore)

An actor (`CentralActions.act`) writes its observations into its slot, bumps its request number, signals, and
waits for the reply number to match. Numbers, not flags: a reply meant for an actor's previous incarnation
(killed mid-request) is recognised and ignored. Only semaphores and slot indices cross processes; the
observations and actions stay in preallocated shared memory.
"""
from __future__ import annotations

import copy
import multiprocessing as mp
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from menger.inference.service import InferenceService, batched_act
from menger.models.policy import ActOutput
from menger.transport.shm import action_field


def _request_obs_dtype(space: gym.Space) -> torch.dtype:
    """What the actor hands its policy: images stay uint8, everything else is float32."""
    return torch.uint8 if np.dtype(space.dtype) == np.uint8 else torch.float32


@dataclass
class InferenceSlots:
    """One request slot per actor in shared memory, and the semaphores that wake each side.

    obs [A, B, *obs_shape] (a dict of such tensors for Dict observations), core_state / next_state [A, 2, B, H],
    actions [A, B, *action_shape], logp [A, B]; request_seq / reply_seq / version int64 [A],
    request_time float64 [A] (time.monotonic of the request, for the latency metric); closed uint8 [1].
    """

    obs: torch.Tensor | dict
    core_state: torch.Tensor
    actions: torch.Tensor
    logp: torch.Tensor
    next_state: torch.Tensor
    request_seq: torch.Tensor
    reply_seq: torch.Tensor
    version: torch.Tensor
    request_time: torch.Tensor
    closed: torch.Tensor
    wakeup: object            # multiprocessing.Semaphore: one release per request
    replies: list             # one multiprocessing.Semaphore per actor

    @classmethod
    def allocate(cls, num_actors: int, envs_per_actor: int, obs_space: gym.Space, action_space: gym.Space,
                 lstm_size: int = 0) -> "InferenceSlots":
        a, b = num_actors, envs_per_actor

        def shared(shape, dtype):
            return torch.zeros(shape, dtype=dtype).share_memory_()

        if isinstance(obs_space, gym.spaces.Dict):
            obs = {key: shared((a, b, *space.shape), torch.float32) for key, space in obs_space.spaces.items()}
        else:
            obs = shared((a, b, *obs_space.shape), _request_obs_dtype(obs_space))
        shape, dtype = action_field(action_space)
        actions = shared((a, b, *shape), dtype)
        context = mp.get_context("fork")
        return cls(obs=obs, core_state=shared((a, 2, b, lstm_size), torch.float32), actions=actions,
                   logp=shared((a, b), torch.float32), next_state=shared((a, 2, b, lstm_size), torch.float32),
                   request_seq=shared(a, torch.int64), reply_seq=shared(a, torch.int64),
                   version=shared(a, torch.int64), request_time=shared(a, torch.float64),
                   closed=shared(1, torch.uint8), wakeup=context.Semaphore(0),
                   replies=[context.Semaphore(0) for _ in range(a)])

    @property
    def num_actors(self) -> int:
        return self.logp.shape[0]


class CentralActions:
    """The actor's side: an `ActionSource` that asks the service instead of running the policy itself."""

    def __init__(self, slots: InferenceSlots, actor_id: int, params, timeout_s: float = 60.0):
        self.slots, self.actor_id, self.params, self.timeout_s = slots, actor_id, params, timeout_s

    def refresh(self) -> int:
        """The service reads the newest parameters before every forward, so the published version is a lower
        bound of the version behind this unroll's actions (sync mode: exactly it)."""
        return self.params.version()

    def act(self, obs, state: torch.Tensor | None) -> ActOutput:
        slots, a = self.slots, self.actor_id
        if isinstance(obs, dict):
            for key, tensor in slots.obs.items():
                tensor[a].copy_(obs[key])
        else:
            slots.obs[a].copy_(obs)
        if state is not None:
            slots.core_state[a].copy_(state)
        sequence = int(slots.request_seq[a]) + 1
        slots.request_time[a] = time.monotonic()
        slots.request_seq[a] = sequence
        slots.wakeup.release()
        self._wait_for_reply(sequence)
        next_state = slots.next_state[a].clone() if state is not None else None
        return ActOutput(slots.actions[a].clone(), slots.logp[a].clone(), next_state)

    def _wait_for_reply(self, sequence: int) -> None:
        slots, a = self.slots, self.actor_id
        deadline = time.monotonic() + self.timeout_s
        while int(slots.reply_seq[a]) != sequence:
            if slots.closed[0]:
                raise RuntimeError(f"actor {a}: the central inference service has stopped (see the learner's log)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"actor {a}: no answer from the central inference service for "
                                   f"{self.timeout_s:.0f} s; is the learner's process overloaded?")
            slots.replies[a].acquire(timeout=0.5)  # a stale wake-up (an old incarnation's reply) just loops


@dataclass(frozen=True)
class CentralClient:
    """What an actor receives (inherited by a fork, or shared by a thread): the slots, and its ActionSource."""

    slots: InferenceSlots

    def actions_for(self, actor_id: int, params) -> CentralActions:
        return CentralActions(self.slots, actor_id, params)


class CentralInference(InferenceService):
    """The service on this host: a thread in the learner's process, running `serve_once` until `close`."""

    def __init__(self, slots: InferenceSlots, policy, params, device: torch.device, *, max_requests: int,
                 timeout_s: float, seed: int = 0):
        super().__init__(policy, device, max_requests=max_requests, timeout_s=timeout_s, seed=seed)
        self.slots, self.params = slots, params
        self._next_actor = 0  # round-robin start of the scan: no actor waits behind the cap forever

    def _fail(self, reason: str) -> None:
        self.slots.closed[0] = 1  # every waiting actor sees the flag

    def serve_once(self, wait_s: float) -> int:
        """Answer one batch of requests; returns how many (0 when none came within `wait_s`)."""
        if not self.slots.wakeup.acquire(timeout=wait_s):
            return 0
        deadline, taken = time.monotonic() + self.timeout_s, 1
        while taken < self.max_requests:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.slots.wakeup.acquire(timeout=remaining):
                break
            taken += 1
        waiting = self._waiting()
        if waiting:
            self._answer(waiting)
        return len(waiting)

    def _waiting(self) -> list[tuple[int, int]]:
        """(actor, request number) of up to `max_requests` unanswered requests, scanning round-robin."""
        requested, replied = self.slots.request_seq.tolist(), self.slots.reply_seq.tolist()
        count = len(requested)
        order = [(self._next_actor + i) % count for i in range(count)]
        waiting = [(a, requested[a]) for a in order if requested[a] != replied[a]][: self.max_requests]
        if waiting:
            self._next_actor = (waiting[-1][0] + 1) % count
        return waiting

    def _answer(self, waiting: list[tuple[int, int]]) -> None:
        slots = self.slots
        index = torch.tensor([a for a, _ in waiting])
        self._refresh()
        k, b = len(waiting), slots.logp.shape[1]
        if isinstance(slots.obs, dict):
            obs = {key: t.index_select(0, index).flatten(0, 1) for key, t in slots.obs.items()}
        else:
            obs = slots.obs.index_select(0, index).flatten(0, 1)
        state = None
        if self.policy.lstm_size:
            state = slots.core_state.index_select(0, index).movedim(1, 0).flatten(1, 2)
        action, logp, next_state = batched_act(self.policy, obs, state, self.device, self.generator)
        slots.actions.index_copy_(0, index, action.view(k, b, *action.shape[1:]).to(slots.actions.dtype))
        slots.logp.index_copy_(0, index, logp.view(k, b))
        if next_state is not None:
            slots.next_state.index_copy_(0, index, next_state.view(2, k, b, -1).movedim(1, 0))
        now = time.monotonic()
        for a, sequence in waiting:
            slots.version[a] = self.version
            self._counts["latency_s"] += now - float(slots.request_time[a])
            slots.reply_seq[a] = sequence
            slots.replies[a].release()
        self._counts["forwards"] += 1
        self._counts["requests"] += k

    def _refresh(self) -> None:
        """Copy the newest published parameters onto the device when their version moved."""
        if self.params.version() == self.version:
            return
        staging = getattr(self, "_staging", None)
        if staging is None:
            staging = self._staging = copy.deepcopy(self.policy).cpu()
        self.version = self.params.read_into(staging)
        vector = parameters_to_vector(staging.parameters()).to(self.device)
        vector_to_parameters(vector, self.policy.parameters())

    # ----- metrics and shutdown ------------------------------------------------------------
    def actor_kwargs(self) -> dict:
        """What `make_actor` needs to ask this service instead of acting locally."""
        return {"inference": CentralClient(self.slots)}

    def close(self) -> None:
        self._stop.set()
        self.slots.closed[0] = 1
        self._stop_thread()

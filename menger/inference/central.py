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
import logging
import math
import multiprocessing as mp
import threading
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from menger.models.policy import ActOutput

log = logging.getLogger("menger.inference")


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
        if isinstance(action_space, gym.spaces.Discrete):
            actions = shared((a, b), torch.int64)
        else:
            actions = shared((a, b, *action_space.shape), torch.float32)
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


def sample_actions(policy, out: torch.Tensor, generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """`Policy.act`'s sampling on CPU logits: Gumbel-max for categorical, a Gaussian for Box actions.

    Kept on the CPU whatever the device of the forward, so one seeded CPU generator serves every device
    (the unit tests check it against `Policy.act`).
    """
    if policy.discrete:
        logp_all = torch.log_softmax(out, dim=-1)
        u = torch.rand(out.shape, generator=generator).clamp_(1e-10, 1.0)
        action = (logp_all - torch.log(-torch.log(u))).argmax(-1)
        return action, logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
    log_std = policy.log_std.detach().float().cpu()
    action = out + log_std.exp() * torch.randn(out.shape, generator=generator)
    z = (action - out) / log_std.exp()
    logp = (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    return action, logp


@torch.no_grad()
def batched_act(policy, obs, state: torch.Tensor | None, device: torch.device,
                generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """One forward on `device` over the N envs of every request in a batch; the results come back on the CPU.

    obs [N, *obs_shape] (or a dict of such), state [2, N, H] or None. Returns action [N, ...], logp [N] and the
    next state [2, N, H] (None without an LSTM). Both central services (shared-memory slots, Ray) call it.
    """
    obs = {key: t.to(device) for key, t in obs.items()} if isinstance(obs, dict) else obs.to(device)
    out, _, next_state = policy(obs, None if state is None else state.to(device))
    action, logp = sample_actions(policy, out.float().cpu(), generator)
    return action, logp, None if next_state is None else next_state.float().cpu()


class InferenceService:
    """What the local and the Ray services share: the serving thread, failure reporting and the metrics.

    A subclass defines `serve_once(wait_s) -> int` (answer one batch) and `_fail(reason)` (tell every waiting
    actor that the service is gone). `max_requests` caps the requests answered by one forward (each brings its
    B envs); `timeout_s` bounds the wait for more requests after the first one arrived.
    """

    thread_name = "menger-inference"

    def __init__(self, policy, device: torch.device, *, max_requests: int, timeout_s: float, seed: int = 0):
        if max_requests < 1:
            raise ValueError(f"max_requests must be at least 1; got {max_requests}")
        self.device = torch.device(device)
        self.policy = copy.deepcopy(policy).to(self.device).eval()
        self.max_requests, self.timeout_s = max_requests, timeout_s
        self.generator = torch.Generator().manual_seed(seed)
        self.version = -1
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._counts = {"forwards": 0, "requests": 0, "latency_s": 0.0}
        self._counted_since = time.monotonic()
        self.error: str | None = None

    def start(self):
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.serve_once(wait_s=0.05)
        except Exception as exc:  # noqa: BLE001 - reported to every waiting actor and in the log
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("central inference stopped")
            self._fail(f"the learner's inference thread failed ({self.error})")

    def _stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def metrics(self) -> dict[str, float]:
        """Means since the previous call: requests per forward, request-to-reply latency, requests per second."""
        counts, now = self._counts, time.monotonic()
        forwards, requests = counts["forwards"], counts["requests"]
        m = {"inference/batch_size_mean": requests / forwards if forwards else 0.0,
             "inference/latency_ms_mean": 1000.0 * counts["latency_s"] / requests if requests else 0.0,
             "inference/requests_per_s": requests / max(now - self._counted_since, 1e-9),
             "inference/version": float(self.version)}
        self._counts = {"forwards": 0, "requests": 0, "latency_s": 0.0}
        self._counted_since = now
        return m


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
        return {"inference": self.slots}

    def close(self) -> None:
        self._stop.set()
        self.slots.closed[0] = 1
        self._stop_thread()


class LocalInference:
    """`runtime.inference: local`: no service; actors run their own policy copies."""

    slots = None

    def actor_kwargs(self) -> dict:
        return {}

    def metrics(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


def start_inference(config, policy, transport, device: torch.device, obs_space: gym.Space,
                    action_space: gym.Space):
    """The learner's side of `runtime.inference`: a running central service, or `LocalInference`.

    Threads and processes launchers: `CentralInference`, its request slots in this host's shared memory. Ray
    launcher: `menger.inference.ray.RayInference`, whose requests reach the learner's process through a mailbox
    actor (imported only then: Ray is an optional extra).
    """
    rt = config.runtime
    if rt.inference != "central":
        return LocalInference()
    if rt.launcher == "ray" and hasattr(transport, "latest_parameters"):
        from menger.inference.ray import start_ray_inference

        return start_ray_inference(config, policy, transport, device)
    if rt.launcher not in ("threads", "processes"):
        raise ValueError(f"runtime.inference=central works with the threads and processes launchers (request slots "
                         f"in shared memory) and with the ray launcher's own transport (a mailbox actor); launcher "
                         f"{rt.launcher!r} with a {type(transport).__name__} transport offers neither: use "
                         f"runtime.inference=local")
    params = transport.params
    slots = InferenceSlots.allocate(rt.actors, rt.envs_per_actor, obs_space, action_space, config.model.lstm_size)
    return CentralInference(slots, policy, params, device, max_requests=rt.inference_batch or rt.actors,
                            timeout_s=rt.inference_timeout_ms / 1000.0, seed=rt.seed + 1).start()

"""Central inference (SEED RL) for the ray launcher: actors on any node, one batched forward in the learner's process.

Ray actors cannot reach a thread of the driver directly, so requests meet it in a mailbox: a small threaded Ray
actor pinned to the driver's node (`max_concurrency`: one thread per waiting request)::

    actor (any node):  RayCentralActions.act(obs, state) -> mailbox.act(obs, state): waits for its reply
    mailbox.take(cap, timeout)      the driver's inference thread long-polls: the first request, then more until
                                    `cap` requests are in or `timeout` has passed (the dynamic batch)
    driver (the learner's device):  newest published parameters (the parameter server's `latest()`, when the
                                    version moved) -> one forward over every taken request's B envs -> mailbox.answer(...)
    mailbox.answer(replies)         wakes each request's thread, which returns action / logp / next state

The forward and the parameters stay with the learner, as in SEED RL: no parameter copy per version leaves the
driver for inference, and the mailbox and the driver share a node, so the extra hop is local. Every wait has a
deadline: a request unanswered for `REPLY_TIMEOUT_S` fails (the actor's unroll call raises, the trainer restarts
it), and a stopped service fails every waiting request at once.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from torch.nn.utils import vector_to_parameters

from menger.inference.service import InferenceService, batched_act
from menger.models.policy import ActOutput

log = logging.getLogger("menger.inference.ray")

REPLY_TIMEOUT_S = 60.0  # longest a request waits in the mailbox for the learner's answer
CONTROL_TIMEOUT_S = 60.0  # margin of every ray.get beyond the wait the call itself may do


@dataclass
class _Request:
    obs: object                  # np.ndarray [B, *obs_shape], or a dict of such
    state: np.ndarray | None     # [2, B, H] with an LSTM
    arrived: float               # time.monotonic() in the mailbox
    done: threading.Event
    reply: tuple | None = None   # (action [B, ...], logp [B], next_state [2, B, H] or None)


class InferenceMailbox:
    """The Ray actor where actors' requests wait for the driver's inference thread (threaded: `max_concurrency`)."""

    def __init__(self, reply_timeout_s: float = REPLY_TIMEOUT_S):
        self.reply_timeout_s = reply_timeout_s
        self._changed = threading.Condition()
        self._pending: dict[int, _Request] = {}  # arrived, not yet taken (insertion order: first come, first served)
        self._taken: dict[int, _Request] = {}    # taken by the driver, not yet answered
        self._next_id = 0
        self._closed: str | None = None

    def act(self, obs, state):
        """Called by an actor: wait for this request's answer; (action, logp, next_state)."""
        with self._changed:
            if self._closed:
                raise RuntimeError(f"the central inference service has stopped: {self._closed}")
            request_id, self._next_id = self._next_id, self._next_id + 1
            request = self._pending[request_id] = _Request(obs, state, time.monotonic(), threading.Event())
            self._changed.notify_all()
        if not request.done.wait(self.reply_timeout_s):
            with self._changed:
                self._pending.pop(request_id, None)
                self._taken.pop(request_id, None)
            raise TimeoutError(f"no answer from the learner's inference thread for {self.reply_timeout_s:.0f} s; "
                               "is the learner's process overloaded or gone?")
        if request.reply is None:
            raise RuntimeError(f"the central inference service has stopped: {self._closed}")
        return request.reply

    def take(self, max_requests: int, timeout_s: float, wait_s: float) -> list[tuple]:
        """Called by the driver: up to `max_requests` requests as (id, obs, state, seconds waited so far).

        Waits up to `wait_s` for a first request, then up to `timeout_s` more for the batch to fill; [] if none.
        """
        with self._changed:
            if not self._changed.wait_for(lambda: self._pending or self._closed, wait_s) or self._closed:
                return []
            deadline = time.monotonic() + timeout_s
            while len(self._pending) < max_requests and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            now, batch = time.monotonic(), []
            for request_id in list(self._pending)[:max_requests]:
                request = self._taken[request_id] = self._pending.pop(request_id)
                batch.append((request_id, request.obs, request.state, now - request.arrived))
            return batch

    def answer(self, replies: list[tuple]) -> None:
        """Called by the driver: (id, action, logp, next_state) per taken request; wakes each one's thread."""
        for request_id, *reply in replies:
            with self._changed:
                request = self._taken.pop(request_id, None)
            if request is not None:  # gone: it timed out meanwhile
                request.reply = tuple(reply)
                request.done.set()

    def close(self, reason: str) -> None:
        """Fail every waiting request and refuse new ones (the service stopped, or the run ended)."""
        with self._changed:
            self._closed = reason
            waiting = list(self._pending.values()) + list(self._taken.values())
            self._pending.clear()
            self._taken.clear()
            self._changed.notify_all()
        for request in waiting:
            request.done.set()


class RayCentralActions:
    """The actor's side on Ray: an `ActionSource` that asks the mailbox instead of running the policy itself."""

    def __init__(self, mailbox, params, timeout_s: float = REPLY_TIMEOUT_S):
        self.mailbox, self.params, self.timeout_s = mailbox, params, timeout_s

    def refresh(self) -> int:
        """The service reads the newest published parameters before every forward, so the version the learner
        offered with this unroll is a lower bound of the version behind its actions (sync mode: exactly it)."""
        return self.params.version()

    def act(self, obs, state: torch.Tensor | None) -> ActOutput:
        obs = {key: t.numpy() for key, t in obs.items()} if isinstance(obs, dict) else obs.numpy()
        ref = self.mailbox.act.remote(obs, None if state is None else state.numpy())
        try:
            action, logp, next_state = ray.get(ref, timeout=self.timeout_s + CONTROL_TIMEOUT_S)
        except GetTimeoutError:
            raise TimeoutError(f"no answer from the central inference mailbox for "
                               f"{self.timeout_s + CONTROL_TIMEOUT_S:.0f} s; is the driver's node reachable?") from None
        return ActOutput(torch.tensor(action), torch.tensor(logp),
                         None if next_state is None else torch.tensor(next_state))


@dataclass(frozen=True)
class RayInferenceClient:
    """What a Ray actor receives (picklable): the mailbox, and how it makes its `RayCentralActions`."""

    mailbox: object
    timeout_s: float = REPLY_TIMEOUT_S

    def actions_for(self, actor_id: int, params) -> RayCentralActions:
        return RayCentralActions(self.mailbox, params, self.timeout_s)


def _request_envs(obs) -> int:
    return len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)


def _stack(requests: list) -> object:
    """One batch of N envs from the requests' observations (each [B, ...], or dicts of such)."""
    if isinstance(requests[0], dict):
        return {key: torch.from_numpy(np.concatenate([obs[key] for obs in requests])) for key in requests[0]}
    return torch.from_numpy(np.concatenate(requests))


class RayInference(InferenceService):
    """The driver's side: a thread that takes batches from the mailbox and answers them on the learner's device.

    `latest_parameters()` gives (version, flat float32 parameters) as last published; `max_requests` caps the
    requests answered by one forward (each brings its B envs); `timeout_s` bounds the wait for more after the first.
    """

    thread_name = "menger-ray-inference"

    def __init__(self, mailbox, policy, latest_parameters: Callable[[], tuple[int, np.ndarray]],
                 device: torch.device, *, max_requests: int, timeout_s: float, seed: int = 0):
        super().__init__(policy, device, max_requests=max_requests, timeout_s=timeout_s, seed=seed)
        self.mailbox, self.latest_parameters = mailbox, latest_parameters
        self.requests_answered = 0  # over the whole run: one per actor step (B env steps) acted through here

    def _fail(self, reason: str) -> None:
        self._close_mailbox(reason)

    def serve_once(self, wait_s: float) -> int:
        """Answer one batch of requests; returns how many (0 when none came within `wait_s`)."""
        taken = ray.get(self.mailbox.take.remote(self.max_requests, self.timeout_s, wait_s),
                        timeout=wait_s + self.timeout_s + CONTROL_TIMEOUT_S)
        if not taken:
            return 0
        began = time.monotonic()
        self._refresh()
        ids, observations, states, waited = zip(*taken)
        sizes = [_request_envs(obs) for obs in observations]
        state = None if states[0] is None else torch.from_numpy(np.concatenate(states, axis=1))
        action, logp, next_state = batched_act(self.policy, _stack(list(observations)), state, self.device,
                                               self.generator)
        actions, logps = action.split(sizes), logp.split(sizes)
        next_states = next_state.split(sizes, dim=1) if next_state is not None else [None] * len(ids)
        self.mailbox.answer.remote([(request_id, a.numpy(), lp.numpy(), None if s is None else s.numpy())
                                    for request_id, a, lp, s in zip(ids, actions, logps, next_states)])
        answered_in = time.monotonic() - began
        self._counts["forwards"] += 1
        self._counts["requests"] += len(ids)
        self.requests_answered += len(ids)
        self._counts["latency_s"] += sum(waited) + answered_in * len(ids)
        return len(ids)

    def _refresh(self) -> None:
        """Copy the newest published parameters onto the device when their version moved."""
        version, flat = self.latest_parameters()
        if version != self.version:
            vector_to_parameters(torch.from_numpy(flat).to(self.device), self.policy.parameters())
            self.version = version

    # ----- metrics and shutdown ------------------------------------------------------------
    def actor_kwargs(self) -> dict:
        """What a Ray actor needs to ask this service instead of acting locally (see `RemoteActor`)."""
        return {"inference": RayInferenceClient(self.mailbox)}

    def close(self) -> None:
        self._stop_thread()
        self._close_mailbox("the run ended")
        try:
            ray.kill(self.mailbox)
        except RayError:
            pass

    def _close_mailbox(self, reason: str) -> None:
        try:
            ray.get(self.mailbox.close.remote(reason), timeout=CONTROL_TIMEOUT_S)
        except (RayError, GetTimeoutError):
            pass  # the mailbox is gone already: its requests failed with it


def start_mailbox(max_requests_in_flight: int):
    """The mailbox actor on this (the driver's) node: no CPU of its own, a thread per request that can wait."""
    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(InferenceMailbox).options(num_cpus=0, max_concurrency=max_requests_in_flight + 4,
                                                scheduling_strategy=here, max_restarts=0).remote(REPLY_TIMEOUT_S)


def start_ray_inference(runtime, policy, latest_parameters, device: torch.device) -> RayInference:
    """`runtime.inference.mode: central` on the ray launcher: a mailbox on this node and a running `RayInference`.

    `latest_parameters()`: (version, flat parameters) as last published. The mailbox has room for two requests
    per actor: a replaced incarnation's last request may still wait.
    """
    mailbox = start_mailbox(2 * runtime.actors)
    return RayInference(mailbox, policy, latest_parameters, device,
                        max_requests=runtime.inference.batch or runtime.actors,
                        timeout_s=runtime.inference.timeout_ms / 1000.0, seed=runtime.seed + 1).start()

"""The contracts the runtime runs on, and the small types that travel between its roles.

Each contract is documented with the loop that drives it. Nothing here imports torch.distributed, Ray or a
launcher: roles are placed by a launcher (threads, processes, Ray) without knowing which one.

The data path, one lap::

    env --obs--> Actor (ActionSource: its cached params, or a central service) --action--> env   (T steps x B envs)
    Actor --(slot, UnrollMeta)--> Transport --> Coordinator.accept --> Coordinator.take_batch --> Learner.update
    Learner --params(version)--> ParameterSink --> ParameterSource --> actors copy only when the version moved
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


@dataclass(frozen=True)
class UnrollMeta:
    """The tag every unroll carries, so every frame can be accounted for.

    `policy_version` is the parameter version that chose the unroll's actions; the learner's version
    minus it is the unroll's policy lag. `episode_returns` and `episode_lengths` are the episodes that
    ended in the unroll; `faulty_episodes` counts those a fault ended instead (an env rebuilt, a non-finite
    value dropped): their returns are not true ones and are left out. `env_stats` are the env's fault
    counters, cumulative over this incarnation. `obs_moments` and `return_moments` (`env.normalize`): the
    moments (`menger.models.normalize.Moments`) of the unroll's observations and of its envs' discounted returns,
    which the trainer merges into the running statistics; None when not normalising. `match_results`: the games
    of a multi-agent env that ended in the unroll, each (opponent, score of the learned side), for the league.
    `episode_envs`: for each of `episode_returns`, the env (row of the actor's vector env) it ran in.
    `episode_infos`: with `env.info_keys`, for each of `episode_returns`, the listed keys its last info reported,
    as (key, value) pairs (a key it did not report is absent); empty when no keys are asked.
    """

    actor_id: int
    incarnation: int
    sequence: int
    policy_version: int
    frames: int
    episode_returns: tuple[float, ...] = ()
    episode_lengths: tuple[int, ...] = ()
    env_stats: tuple[tuple[str, int], ...] = field(default=())
    faulty_episodes: int = 0
    invalid_frames: int = 0  # rows that were no transition: autoreset steps, and what env faults cost
    obs_moments: Any = None
    return_moments: Any = None
    match_results: tuple[tuple[str, float], ...] = ()  # multi-agent: (opponent, score 1 / 0.5 / 0) per game ended
    episode_envs: tuple[int, ...] = ()
    episode_infos: tuple[tuple[tuple[str, float], ...], ...] = ()


# ----- parameters -----------------------------------------------------------------------------------------------
class ParameterSource(Protocol):
    """Where actors get parameters (acme's VariableSource): `SharedParameters` on a host, a node cache on Ray.

    Loop (`LocalActions.refresh`, before each unroll)::

        if source.version() != my_version:
            my_version = source.read_into(my_model)     # a whole version, never a half-written one
    """

    def version(self) -> int: ...

    def read_into(self, module) -> int: ...


class ParameterSink(Protocol):
    """Where the learner publishes (the transport forwards to its parameter server).

    Loop (`Trainer`, after each optimizer step)::

        sink.publish(learner.policy, learner_version)   # once per version; readers copy it when they need it
    """

    def publish(self, module, version: int) -> None: ...


# ----- the actor's side -----------------------------------------------------------------------------------------
class ActionSource(Protocol):
    """Where an actor's actions come from: its own cached parameters, or a central inference service (SEED RL).

    Loop (`Actor.unroll`)::

        version = source.refresh()                 # the version this unroll's actions come from (a lower bound)
        for t in range(T):
            out = source.act(obs_t, state)         # action [B], logp [B], next state: all B envs at once
    """

    def refresh(self) -> int: ...

    def act(self, obs, state) -> Any: ...


class ActorPort(Protocol):
    """What one unroll needs from the transport: slots to write into, parameters, a place to show liveness.

    Loop (`Actor.unroll(slot)`)::

        view = port.slot(slot)                     # tensors in shared memory (or a local buffer Ray copies out)
        for t in range(T): ... write step t into view ...; port.beat(actor_id, frames_so_far)
        # port.params is the ParameterSource the actor's ActionSource reads
    """

    params: ParameterSource

    def slot(self, index: int) -> dict: ...

    def num_slots(self) -> int: ...

    def beat(self, actor_id: int, frames_in_unroll: int) -> None: ...


class GrantedPort(ActorPort, Protocol):
    """An ActorPort for actors that run their own loop (threads and processes launchers).

    Loop (`Actor.run`)::

        while (slot := port.wait_for_grant(actor_id, actor.snapshot, timeout_s)) is not None:
            port.submit(slot, actor.unroll(slot))  # only (slot, UnrollMeta) crosses to the learner

    On Ray there is no such loop: the transport calls `actor.unroll(slot)` once per remote call.
    """

    def wait_for_grant(self, actor_id: int, snapshot: Callable[[], dict], timeout_s: float) -> int | None: ...

    def submit(self, slot: int, meta: UnrollMeta) -> None: ...


# ----- the learner's side ---------------------------------------------------------------------------------------
class ActorHandle(Protocol):
    """A launched actor, whatever runs it (a thread, a process, a Ray actor)."""

    def is_alive(self) -> bool: ...

    def kill(self) -> None: ...

    def join(self, timeout: float) -> None: ...


class Transport(ParameterSink, Protocol):
    """The trainer's link to its actors; bulk data stays where it was written, only slots and tags travel.

    Loop (`Trainer.run`)::

        handle = transport.start_actor(actor_id, actor_kwargs)   # a thread, a process or a Ray actor, where
                                                                 # actor_kwargs["build"](port=..., **rest) makes it
        transport.grant(actor_id, slot)                          # the actor may fill `slot` (False: it is gone)
        for actor_id, message in transport.receive(timeout):     # ("unroll", slot, meta) | ("error", text, tb)
            ...                                                  # | ("snapshot", state)
        batch = transport.gather(slots)                          # accepted unrolls as one batch [T, S*B, ...]
        transport.publish(policy, version)                       # actors pull it when their version is older
        transport.silent(seconds); transport.frames_in_flight(actor_id)   # the actors without a sign of life for
                                                                 # `seconds` (all at once); what a death loses
        transport.drain(actor_id); transport.release(actor_id)   # a lost incarnation's last words, then its link
    """

    def start_actor(self, actor_id: int, actor_kwargs: dict) -> ActorHandle: ...

    def grant(self, actor_id: int, slot: int) -> bool: ...

    def receive(self, timeout: float) -> list[tuple[int, tuple]]: ...

    def drain(self, actor_id: int) -> list[tuple]: ...

    def request_snapshot(self, actor_id: int) -> None: ...

    def silent_for(self, actor_id: int) -> float: ...

    def silent(self, seconds: float) -> list[int]: ...

    def closed(self) -> list[int]: ...

    def frames_in_flight(self, actor_id: int) -> int: ...

    def release(self, actor_id: int) -> None: ...

    def gather(self, slots: list[int]) -> dict: ...

    def chunk_store(self) -> "ChunkStore": ...

    def metrics(self) -> dict: ...

    def shutdown(self, handles: list) -> None: ...


class ChunkStore(Protocol):
    """Where the replay's chunks (its actors' unroll slots) live, for `menger.coordinator.replay`.

    On one host (`SlotChunks`) every field is in the transport's shared-memory slots. On Ray (`RayChunks`) the
    learner keeps the per-step fields (`tensors`: rewards, actions, Q values, ...: what items and priorities are
    made of) and each node keeps the observations its actors wrote, in a replay shard beside them::

        store.tensors["rewards"][slot]                       # [slots, T, B] per-step fields, in the learner
        request = store.request(slot, steps, b)              # start gathering obs[slot, steps[i, k], b] [N, K]
        obs, kept = store.fetch(request)                     # [N, K, ...]; kept: items still stored (None: all)
        for slot in store.take_lost(): ...                   # chunks whose node is gone since the last call
        store.shard_of(actor_id, shards)                     # the replay shard an actor's chunks go into

    `prefetch`: the coordinator requests the next batch while the learner steps on this one. `fixed_shards`: an
    actor's shard never changes (False on Ray, where it is its node's, and a restarted actor may move).
    """

    tensors: dict
    prefetch: bool
    fixed_shards: bool
    nbytes: int

    def shard_of(self, actor_id: int, shards: int) -> int: ...

    def request(self, slot, steps, b) -> Any: ...

    def fetch(self, request) -> tuple: ...

    def take_lost(self) -> list[int]: ...

    def state(self, slots: list[int]) -> dict: ...

    def load(self, chunks: dict, slots: list[int]) -> None: ...

    def metrics(self) -> dict: ...


class InferenceBackend(Protocol):
    """The learner's side of `runtime.inference`: nothing (local) or a running central service.

    Use (`Trainer`)::

        service = launcher.start_inference(...)          # after the first publish
        transport.start_actor(i, {..., **service.actor_kwargs()})   # how actor i reaches it
        metrics.update(service.metrics())                # per log interval
        service.close()                                  # after the actors stopped
    """

    def actor_kwargs(self) -> dict: ...

    def metrics(self) -> dict: ...

    def close(self) -> None: ...


class Launcher(Protocol):
    """Places actors and owns how they are reached; the experiment does not know which launcher runs it.

    Use (`Trainer._setup`)::

        transport = launcher.make_transport(spec, policy, slots_per_actor)   # pipes + shared memory, or Ray refs
        inference = launcher.start_inference(policy, transport, device)      # per runtime.inference
        torch.set_num_threads(cores - launcher.local_actors)                 # actors that share the learner's cores
        ... transport.start_actor(...) calls launcher.start_actor(target, kwargs) ...
        launcher.shutdown()
    """

    name: str
    local_actors: int

    def make_transport(self, spec, policy, slots_per_actor: int) -> Transport: ...

    def start_inference(self, policy, transport: Transport, device) -> InferenceBackend: ...

    def start_actor(self, target, kwargs: dict) -> ActorHandle: ...

    def shutdown(self) -> None: ...


# ----- coordination ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """What the coordinator made of one unroll tag.

    `reason` names why it was dropped (`stale_incarnation`, `duplicate`, `policy_lag`), None when accepted;
    `delivered` is True when the unroll is new work of the actor's live incarnation (the supervisor's sign of
    health), even if it was then dropped for its policy lag.
    """

    accepted: bool
    reason: str | None = None
    delivered: bool = False


@dataclass
class Batch:
    """A learner batch: the gathered tensors [T, columns, ...] and the tags of the unrolls in it."""

    data: dict
    metas: list[UnrollMeta]
    lags: list[int]
    keys: object = None  # replay: the sampled items' keys, where `learned` writes their new priorities

    @property
    def frames(self) -> int:
        return sum(meta.frames for meta in self.metas)


class Coordinator(Protocol):
    """The rules between actors and learner: who may fill which slot, which unrolls count, when a batch is ready.

    Loop (`Trainer.run`)::

        for actor_id, slot in coordinator.grants(): transport.grant(actor_id, slot)  # else grant_failed(...)
        for actor_id, ("unroll", slot, meta) in transport.receive(timeout):
            verdict = coordinator.accept(slot, meta)       # accepted, or dropped with its reason
        if coordinator.batch_ready():
            batch = coordinator.take_batch(transport.gather)
            learner.update(batch); publish(version); coordinator.published(version)
            for meta in coordinator.take_expired(): accounts.drop("policy_lag", meta.frames)

    The supervisor tells it about incarnations: `actor_started`, `actor_lost` (its granted slots come back),
    `actor_given_up`. `SyncCoordinator` (PPO) grants after each publish; `AsyncCoordinator` (IMPALA, APPO) as
    slots free up; a replay coordinator inserts accepted unrolls into a table and makes a batch ready when its
    rate limiter lets a sample through. Each checks its flow-control arithmetic when built.
    """

    slots_per_actor: int

    def actor_started(self, actor_id: int, incarnation: int) -> None: ...

    def actor_lost(self, actor_id: int) -> None: ...

    def actor_given_up(self, actor_id: int) -> None: ...

    def grants(self) -> list[tuple[int, int]]: ...

    def grant_failed(self, actor_id: int, slot: int) -> None: ...

    def accept(self, slot: int, meta: UnrollMeta) -> Verdict: ...

    def batch_ready(self) -> bool: ...

    def take_batch(self, gather: Callable[[list[int]], dict]) -> Batch: ...

    def published(self, version: int) -> None: ...

    def take_expired(self) -> list[UnrollMeta]:
        """Accepted unrolls dropped since the last call because they grew too stale while they waited."""
        ...

"""Role interfaces and the shared types that travel between them.

Each role is documented with the loop that drives it. Nothing here imports torch.distributed, Ray or a
launcher: roles are placed by a launcher (threads, processes, Ray) without knowing which one.

The data path, one lap::

    env --obs--> Actor (batched inference on cached params) --action--> env   (T steps x B envs)
    Actor --Unroll(slot, UnrollMeta)--> transport --> Learner (loss, optimizer step, version += 1)
    Learner --params(version)--> ParameterServer --> Actors copy only when the version moved
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class UnrollMeta:
    """The tag every unroll carries, so every frame can be accounted for.

    `policy_version` is the parameter version that chose the unroll's actions; the learner's version
    minus it is the unroll's policy lag.
    """

    actor_id: int
    incarnation: int
    sequence: int
    policy_version: int
    frames: int
    episode_returns: tuple[float, ...] = ()
    episode_lengths: tuple[int, ...] = ()
    env_stats: tuple[tuple[str, int], ...] = field(default=())


class ParameterSource(Protocol):
    """Where actors get parameters (acme's VariableSource).

    Loop::

        if source.version() > my_version:
            my_version = source.read_into(my_model)
    """

    def version(self) -> int: ...

    def read_into(self, module) -> int: ...


class ParameterSink(Protocol):
    """Where the learner publishes: `publish(module, version)` after each optimizer step."""

    def publish(self, module, version: int) -> None: ...


class ActorRole(Protocol):
    """Steps B envs for T steps per unroll with batched local inference, and emits tagged unrolls.

    Loop::

        while running:
            slot = port.acquire()                      # a free unroll slot (back-pressure)
            pull params if their version moved          # sync mode: wait for the newest
            for t in range(T): act on B envs, write into slot
            port.submit(slot, UnrollMeta(...))
    """

    def run(self) -> None: ...


class LearnerRole(Protocol):
    """Turns batches of unrolls into parameter updates.

    Loop::

        batch = coordinator.next_batch()     # sync: one unroll per actor, all on the newest version
        stats = learner.update(batch)        # pure losses + optimizer step
        server.publish(learner.model, learner.version)
    """

    def update(self, batch) -> dict[str, float]: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class ActorHandle(Protocol):
    """A launched actor, whatever runs it (a thread, a process, a Ray actor)."""

    def is_alive(self) -> bool: ...

    def kill(self) -> None: ...

    def join(self, timeout: float) -> None: ...


class Launcher(Protocol):
    """Places actors; the experiment does not know which launcher runs it."""

    name: str

    def start_actor(self, target, kwargs: dict) -> ActorHandle: ...

    def shutdown(self) -> None: ...

"""GORILA (Nair et al. 2015): DQN learners that sample the replay and push gradients to a parameter server.

Ape-X's actors fill the replay as usual. `runtime.learner.count` = W learner processes compute gradients; the
trainer's own learner (`GorilaLearner`) is the server that applies them. Per gradient::

    trainer                                               learner process w (`_worker_main`)
    replay sample -> staging slot w (shared memory)
                  -> ("batch", n) ----------------------> copy the newest parameters (and the target's) from the
                                                          shared caches if their versions moved; Ape-X's double-Q
                                                          n-step loss -> gradient slot w, |TD| -> priorities slot w
                  <- ("gradient", base version, stats) -- only after both slots are written
    async: staleness = version - base version; more than `max_staleness`: dropped and counted; else applied
    sync:  a round (one batch per learner, all on one version) is averaged and applied once
    server step -> version += 1 -> publish (actors' cache and the learners' caches); priorities -> replay

A learner killed before its message leaves nothing behind: its slots are not read, its batch's priorities stay
as they were, and the others go on (the run ends only when none is left).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
from dataclasses import dataclass

import torch

from menger.children import report_error, stop_children
from menger.forking import FORK_GATE
from menger.learners.learner import Adam, LearnerProcessError
from menger.learners.offpolicy import DQNLearner
from menger.params.server import SharedParameters
from menger.learners.ps import make_parameter_server
from menger.params.sharded import write_gradient
from menger.transport.shm import UnrollSpec

log = logging.getLogger("menger.learners")

BATCH_FIELDS = ("actions", "rewards", "discounts", "weights")


class GorilaLearner(DQNLearner):
    """The parameter server of GORILA: Ape-X's networks and state, with a sharded server for an optimizer.

    `update(batch)` takes pushed gradients (`batch["gradient"]` [K, P], averaged with weights 1/K) instead of
    replay items; the target network is copied every `target_update_interval` of its steps, and `target_version`
    counts the copies, so the learner processes fetch the target only when it moved.
    """

    def __init__(self, policy, cfg, *, device: torch.device, seed: int, shards: int, launcher: str = "threads"):
        super().__init__(policy, cfg, device=device, seed=seed)
        self.optimizer = make_parameter_server(self.params, shards, cfg.max_grad_norm,
                                               lambda group: Adam(group, lr=cfg.lr, eps=cfg.adam_eps), launcher)
        self.target_version = 0

    def update(self, batch: dict, frames: int) -> dict:
        gradients = batch["gradient"].to(self.device)
        count = gradients.shape[0]
        norm = self.optimizer.apply(gradients, [1.0 / count] * count)
        self.updates += 1
        if self.updates % self.cfg.target_update_interval == 0:
            self.target.load_state_dict(self.policy.state_dict())
            self.target_version += 1
        return dict(batch.get("stats", {}), grad_norm=float(norm), gradients=float(count))

    def state_dict(self) -> dict:
        return dict(super().state_dict(), target_version=self.target_version)

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.target_version = int(state.get("target_version", 0))

    def metrics(self) -> dict:
        return getattr(self.optimizer, "metrics", dict)()

    def close(self) -> None:
        close = getattr(self.optimizer, "close", None)
        if close is not None:
            close()


# ----- the learner processes ---------------------------------------------------------------------
def _staging(obs_space, action_space, batch_size: int, shared: bool = True) -> dict[str, torch.Tensor]:
    """A replay batch's tensors, preallocated: obs and next_obs (obs.KEY / next_obs.KEY for Dict observations),
    actions, rewards, discounts, weights [batch_size, ...]."""
    fields = UnrollSpec(obs_space, action_space, 1, batch_size).field_shapes()
    tensors = {}
    for name, (shape, dtype) in fields.items():
        if name == "obs" or name.startswith("obs."):
            tensors[name] = torch.zeros(shape[1:], dtype=dtype)
            tensors["next_" + name] = torch.zeros(shape[1:], dtype=dtype)
        elif name == "actions":
            tensors[name] = torch.zeros(shape[1:], dtype=dtype)
    for name in ("rewards", "discounts", "weights"):
        tensors[name] = torch.zeros(batch_size, dtype=torch.float32)
    return {name: t.share_memory_() if shared else t for name, t in tensors.items()}


def _stage(staging: dict, batch: dict) -> int:
    """Write a replay batch into a staging slot; returns its item count."""
    n = batch["rewards"].shape[0]
    for name, tensor in staging.items():
        head, _, key = name.partition(".")
        value = batch[head][key] if key else batch[head]
        tensor[:n].copy_(value)
    return n


def _staged(staging: dict, n: int) -> dict:
    batch: dict = {}
    for name, tensor in staging.items():
        head, _, key = name.partition(".")
        if key:
            batch.setdefault(head, {})[key] = tensor[:n]
        else:
            batch[head] = tensor[:n]
    return batch


def _worker_main(index: int, config, spaces, staging: dict, gradient: torch.Tensor, priorities: torch.Tensor,
                 online: SharedParameters, target: SharedParameters, conn, parent_pid: int) -> None:
    """One DQN learner: on each staged batch, the gradient of Ape-X's loss on the newest parameters it can read."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # stopping is the driver's to handle
        signal.signal(signum, signal.SIG_IGN)
    code = 0
    try:
        from menger.models import build_policy

        torch.set_num_threads(1)
        learner = DQNLearner(build_policy(*spaces, config.model, config.algo), config.gorila,
                             device=torch.device("cpu"), seed=config.runtime.seed + index)
        target_seen = -1
        while True:
            if not conn.poll(0.1):
                if os.getppid() != parent_pid:
                    return
                continue
            message = conn.recv()
            if message[0] == "stop":
                return
            _, n = message
            version = online.read_into(learner.policy)
            if target.version() != target_seen:
                target_seen = target.read_into(learner.target)
            loss, new_priorities, stats = learner.loss(_staged(staging, n))
            grads = torch.autograd.grad(loss, learner.params, allow_unused=True)
            write_gradient(gradient, learner.params, grads)
            priorities[:n].copy_(new_priorities.detach().reshape(-1))
            conn.send(("gradient", version, dict({k: float(v) for k, v in stats.items()}, loss=float(loss))))
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which names this learner
        report_error(conn, exc)
        code = 1
    os._exit(code)


@dataclass
class Pushed:
    """A learner's gradient as it arrived: the batch it came from, the version it was computed on, copies of
    its slots."""

    batch: object
    base_version: int
    stats: dict
    gradient: torch.Tensor
    priorities: torch.Tensor


class GorilaWorkers:
    """The trainer's handle on the learner processes (in place of `LearnerGroup`).

    Use::

        workers = GorilaWorkers.start(config, obs_space, action_space)   # before CUDA
        workers.attach(learner)                                          # the first parameters
        for w in workers.idle(): workers.submit(w, batch)                # a replay sample
        for pushed in workers.finished(): ...                            # never blocks
        workers.publish(learner, version)                                # after every server step
        workers.close()
    """

    def __init__(self, config, processes, conns, stagings, gradients, priorities, online, target):
        self.config = config
        self.processes, self.conns = processes, conns
        self.stagings, self.gradients, self.priorities = stagings, gradients, priorities
        self.online, self.target = online, target
        self.count = len(processes)
        self.in_flight: dict[int, object] = {}
        self.gone: set[int] = set()
        self.lost = 0  # learners that died

    @classmethod
    def start(cls, config, obs_space, action_space) -> "GorilaWorkers":
        from menger.models import build_policy

        with torch.random.fork_rng(devices=[]):  # building the template must not move the run's seed
            template = build_policy(obs_space, action_space, config.model, config.algo)
        network_space = template.action_space
        size = sum(p.numel() for p in template.parameters() if p.requires_grad)
        online, target = SharedParameters(template), SharedParameters(template)
        context, batch = mp.get_context("fork"), config.replay.batch_size
        processes, conns, stagings, gradients, priorities = [], [], [], [], []
        for index in range(config.runtime.learner.count):
            staging = _staging(obs_space, network_space, batch)
            gradient = torch.zeros(size).share_memory_()
            priority = torch.zeros(batch, dtype=torch.float64).share_memory_()
            ours, theirs = context.Pipe(duplex=True)
            process = context.Process(target=_worker_main, name=f"menger-gorila-{index}", daemon=True,
                                      args=(index, config, (obs_space, action_space), staging, gradient, priority,
                                            online, target, theirs, os.getpid()))
            with FORK_GATE.forking():
                process.start()
            theirs.close()
            processes.append(process)
            conns.append(ours)
            stagings.append(staging)
            gradients.append(gradient)
            priorities.append(priority)
        return cls(config, processes, conns, stagings, gradients, priorities, online, target)

    def attach(self, learner) -> None:
        """The first parameters (after any restore), for every learner process."""
        self.publish(learner, -1)

    def publish(self, learner, version: int) -> None:
        """The server's newest parameters, and its target network when that moved, into the learners' caches."""
        self.online.publish(learner.policy, version)
        if self.target.version() != learner.target_version or version < 0:
            self.target.publish(learner.target, learner.target_version)

    def idle(self) -> list[int]:
        return [w for w in range(len(self.processes)) if w not in self.in_flight and w not in self.gone]

    def alive(self) -> int:
        return self.count - len(self.gone)

    def busy(self) -> bool:
        return bool(self.in_flight)

    def has_results(self) -> bool:
        """Whether a gradient (or a death) waits to be collected by `finished`."""
        return any(self.conns[w].poll(0) or not self.processes[w].is_alive() for w in self.in_flight)

    def submit(self, worker: int, batch) -> None:
        """Stage a replay sample for an idle learner; it computes on the newest parameters it can read."""
        n = _stage(self.stagings[worker], batch.data)
        try:
            self.conns[worker].send(("batch", n))
        except (OSError, ValueError):  # it died since it was last seen: the sample is left unlearned
            self._lose(worker)
            return
        self.in_flight[worker] = batch

    def finished(self) -> list[Pushed]:
        """The gradients that have arrived (copied out of their slots); a learner found dead is left out."""
        out = []
        for worker in list(self.in_flight):
            conn, process = self.conns[worker], self.processes[worker]
            try:
                ready = conn.poll(0)
                message = conn.recv() if ready else None
            except (EOFError, OSError):
                message, ready = None, False
            if message is not None and message[0] == "gradient":
                batch = self.in_flight.pop(worker)
                n = batch.data["rewards"].shape[0]
                out.append(Pushed(batch, message[1], message[2], self.gradients[worker].clone(),
                                  self.priorities[worker][:n].clone()))
            elif message is not None and message[0] == "error":
                error = LearnerProcessError(f"GORILA learner {worker} failed: {message[1]}")
                error.child_errors = {f"gorila learner {worker}": (message[1], message[2])}
                raise error
            elif not process.is_alive():
                self._lose(worker)
        return out

    def _lose(self, worker: int) -> None:
        self.in_flight.pop(worker, None)
        self.gone.add(worker)
        self.lost += 1
        process = self.processes[worker]
        left = self.alive()
        log.warning("GORILA learner %d (pid %d) died (exit code %s); its gradient in flight was never applied; "
                    "%d learner(s) go on", worker, process.pid, process.exitcode, left)
        if not left:
            raise LearnerProcessError("every GORILA learner process died; nothing computes gradients any more: "
                                      "resume the run from its last checkpoint (menger resume RUN_DIR)")

    def check(self) -> None:
        """Learners that died while idle are noticed here."""
        for worker, process in enumerate(self.processes):
            if worker not in self.gone and worker not in self.in_flight and not process.is_alive():
                self._lose(worker)

    def metrics(self) -> dict:
        return {"learner/workers": self.count - len(self.gone), "learner/workers_lost": self.lost}

    def close(self) -> None:
        stop_children(self.processes, self.conns)
        self.processes, self.conns = [], []

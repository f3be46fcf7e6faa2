"""Data-parallel learners: N processes joined with torch.distributed, one optimizer step per batch, together.

Rank 0 is the Trainer's own learner in the driver; ranks 1..N-1 are forked processes (`LearnerGroup.start`),
forked before the driver touches CUDA so each can take its own device. The loop, per update::

    rank 0: split the batch's unroll columns into N shares (tensor_split: sizes differ by at most one)
            write share r into rank r's staging slot in shared memory; send ("update", columns, frames, weight)
    every rank: learner.update(its share)      # inside, after each backward: _sync_gradients()
                   grads *= columns_r / columns; all_reduce(SUM)   # = the whole batch's mean gradient
    every rank: clip, optimizer step            # same gradients, same state: parameters stay identical
    rank 0: wait for every rank's "done", then publish

Parameters start identical: every rank builds the same model (and on resume loads the same checkpoint), then
rank 0 broadcasts its parameters. Every collective has a deadline (`runtime.learner.collective_timeout_s`), the
ranks meet through a rendezvous file (no TCP store listens anywhere; gloo's sockets stay on the loopback
device), and a learner process that dies ends the run with `LearnerProcessError`
naming it, instead of a hang.
"""
from __future__ import annotations

import datetime
import logging
import multiprocessing as mp
import os
import signal
import shutil
import socket
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.utils import parameters_to_vector

from menger.children import report_error, stop_children
from menger.device import resolve_device
from menger.forking import FORK_GATE
from menger.learners.learner import LearnerProcessError
from menger.models.actions import ActionCodec
from menger.transport import UnrollBuffers, UnrollSpec

log = logging.getLogger("menger.learners")


# ----- pure helpers --------------------------------------------------------------------------------
def share_bounds(columns: int, learners: int) -> list[tuple[int, int]]:
    """[start, stop) of each learner's share of `columns` unroll columns; sizes differ by at most one."""
    base, extra = divmod(columns, learners)
    bounds, start = [], 0
    for rank in range(learners):
        stop = start + base + (1 if rank < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _threads_per_rank(runtime) -> int:
    """Each rank's share of the learner's threads (runtime.learner.threads, or the cores the actors leave)."""
    threads = runtime.learner.threads or max(1, (os.cpu_count() or 1) - runtime.actors)
    return max(1, threads // runtime.learner.count)


def _columns(value, start: int, stop: int):
    if isinstance(value, dict):
        return {k: _columns(v, start, stop) for k, v in value.items()}
    return value[:, start:stop]


def _loopback_interface() -> str:
    names = [name for _, name in socket.if_nameindex() if name.startswith("lo")]
    return names[0] if names else "lo"


def _rendezvous_file() -> str:
    """A fresh path for torch.distributed's FileStore: the ranks meet through a file, so no TCP store listens on
    any interface (torch's TCPStore server binds every interface, whatever host the clients are given)."""
    return os.path.join(tempfile.mkdtemp(prefix="menger-rendezvous-"), "store")


def rank_device(device: torch.device, rank: int) -> torch.device:
    """Rank r's device: cuda:(r mod GPUs) on CUDA; the CPU stays the CPU."""
    if device.type != "cuda":
        return device
    return torch.device("cuda", rank % max(1, torch.cuda.device_count()))


def backend_for(device: torch.device, learners: int) -> str:
    """nccl when every learner has a GPU of its own (nccl refuses two ranks on one GPU), else gloo."""
    if device.type == "cuda" and torch.cuda.device_count() >= learners:
        return "nccl"
    return "gloo"


# ----- the gradient all-reduce, the learner's hook -------------------------------------------------
class GradientAllReduce:
    """`Learner._sync_gradients` for N learners: weighted SUM all-reduce of all gradients in one flat buffer.

    `weight` is this rank's share of the batch's columns, so the sum is the whole batch's mean gradient.
    """

    def __init__(self):
        self.weight = 1.0

    def all_reduce(self, parameters) -> None:
        params = list(parameters)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads]).mul_(self.weight)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).clone()
            offset += n

    def mean(self, value: float, device: torch.device) -> float:
        """A scalar every rank agrees on (the weighted mean), for decisions such as PPO's early stop."""
        tensor = torch.tensor([value * self.weight], dtype=torch.float64, device=device)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return float(tensor.item())


def _join(rank: int, world: int, rendezvous: str, backend: str, timeout_s: float) -> None:
    """Join the group through the rendezvous file; gloo's (and nccl's) own sockets stay on the loopback device."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", _loopback_interface())
    os.environ.setdefault("NCCL_SOCKET_IFNAME", _loopback_interface())
    dist.init_process_group(backend, init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def _broadcast_parameters(policy) -> None:
    with torch.no_grad():
        for tensor in list(policy.parameters()) + list(policy.buffers()):
            dist.broadcast(tensor.data, src=0)


# ----- ranks 1..N-1 --------------------------------------------------------------------------------
def _worker_main(rank: int, world: int, rendezvous: str, backend: str, config, spaces, run_dir, resume: bool,
                 staging: UnrollBuffers, flat_params: torch.Tensor, conn, parent_pid: int) -> None:
    """A forked learner: build the same learner, join the group, then step on the shares rank 0 hands it."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # stopping is the driver's to handle
        signal.signal(signum, signal.SIG_IGN)
    code = 0
    try:
        learner = _build_learner(config, spaces, rank, run_dir, resume)
        _join(rank, world, rendezvous, backend, config.runtime.learner.collective_timeout_s)
        learner.gradient_sync = GradientAllReduce()
        _broadcast_parameters(learner.policy)
        _serve(learner, staging, flat_params, conn, parent_pid)
    except BaseException as exc:  # noqa: BLE001 - reported to rank 0, which ends the run naming this rank
        report_error(conn, exc)
        code = 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    os._exit(code)


def _build_learner(config, spaces, rank: int, run_dir, resume: bool):
    from menger.learners import make_learner
    from menger.models import build_policy

    rt = config.runtime
    torch.set_num_threads(_threads_per_rank(rt))
    torch.manual_seed(rt.seed)
    device = rank_device(resolve_device(rt.learner.device), rank)
    learner = make_learner(config, build_policy(*spaces, config.model, config.algo), device)
    if resume:
        from menger.checkpoint import CheckpointManager, unflatten_state

        checkpoint = CheckpointManager(Path(run_dir) / "checkpoints").load_latest()
        if checkpoint is not None:
            learner.load_state_dict(unflatten_state(checkpoint.tensors, checkpoint.metadata)["learner"])
    return learner


def _serve(learner, staging: UnrollBuffers, flat_params: torch.Tensor, conn, parent_pid: int) -> None:
    """Idle waits have no deadline (rank 0 may wait long for actors); a vanished driver ends the process."""
    views = staging.slot(0)
    while True:
        if not conn.poll(0.1):
            if os.getppid() != parent_pid:
                raise LearnerProcessError("the driver (rank 0) is gone")
            continue
        message = conn.recv()
        if message[0] == "update":
            _, columns, frames, weight = message
            learner.gradient_sync.weight = weight
            learner.update(_staged_batch(views, columns), frames)
            conn.send(("done",))
        elif message[0] == "parameters":
            flat_params.copy_(parameters_to_vector([p.detach() for p in learner.policy.parameters()]).cpu())
            conn.send(("parameters",))
        elif message[0] == "stop":
            return


def _staged_batch(views: dict, columns: int) -> dict:
    batch: dict = {}
    for name, tensor in views.items():
        share = tensor[:, :columns]
        if name.startswith("obs."):
            batch.setdefault("obs", {})[name[4:]] = share
        else:
            batch[name] = share
    return batch


def _stage(staging: UnrollBuffers, share: dict) -> None:
    """Write a share into a staging slot: the same field names as the unroll slots (obs.KEY for dicts)."""
    for name, tensor in staging.tensors.items():
        value = share["obs"][name[4:]] if name.startswith("obs.") else share[name]
        tensor[0, :, :value.shape[1]].copy_(value)


# ----- rank 0 ------------------------------------------------------------------------------------
class LearnerGroup:
    """Rank 0's handle on the learners: `update` steps all of them on one batch; one learner is the plain case.

    Use::

        group = LearnerGroup.start(config, obs_space, action_space, run_dir, resume=...)   # before CUDA
        learner = make_learner(...); (restore it)
        group.attach(learner)                          # rank 0 joins; parameters broadcast from rank 0
        stats = group.update(learner, batch, frames)   # every step
        group.close()
    """

    def __init__(self, config, processes=(), conns=(), stagings=(), flat_params=(), backend: str = "gloo"):
        self.config, self.learners = config, config.runtime.learner.count
        self.processes, self.conns = list(processes), list(conns)
        self.stagings, self.flat_params = list(stagings), list(flat_params)
        self.backend = backend
        self.updates = 0
        self._rendezvous: str | None = None

    @classmethod
    def start(cls, config, obs_space, action_space, run_dir=None, *, resume: bool = False) -> "LearnerGroup":
        """Fork ranks 1..N-1 (nothing happens for one learner); they wait for rank 0 at the rendezvous."""
        rt = config.runtime
        learners = rt.learner.count
        if learners == 1:
            return cls(config)
        device = resolve_device(rt.learner.device)
        backend = backend_for(device, learners)
        if device.type == "cuda" and backend == "gloo":
            log.warning("%d learners share %d GPU(s): using gloo (nccl needs one GPU per learner)",
                        learners, torch.cuda.device_count())
        share = -(-config.batch_columns // learners)
        spec = UnrollSpec(obs_space, ActionCodec(action_space, config.algorithm.actions, config.algo).space, rt.unroll_length, share,
                          config.model.lstm_size)
        rendezvous, context = _rendezvous_file(), mp.get_context("fork")
        parameter_count = _parameter_count(config, obs_space, action_space)
        group = cls(config, backend=backend)
        group._rendezvous = rendezvous
        for rank in range(1, learners):
            staging = UnrollBuffers(spec, 1, shared=True)
            flat = torch.zeros(parameter_count, dtype=torch.float32).share_memory_()
            ours, theirs = context.Pipe(duplex=True)
            process = context.Process(
                target=_worker_main, name=f"menger-learner-{rank}", daemon=True,
                args=(rank, learners, rendezvous, backend, config, (obs_space, action_space), run_dir, resume,
                      staging, flat, theirs, os.getpid()))
            with FORK_GATE.forking():
                process.start()
            theirs.close()
            group.processes.append(process)
            group.conns.append(ours)
            group.stagings.append(staging)
            group.flat_params.append(flat)
        return group

    def attach(self, learner) -> None:
        """Rank 0 joins the group; its parameters become everyone's. Call after any restore."""
        if self.learners == 1:
            return
        rt = self.config.runtime
        if learner.device.type == "cpu":
            torch.set_num_threads(_threads_per_rank(rt))
        try:
            _join(0, self.learners, self._rendezvous, self.backend, rt.learner.collective_timeout_s)
            learner.gradient_sync = GradientAllReduce()
            _broadcast_parameters(learner.policy)
        except RuntimeError as exc:
            raise self._failure("joining the learner group", exc) from exc

    def update(self, learner, batch: dict, frames: int) -> dict[str, float]:
        """One step of every learner on its share of `batch` ([L, columns, ...]); rank 0's stats."""
        if self.learners == 1:
            return learner.update(batch, frames)
        columns = batch["dones"].shape[1]
        bounds = share_bounds(columns, self.learners)
        self._check_alive("before an update")
        for rank, (start, stop) in enumerate(bounds[1:], start=1):
            _stage(self.stagings[rank - 1], _columns(batch, start, stop))
            self.conns[rank - 1].send(("update", stop - start, frames, (stop - start) / columns))
        start, stop = bounds[0]
        learner.gradient_sync.weight = (stop - start) / columns
        try:
            stats = learner.update(_columns(batch, start, stop), frames)
        except RuntimeError as exc:  # a collective failed: a peer died or timed out
            raise self._failure(f"update {self.updates + 1}", exc) from exc
        self._wait_all("done", f"update {self.updates + 1}")
        self.updates += 1
        return stats

    def publish(self, learner, version: int) -> None:
        """Nothing to do: every rank stepped to the same parameters (a `GorilaWorkers` reads them from here)."""

    def parameters(self, rank: int) -> torch.Tensor:
        """Rank `rank`'s flat parameter vector (read back through shared memory): for checks and tests."""
        if rank == 0 or self.learners == 1:
            raise ValueError("rank 0's parameters are the trainer's learner.policy; ask for rank 1..N-1")
        self.conns[rank - 1].send(("parameters",))
        self._wait_one(rank, "parameters", "reading parameters")
        return self.flat_params[rank - 1].clone()

    def _wait_all(self, answer: str, during: str) -> None:
        for rank in range(1, self.learners):
            self._wait_one(rank, answer, during)

    def _wait_one(self, rank: int, answer: str, during: str) -> None:
        conn, process = self.conns[rank - 1], self.processes[rank - 1]
        deadline = time.monotonic() + self.config.runtime.learner.collective_timeout_s
        while True:
            if conn.poll(0.05):
                message = conn.recv()
                if message[0] == answer:
                    return
                if message[0] == "error":
                    error = LearnerProcessError(f"learner rank {rank} failed during {during}: {message[1]}")
                    error.child_errors = {f"learner rank {rank}": (message[1], message[2])}  # for menger.explain
                    raise error
            elif not process.is_alive():
                raise self._failure(during, None)
            elif time.monotonic() > deadline:
                raise LearnerProcessError(f"learner rank {rank} gave no answer during {during} for "
                                          f"{self.config.runtime.learner.collective_timeout_s:.0f} s "
                                          "(runtime.learner.collective_timeout_s)")

    def _check_alive(self, during: str) -> None:
        if any(not p.is_alive() for p in self.processes):
            raise self._failure(during, None)

    def _failure(self, during: str, cause: Exception | None) -> LearnerProcessError:
        time.sleep(0.2)  # let a dying peer's exit code and last words arrive
        dead = [f"rank {r} (pid {p.pid}, exit code {p.exitcode})" for r, p in enumerate(self.processes, start=1)
                if not p.is_alive()]
        words = []
        for rank, conn in enumerate(self.conns, start=1):
            try:
                while conn.poll():
                    message = conn.recv()
                    if message[0] == "error":
                        words.append(f"rank {rank}: {message[1]}")
            except (EOFError, OSError):
                pass
        what = f"learner {', '.join(dead)} died" if dead else "a collective failed"
        detail = "; ".join(words) or (str(cause) if cause else "no error reported")
        return LearnerProcessError(f"{what} during {during} ({detail}); the data-parallel learners cannot go on "
                                   "with fewer ranks: resume the run from its last checkpoint (menger resume RUN_DIR)")

    def close(self) -> None:
        stop_children(self.processes, self.conns)
        self.processes, self.conns = [], []
        if self.learners > 1 and dist.is_initialized():
            dist.destroy_process_group()
        if self._rendezvous is not None:
            shutil.rmtree(os.path.dirname(self._rendezvous), ignore_errors=True)
            self._rendezvous = None


def _parameter_count(config, obs_space, action_space) -> int:
    """Built under a forked RNG: counting must not move the seed that rank 0's own model is built from."""
    from menger.models import build_policy

    with torch.random.fork_rng(devices=[]):
        return sum(p.numel() for p in build_policy(obs_space, action_space, config.model, config.algo).parameters())

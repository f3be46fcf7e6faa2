"""A sharded parameter server: the parameters split across S shards by size, each with its own optimizer state.

Gradient workers (A3C's actor-learners, GORILA's learners) compute gradients on their own data against the
parameters they last fetched and push them flat (one float32 vector in the order of the learned parameters,
`write_gradient`). The server applies them:

    sync   average the K gradients of one round (weights w_k), then step once
    async  step on each gradient as it arrives (K = 1)

One step, whatever the shard count::

    g = sum_k w_k g_k                                   # in push order: K = 2 is all-reduce's sum, bit for bit
    norm = |per-tensor L2 norms of g|                   # one global clip, as `clip_gradients` computes it
    scale = min(1, max_norm / (norm + 1e-6))
    for shard in shards: shard.step(g, scale)           # its slice only, its own Adam moments

so S shards give the same parameters as one (Adam is elementwise), and K gradients of one round the same as
K data-parallel learners' all-reduce (tested). The server does not version or publish: its caller (the trainer)
counts a version per step and publishes through the host's parameter cache, as for every learner. A gradient
computed on parameters more than `max_staleness` versions old never reaches it: the coordinator (A3C) or the
trainer (GORILA) drops it and counts it.

Three ways to hold the shards, one face (`param_groups`, `zero_grad`, `apply`, `applied`, `state_dict`,
`load_state_dict`), chosen by `menger.learners.ps.make_parameter_server` from the launcher:

    ShardedParameterServer   the shards are objects in the learner's process (the threads launcher)
    ShardProcesses           each shard is a forked process of its own (the processes launcher): the driver
                             sends "step" down a pipe per shard, the parameters and the gradient are in shared
                             memory. A shard that dies ends the run with `ParameterServerError`, naming it; the
                             run resumes from its last checkpoint.
    RayShards                each shard is a Ray actor (`menger.params.ray`, the ray launcher); a shard that
                             dies is made again from its last snapshot and the run goes on.

All take the same steps bit for bit, and their checkpoints are interchangeable (tested).
"""
from __future__ import annotations

import atexit
import functools
import multiprocessing as mp
import multiprocessing.util  # noqa: F401 - its exit hook is registered before ours, so ours runs first
import os
import pickle
import signal
import time

import torch

from menger.children import report_error, stop_children
from menger.forking import FORK_GATE
from menger.params.server import views_of


def shard_bounds(sizes: list[int], shards: int) -> list[tuple[int, int]]:
    """[start, stop) of each shard's parameter tensors: contiguous runs of whole tensors whose element counts
    are as even as cutting between tensors allows (each shard holds at least one tensor)."""
    if shards < 1:
        raise ValueError(f"a parameter server needs at least one shard; got {shards}")
    if shards > len(sizes):
        raise ValueError(f"runtime.parameter_server.shards={shards} but the network has only {len(sizes)} parameter "
                         f"tensors, and a shard holds whole tensors; use at most {len(sizes)} shards")
    total, bounds, start, done = sum(sizes), [], 0, 0
    for shard in range(shards):
        if shard == shards - 1:
            bounds.append((start, len(sizes)))
            break
        target = total * (shard + 1) / shards
        stop = start + 1
        done += sizes[start]
        # take the next tensor while it brings this shard closer to its share, leaving one for each later shard
        while stop < len(sizes) - (shards - 1 - shard) and abs(done + sizes[stop] - target) <= abs(done - target):
            done += sizes[stop]
            stop += 1
        bounds.append((start, stop))
        start = stop
    return bounds


def weighted_sum(gradients: torch.Tensor, weights: list[float], size: int) -> torch.Tensor:
    """sum_k w_k g_k of `gradients` [K, size], in push order (K = 1 with weight 1: the gradient itself)."""
    if gradients.dim() != 2 or gradients.shape[1] != size:
        raise ValueError(f"a pushed gradient must be a flat float32 vector of {size} entries (the learned "
                         f"parameters in order); got shape {tuple(gradients.shape)}")
    if len(weights) != gradients.shape[0]:
        raise ValueError(f"{gradients.shape[0]} gradients but {len(weights)} weights")
    if gradients.shape[0] == 1 and weights[0] == 1.0:
        return gradients[0]
    flat = gradients[0].mul(weights[0])
    for k in range(1, gradients.shape[0]):
        flat.add_(gradients[k].mul(weights[k]))
    return flat


def clip_scale(norm: torch.Tensor, max_grad_norm: float) -> torch.Tensor | None:
    """The global clip's factor, as `clip_gradients` computes it (None: no clipping)."""
    return (max_grad_norm / (norm + 1e-6)).clamp_(max=1.0) if max_grad_norm > 0 else None


def check_layout(state: dict, sizes: list[int]) -> None:
    if "shards" not in state or list(state["sizes"]) != sizes:
        raise ValueError(f"the checkpoint's parameter server has shards of {list(state.get('sizes', []))} "
                         f"parameters, this run's {sizes}: resume with the runtime.parameter_server.shards and "
                         "model the run was trained with")


def write_gradient(flat: torch.Tensor, params: list[torch.Tensor], grads) -> None:
    """A worker's gradients into a flat slot, in parameter order (zeros where a parameter had none): the layout
    every pushed gradient has."""
    offset = 0
    for p, g in zip(params, grads):
        size = p.numel()
        if g is None:
            flat[offset:offset + size].zero_()
        else:
            flat[offset:offset + size].copy_(g.reshape(-1))
        offset += size


class ParameterShard:
    """A run of whole parameter tensors, their slice [offset, offset + size) of a flat gradient, and the Adam
    moments of those tensors alone."""

    def __init__(self, params: list[torch.Tensor], offset: int, optimizer):
        self.params, self.offset, self.optimizer = params, offset, optimizer
        self.size = sum(p.numel() for p in params)

    def grads(self, flat: torch.Tensor) -> list[torch.Tensor]:
        views, offset = [], self.offset
        for p in self.params:
            views.append(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        return views

    def norms(self, flat: torch.Tensor) -> list[torch.Tensor]:
        return list(torch._foreach_norm(self.grads(flat)))

    @torch.no_grad()
    def step(self, flat: torch.Tensor, scale: torch.Tensor | None) -> None:
        grads = self.grads(flat)
        if scale is not None:
            torch._foreach_mul_(grads, scale)
        for p, g in zip(self.params, grads):
            p.grad = g
        self.optimizer.step()
        for p in self.params:
            p.grad = None


class ShardedParameterServer:
    """The optimizer of a learner in `runtime.learner.mode: parameter_server`: S shards, one global clip.

    It has an optimizer's face where the learner needs one (`param_groups` for the LR schedule, `state_dict`),
    and `apply(gradients, weights)` in place of `step`. `make_optimizer(params)` builds one shard's optimizer.
    """

    def __init__(self, params: list[torch.Tensor], shards: int, max_grad_norm: float, make_optimizer):
        bounds = shard_bounds([p.numel() for p in params], shards)
        self.size = sum(p.numel() for p in params)
        self.max_grad_norm = max_grad_norm
        self.shards, offset = [], 0
        for start, stop in bounds:
            group = params[start:stop]
            self.shards.append(ParameterShard(group, offset, make_optimizer(group)))
            offset += sum(p.numel() for p in group)
        self.applied = 0

    @property
    def param_groups(self) -> list[dict]:
        return [group for shard in self.shards for group in shard.optimizer.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear: the shards take their gradients from `apply` and drop them after the step."""

    @torch.no_grad()
    def apply(self, gradients: torch.Tensor, weights: list[float]) -> torch.Tensor:
        """One step on the weighted sum of `gradients` [K, size] (K = 1: the gradient as it is); returns the
        global norm before clipping."""
        flat = weighted_sum(gradients, weights, self.size)
        norms = [n for shard in self.shards for n in shard.norms(flat)]
        norm = torch.linalg.vector_norm(torch.stack(norms))
        scale = clip_scale(norm, self.max_grad_norm)
        for shard in self.shards:
            shard.step(flat, scale)
        self.applied += gradients.shape[0]
        return norm

    def state_dict(self) -> dict:
        return {"shards": [shard.optimizer.state_dict() for shard in self.shards],
                "sizes": [shard.size for shard in self.shards], "applied": self.applied}

    def load_state_dict(self, state: dict) -> None:
        check_layout(state, [shard.size for shard in self.shards])
        for shard, saved in zip(self.shards, state["shards"]):
            shard.optimizer.load_state_dict(saved)
        self.applied = int(state.get("applied", 0))


# ----- the shards in processes of their own ----------------------------------------------------------
ANSWER_TIMEOUT_S = 60.0  # a shard answers in milliseconds; one silent for this long is stuck
RESUME = "the run cannot go on without it: resume from the last checkpoint with `menger resume RUN_DIR`"


class ParameterServerError(RuntimeError):
    """A parameter-server shard process died, failed or stopped answering. `child_errors`: {"parameter server
    shard i": (its error, its traceback)} when the shard reported one (`menger.explain`)."""

    child_errors: dict[str, tuple[str, str]] = {}


class ShardProcesses:
    """`ShardedParameterServer` with each shard in a forked process of its own (the processes launcher).

    Shared memory (CPU, float32) holds the learned parameters as one flat vector (each shard writes its slice
    only) and the gradient to apply (the driver writes it). A pipe per shard carries the rest. One step::

        driver: gradient buffer = sum_k w_k g_k                # as ShardedParameterServer computes it
        driver: norm = |per-tensor norms of it|, scale = min(1, max_norm / (norm + 1e-6))   # the same bits
        driver -> every shard ("step", scale, lrs)   shard: scales its slice, steps its Adam; ("done",)
        driver: parameter buffer -> the learner's parameter tensors (`params`), which the trainer publishes

    Each shard's Adam moments live in its process; `state_dict` and `load_state_dict` fetch and send them through
    the pipes, in ShardedParameterServer's layout. Every wait has a deadline (`timeout_s`): a shard that dies,
    fails or stays silent raises `ParameterServerError` naming it, and the run resumes from its last checkpoint.
    The shards touch only the CPU, so they may be forked after the learner's process has initialised CUDA; the
    learner's parameters may live on a GPU (they are copied to and from the CPU buffers).
    """

    def __init__(self, params: list[torch.Tensor], shards: int, max_grad_norm: float, make_optimizer, *,
                 timeout_s: float = ANSWER_TIMEOUT_S):
        if any(p.dtype != torch.float32 for p in params):
            raise ValueError("the parameter-server shard processes hold float32 parameters; this network has "
                             f"{sorted({str(p.dtype) for p in params})}")
        sizes = [p.numel() for p in params]
        bounds = shard_bounds(sizes, shards)
        self.params, self.size = list(params), sum(sizes)
        self.max_grad_norm, self.timeout_s = max_grad_norm, timeout_s
        self.sizes = [sum(sizes[start:stop]) for start, stop in bounds]
        self.applied, self._rounds = 0, 0
        self._cut_short: tuple | None = None  # (round, answer, shards yet to answer, gradients it applies)
        self._flat = torch.cat([p.detach().reshape(-1).cpu() for p in params]).share_memory_()
        self._gradient = torch.zeros(self.size).share_memory_()
        self._views = views_of(self._flat, params)
        self._gradient_views = views_of(self._gradient, params)
        self._groups: list[list[dict]] = []  # each shard's param_groups, as the LR schedule sees them
        self.processes: list = []
        self.conns: list = []
        # Shards ignore SIGTERM, so multiprocessing's exit hook (terminate, then join) would wait for them forever
        # if the driver exits without `close`: this hook, registered after it, runs before it and stops them.
        self._stop = functools.partial(_stop_shards, self.processes, self.conns, os.getpid())
        atexit.register(self._stop)
        context, offset = mp.get_context("fork"), 0
        try:
            for index, (start, stop) in enumerate(bounds):
                ours, theirs = context.Pipe(duplex=True)
                self.conns.append(ours)
                process = context.Process(
                    target=_shard_main, name=f"menger-ps-shard-{index}", daemon=True,
                    args=(self._views[start:stop], offset, make_optimizer, self._gradient, theirs, list(self.conns),
                          os.getpid()))
                with FORK_GATE.forking():
                    process.start()
                theirs.close()
                self.processes.append(process)
                offset += self.sizes[index]
            for index in range(shards):
                lrs = self._answer(index, "ready", 0, "start-up")[2]
                self._groups.append([{"lr": lr} for lr in lrs])
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        """The shard processes' pids, shard 0 first."""
        return [process.pid for process in self.processes]

    @property
    def param_groups(self) -> list[dict]:
        return [group for groups in self._groups for group in groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Nothing to clear: the shards take their gradients from `apply` and drop them after the step."""

    @torch.no_grad()
    def apply(self, gradients: torch.Tensor, weights: list[float]) -> torch.Tensor:
        """One step on the weighted sum of `gradients` [K, size]; returns the global norm before clipping."""
        self._settle()  # no shard may still read the gradient buffer when it is written
        self._gradient.copy_(weighted_sum(gradients, weights, self.size))
        first, last = self.applied + 1, self.applied + gradients.shape[0]
        during = f"the step on pushed gradient {first}" + (f" to {last}" if last > first else "")
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(self._gradient_views)))
        scale = clip_scale(norm, self.max_grad_norm)
        scale = None if scale is None else float(scale)  # a float32 value: exact as a float, exact back
        self._round([("step", scale, [g["lr"] for g in groups]) for groups in self._groups], "done", during,
                    applies=gradients.shape[0])
        self._take_step(gradients.shape[0])
        return norm

    @torch.no_grad()
    def _take_step(self, count: int) -> None:
        """The shards' new parameters into the learner's tensors; `count` gradients applied."""
        for param, view in zip(self.params, self._views):
            param.copy_(view)
        self.applied += count

    def _settle(self) -> None:
        """A round that an interrupt (Ctrl-C) cut short: wait for the answers it still owes, so that no shard is
        still working on it when the next round starts; a cut-short step is then taken into the learner's
        parameters and count, so they match the shards' moments (which a closing checkpoint saves with them)."""
        if self._cut_short is None:
            return
        number, answer, waiting, applies = self._cut_short
        self._cut_short = None
        for index in sorted(waiting):
            self._answer(index, answer, number, "the round an interrupt cut short")
        if answer == "done":
            self._take_step(applies)

    def state_dict(self) -> dict:
        answers = self._round([("state",)] * len(self.conns), "state", "saving the optimizer state")
        shards = []
        for groups, (_, _, blob) in zip(self._groups, answers):
            saved = pickle.loads(blob)
            for saved_group, group in zip(saved["param_groups"], groups):
                saved_group["lr"] = group["lr"]  # what the schedule set since the last step
            shards.append(saved)
        return {"shards": shards, "sizes": list(self.sizes), "applied": self.applied}

    @torch.no_grad()
    def load_state_dict(self, state: dict) -> None:
        """The shards' Adam state; the parameters are the learner's as they are now (`Learner.load_state_dict`
        loads the model first)."""
        check_layout(state, self.sizes)
        self._round([("load", pickle.dumps(_own_tensors(saved))) for saved in state["shards"]], "loaded",
                    "loading the optimizer state")
        for groups, saved in zip(self._groups, state["shards"]):
            for group, saved_group in zip(groups, saved["param_groups"]):
                group["lr"] = saved_group["lr"]
        for view, param in zip(self._views, self.params):
            view.copy_(param)
        self.applied = int(state.get("applied", 0))

    def close(self) -> None:
        """Stop the shard processes (a dead one is only reaped); safe to call more than once."""
        atexit.unregister(self._stop)
        self._stop()

    # ----- the driver's side of the pipes -----------------------------------------------------------------
    def _round(self, messages: list[tuple], answer: str, during: str, applies: int = 0) -> list[tuple]:
        """Send each shard its message, then collect every shard's answer: they work meanwhile, together. Each
        message carries the round's number and each answer echoes it, so an answer to an earlier round is told
        apart; a round an interrupt cuts short is settled before the next one (`_settle`)."""
        self._settle()
        self._rounds += 1
        waiting = set(range(len(messages)))
        self._cut_short = (self._rounds, answer, waiting, applies)
        for index, (kind, *args) in enumerate(messages):
            try:
                self.conns[index].send((kind, self._rounds, *args))
            except (OSError, ValueError):
                raise self._died(index, during) from None
        answers = []
        for index in range(len(messages)):
            answers.append(self._answer(index, answer, self._rounds, during))
            waiting.discard(index)
        self._cut_short = None
        return answers

    def _answer(self, index: int, answer: str, round_number: int, during: str) -> tuple:
        conn, process = self.conns[index], self.processes[index]
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                message = conn.recv() if conn.poll(0.05) else None
            except (EOFError, OSError):
                raise self._died(index, during) from None
            if message is not None:
                if message[0] == answer and message[1] == round_number:
                    return message
                if message[0] != "error" and message[1] < round_number:  # an earlier round's
                    continue
                if message[0] == "error":
                    error = ParameterServerError(f"parameter server shard {index} (pid {process.pid}) failed during "
                                                 f"{during}: {message[1]}; {RESUME}")
                    error.child_errors = {f"parameter server shard {index}": (message[1], message[2])}
                    raise error
                raise ParameterServerError(f"parameter server shard {index} (pid {process.pid}) answered "
                                           f"{message[0]!r} where {answer!r} was due during {during}; {RESUME}")
            if not process.is_alive():
                raise self._died(index, during)
            if time.monotonic() > deadline:
                raise ParameterServerError(f"parameter server shard {index} (pid {process.pid}) gave no answer "
                                           f"during {during} for {self.timeout_s:g} s; {RESUME}")

    def _died(self, index: int, during: str) -> ParameterServerError:
        process = self.processes[index]
        process.join(5.0)  # its pipe closed as it exited: reap it for its exit code
        code = process.exitcode
        how = f", killed by {signal.Signals(-code).name}" if code is not None and code < 0 else ""
        return ParameterServerError(f"parameter server shard {index} (pid {process.pid}, exit code {code}{how}) "
                                    f"died during {during}; {RESUME}")


def _stop_shards(processes: list, conns: list, owner: int) -> None:
    """Ask every shard to stop, kill one that has not within 5 s, reap them all. Only in the process that forked
    them: a process forked from it later (an actor) inherits this hook but not the shards."""
    if os.getpid() != owner:
        return
    stop_children(processes, conns, ("stop", 0), reap_s=5.0)
    processes.clear()
    conns.clear()


def _own_tensors(value):
    """A copy whose tensors hold their own storage: a tensor pickles its whole storage, and a checkpoint's
    tensors may be views of one large buffer."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {key: _own_tensors(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_own_tensors(item) for item in value)
    return value


def _shard_main(params: list[torch.Tensor], offset: int, make_optimizer, gradient: torch.Tensor, conn,
                inherited: list, parent_pid: int) -> None:
    """A forked shard: its slice of the shared parameters, its own Adam, then the driver's messages."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # stopping is the driver's to handle
        signal.signal(signum, signal.SIG_IGN)
    for other in inherited:  # the driver's ends of this shard's pipe and of earlier shards'
        other.close()
    code = 0
    try:
        torch.set_num_threads(1)  # a few small tensors: no thread pool to compete with the actors
        shard = ParameterShard(params, offset, make_optimizer(params))
        conn.send(("ready", 0, [group["lr"] for group in shard.optimizer.param_groups]))
        _serve_shard(shard, gradient, conn, parent_pid)
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which ends the run naming this shard
        report_error(conn, exc)
        code = 1
    os._exit(code)


def _serve_shard(shard: ParameterShard, gradient: torch.Tensor, conn, parent_pid: int) -> None:
    """Idle waits have no deadline (the driver may wait long for gradients); a vanished driver ends the shard."""
    while True:
        if not conn.poll(0.1):
            if os.getppid() != parent_pid:
                return
            continue
        try:
            message = conn.recv()
        except EOFError:  # the driver closed its end
            return
        kind, round_number, *args = message
        if kind == "step":
            scale, lrs = args
            for group, lr in zip(shard.optimizer.param_groups, lrs):
                group["lr"] = lr
            shard.step(gradient, None if scale is None else torch.tensor(scale, dtype=torch.float32))
            conn.send(("done", round_number))
        elif kind == "state":
            conn.send(("state", round_number, pickle.dumps(shard.optimizer.state_dict())))
        elif kind == "load":
            shard.optimizer.load_state_dict(pickle.loads(args[0]))
            conn.send(("loaded", round_number))
        elif kind == "stop":
            return

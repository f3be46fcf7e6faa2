"""`menger tune EXP --population N`: population-based training (Jaderberg et al. 2017) over the experiment's `tune:` keys.

    members = N runs, each with its own values drawn from `tune:` and its own seed (runtime.seed + i)
    for each generation g, until stop.env_frames (every member's budget) or a member reaches stop.target_return:
        every member trains to (g + 1) * ready env frames, all at the same time     # a segment: train or resume
        ready: each member's score is its metric at the end of the segment
        exploit: each member in the bottom `quantile` copies one drawn from the top `quantile`: its whole run
                 directory (weights, optimizer state, LR schedule, counters, replay, actors' envs) in one rename
        explore: each of the copy's tuned values is resampled (probability `resample`), or else multiplied by
                 0.8 or 1.2 (kept inside its range); the next segment resumes the copy with them

A segment is an ordinary `menger train` or `menger resume` of the member's run directory, stopped by `SegmentEnd`
with its closing checkpoint; so every copy moves a checkpoint and its config together or, if the tune is killed
in between, not at all (`Population.recover`). Where members run is an executor's business:

    processes   (default) every member a `python -m menger.pbt --worker` process on this machine that runs its
                segments one after another; one that dies is started again and resumes from its last checkpoint
    ray         every member a Ray actor that runs its segments one after another; a member whose actor is lost
                with its node gets a new one elsewhere, which resumes from the last checkpoint (the tune directory
                must be on storage every node sees)
    inline      one after another in this process (tests, debugging)

The tune directory: `population.json` (the state `menger tune` resumes from), `lineage.jsonl` (one record per
event: start, ready, exploit, restart, failed, stopped, target, done), `lineage.png`, `members/member-NN` (run directories)
and `best.json` (the best member's run directory, which `menger eval` and `menger resume` take like any run).
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from menger.config import ConfigError
from menger.experiment import Tuned, load_experiment, load_experiment_data, tune_spec
from menger.checkpoint import _fsync_directory as _fsync  # opens and syncs a file or a directory alike
from menger.runtime import Observer
from menger.runtime.rundir import LOCK_FILE
from menger.runtime.stopping import TrainingFailed
from menger.tune import default_metric

log = logging.getLogger("menger.pbt")

STATE_FILE = "population.json"
LINEAGE_FILE = "lineage.jsonl"
PERTURB = (0.8, 1.2)
WAIT_NOTE_S = 300.0  # a Ray segment this long without an answer is logged (it may wait for room)
MAX_RESTARTS = 3  # a member's segment that dies this many times in a row ends the tune (its log says why)


class PopulationError(RuntimeError):
    """The population cannot go on: a member keeps dying, or none has a score to copy."""


# ----- the rules: pure functions of scores, values and a seeded RNG ------------------------------------------------
def draw(tuned: Tuned, rng: random.Random):
    """A value of one tuned key drawn from its distribution."""
    if tuned.kind == "log_uniform":
        return math.exp(rng.uniform(math.log(tuned.low), math.log(tuned.high)))
    if tuned.kind == "uniform":
        return rng.uniform(tuned.low, tuned.high)
    if tuned.kind == "int_uniform":
        return rng.randint(int(tuned.low), int(tuned.high))
    return rng.choice(list(tuned.choices))


def explore(values: dict, spec: list[Tuned], rng: random.Random, resample: float,
            perturb: tuple[float, ...] = PERTURB) -> tuple[dict, dict]:
    """The copied values, each resampled (probability `resample`) or multiplied by a factor drawn from
    `perturb` and kept inside its range (a choice is kept); returns (new values, {key: what was done})."""
    out, how = dict(values), {}
    for tuned in spec:
        if rng.random() < resample:
            out[tuned.key], how[tuned.key] = draw(tuned, rng), "resample"
        elif tuned.kind != "choice":
            factor = rng.choice(perturb)
            value = min(tuned.high, max(tuned.low, values[tuned.key] * factor))
            out[tuned.key] = int(round(value)) if tuned.kind == "int_uniform" else value
            how[tuned.key] = f"x{factor:g}"
    return out, how


def pick_exploits(scores: dict[int, float | None], quantile: float, rng: random.Random) -> list[tuple[int, int]]:
    """Truncation selection: (member, source) for each member in the bottom `quantile` by score, its source drawn
    from the top `quantile`. Members without a score (no episode finished yet) take no part; a failed member
    scores -inf, so it is always replaced."""
    ranked = sorted((m for m, s in scores.items() if s is not None), key=lambda m: (scores[m], m))
    count = max(1, int(len(ranked) * quantile)) if quantile > 0 else 0  # two members: one copies the other
    if count == 0 or len(ranked) < 2:
        return []
    bottom, top = ranked[:count], [m for m in ranked[-count:] if math.isfinite(scores[m])]
    if not top:
        return []
    return [(member, rng.choice(top)) for member in bottom if member not in top]


# ----- one segment of one member --------------------------------------------------------------------------------
class SegmentEnd(Observer):
    """Stops a member's run (with its closing checkpoint) once it has `until` env frames: the end of a segment.
    The experiment's own stop rules stay as they are, so its LR schedule still ends at stop.env_frames."""

    def __init__(self, until: int):
        self.until, self.started_at = until, 0

    def on_start(self, trainer) -> None:
        self.started_at = int(trainer.accounts.accepted)  # where the segment began: > 0 after a checkpoint
        if trainer.accounts.accepted >= self.until:  # a segment that had ended when the tune was killed
            trainer.request_stop()

    def on_update(self, trainer, stats: dict) -> None:
        if trainer.accounts.accepted >= self.until:
            trainer.request_stop()


def _has_checkpoint(run_dir: Path) -> bool:
    from menger.checkpoint import CheckpointManager

    return (run_dir / "checkpoints").is_dir() and bool(CheckpointManager(run_dir / "checkpoints").list())


def run_segment(job: dict) -> dict:
    """Train (or resume) one member's run directory to `job["until"]` frames with `job["values"]`; returns its
    frames, its metric, whether it reached the target, or its failure. Safe to run again after a crash: a run
    directory with a checkpoint is resumed from it."""
    from menger import api

    run_dir = Path(job["run_dir"])
    settings = [f"{key}={json.dumps(value)}" for key, value in job["values"].items()]
    end = SegmentEnd(int(job["until"]))
    observers = [end]
    resumed = _has_checkpoint(run_dir)
    try:
        if resumed:
            result = api.resume(run_dir, overrides=settings, observers=observers,
                                allow_import=job.get("allow_import", ()))
        else:
            result = api.train(job["experiment"], overrides=[*job["overrides"], *settings], run_dir=str(run_dir),
                               observers=observers)
    except TrainingFailed as exc:  # values that cannot learn are a result: the member is replaced
        return {"status": "failed", "error": str(exc), "frames": _frames_on_disk(run_dir), "score": None}
    metrics = result.final_metrics
    score = metrics.get(job["metric"])
    return {"status": "target" if result.reached_target else "ok", "frames": int(metrics.get("time/env_frames", 0)),
            "score": None if score is None else float(score), "from_frames": end.started_at}


def _frames_on_disk(run_dir: Path) -> int:
    from menger.logging.jsonl import read_jsonl

    try:
        records = read_jsonl(run_dir / "metrics.jsonl")
    except (OSError, ValueError):
        return 0
    return int(records[-1].get("time/env_frames", 0)) if records else 0


def _worker_main() -> int:
    """`python -m menger.pbt --worker`: a member's process (the processes executor). Each input line names a job
    file and a result file: it runs that segment and writes the result; it ends when its input closes."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the tune stops: checkpoint, then exit
    for line in sys.stdin:
        job_path, result_path = line.rstrip("\n").split("\t")
        result = run_segment(json.loads(Path(job_path).read_text()))
        _write_json(Path(result_path), result)
    return 0


# ----- executors: where segments run ----------------------------------------------------------------------------
class InlineMembers:
    """Segments one after another in this process."""

    def run(self, jobs: dict[int, dict], on_restart) -> dict[int, dict]:
        return {member: run_segment(job) for member, job in jobs.items()}

    def close(self) -> None:
        pass


class ProcessMembers:
    """Every member a process of its own, all at the same time, that runs the member's segments one after another
    (started once, so the imports are paid once, not at every segment). A process that dies without a result
    (killed, out of memory) is started again, and the segment resumes from the member's last checkpoint."""

    def __init__(self, out_dir: Path, max_restarts: int = MAX_RESTARTS):
        self.out_dir, self.max_restarts = out_dir, max_restarts
        self.workers: dict[int, subprocess.Popen] = {}
        self.running: dict[int, subprocess.Popen] = {}  # the members whose segment is under way, and their process

    def _paths(self, member: int) -> tuple[Path, Path]:
        jobs = self.out_dir / "jobs"
        jobs.mkdir(exist_ok=True)
        return jobs / f"member-{member:02d}.job.json", jobs / f"member-{member:02d}.result.json"

    def _worker(self, member: int, job: dict) -> subprocess.Popen:
        worker = self.workers.get(member)
        if worker is not None and worker.poll() is None:
            return worker
        logfile = open(Path(job["run_dir"]).parent / f"member-{member:02d}.log", "a")  # noqa: SIM115 - the child's
        try:
            # its own session: a Ctrl-C reaches the tune, which stops the members in order; and a member whose tune
            # dies is sent SIGTERM (it checkpoints and exits) instead of training on as an orphan
            worker = subprocess.Popen([sys.executable, "-m", "menger.pbt", "--worker"], stdin=subprocess.PIPE,
                                      stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True,
                                      preexec_fn=_die_with_parent, text=True)
        finally:
            logfile.close()
        self.workers[member] = worker
        return worker

    def _send(self, member: int, job: dict) -> subprocess.Popen:
        job_path, result_path = self._paths(member)
        result_path.unlink(missing_ok=True)
        _write_json(job_path, job)
        for _ in range(2):
            worker = self._worker(member, job)
            try:
                worker.stdin.write(f"{job_path}\t{result_path}\n")
                worker.stdin.flush()
                return worker
            except (BrokenPipeError, OSError):  # it died between segments: a new one
                worker.wait()
        raise PopulationError(f"member {member}'s process dies as it starts; "
                              f"{Path(job['run_dir']).parent / f'member-{member:02d}.log'} says why")

    def run(self, jobs: dict[int, dict], on_restart) -> dict[int, dict]:
        results: dict[int, dict] = {}
        deaths = {member: 0 for member in jobs}
        self.running = {member: self._send(member, job) for member, job in jobs.items()}
        while self.running:
            for member, worker in list(self.running.items()):
                result_path = self._paths(member)[1]
                if result_path.exists():  # written whole (a rename)
                    results[member] = json.loads(result_path.read_text())
                    del self.running[member]
                    continue
                code = worker.poll()
                if code is None:
                    continue
                deaths[member] += 1
                logfile = Path(jobs[member]["run_dir"]).parent / f"member-{member:02d}.log"
                if deaths[member] > self.max_restarts:
                    del self.running[member]
                    raise PopulationError(f"member {member} died {deaths[member]} times in this segment (exit "
                                          f"{code}); {logfile} says why. Fix it, then run the same `menger tune` "
                                          "command again: the population resumes")
                on_restart(member, f"its process ended with exit code {code}")
                time.sleep(deaths[member])  # a dying member's lock and checkpoint settle first
                self.running[member] = self._send(member, jobs[member])
            time.sleep(0.05)
        return results

    def close(self) -> None:
        """Stop the running segments the way SIGTERM stops a run (each writes its checkpoint first); the idle
        processes end when their input closes."""
        for member, worker in self.workers.items():
            if worker.poll() is not None:
                continue
            if member in self.running:
                worker.send_signal(signal.SIGTERM)
            try:
                worker.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 60
        for worker in self.workers.values():
            try:
                worker.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        self.workers, self.running = {}, {}


def _die_with_parent() -> None:
    """In a member process before it runs: SIGTERM when its parent (the tune) dies (Linux; elsewhere nothing)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class MemberWorker:
    """A member's long-lived Ray actor: it runs the member's segments one after another, so the imports and Ray's
    worker start are paid once per member, not once per segment (as `ProcessMembers`' processes on one host)."""

    def run(self, job: dict) -> dict:
        return run_segment(job)


class RayMembers:
    """Every member a Ray actor (`MemberWorker`, `cpus` CPUs) on whichever node has room, alive for the whole tune.
    A member whose actor is lost with its node or its worker gets a new actor, on a node that is alive, and the
    segment runs again from the member's last checkpoint. Ray's own restarts stay off: a restarted actor would
    not know which segment to resume, the tune does."""

    def __init__(self, cpus: float = 1.0, max_restarts: int = MAX_RESTARTS, address: str | None = None):
        try:
            import ray
        except ImportError as exc:
            raise ConfigError("menger tune --on ray needs Ray: pip install 'menger-rl[ray]'") from exc
        if not ray.is_initialized():
            ray.init(address=address or os.environ.get("RAY_ADDRESS"), log_to_driver=False)
        self.ray, self.cpus, self.max_restarts = ray, cpus, max_restarts
        # spread over the nodes: a node that goes takes as few members with it as it can
        self._actor_class = ray.remote(num_cpus=cpus, max_restarts=0, max_task_retries=0,
                                       scheduling_strategy="SPREAD")(MemberWorker)
        self.actors: dict[int, object] = {}
        names = ("ActorDiedError", "ActorUnavailableError", "WorkerCrashedError", "NodeDiedError", "OwnerDiedError",
                 "ObjectLostError", "RaySystemError", "LocalRayletDiedError")
        self._lost = tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))

    def _actor(self, member: int):
        actor = self.actors.get(member)
        if actor is None:
            actor = self.actors[member] = self._actor_class.remote()
        return actor

    def run(self, jobs: dict[int, dict], on_restart) -> dict[int, dict]:
        ray = self.ray
        deaths = {member: 0 for member in jobs}
        pending = {self._actor(member).run.remote(job): member for member, job in jobs.items()}
        results = {}
        waited = 0.0
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_NOTE_S)
            if not done:  # a member's actor may wait for a node with room (the cluster lost one): say so
                waited += WAIT_NOTE_S
                log.warning("%d member(s) still training or waiting for a node with %g free CPU(s) after %.0f s: "
                            "%s (ray status shows the cluster's free CPUs)", len(pending), self.cpus, waited,
                            ", ".join(str(m) for m in sorted(pending.values())))
                continue
            member = pending.pop(done[0])
            try:
                results[member] = ray.get(done[0])
            except self._lost as exc:
                deaths[member] += 1
                self._forget(member)
                if deaths[member] > self.max_restarts:
                    raise PopulationError(f"member {member}'s Ray actor was lost {deaths[member]} times in this "
                                          f"segment ({type(exc).__name__}); check the cluster, then run the same "
                                          "`menger tune` command again") from exc
                on_restart(member, f"its Ray actor was lost ({type(exc).__name__}); a new one resumes it")
                pending[self._actor(member).run.remote(jobs[member])] = member
            except ray.exceptions.RayTaskError as exc:  # the segment itself raised: not the cluster's doing
                raise exc.as_instanceof_cause() from None
        return results

    def _forget(self, member: int) -> None:
        actor = self.actors.pop(member, None)
        if actor is not None:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone with its node
                pass

    def close(self) -> None:
        """The members' actors end with the tune (their run directories hold everything they had)."""
        for member in list(self.actors):
            self._forget(member)


EXECUTORS = ("processes", "ray", "inline")


# ----- the population -------------------------------------------------------------------------------------------
@dataclass
class Member:
    id: int
    run_dir: str                  # relative to the tune directory
    values: dict
    seed: int
    frames: int = 0
    score: float | None = None
    status: str = "training"      # training | failed | target | stopped (by another stop rule, e.g. wall clock)
    history: list = field(default_factory=list)  # [frames, score] at each ready


@dataclass
class PBTResult:
    out_dir: Path
    best: dict | None
    members: list[Member]
    reached_at: int | None        # total env frames of the population when a member first reached the target


class Population:
    """The population's state in `out_dir/population.json`, written atomically after every step, and the rules
    that move it on (module doc)."""

    def __init__(self, out_dir: Path, *, size: int, ready: int, quantile: float, resample: float, seed: int,
                 metric: str, budget: int, target: float | None, perturb=PERTURB, direction: str = "maximize"):
        self.out_dir = out_dir
        self.size, self.ready, self.quantile, self.resample, self.seed = size, ready, quantile, resample, seed
        self.metric, self.budget, self.target, self.perturb = metric, budget, target, tuple(perturb)
        self.direction = direction
        self.sign = 1.0 if direction == "maximize" else -1.0  # ranks by sign * score: the best is the largest
        self.generation = 0
        self.members: list[Member] = []
        self.pending: list[dict] = []   # exploits decided but maybe not all copied when the tune was killed
        self.done = False
        self.reached_at: int | None = None

    # -- persistence
    def save(self) -> None:
        state = {"format": 1, "size": self.size, "ready": self.ready, "quantile": self.quantile,
                 "resample": self.resample, "seed": self.seed, "metric": self.metric, "budget": self.budget,
                 "target": self.target, "perturb": list(self.perturb), "direction": self.direction,
                 "generation": self.generation,
                 "pending": self.pending, "done": self.done, "reached_at": self.reached_at,
                 "members": [vars(m) for m in self.members]}
        _write_json(self.out_dir / STATE_FILE, state)

    @classmethod
    def load(cls, out_dir: Path) -> "Population":
        state = json.loads((out_dir / STATE_FILE).read_text())
        population = cls(out_dir, size=state["size"], ready=state["ready"], quantile=state["quantile"],
                         resample=state["resample"], seed=state["seed"], metric=state["metric"],
                         budget=state["budget"], target=state["target"], perturb=state.get("perturb", PERTURB),
                         direction=state.get("direction", "maximize"))
        population.generation, population.pending = state["generation"], state["pending"]
        population.done, population.reached_at = state["done"], state.get("reached_at")
        population.members = [Member(**m) for m in state["members"]]
        return population

    def event(self, event: str, **fields) -> None:
        record = {"event": event, "time": round(time.time(), 3), "generation": self.generation, **fields}
        with open(self.out_dir / LINEAGE_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rng(self, purpose: str) -> random.Random:
        """The generation's own RNG: a resumed tune decides exactly as the killed one would have."""
        return random.Random(f"{self.seed}/{self.generation}/{purpose}")

    def path(self, member: Member) -> Path:
        return self.out_dir / member.run_dir

    # -- the steps
    def start(self, spec: list[Tuned], base_seed: int) -> None:
        rng = random.Random(f"{self.seed}/start")
        for i in range(self.size):
            values = {tuned.key: draw(tuned, rng) for tuned in spec}
            member = Member(i, f"members/member-{i:02d}", values, base_seed + i)
            self.members.append(member)
            self.event("start", member=i, values=values, seed=member.seed, frames=0)
        self.save()

    def segment_end(self) -> int:
        return min(self.budget, (self.generation + 1) * self.ready)

    def record(self, results: dict[int, dict]) -> None:
        """The segment's results: every member's frames and score (a failed one scores -inf)."""
        for member in self.members:
            result = results.get(member.id)
            if result is None:
                continue
            member.frames = max(member.frames, int(result["frames"]))
            if result["status"] == "failed":
                member.status, member.score = "failed", -math.inf
                self.event("failed", member=member.id, frames=member.frames, error=result["error"][:500])
            else:
                member.status = "target" if result["status"] == "target" else "training"
                member.score = result["score"]
                if member.status == "training" and member.frames < self.segment_end():
                    # another stop rule (stop.wall_clock_s) ended it before the segment's end: it is done
                    member.status = "stopped"
                    self.event("stopped", member=member.id, frames=member.frames)
            member.history.append([member.frames, member.score])
            self.event("ready", member=member.id, frames=member.frames, score=member.score, values=member.values,
                       from_frames=result.get("from_frames"))
        reached = [m for m in self.members if m.status == "target"]
        if reached and self.reached_at is None:
            self.reached_at = sum(m.frames for m in self.members)
            self.event("target", member=reached[0].id, frames=reached[0].frames, total_frames=self.reached_at,
                       score=reached[0].score)
        # a population stops when a member reaches the target; fixed members (quantile 0) each train until theirs
        training = [m for m in self.members if m.status == "training"]
        if (reached and self.quantile > 0) or all(m.frames >= self.budget for m in training):
            self.done = True
        self.save()

    def decide(self, spec: list[Tuned]) -> None:
        """Exploit and explore, decided (and saved as pending) before any directory is touched."""
        # members that are done (stopped by another rule, or at the target) are neither copied over nor copied
        scores = {m.id: self._rank(m) if m.status in ("training", "failed") else None for m in self.members}
        rng = self.rng("exploit")
        self.pending = []
        for member_id, source_id in pick_exploits(scores, self.quantile, rng):
            source = self.members[source_id]
            values, how = explore(source.values, spec, rng, self.resample, self.perturb)
            self.pending.append({"member": member_id, "source": source_id, "values": values, "explore": how})
        self.save()

    def apply(self) -> None:
        """Carry out the pending copies (again, after a kill: each is whole or absent), then the next generation."""
        for exploit in self.pending:
            member, source = self.members[exploit["member"]], self.members[exploit["source"]]
            step = copy_run(self.path(source), self.path(member))
            self.event("exploit", member=member.id, source=source.id, frames=source.frames, checkpoint=step,
                       score=member.score, source_score=source.score, old_values=member.values,
                       values=exploit["values"], explore=exploit["explore"])
            member.values, member.frames, member.score = dict(exploit["values"]), source.frames, source.score
            member.status, member.seed = "training", source.seed
        self.pending = []
        self.generation += 1
        self.save()

    def recover(self) -> None:
        """A tune killed halfway through a copy: put back any member directory left aside, drop half-made ones."""
        members = self.out_dir / "members"
        for member in self.members:
            target = self.path(member)
            if not target.exists():
                aside = sorted(members.glob(f".old-{target.name}-*"))
                if aside:
                    aside[-1].rename(target)
        for stray in members.glob(".tmp-*"):
            shutil.rmtree(stray, ignore_errors=True)
        for stray in members.glob(".old-*"):
            shutil.rmtree(stray, ignore_errors=True)

    def _rank(self, member: Member) -> float | None:
        """What ranks a member: its score, negated when the metric is minimised; -inf for a failed one."""
        if member.score is None or not math.isfinite(member.score):
            return member.score
        return self.sign * member.score

    def best(self) -> Member | None:
        scored = [m for m in self.members if m.score is not None and math.isfinite(m.score)]
        reached = [m for m in scored if m.status == "target"]
        return max(reached or scored, key=self._rank, default=None)


def copy_run(source: Path, target: Path) -> int:
    """Make `target` a copy of the run directory `source` (its newest checkpoint and everything beside the
    checkpoints: config, metrics, a self-play league's snapshots) in one
    rename: a kill at any instant leaves the old target or the whole copy (`Population.recover`). Returns the
    update count of the checkpoint copied."""
    from menger.checkpoint import CheckpointManager

    newest = CheckpointManager(source / "checkpoints").load_latest()  # verified (past a damaged one, loudly)
    if newest is None:
        raise PopulationError(f"{source} has no checkpoint to copy")
    newest_path = newest.path
    temporary = target.parent / f".tmp-{target.name}-{uuid.uuid4().hex[:8]}"
    (temporary / "checkpoints").mkdir(parents=True)
    shutil.copytree(newest_path, temporary / "checkpoints" / newest_path.name)
    for entry in source.iterdir():  # config.yaml, metrics.jsonl, a self-play league's snapshots, TensorBoard
        if entry.name in ("checkpoints", LOCK_FILE) or entry.name.startswith("."):
            continue
        if entry.is_dir():
            shutil.copytree(entry, temporary / entry.name)
        else:
            shutil.copy2(entry, temporary / entry.name)
    _fsync_tree(temporary)
    aside = target.parent / f".old-{target.name}-{uuid.uuid4().hex[:8]}"
    if target.exists():
        target.rename(aside)
    temporary.rename(target)
    _fsync(target.parent)
    shutil.rmtree(aside, ignore_errors=True)
    return int(newest.step)


def _fsync_tree(root: Path) -> None:
    """Every file and directory under `root` on disk (`fsync` opens a file or a directory alike)."""
    for directory, _, files in os.walk(root):
        for name in files:
            _fsync(Path(directory, name))
        _fsync(Path(directory))


def _write_json(path: Path, data) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


# ----- the loop -------------------------------------------------------------------------------------------------
def train_population(experiment: str | dict, out_dir: str | Path, size: int, overrides: list[str] = (), *,
                     ready: int | None = None, quantile: float = 0.25, resample: float = 0.25, seed: int = 0,
                     metric: str | None = None, executor="processes", ray_cpus: float = 1.0,
                     perturb: tuple[float, ...] = PERTURB, direction: str = "maximize", echo=None) -> PBTResult:
    """Train (or go on with) the population in `out_dir` (module doc). `ready`: env frames between exploits
    (default: a twentieth of stop.env_frames); `quantile`: the share of members copied and copied from (0: none,
    every member keeps its values); `executor`: processes, ray, inline, or an object with their `run` and `close`."""
    overrides = list(overrides)
    config = load_experiment(experiment, overrides)
    spec = tune_spec(config)
    if not spec:
        raise ConfigError("population-based training perturbs the experiment's `tune:` keys; add a `tune:` section, "
                          "e.g. tune: {ppo.lr: {log_uniform: [1.0e-4, 1.0e-2]}}")
    if config.stop.env_frames is None:
        raise ConfigError("menger tune --population needs each member's budget: set stop.env_frames")
    if config.league.mode == "league":
        raise ConfigError("menger tune --population trains single-learner runs; a league (league.mode=league) "
                          "already trains a population of its own")
    if size < 2:
        raise ConfigError(f"--population {size}: a population needs at least 2 members to copy from")
    if not 0.0 <= quantile <= 0.5:
        raise ConfigError(f"--quantile {quantile}: give the share copied (and copied from), in [0, 0.5]; 0 keeps "
                          "every member's values (fixed settings, a random search on the same budget)")
    if not 0.0 <= resample <= 1.0:
        raise ConfigError(f"--resample {resample}: a probability, in [0, 1]")
    if direction not in ("maximize", "minimize"):
        raise ConfigError(f"direction {direction!r}: maximize or minimize")
    if isinstance(executor, str) and executor not in EXECUTORS:
        raise ConfigError(f"members on {executor!r}: one of {', '.join(EXECUTORS)}")
    ready = int(ready or max(1, config.stop.env_frames // 20))
    batch = config.batch_columns * config.runtime.unroll_length
    if ready < batch:
        raise ConfigError(f"--ready {ready}: fewer env frames than one learner batch ({batch}); give at least that")
    echo = echo or (lambda line: log.info("%s", line))
    out_dir = Path(out_dir)
    (out_dir / "members").mkdir(parents=True, exist_ok=True)
    data = load_experiment_data(experiment, overrides)
    if (out_dir / STATE_FILE).exists():
        population = Population.load(out_dir)
        if population.size != size:
            raise ConfigError(f"{out_dir} holds a population of {population.size}, not {size}; give "
                              f"--population {population.size} to go on with it, or another --out")
        population.recover()
        echo(f"resuming the population in {out_dir} at generation {population.generation}")
        given = {"ready": ready, "quantile": quantile, "resample": resample, "seed": seed}
        kept = {k: getattr(population, k) for k, v in given.items() if v != getattr(population, k)}
        if kept:
            echo(f"  it keeps the settings it started with: {kept} (start a new --out for others)")
    else:
        (out_dir / "experiment.json").write_text(json.dumps(data, indent=2, default=str))
        population = Population(out_dir, size=size, ready=ready, quantile=quantile, resample=resample, seed=seed,
                                metric=metric or default_metric(config.algo), budget=int(config.stop.env_frames),
                                target=config.stop.target_return, perturb=perturb, direction=direction)
        population.start(spec, config.runtime.seed)
    members = executor if not isinstance(executor, str) else {
        "processes": lambda: ProcessMembers(out_dir), "ray": lambda: RayMembers(ray_cpus), "inline": InlineMembers,
    }[executor]()

    def on_restart(member: int, why: str) -> None:
        population.event("restart", member=member, why=why)
        echo(f"member {member}: {why}; restarting it from its last checkpoint")

    try:
        while not population.done:
            if population.pending:  # a tune killed between deciding and copying
                population.apply()
                continue
            until = population.segment_end()
            jobs = {m.id: {"experiment": data, "overrides": [*overrides, f"runtime.seed={m.seed}"],
                           "run_dir": str(population.path(m).resolve()), "until": until, "values": m.values,
                           "metric": population.metric}
                    for m in population.members if m.status == "training"}
            population.record(members.run(jobs, on_restart))
            echo(format_generation(population))
            if not population.done:
                population.decide(spec)
                population.apply()
    finally:
        members.close()
    best = population.best()
    summary = None
    if best is not None:
        summary = {"member": best.id, "score": best.score, "frames": best.frames, "values": best.values,
                   "run_dir": str(population.path(best)), "reached_at": population.reached_at}
        _write_json(out_dir / "best.json", summary)
    if not any(r.get("event") == "done" for r in read_lineage(out_dir)):
        population.event("done", best=None if best is None else best.id, reached_at=population.reached_at,
                         total_frames=sum(m.frames for m in population.members))
    try:
        plot_lineage(out_dir)
    except Exception as exc:  # noqa: BLE001 - a missing picture must not lose a finished population
        log.warning("could not draw %s: %s", out_dir / "lineage.png", exc)
    return PBTResult(out_dir, summary, population.members, population.reached_at)


def format_generation(population: Population) -> str:
    lines = [f"generation {population.generation}: {population.segment_end()} frames per member"]
    for m in population.members:
        values = "  ".join(f"{k}={_short(v)}" for k, v in m.values.items())
        score = "-" if m.score is None else f"{m.score:.4g}"
        lines.append(f"  member {m.id:>2}  {m.status:<8}  frames {m.frames:>9}  {population.metric} {score:<9}  "
                     f"{values}")
    return "\n".join(lines)


def _short(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# ----- the lineage and its picture ------------------------------------------------------------------------------
def read_lineage(out_dir: str | Path) -> list[dict]:
    path = Path(out_dir) / LINEAGE_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
    return out


def schedules(records: list[dict]) -> dict[int, list[tuple[int, dict, float | None]]]:
    """Each member's hyperparameter schedule from its lineage: [(frames, values, score)] at its start, at each
    ready and after each exploit."""
    out: dict[int, list] = {}
    for r in records:
        if r["event"] == "start":
            out.setdefault(r["member"], []).append((0, r["values"], None))
        elif r["event"] == "ready":
            out.setdefault(r["member"], []).append((r["frames"], r["values"], r["score"]))
        elif r["event"] == "exploit":
            out.setdefault(r["member"], []).append((r["frames"], r["values"], r["source_score"]))
    return out


def plot_lineage(out_dir: str | Path) -> Path:
    """`lineage.png`: each member's score and each tuned value against its env frames; a copy is a dashed jump
    from the source's point."""
    from matplotlib.figure import Figure

    out_dir = Path(out_dir)
    records = read_lineage(out_dir)
    tracks = schedules(records)
    keys = sorted({k for points in tracks.values() for _, values, _ in points for k in values})
    figure = Figure(figsize=(7.5, 2.6 * (1 + len(keys))), layout="constrained")
    axes = figure.subplots(1 + len(keys), 1, sharex=True, squeeze=False)[:, 0]
    colours = [f"C{i % 10}" for i in range(len(tracks))]
    for (member, points), colour in zip(sorted(tracks.items()), colours):
        segments = _segments(points)
        for i, segment in enumerate(segments):
            frames = [p[0] for p in segment]
            label = f"member {member}" if i == 0 else None
            scores = [(f, s) for f, _, s in segment if s is not None and math.isfinite(s)]
            if scores:
                axes[0].plot(*zip(*scores), color=colour, marker=".", label=label)
            for ax, key in zip(axes[1:], keys):
                ax.step(frames, [p[1].get(key) for p in segment], where="post", color=colour, marker=".")
    for r in records:
        if r["event"] == "exploit":
            for ax in axes[1:]:
                ax.axvline(r["frames"], color="0.85", linewidth=0.6, zorder=0)
    axes[0].set_ylabel(records[0].get("metric", "score") if records else "score")
    axes[0].set_title(f"population-based training: {out_dir.resolve().name}")
    axes[0].legend(fontsize=7, ncol=4)
    for ax, key in zip(axes[1:], keys):
        ax.set_ylabel(key)
        if all(isinstance(p[1].get(key), (int, float)) and p[1].get(key) > 0
               for points in tracks.values() for p in points):
            ax.set_yscale("log")
    axes[-1].set_xlabel("env frames (per member)")
    destination = out_dir / "lineage.png"
    temporary = destination.with_name(".lineage.png.tmp")
    figure.savefig(temporary, format="png", dpi=110)
    os.replace(temporary, destination)
    return destination


def _segments(points: list[tuple]) -> list[list[tuple]]:
    """A member's points cut where an exploit moved it (its frames jump), so a copy is not drawn as training."""
    out, current = [], []
    for point in points:
        if current and point[0] < current[-1][0]:
            out.append(current)
            current = []
        current.append(point)
    return out + [current] if current else out


if __name__ == "__main__":
    if sys.argv[1:] != ["--worker"]:
        sys.exit("python -m menger.pbt --worker: a population member's process, started by `menger tune --population`")
    sys.exit(_worker_main())

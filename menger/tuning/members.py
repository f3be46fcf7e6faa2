"""Where a population's members train: one segment of one member (`run_segment`: an ordinary train or resume,
stopped by `SegmentEnd`), and the executors that run every member's segments: in this process (`InlineMembers`),
in a process each on this machine (`ProcessMembers`, `python -m menger.tuning.members --worker`), or as Ray
actors (`RayMembers`). Each one's `run(jobs, on_restart)` returns every member's result; a member that dies is
started again and resumes from its last checkpoint."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from menger.children import die_with_parent
from menger.extras import require
from menger.runtime import Observer
from menger.runtime.stopping import TrainingFailed
from menger.tuning.lineage import write_json

log = logging.getLogger("menger.pbt")

WAIT_NOTE_S = 300.0  # a Ray segment this long without an answer is logged (it may wait for room)
MAX_RESTARTS = 3  # a member's segment that dies this many times in a row ends the tune (its log says why)


class PopulationError(RuntimeError):
    """The population cannot go on: a member keeps dying, or none has a score to copy."""


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
    """`python -m menger.tuning.members --worker`: a member's process (the processes executor). Each input line names a job
    file and a result file: it runs that segment and writes the result; it ends when its input closes."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the tune stops: checkpoint, then exit
    for line in sys.stdin:
        job_path, result_path = line.rstrip("\n").split("\t")
        result = run_segment(json.loads(Path(job_path).read_text()))
        write_json(Path(result_path), result)
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
            worker = subprocess.Popen([sys.executable, "-m", "menger.tuning.members", "--worker"], stdin=subprocess.PIPE,
                                      stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True,
                                      preexec_fn=die_with_parent, text=True)
        finally:
            logfile.close()
        self.workers[member] = worker
        return worker

    def _send(self, member: int, job: dict) -> subprocess.Popen:
        job_path, result_path = self._paths(member)
        result_path.unlink(missing_ok=True)
        write_json(job_path, job)
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
        ray = require("ray", "ray", "`menger tune --on ray`", instead="use --on processes")
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


if __name__ == "__main__":
    if sys.argv[1:] != ["--worker"]:
        sys.exit("python -m menger.tuning.members --worker: a population member's process, started by "
                 "`menger tune --population`")
    sys.exit(_worker_main())

"""Helpers for the runtime's fault-injection tests: small configs, a trainer in a thread, `menger` as a subprocess.

A fault test follows one loop, through the `harness` fixture::

    run = harness.start(harness.config(...))           # the coordinator runs in a background thread
    harness.wait_until(lambda: <the run reached the state to break>, ...)
    inject the fault (a signal to an actor's pid, a damaged file, a bad key)
    harness.wait_until(lambda: <the runtime reacted>, ...)  -> the figure the fault table names, printed
    result = run.join()                                # the run's own outcome: a TrainResult, or its exception

Every wait has a deadline, like the runtime's own: a fault that hangs the runtime fails the test instead of
hanging the suite.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

import pytest

from menger.experiment import ExperimentConfig, load_experiment
from menger.forking import FORK_GATE
from menger.launch import make_launcher
from menger.runtime import Trainer, TrainResult

REPO_ROOT = Path(__file__).resolve().parents[2]

# Small and quiet: a CartPole update takes milliseconds, so faults land within a second or two of the start.
FAST_SETTINGS = (
    "runtime.envs_per_actor=4",
    "runtime.unroll_length=16",
    "runtime.learner.threads=1",
    "runtime.learner.device=cpu",
    "ppo.epochs=2",
    "log.tensorboard=false",
    "log.progress=false",
    "log.interval_s=0.1",
    "checkpoint.interval_s=0",
)


def small_config(*overrides: str, preset: str = "cartpole-ppo") -> ExperimentConfig:
    """A preset shrunk by FAST_SETTINGS; later overrides win, so each test states only what it is about."""
    return load_experiment(preset, [*FAST_SETTINGS, *overrides])


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.002) -> float:
    """Poll `condition` until it holds; return the seconds it took, or fail naming `what` did not happen."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(poll_s)
    return time.monotonic() - start


class TrainerInThread:
    """`Trainer.run` in a daemon thread of the test process, so a test can watch and poke the live trainer.

    `trainer.actors[i].handle.pid` is actor i's pid under the processes launcher; `join` returns the
    TrainResult or re-raises what the run raised (e.g. NoActorsError).
    """

    def __init__(self, config: ExperimentConfig, run_dir: Path, *, resume: bool = False, observers=()):
        self.trainer = Trainer(config, run_dir, launcher=make_launcher(config.runtime), resume=resume,
                               observers=observers)
        self.result: TrainResult | None = None
        self.error: BaseException | None = None
        self.started_at = time.monotonic()
        self.ended_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="trainer-under-test", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self.trainer.run()
        except BaseException as error:  # noqa: BLE001 - handed to the test by join()
            self.error = error
        finally:
            self.ended_at = time.monotonic()

    @property
    def finished(self) -> bool:
        return not self._thread.is_alive()

    def actors_ready(self) -> bool:
        """Every actor is running (set-up is done and the supervisor started them all)."""
        return all(record.handle is not None for record in self.trainer.actors)

    def updates(self) -> int:
        learner = getattr(self.trainer, "learner", None)
        return learner.updates if learner is not None else 0

    def describe(self) -> str:
        """Where the run stands, for a wait that timed out: ended (and how), or the trainer thread's stack."""
        if self.finished:
            return f"the run had ended: {self.error!r}" if self.error is not None else "the run had ended normally"
        frame = sys._current_frames().get(self._thread.ident)
        stack = "".join(traceback.format_stack(frame)[-8:]) if frame is not None else "(no frame)\n"
        return f"the run was still going; its trainer thread was at:\n{stack}"

    def abort(self) -> None:
        """Teardown of a test that failed with the run still going: the loop stops at its next turn the way a
        time limit stops it (checkpoint, then shutdown of every actor), so no actor process outlives the test."""
        self.trainer.request_stop()
        self._thread.join(30)

    def join(self, timeout_s: float = 60.0) -> TrainResult:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"the run did not end within {timeout_s:.0f} s: the runtime hangs")
        if self.error is not None:
            raise self.error
        return self.result


def menger_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "menger.cli", *args]


def subprocess_env() -> dict[str, str]:
    """The test's environment with the repository importable, so `python -m menger.cli` runs this checkout."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def run_menger(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    """`menger ARGS` to completion; a run that outlives `timeout_s` fails the test (subprocess kills it)."""
    return subprocess.run(menger_command(*args), env=subprocess_env(), capture_output=True, text=True,
                          timeout=timeout_s, cwd=REPO_ROOT)


def start_menger(*args: str, log_path: Path) -> subprocess.Popen:
    """`menger ARGS` in the background, stdout and stderr into `log_path` (a pipe nobody reads could block it)."""
    log_file = log_path.open("w")
    try:
        return subprocess.Popen(menger_command(*args), env=subprocess_env(), stdout=log_file,
                                stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    finally:
        log_file.close()


def child_pids(pid: int) -> list[int]:
    """The live children of process `pid` (Linux /proc), e.g. a learner's actor processes."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid:
            children.append(int(entry.name))
    return children


def process_gone(pid: int) -> bool:
    """True once `pid` no longer runs (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


class FaultHarness:
    """What a fault test needs, with cleanup: runs and subprocesses still going at teardown are ended."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self._runs: list[TrainerInThread] = []
        self._processes: list[subprocess.Popen] = []

    config = staticmethod(small_config)
    run_menger = staticmethod(run_menger)
    child_pids = staticmethod(child_pids)
    process_gone = staticmethod(process_gone)

    def start(self, config: ExperimentConfig, run_dir: Path | None = None, *, resume: bool = False,
              observers=()) -> TrainerInThread:
        run = TrainerInThread(config, run_dir or self.tmp_path / "run", resume=resume, observers=observers)
        self._runs.append(run)
        return run

    def wait_until(self, condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.002) -> float:
        """`wait_until`, and a timeout says what each run of the test was doing (a rare failure explains itself)."""
        try:
            return wait_until(condition, timeout_s, what, poll_s)
        except AssertionError as timeout:
            runs = "\n".join(f"run {i}: {run.describe()}" for i, run in enumerate(self._runs))
            working, forks, forking = FORK_GATE.state()
            raise AssertionError(f"{timeout}\n{runs}\nfork gate: {working} working sections, {forks} forks waiting, "
                                 f"forking={forking}") from None

    def start_menger(self, *args: str, log_path: Path) -> subprocess.Popen:
        process = start_menger(*args, log_path=log_path)
        self._processes.append(process)
        return process

    def close(self) -> None:
        for run in self._runs:
            if not run.finished:
                run.abort()
        for process in self._processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(10)


@pytest.fixture
def harness(tmp_path):
    faults = FaultHarness(tmp_path)
    yield faults
    faults.close()

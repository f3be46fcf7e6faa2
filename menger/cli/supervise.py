"""`menger train ... --supervise [RESTARTS]`: a learner that dies is resumed from its newest checkpoint without a
human, up to a cap.

The command runs the training as a child process (`python -m menger.cli train ...`, in its own session) and
waits for it. What its end means::

    exit 0                                  done: the supervisor exits 0
    killed by a signal (SIGKILL, SIGSEGV,   the learner died: after a back-off (1 s, doubling to 30 s) the run is
    the OOM killer)                         resumed (`menger resume RUN`) from its newest valid checkpoint, or
                                            trained again from the start if it had none yet; at most RESTARTS times
    any exit code                           an answer (a config error, a failed run, a stop the user asked for):
                                            returned as it is, never retried

SIGINT, SIGTERM and SIGHUP sent to the supervisor are passed on to the child, which writes its checkpoint and
stops; the supervisor then returns the child's code and restarts nothing. Restarts are printed and counted in
`RUN_DIR/supervisor.jsonl`, one record per start.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FIRST_BACKOFF_S, LONGEST_BACKOFF_S = 1.0, 30.0


def _has_checkpoint(run_dir: Path) -> bool:
    from menger.checkpoint import CheckpointManager

    folder = run_dir / "checkpoints"
    return folder.is_dir() and bool(CheckpointManager(folder).list())


def _record(run_dir: Path, **fields) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "supervisor.jsonl", "a") as out:
        out.write(json.dumps({"time": time.time(), **fields}) + "\n")


def supervise(train_argv: list[str], run_dir: Path, *, restarts: int, no_progress: bool) -> int:
    """Run `menger train *train_argv` (which names `--run-dir run_dir`) and resume it after deaths; see above."""
    if restarts < 0:
        raise ValueError(f"--supervise {restarts}: the number of restarts must be >= 0")
    child: subprocess.Popen | None = None
    stop_asked: list[int] = []

    def forward(signum, frame):
        stop_asked.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    try:
        command, restarted, backoff = ["train", *train_argv], 0, FIRST_BACKOFF_S
        while True:
            _record(run_dir, event="start", command=command, restart=restarted)
            child = subprocess.Popen([sys.executable, "-m", "menger.cli", *command], start_new_session=True)
            while True:
                try:
                    code = child.wait()
                    break
                except InterruptedError:  # a forwarded signal interrupted the wait
                    continue
            _record(run_dir, event="exit", code=code, restart=restarted)
            if code >= 0 or stop_asked:
                return code if code >= 0 else 128 - code
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if restarted >= restarts:
                print(f"menger: the learner died ({name}) and --supervise {restarts} restarts are used up; resume "
                      f"by hand with: menger resume {run_dir}", file=sys.stderr, flush=True)
                return 128 - code
            restarted += 1
            if _has_checkpoint(run_dir):
                command = ["resume", str(run_dir), *(["--no-progress"] if no_progress else [])]
                how = "resuming from its newest checkpoint"
            else:
                command, how = ["train", *train_argv], "it had no checkpoint yet: training again from the start"
            print(f"menger: the learner died ({name}); {how} in {backoff:.0f} s (restart {restarted} of "
                  f"{restarts})", file=sys.stderr, flush=True)
            time.sleep(backoff)
            if stop_asked:  # a stop came during the back-off: nothing to resume into
                return 128 + stop_asked[-1]
            backoff = min(2 * backoff, LONGEST_BACKOFF_S)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child is not None and child.poll() is None:  # the supervisor itself is going (an exception)
            child.terminate()
            os.waitpid(child.pid, 0)

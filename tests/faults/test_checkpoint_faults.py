"""SIGKILL a process while it writes checkpoints, many times: the newest complete checkpoint must always load.

Starting Python with torch takes seconds, so one helper process imports it once and forks a fresh saver per try
(a tiny fork server); each saver resumes from the newest checkpoint, like a restarted learner, and saves in a loop
until it is killed at a random moment.
"""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import torch

from menger.checkpoint import CheckpointManager

TRIES = 30
MAX_DELAY_S = 0.12
WEIGHTS = 250_000  # 1 MB of float32 per checkpoint: a save takes long enough to be hit mid-write

FORK_SERVER = textwrap.dedent("""
    import os, sys
    import torch
    from menger.checkpoint import CheckpointManager

    directory, weights = sys.argv[1], int(sys.argv[2])

    def save_until_killed():
        manager = CheckpointManager(directory, keep_last=2)
        step = manager.load_latest().step + 1
        print("saving", os.getpid(), flush=True)
        while True:
            manager.save(step, {"weights": torch.full((weights,), float(step))}, {"step": step})
            step += 1

    for _request in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                save_until_killed()
            finally:
                os._exit(1)  # only reached if saving raised: the parent reports a non-kill exit
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
""")


def expected_tensors(step):
    return {"weights": torch.full((WEIGHTS,), float(step))}


def start_fork_server(directory, stderr):
    repo_root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(repo_root), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-c", FORK_SERVER, str(directory), str(WEIGHTS)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)


def kill_one_saver(server, delay_s):
    """Fork a saver, SIGKILL it delay_s after it starts saving, return its exit code (-SIGKILL unless it failed).

    The saver announces itself once resumed, so the delay counts from its first save even on a loaded machine;
    the fork server reports the exit code only after the saver is gone, so the two lines never interleave.
    """
    server.stdin.write("go\n")
    server.stdin.flush()
    line = server.stdout.readline()
    if not line.startswith("saving "):
        return int(line)  # the saver failed before saving anything
    time.sleep(delay_s)
    os.kill(int(line.split()[1]), signal.SIGKILL)
    return int(server.stdout.readline())


def test_sigkill_during_checkpoint_writes_always_leaves_a_loadable_checkpoint(tmp_path):
    directory = tmp_path / "checkpoints"
    CheckpointManager(directory, keep_last=2).save(0, expected_tensors(0), {"step": 0})
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    resumes, mid_save_kills, previous_step, failures = 0, 0, 0, []
    with open(tmp_path / "server.stderr", "w+") as stderr:
        server = start_fork_server(directory, stderr)
        try:
            for attempt in range(TRIES):
                exit_code = kill_one_saver(server, rng.uniform(0.0, MAX_DELAY_S))
                mid_save_kills += any(directory.glob(".tmp-*"))
                problem = check_resume(directory, previous_step, exit_code)
                if problem:
                    failures.append(f"try {attempt}: {problem}")
                else:
                    resumes += 1
                    previous_step = CheckpointManager(directory).load_latest().step
        finally:
            server.stdin.close()
            server.wait(timeout=10)
            stderr.seek(0)
            server_errors = stderr.read()
    print(f"\nSIGKILL during checkpoint writes (seed {seed}): successful resumes {resumes}/{TRIES}; "
          f"kills that left a temporary directory behind {mid_save_kills}/{TRIES}; newest step reached {previous_step}")
    assert not failures, "\n".join(failures) + f"\nfork server stderr:\n{server_errors}"
    assert previous_step > 0 and mid_save_kills > 0, "no kill landed during a save: the test tested nothing"

    final = CheckpointManager(directory, keep_last=2).save(previous_step + 1, expected_tensors(0), {"step": 0})
    assert sorted(path.name for path in directory.iterdir()) == [f"ckpt-{previous_step:012d}", final.name], \
        "the next save must sweep away the temporaries left by the kills"


def check_resume(directory, previous_step, exit_code):
    """What is wrong with resuming after a kill, or None when the newest complete checkpoint loads intact."""
    if exit_code != -signal.SIGKILL:
        return f"the saver exited with {exit_code} before it was killed"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoint = CheckpointManager(directory, keep_last=2).load_latest()
    if caught:
        return f"a kill left a damaged checkpoint in place: {caught[0].message}"
    if checkpoint is None:
        return "no checkpoint found"
    if checkpoint.step < previous_step:
        return f"went back from step {previous_step} to {checkpoint.step}"
    if checkpoint.metadata != {"step": checkpoint.step}:
        return f"metadata {checkpoint.metadata} does not match step {checkpoint.step}"
    if not torch.equal(checkpoint.tensors["weights"], expected_tensors(checkpoint.step)["weights"]):
        return f"tensors of step {checkpoint.step} hold other values"
    return None

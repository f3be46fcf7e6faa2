"""One owner per run directory: a second train or resume on a live run is refused naming the owner; a dead owner
leaves nothing stale; a checkpoint save never deletes another live process's save in progress."""
import os
import signal
import subprocess
import sys
import time

import pytest
from test_resume_faults import logged_updates

from menger.checkpoint import CheckpointManager, flatten_state
from menger.runtime.rundir import RunDirectoryBusy, RunDirectoryLock


def test_a_second_lock_on_a_held_run_directory_is_refused_naming_the_owner(tmp_path):
    with RunDirectoryLock(tmp_path):
        with pytest.raises(RunDirectoryBusy, match=f"in use by another training process \\(pid {os.getpid()}\\)"):
            RunDirectoryLock(tmp_path).acquire()
    RunDirectoryLock(tmp_path).acquire().release()  # released with the first


def test_a_killed_owner_leaves_no_stale_lock(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from menger.runtime.rundir import RunDirectoryLock\n"
        f"RunDirectoryLock({str(tmp_path)!r}).acquire(); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirectoryBusy, match=f"pid {holder.pid}"):
            RunDirectoryLock(tmp_path).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        RunDirectoryLock(tmp_path).acquire().release()  # the kernel dropped the dead owner's lock
    finally:
        holder.kill()
        holder.wait(10)


def test_a_forked_child_does_not_keep_its_parents_lock(tmp_path):
    lock = RunDirectoryLock(tmp_path).acquire()
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # the child lingers, as an actor may for a moment after its learner is gone
        os.write(ready_w, b"x")  # fork has returned here: the after-fork hooks have run
        time.sleep(5)
        os._exit(0)
    try:
        assert os.read(ready_r, 1) == b"x"
        lock.release()
        RunDirectoryLock(tmp_path).acquire().release()
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(ready_r)
        os.close(ready_w)


def test_a_save_leaves_another_live_processs_temporary_alone_and_clears_the_dead(tmp_path):
    manager = CheckpointManager(tmp_path, keep_last=3)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    try:
        live_save = tmp_path / f".tmp-ckpt-000000000007-{sleeper.pid}-0123abcd"
        dead_save = tmp_path / f".tmp-ckpt-000000000006-{dead.pid}-0123abcd"
        legacy = tmp_path / ".tmp-delete-ckpt-000000000001-0123abcd"  # written before temporaries named a pid
        for path in (live_save, dead_save, legacy):
            path.mkdir()
        manager.save(8, *flatten_state({"step": 8}))
        assert live_save.exists() and not dead_save.exists() and not legacy.exists()
    finally:
        sleeper.kill()
        sleeper.wait(10)


def test_resume_or_train_on_a_live_run_is_refused_with_the_owners_pid(harness):
    run_dir = harness.tmp_path / "run"
    settings = ["runtime.launcher=processes", "runtime.actors=1", "runtime.envs_per_actor=4",
                "runtime.unroll_length=16", "ppo.epochs=1", "stop.target_return=null", "stop.env_frames=100000000",
                "log.tensorboard=false", "log.interval_s=0.05", "checkpoint.interval_updates=2"]
    learner = harness.start_menger("train", "cartpole-ppo", "--no-progress", "--run-dir", str(run_dir),
                                   *[f"--set={item}" for item in settings], log_path=harness.tmp_path / "train.log")
    harness.wait_until(lambda: logged_updates(run_dir) >= 3 or learner.poll() is not None, 120, "three updates",
                       poll_s=0.01)
    assert learner.poll() is None, (harness.tmp_path / "train.log").read_text()
    for args in (["resume", str(run_dir)], ["train", "cartpole-ppo", "--run-dir", str(run_dir)]):
        refused = harness.run_menger(*args, "--no-progress", timeout_s=60)
        assert refused.returncode == 1, refused.stderr
        assert f"in use by another training process (pid {learner.pid})" in refused.stderr
    print(f"a second {args[0]} on a live run: exit {refused.returncode}: {refused.stderr.strip()[:140]}")
    assert learner.poll() is None, "the refused command disturbed the live run"
    learner.send_signal(signal.SIGTERM)
    assert learner.wait(60) == 128 + signal.SIGTERM

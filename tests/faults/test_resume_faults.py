"""A learner killed or a checkpoint damaged: the run resumes from the newest valid checkpoint, counters intact.

docs/guides/reliability.md promises 4 and 5: loading falls back past a damaged checkpoint and says so, and never silently
starts from scratch.
"""
import json
import logging
import os
import shutil
import signal
import warnings

import pytest

from menger import api
from menger.checkpoint import CheckpointError, CheckpointFallbackWarning, CheckpointManager, unflatten_state

CHECKPOINT_EVERY = 4  # updates


def checkpoint_counters(run_dir) -> tuple[str, int, int]:
    """(name, learner updates, accepted env frames) of the newest valid checkpoint of a run."""
    checkpoint = CheckpointManager(run_dir / "checkpoints").load_latest()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    return checkpoint.path.name, int(state["learner"]["updates"]), int(state["accounts"]["accepted"])


def metric_records(run_dir) -> list[dict]:
    """Every record of metrics.jsonl; a line cut short by a kill is skipped."""
    records = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def logged_updates(run_dir) -> int:
    """The most learner updates metrics.jsonl reports so far (0 before the first record)."""
    if not (run_dir / "metrics.jsonl").exists():
        return 0
    return max((record["learner/updates"] for record in metric_records(run_dir)), default=0)


@pytest.mark.slow
def test_sigkill_the_learner_then_resume_from_the_newest_checkpoint_with_counters_intact(harness):
    run_dir = harness.tmp_path / "run"
    settings = ["runtime.launcher=processes", "runtime.actors=2", "runtime.envs_per_actor=4",
                "runtime.unroll_length=16", "ppo.epochs=2", "stop.target_return=null", "stop.env_frames=10000000",
                f"checkpoint.interval_updates={CHECKPOINT_EVERY}", "checkpoint.interval_s=0",
                "log.tensorboard=false", "log.progress=false", "log.interval_s=0.05"]
    learner = harness.start_menger("train", "cartpole-ppo", "--no-progress", "--run-dir", str(run_dir),
                                   *[f"--set={item}" for item in settings], log_path=harness.tmp_path / "train.log")
    checkpoints = CheckpointManager(run_dir / "checkpoints")
    harness.wait_until(lambda: len(checkpoints.list()) >= 2 or learner.poll() is not None, 120,
                       "two checkpoints", poll_s=0.01)
    harness.wait_until(lambda: logged_updates(run_dir) >= 2 * CHECKPOINT_EVERY + 2 or learner.poll() is not None, 120,
                       "updates past the second checkpoint, so that the kill loses some", poll_s=0.01)
    assert learner.poll() is None, f"training ended early: {(harness.tmp_path / 'train.log').read_text()}"
    actors = harness.child_pids(learner.pid)
    os.kill(learner.pid, signal.SIGKILL)
    learner.wait(10)
    orphans_exit_s = harness.wait_until(lambda: all(harness.process_gone(pid) for pid in actors), 30,
                                        "the killed learner's actors to exit")

    name, updates, frames = checkpoint_counters(run_dir)
    logged_before_kill = metric_records(run_dir)
    updates_logged = logged_updates(run_dir)
    more = 4000
    done = harness.run_menger("resume", str(run_dir), "--no-progress", "--set", f"stop.env_frames={frames + more}",
                              timeout_s=120)
    after = metric_records(run_dir)[len(logged_before_kill):]
    print(f"killed at >= {updates_logged} updates (logged); newest checkpoint {name}: {updates} updates, "
          f"{frames} frames; "
          f"updates lost <= {updates_logged - updates} (interval {CHECKPOINT_EVERY}); actors exited "
          f"{orphans_exit_s:.2f} s after the kill; resume exit code {done.returncode}; after resume: "
          f"{after[0]['learner/updates']} -> {after[-1]['learner/updates']} updates, "
          f"{after[0]['time/env_frames']} -> {after[-1]['time/env_frames']} frames")
    assert len(actors) == 2
    assert done.returncode == 0, done.stderr
    assert f"resumed from {name} (update {updates}, {frames} frames, " in done.stderr
    assert after[0]["learner/updates"] >= updates and after[0]["time/env_frames"] >= frames
    assert after[-1]["learner/updates"] > updates and after[-1]["time/env_frames"] >= frames + more
    assert updates_logged - updates <= 2 * CHECKPOINT_EVERY  # a save cut short by the kill costs one more interval


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def delete(path):
    path.unlink()


DAMAGE = {"truncated tensors": ("tensors.safetensors", truncate),
          "corrupted metadata": ("meta.json", flip_a_byte),
          "missing manifest": ("MANIFEST.json", delete)}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A short, finished run with three checkpoints (threads launcher: no fork, a second or two)."""
    from menger.experiment import load_experiment

    run_dir = tmp_path_factory.mktemp("finished") / "run"
    config = load_experiment("cartpole-ppo", [
        "runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.unroll_length=16",
        "runtime.learner.device=cpu", "runtime.learner.threads=1", "ppo.epochs=2", "stop.target_return=null",
        f"stop.env_frames={3 * CHECKPOINT_EVERY * 64}", f"checkpoint.interval_updates={CHECKPOINT_EVERY}",
        "checkpoint.interval_s=0", "checkpoint.keep_last=3", "log.tensorboard=false", "log.progress=false"])
    api.train(config, run_dir=str(run_dir))
    return run_dir


def checkpoint_file_names():
    from menger import checkpoint

    return checkpoint.TENSORS_FILE, checkpoint.META_FILE, checkpoint.MANIFEST_FILE


@pytest.mark.filterwarnings("ignore:removing damaged checkpoint")  # the resumed run saves that step again
def test_damaged_newest_checkpoint_is_detected_and_resume_falls_back_to_the_previous_one(finished_run, tmp_path,
                                                                                         caplog):
    assert {name for name, _ in DAMAGE.values()} == set(checkpoint_file_names()), "checkpoint file names changed"
    caplog.set_level(logging.INFO, logger="menger.trainer")
    detected = 0
    for kind, (file_name, damage) in DAMAGE.items():
        run_dir = tmp_path / kind.replace(" ", "-")
        shutil.copytree(finished_run, run_dir)
        previous, newest = CheckpointManager(run_dir / "checkpoints").list()[-2:]
        damage(newest / file_name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CheckpointFallbackWarning)
            fallback, updates, frames = checkpoint_counters(run_dir)
        assert fallback == previous.name
        caplog.clear()
        with pytest.warns(CheckpointFallbackWarning, match=f"falling back to checkpoint .*{previous.name}") as warned:
            result = api.resume(run_dir, [f"stop.env_frames={frames + 256}"])
        messages = " ".join(str(warning.message) for warning in warned)
        named = newest.name in messages
        resumed_line = f"resumed from {previous.name} (update {updates}, {frames} frames, "
        detected += named and resumed_line in caplog.text
        print(f"{kind}: fell back from {newest.name} to {previous.name}; the warning names the damaged one: {named}; "
              f"updates {updates} -> {result.final_metrics['learner/updates']}")
        assert named, f"the warning does not name the damaged checkpoint {newest.name}: {messages}"
        assert resumed_line in caplog.text
        assert result.final_metrics["learner/updates"] > updates, "the run did not continue from the checkpoint"
    print(f"detection rate {detected}/{len(DAMAGE)}")
    assert detected == len(DAMAGE)


def test_every_checkpoint_damaged_refuses_to_resume_instead_of_starting_from_scratch(finished_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    for checkpoint in CheckpointManager(run_dir / "checkpoints").list():
        truncate(checkpoint / checkpoint_file_names()[0])
    metrics_before = (run_dir / "metrics.jsonl").read_text()
    with pytest.raises(CheckpointError, match="refusing to start from scratch"):
        api.resume(run_dir, ["stop.env_frames=100000"])
    assert (run_dir / "metrics.jsonl").read_text() == metrics_before, "a run started although nothing could load"

"""`menger train --supervise`: a learner that dies is resumed from its newest checkpoint without a human
(docs/guides/reliability.md, stops and deaths); an answer (an exit code) is never retried, and a stop is passed on."""
import json
import os
import signal

from test_resume_faults import checkpoint_counters, logged_updates

SETTINGS = ["runtime.launcher=processes", "runtime.actors=2", "runtime.envs_per_actor=4", "runtime.unroll_length=16",
            "ppo.epochs=2", "stop.target_return=null", "stop.env_frames=10000000", "checkpoint.interval_s=0",
            "checkpoint.interval_updates=5", "log.tensorboard=false", "log.progress=false", "log.interval_s=0.05"]


def _events(run_dir):
    return [json.loads(line) for line in (run_dir / "supervisor.jsonl").read_text().splitlines()]


def _learner_pid(run_dir) -> int | None:
    try:
        text = (run_dir / ".lock").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


def test_a_sigkilled_learner_is_resumed_from_its_newest_checkpoint(harness):
    run_dir, log_path = harness.tmp_path / "run", harness.tmp_path / "supervise.log"
    supervisor = harness.start_menger("train", "cartpole-ppo", "--supervise", "2", "--no-progress", "--run-dir",
                                      str(run_dir), *[f"--set={s}" for s in SETTINGS], "--set=stop.wall_clock_s=15",
                                      log_path=log_path)
    harness.wait_until(lambda: logged_updates(run_dir) >= 12 or supervisor.poll() is not None, 120, "12 updates",
                       poll_s=0.01)
    assert supervisor.poll() is None, log_path.read_text()
    learner = _learner_pid(run_dir)
    assert learner is not None and learner != supervisor.pid  # the learner is the supervisor's child
    _, updates_saved, _ = checkpoint_counters(run_dir)
    os.kill(learner, signal.SIGKILL)
    code = supervisor.wait(120)
    output = log_path.read_text()
    events = _events(run_dir)
    _, updates_after, _ = checkpoint_counters(run_dir)
    print(f"killed learner {learner} after its checkpoint at update {updates_saved}; supervisor exit {code}; "
          f"{len(events)} events; final checkpoint at update {updates_after}")
    assert code == 0, output
    assert [e["event"] for e in events] == ["start", "exit", "start", "exit"]
    assert events[1]["code"] == -signal.SIGKILL and events[2]["command"][0] == "resume"
    assert "the learner died (SIGKILL); resuming from its newest checkpoint" in output
    assert updates_after > updates_saved  # the resumed learner went on from the checkpoint


def test_an_exit_code_is_an_answer_and_is_not_retried(harness):
    run_dir, log_path = harness.tmp_path / "run", harness.tmp_path / "supervise.log"
    supervisor = harness.start_menger("train", "cartpole-ppo", "--supervise", "--no-progress", "--run-dir",
                                      str(run_dir), *[f"--set={s}" for s in SETTINGS],
                                      "--set=env.id=menger/FaultyVector-v0", "--set=env.kwargs={reset_failures: -1}",
                                      "--set=stop.wall_clock_s=5", log_path=log_path)
    code = supervisor.wait(120)
    events = _events(run_dir) if (run_dir / "supervisor.jsonl").exists() else []
    print(f"supervisor exit {code}; events {[(e['event'], e.get('code')) for e in events]}")
    assert code != 0 and code < 128, log_path.read_text()
    assert [e["event"] for e in events] in (["start", "exit"], [])  # one try (or refused before any start)


def test_a_stop_signal_is_passed_on_and_nothing_restarts(harness):
    run_dir, log_path = harness.tmp_path / "run", harness.tmp_path / "supervise.log"
    supervisor = harness.start_menger("train", "cartpole-ppo", "--supervise", "--no-progress", "--run-dir",
                                      str(run_dir), *[f"--set={s}" for s in SETTINGS], log_path=log_path)
    harness.wait_until(lambda: logged_updates(run_dir) >= 5 or supervisor.poll() is not None, 120, "five updates",
                       poll_s=0.01)
    assert supervisor.poll() is None, log_path.read_text()
    supervisor.send_signal(signal.SIGTERM)
    code = supervisor.wait(60)
    events = _events(run_dir)
    _, updates, _ = checkpoint_counters(run_dir)
    assert code == 128 + signal.SIGTERM, log_path.read_text()
    assert [e["event"] for e in events] == ["start", "exit"] and events[1]["code"] == 128 + signal.SIGTERM
    assert updates == logged_updates(run_dir)  # the child wrote its closing checkpoint

"""Stops are checkpoints (docs/guides/reliability.md, promise 4; the SIGTERM row of the fault table): docker, systemd, Kubernetes
and Slurm stop jobs with SIGTERM, a closed terminal sends SIGHUP. The run writes a closing checkpoint of everything
it learned, exits with 128 + the signal's number, and `menger resume` continues from exactly there."""
import signal

import pytest
from test_resume_faults import checkpoint_counters, logged_updates

SETTINGS = ["runtime.launcher=processes", "runtime.actors=2", "runtime.envs_per_actor=4", "runtime.unroll_length=16",
            "ppo.epochs=2", "stop.target_return=null", "stop.env_frames=10000000", "checkpoint.interval_s=0",
            "log.tensorboard=false", "log.progress=false", "log.interval_s=0.05"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_writes_a_closing_checkpoint_and_exits_with_a_distinct_code(harness, signum):
    run_dir = harness.tmp_path / "run"
    log_path = harness.tmp_path / "train.log"
    learner = harness.start_menger("train", "cartpole-ppo", "--no-progress", "--run-dir", str(run_dir),
                                   *[f"--set={item}" for item in SETTINGS], log_path=log_path)
    harness.wait_until(lambda: logged_updates(run_dir) >= 5 or learner.poll() is not None, 120, "five updates",
                       poll_s=0.01)
    assert learner.poll() is None, f"training ended early: {log_path.read_text()}"
    learner.send_signal(signum)
    code = learner.wait(60)
    output = log_path.read_text()
    _, updates, frames = checkpoint_counters(run_dir)
    reported = logged_updates(run_dir)
    print(f"{signal.Signals(signum).name}: exit code {code}, checkpoint at update {updates} ({frames} frames), "
          f"last record {reported} updates")
    assert code == 128 + signum, output
    assert updates >= 5 and updates == reported, "the closing checkpoint does not hold every update learned"
    assert f"menger resume {run_dir}" in output
    resumed = harness.run_menger("resume", str(run_dir), "--no-progress", f"--set=stop.env_frames={frames + 1000}",
                                 timeout_s=120)
    assert resumed.returncode == 0, resumed.stderr
    _, updates_after, frames_after = checkpoint_counters(run_dir)
    assert updates_after > updates and frames_after >= frames + 1000


def test_a_second_stop_signal_interrupts_at_once(harness):
    """A user who signals twice does not want to wait for the current step: Ctrl-C's path (exit 130)."""
    run_dir = harness.tmp_path / "run"
    learner = harness.start_menger("train", "cartpole-ppo", "--no-progress", "--run-dir", str(run_dir),
                                   *[f"--set={item}" for item in SETTINGS], log_path=harness.tmp_path / "train.log")
    harness.wait_until(lambda: logged_updates(run_dir) >= 2 or learner.poll() is not None, 120, "two updates",
                       poll_s=0.01)
    learner.send_signal(signal.SIGTERM)
    learner.send_signal(signal.SIGTERM)
    code = learner.wait(60)
    assert code in (128 + signal.SIGTERM, 130), (harness.tmp_path / "train.log").read_text()


def test_a_stop_signal_stops_every_learner_of_a_league_with_its_checkpoint(harness):
    """A league's learners run in threads, where no signal handler can live: the main thread's stops them all."""
    run_dir = harness.tmp_path / "league"
    log_path = harness.tmp_path / "train.log"
    league = ["model.hidden=[32,32]", "runtime.envs_per_actor=8", "league.fixed_opponents=[random]",
              "league.min_snapshot_steps=256", "league.snapshot_steps=512", "stop.wall_clock_s=null"]
    learner = harness.start_menger("train", "connect4-league", "--no-progress", "--run-dir", str(run_dir),
                                   *[f"--set={item}" for item in SETTINGS + league], log_path=log_path)
    players = [run_dir / "players" / name for name in ("main_0", "main_exploiter_0", "league_exploiter_0")]
    try:
        harness.wait_until(lambda: all(logged_updates(p) >= 3 for p in players) or learner.poll() is not None, 120,
                           "three updates of every learner", poll_s=0.05)
    except AssertionError as stalled:  # say where it stood: which learner, which actor
        updates = {p.name: logged_updates(p) for p in players}
        raise AssertionError(f"{stalled}; updates {updates}; the log ends:\n{log_path.read_text()[-4000:]}") from None
    assert learner.poll() is None, f"training ended early: {log_path.read_text()}"
    learner.send_signal(signal.SIGTERM)
    code = learner.wait(60)
    assert code == 128 + signal.SIGTERM, log_path.read_text()
    for player in players:
        _, updates, _ = checkpoint_counters(player)
        assert updates >= 3 and updates == logged_updates(player), player.name  # nothing learned was lost
    assert (run_dir / "league" / "hub.json").exists()

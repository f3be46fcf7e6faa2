"""Ape-X DQN, R2D2 and SAC through the whole runtime: replay metrics, the deterministic evaluation, `menger eval`,
and the exact resume of a lockstep replay run (N updates + checkpoint + resume + N updates == 2N updates)."""
import pytest
import torch

from menger import api
from menger.checkpoint import CheckpointManager, unflatten_state
from menger.commands.evaluate import evaluate_run
from menger.experiment import load_experiment

SMALL = ["runtime.learner.device=cpu", "runtime.learner.threads=1", "checkpoint.interval_s=0", "stop.target_return=null"]


@pytest.mark.parametrize("preset,launcher", [("cartpole-apex", "threads"), ("cartpole-apex", "processes"),
                                             ("cartpole-novel-r2d2", "threads"), ("cartpole-novel-r2d2", "processes"),
                                             ("pendulum-sac", "threads"), ("pendulum-sac", "processes")])
def test_a_replay_run_reports_its_replay_and_its_evaluations(tmp_path, quiet, preset, launcher):
    # SAC updates once per frame: batches of 32 instead of 256 keep its 2,500 updates to a few seconds; evaluations
    # by frames, as evaluations every 0.2 s took half of a threads run's time from the learner
    lighter = ["replay.batch_size=32", "replay.samples_per_insert=32"] if preset == "pendulum-sac" else []
    result = api.train(preset, overrides=[*quiet, *SMALL, f"runtime.launcher={launcher}", "stop.env_frames=3000",
                                          "replay.min_size=500", "eval.interval_frames=1000", "eval.episodes=2",
                                          *lighter],
                       run_dir=str(tmp_path / "run"))
    m = result.final_metrics
    assert m["learner/updates"] > 0 and m["time/env_frames"] >= 3000
    assert m["replay/size"] >= 500 and m["replay/bytes"] > 0 and m["replay/inserts"] >= m["replay/size"]
    assert m["replay/samples"] == m["learner/updates"] * load_experiment(preset, lighter).replay.batch_size
    for key in ("replay/samples_per_insert", "replay/insert_blocked_s", "replay/priority_mean", "eval/return_mean",
                "eval/time_s", "replay/inserts_per_s", "replay/samples_per_s"):
        assert key in m, key
    assert m["eval/count"] >= 1
    report = evaluate_run(tmp_path / "run", episodes=2)  # the trained policy plays, deterministically
    assert report["episodes"] == 2


def _final(run_dir):
    checkpoint = CheckpointManager(run_dir / "checkpoints").load_latest()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    return checkpoint.step, state


@pytest.mark.parametrize("preset,steps,items", [("cartpole-apex", 8, 16), ("pendulum-sac", 8, 16),
                                               ("cartpole-novel-r2d2", 16, 4)])  # r2d2: items are sequences
def test_a_lockstep_replay_run_resumes_bit_for_bit(tmp_path, quiet, preset, steps, items):
    settings = [*quiet, *SMALL, "runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=2",
                f"runtime.unroll_length={steps}", "replay.lockstep=true", f"replay.min_size={4 * items}",
                f"replay.batch_size={items}", "replay.samples_per_insert=4", f"replay.max_size={25 * items}",
                "eval.interval_s=0"]
    frames = 16 * 30
    straight, split = tmp_path / "straight", tmp_path / "split"
    api.train(preset, overrides=[*settings, f"stop.env_frames={2 * frames}"], run_dir=str(straight))
    api.train(preset, overrides=[*settings, f"stop.env_frames={frames}"], run_dir=str(split))
    api.resume(split, overrides=[f"stop.env_frames={2 * frames}"])
    step_a, a = _final(straight)
    step_b, b = _final(split)
    assert step_a == step_b > 0
    for name, tensor in a["learner"]["model"].items():
        assert torch.equal(tensor, b["learner"]["model"][name]), f"parameter {name} differs after resume"
    for name, tensor in a["learner"]["target"].items():
        assert torch.equal(tensor, b["learner"]["target"][name]), f"target parameter {name} differs after resume"
    tables_a, tables_b = a["replay"]["tables"]["shards"][0], b["replay"]["tables"]["shards"][0]
    assert tables_a["next_seq"] == tables_b["next_seq"]
    assert (tables_a["priorities"] == tables_b["priorities"]).all()
    assert a["accounts"] == b["accounts"]


def test_resume_goes_on_with_the_replay_it_saved(tmp_path, quiet):
    """RLlib resumed with an empty buffer (#8151): here the items, priorities and the limiter's counts come back."""
    settings = [*quiet, *SMALL, "runtime.launcher=threads", "replay.min_size=500", "eval.interval_s=0"]
    run_dir = tmp_path / "run"
    first = api.train("cartpole-apex", overrides=[*settings, "stop.env_frames=2000"], run_dir=str(run_dir)).final_metrics
    saved = _final(run_dir)[1]["replay"]["tables"]["shards"][0]
    resumed = api.resume(run_dir, overrides=["stop.env_frames=4000"]).final_metrics
    assert first["replay/inserts"] >= len(saved["keys"]) > 0
    # counted on from the saved limiter: a fresh replay would count only the ~2000 frames after the resume
    assert resumed["replay/inserts"] >= first["replay/inserts"] + 1500
    assert resumed["replay/size"] >= len(saved["keys"])
    assert resumed["learner/updates"] > first["learner/updates"]

"""Sync mode, one actor, CPU: N updates + checkpoint + resume + N updates == 2N updates, bit for bit."""
import torch

from menger import api
from menger.checkpoint import CheckpointManager, unflatten_state

FRAMES_PER_UPDATE = 16 * 4


def _settings(quiet, launcher):
    return [*quiet, f"runtime.launcher={launcher}", "runtime.actors=1", "runtime.envs_per_actor=4",
            "runtime.unroll_length=16", "runtime.learner.device=cpu", "runtime.learner.threads=1", "ppo.lr_schedule=constant",
            "ppo.epochs=2", "ppo.minibatches=2", "stop.target_return=null", "checkpoint.interval_s=0"]


def _final_model(run_dir):
    checkpoint = CheckpointManager(run_dir / "checkpoints").load_latest()
    return checkpoint.step, unflatten_state(checkpoint.tensors, checkpoint.metadata)["learner"]["model"]


def _check(tmp_path, quiet, launcher, n=6, preset="cartpole-ppo", extra=()):
    settings = [*_settings(quiet, launcher), *extra]
    straight = tmp_path / "straight"
    api.train(preset, overrides=[*settings, f"stop.env_frames={2 * n * FRAMES_PER_UPDATE}"], run_dir=str(straight))
    split = tmp_path / "split"
    api.train(preset, overrides=[*settings, f"stop.env_frames={n * FRAMES_PER_UPDATE}"], run_dir=str(split))
    api.resume(split, overrides=[f"stop.env_frames={2 * n * FRAMES_PER_UPDATE}"])
    step_a, model_a = _final_model(straight)
    step_b, model_b = _final_model(split)
    assert step_a == step_b == 2 * n
    for name, tensor in model_a.items():
        assert torch.equal(tensor, model_b[name]), f"parameter {name} differs after resume"


def test_resume_is_bit_identical_threads(tmp_path, quiet):
    _check(tmp_path, quiet, "threads")


def test_resume_is_bit_identical_processes(tmp_path, quiet):
    _check(tmp_path, quiet, "processes")


def test_a3c_with_a_sync_parameter_server_resumes_bit_identically_with_its_shards_in_processes(tmp_path, quiet):
    """The shards' moments come back from their processes into the checkpoint, and go back into new ones."""
    _check(tmp_path, quiet, "processes", preset="cartpole-a3c",
           extra=["runtime.parameter_server.update=sync", "runtime.parameter_server.shards=3"])

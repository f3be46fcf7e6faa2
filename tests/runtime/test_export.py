"""`menger export`: the file runs with torch alone (no Menger imported) and takes the same actions as
`menger.api.load_policy` on the same observations, for a feed-forward policy (PPO, Box actions with SAC) and a
recurrent one (R2D2) whose state is carried step by step."""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from menger import api
from menger.cli import main
from menger.export import ExportError, export_policy

SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.learner.threads=1",
         "runtime.learner.device=cpu", "checkpoint.interval_s=0", "log.tensorboard=false", "stop.target_return=null",
         "eval.interval_s=0"]
RUN_WITH_TORCH_ALONE = """
import sys, json, numpy as np, torch
policy = torch.jit.load(sys.argv[1])
obs = torch.from_numpy(np.load(sys.argv[2]))
if len(sys.argv) > 4:
    state, actions = torch.zeros(2, obs.shape[1], int(sys.argv[4])), []
    for step in obs:
        action, state = policy(step, state)
        actions.append(action)
    actions = torch.stack(actions)
else:
    actions = policy(obs)
np.save(sys.argv[3], actions.numpy())
assert not any(name == "menger" or name.startswith("menger.") for name in sys.modules), "Menger was imported"
"""


def _standalone(tmp_path, path, obs, lstm_size=0):
    np.save(tmp_path / "obs.npy", obs)
    args = [str(path), str(tmp_path / "obs.npy"), str(tmp_path / "actions.npy")] + ([str(lstm_size)] if lstm_size else [])
    done = subprocess.run([sys.executable, "-c", RUN_WITH_TORCH_ALONE, *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    return np.load(tmp_path / "actions.npy")


@pytest.mark.parametrize("preset,extra,obs_dim", [
    ("cartpole-ppo", ["stop.env_frames=2048"], 4),
    ("pendulum-sac", ["stop.env_frames=1200", "replay.min_size=200"], 3),
])
def test_an_exported_policy_acts_as_load_policy_does_with_torch_alone(tmp_path, quiet, preset, extra, obs_dim):
    run_dir = tmp_path / "run"
    api.train(preset, overrides=[*quiet, *SMALL, *extra], run_dir=str(run_dir))
    assert main(["export", str(run_dir)]) == 0
    obs = np.random.default_rng(0).uniform(-1, 1, (7, obs_dim)).astype(np.float32)  # not the traced batch of 2
    exported = _standalone(tmp_path, run_dir / "policy.pt", obs)
    np.testing.assert_allclose(exported, api.load_policy(run_dir).act(obs), rtol=1e-5, atol=1e-6)
    extra_files = {"menger.json": ""}
    torch.jit.load(str(run_dir / "policy.pt"), _extra_files=extra_files)
    meta = json.loads(extra_files["menger.json"])
    assert meta["obs_shape"] == [obs_dim] and meta["algo"] == preset.split("-")[1]


def test_an_exported_recurrent_policy_carries_its_state_as_load_policy_does(tmp_path, quiet):
    run_dir = tmp_path / "run"
    api.train("cartpole-novel-r2d2", overrides=[*quiet, *SMALL, "stop.env_frames=3000", "replay.min_size=64"],
              run_dir=str(run_dir))
    path = export_policy(run_dir, tmp_path / "r2d2.pt")
    obs = np.random.default_rng(1).uniform(-1, 1, (6, 5, 2)).astype(np.float32)  # 6 steps of 5 envs
    exported = _standalone(tmp_path, path, obs, lstm_size=64)
    policy = api.load_policy(run_dir)
    expected = np.stack([policy.act(step) for step in obs])  # Policy keeps the state between calls
    np.testing.assert_array_equal(exported, expected)


def test_an_unknown_format_says_what_there_is(tmp_path):
    with pytest.raises(ExportError, match="choose torchscript"):
        export_policy(tmp_path, fmt="onnx")

"""`menger export`: the file runs without Menger, with torch alone (TorchScript) or onnxruntime alone (ONNX), and
takes the same actions as `menger.api.load_policy` on the same observations, for a feed-forward policy (PPO with
Discrete actions, SAC with Box actions) and a recurrent one (R2D2) whose state is carried step by step.

Each run is trained once for the module; the ONNX tests skip only where onnxruntime is not installed (the `dev`
extra installs it, so CI runs them)."""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from menger import api
from menger.cli import main
from menger.commands.export import ExportError, export_policy
from menger.extras import MissingExtraError

SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.learner.threads=1",
         "runtime.learner.device=cpu", "checkpoint.interval_s=0", "log.tensorboard=false", "log.progress=false",
         "stop.target_return=null", "eval.interval_s=0"]
RUNS = {
    "cartpole-ppo": ["stop.env_frames=2048"],
    "pendulum-sac": ["stop.env_frames=1200", "replay.min_size=200"],
    "cartpole-novel-r2d2": ["stop.env_frames=3000", "replay.min_size=64"],
}
OBS_DIM = {"cartpole-ppo": 4, "pendulum-sac": 3, "cartpole-novel-r2d2": 2}
LSTM_SIZE = 64  # cartpole-novel-r2d2's model.lstm_size

# Both runners: argv = model, obs.npy, actions.npy[, lstm size]; obs [N, D], or [steps, N, D] with a state.
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
RUN_WITH_ONNXRUNTIME_ALONE = """
import sys, json, numpy as np, onnxruntime as ort
policy = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
obs = np.load(sys.argv[2])
if len(sys.argv) > 4:
    state, actions = np.zeros((2, obs.shape[1], int(sys.argv[4])), np.float32), []
    for step in obs:
        action, state = policy.run(["action", "next_state"], {"obs": step, "state": state})
        actions.append(action)
    actions = np.stack(actions)
else:
    (actions,) = policy.run(["action"], {"obs": obs})
np.save(sys.argv[3], actions)
meta = json.loads(policy.get_modelmeta().custom_metadata_map["menger.json"])
assert meta["obs_shape"] == list(obs.shape[-1:]), meta
assert not any(name.split(".")[0] in ("menger", "torch") for name in sys.modules), "Menger or torch was imported"
"""
RUNNERS = {"torchscript": RUN_WITH_TORCH_ALONE, "onnx": RUN_WITH_ONNXRUNTIME_ALONE}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """preset -> its run directory, trained on first use."""
    runs = {}

    def run_dir(preset):
        if preset not in runs:
            path = tmp_path_factory.mktemp(preset) / "run"
            api.train(preset, overrides=[*SMALL, *RUNS[preset]], run_dir=str(path))
            runs[preset] = path
        return runs[preset]
    return run_dir


def _needs(fmt):
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="--format onnx needs onnx: pip install 'menger-rl[export]'")
        pytest.importorskip("onnxruntime", reason="running the ONNX file needs onnxruntime")


def _standalone(tmp_path, fmt, path, obs, lstm_size=0):
    np.save(tmp_path / "obs.npy", obs)
    args = [str(path), str(tmp_path / "obs.npy"), str(tmp_path / "actions.npy")] + ([str(lstm_size)] if lstm_size else [])
    done = subprocess.run([sys.executable, "-c", RUNNERS[fmt], *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    return np.load(tmp_path / "actions.npy")


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
@pytest.mark.parametrize("preset", ["cartpole-ppo", "pendulum-sac"])
def test_an_exported_policy_acts_as_load_policy_does_without_menger(tmp_path, trained, preset, fmt):
    _needs(fmt)
    run_dir = trained(preset)
    assert main(["export", str(run_dir), "--format", fmt, "--out", str(tmp_path / f"policy.{fmt}")]) == 0
    obs = np.random.default_rng(0).uniform(-1, 1, (7, OBS_DIM[preset])).astype(np.float32)  # not the traced 2
    exported = _standalone(tmp_path, fmt, tmp_path / f"policy.{fmt}", obs)
    expected = api.load_policy(run_dir).act(obs)
    assert exported.dtype == expected.dtype and exported.shape == expected.shape
    np.testing.assert_allclose(exported, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_an_exported_recurrent_policy_carries_its_state_as_load_policy_does(tmp_path, trained, fmt):
    _needs(fmt)
    run_dir = trained("cartpole-novel-r2d2")
    path = export_policy(run_dir, tmp_path / f"r2d2.{fmt}", fmt)
    obs = np.random.default_rng(1).uniform(-1, 1, (6, 5, 2)).astype(np.float32)  # 6 steps of 5 envs
    exported = _standalone(tmp_path, fmt, path, obs, lstm_size=LSTM_SIZE)
    policy = api.load_policy(run_dir)
    expected = np.stack([policy.act(step) for step in obs])  # Policy keeps the state between calls
    np.testing.assert_array_equal(exported, expected)


def test_the_default_files_and_their_metadata(trained):
    run_dir = trained("cartpole-ppo")
    path = export_policy(run_dir)
    assert path == run_dir / "policy.pt"
    extra_files = {"menger.json": ""}
    torch.jit.load(str(path), _extra_files=extra_files)
    meta = json.loads(extra_files["menger.json"])
    assert meta["obs_shape"] == [4] and meta["algo"] == "ppo" and meta["lstm_size"] == 0
    _needs("onnx")
    import onnx

    path = export_policy(run_dir, fmt="onnx")
    assert path == run_dir / "policy.onnx"
    model = onnx.load(str(path))
    assert json.loads({p.key: p.value for p in model.metadata_props}["menger.json"]) == meta
    assert [i.name for i in model.graph.input] == ["obs"] and [o.name for o in model.graph.output] == ["action"]


def test_an_unknown_format_says_what_there_is(tmp_path):
    with pytest.raises(ExportError, match="choose torchscript or onnx"):
        export_policy(tmp_path, fmt="tflite")


def test_onnx_without_the_onnx_package_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    with pytest.raises(MissingExtraError, match=r"menger-rl\[export\].*or export --format torchscript"):
        export_policy(tmp_path, fmt="onnx")


def test_an_image_policy_takes_uint8_frames_in_onnx(tmp_path):
    _needs("onnx")
    import gymnasium as gym
    import onnxruntime as ort

    from menger.commands.export import _Deterministic, _write_onnx
    from menger.models.policy import Policy

    torch.manual_seed(0)
    network = Policy(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6)).eval()
    module = _Deterministic(network.requires_grad_(False)).eval()
    _write_onnx(module, (torch.zeros((2, 4, 84, 84), dtype=torch.uint8),), tmp_path / "cnn.onnx", {"algo": "ppo"})
    session = ort.InferenceSession(str(tmp_path / "cnn.onnx"), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].type == "tensor(uint8)"
    frames = np.random.default_rng(4).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    (actions,) = session.run(None, {"obs": frames})
    logits, _ = network.action_params(torch.from_numpy(frames))
    top2 = logits.topk(2).values
    assert bool(((top2[:, 0] - top2[:, 1]) > 1e-4).all())  # no near-tie that float rounding could flip
    np.testing.assert_array_equal(actions, module(torch.from_numpy(frames)).numpy())

"""`menger.train(config, env=MyEnv, network=MyNet)`: objects of the user's script (`__main__`) or of a module.

A config records an object by the name that imports it again (`menger.importable`); threads and forked actors
find `__main__`'s objects, Ray's workers cannot (refused before anything starts); a run trained on them reopens
only with them given again.
"""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml
from torch import nn

import menger
from menger.config import ConfigError
from menger.importable import importable_name

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_objects.py"
SMALL = ["runtime.actors=1", "runtime.envs_per_actor=2", "runtime.unroll_length=8", "stop.env_frames=64",
         "stop.target_return=null", "runtime.learner.device=cpu"]


class CueEnv(gym.Env):
    """Name the lit cell of two: 1 for a hit; four steps an episode."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self._light(), {}

    def step(self, action):
        reward = float(int(action) == self.cue)
        self.steps += 1
        return self._light(), reward, self.steps >= 4, False, {}

    def _light(self):
        self.cue = int(self.np_random.integers(2))
        return np.eye(2, dtype=np.float32)[self.cue]


class Encoder(nn.Module):
    def __init__(self, obs_space, action_space, width: int = 8):
        super().__init__()
        self.features_dim = width
        self.body = nn.Linear(obs_space.shape[0], width)

    def forward(self, obs):
        return self.body(obs).tanh()


def make_cue_env():
    return CueEnv()


@pytest.fixture
def in_main(monkeypatch):
    """Put objects into `__main__` as a user's script defines them (`__module__ == "__main__"`)."""
    main = sys.modules["__main__"]

    def put(obj):
        monkeypatch.setattr(obj, "__module__", "__main__")
        obj.__qualname__ = obj.__name__  # a class defined in a test, made a top-level one of the script
        monkeypatch.setattr(main, obj.__name__, obj, raising=False)
        return obj

    return put


@pytest.mark.parametrize("launcher", ["threads", "processes"])
def test_the_example_script_trains_on_the_classes_it_defines(tmp_path, launcher):
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, str(EXAMPLE), "--launcher", launcher, "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    print(done.stdout.strip().splitlines()[-1])  # the run, and how often its policy names the lit cell
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["env"]["id"] == "__main__:MyEnv"
    assert saved["model"]["network"] == "__main__:MyNet"
    assert saved["runtime"]["launcher"] == launcher and saved["runtime"]["seed"] == 1


def test_an_object_of_the_script_is_refused_on_ray_before_anything_starts(tmp_path, in_main, quiet):
    in_main(CueEnv)
    with pytest.raises(ConfigError, match=r"env.id='__main__:CueEnv' is defined in the script that started the run, "
                                          r"and runtime.launcher=ray builds it in Ray's worker processes.*move CueEnv "
                                          r"into a module every node can import.*runtime.launcher=processes"):
        menger.train("cartpole-ppo", [*quiet, "runtime.launcher=ray"], run_dir=tmp_path / "run", env=CueEnv)
    assert not (tmp_path / "run").exists()
    # the same class from an importable module is the user's promise that every node has that module
    module_env = f"{make_cue_env.__module__}:make_cue_env"
    config = menger.load_experiment("cartpole-ppo", ["runtime.launcher=ray", f"env.id={module_env}"])
    assert config.env.id == module_env


def test_a_run_on_the_scripts_objects_reopens_only_with_them(tmp_path, in_main, quiet):
    in_main(CueEnv)
    in_main(Encoder)
    run = menger.train("cartpole-ppo", [*quiet, *SMALL, "runtime.launcher=threads", "model.kwargs.width=4"],
                       run_dir=tmp_path / "run", env=CueEnv, network=Encoder, seed=3)
    config = menger.load_run_config(run.run_dir, env=CueEnv, network=Encoder)
    assert (config.env.id, config.model.network, config.runtime.seed) == ("__main__:CueEnv", "__main__:Encoder", 3)

    with pytest.raises(menger.ScriptObjectError, match=r"names objects of the script that trained it: "
                                                       r"env.id='__main__:CueEnv', model.network='__main__:Encoder'.*"
                                                       r"menger.load_policy\(run_dir, env=CueEnv, network=Encoder\)"):
        menger.load_policy(run.run_dir)
    policy = menger.load_policy(run.run_dir, env=CueEnv, network=Encoder)
    assert policy.network.encoder.features_dim == 4
    assert int(policy.act(np.eye(2, dtype=np.float32)[0])) in (0, 1)
    resumed = menger.resume(run.run_dir, ["stop.env_frames=128"], env=CueEnv, network=Encoder)
    assert resumed.final_metrics["time/env_frames"] >= 128


def test_menger_eval_on_such_a_run_says_to_pass_the_objects_again(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"env": {"id": "__main__:MyEnv"}, "stop": {"env_frames": 1}}))
    done = subprocess.run([sys.executable, "-m", "menger.cli", "eval", str(run_dir)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1
    assert "names objects of the script that trained it: env.id='__main__:MyEnv'" in done.stderr
    assert "menger.load_policy(run_dir, env=MyEnv)" in done.stderr and "Traceback" not in done.stderr


def test_a_given_object_needs_no_consent_but_what_it_does_not_replace_does(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = {"env": {"id": "os:system"}, "model": {"network": "os:getcwd"}, "stop": {"env_frames": 1}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved))
    with pytest.raises(menger.UntrustedRunError, match=r"model.network='os:getcwd'"):
        menger.load_run_config(run_dir, env=CueEnv)
    config = menger.load_run_config(run_dir, env=CueEnv, network=Encoder)
    assert config.env.id == f"{CueEnv.__module__}:CueEnv"


def test_an_object_no_name_finds_again_is_refused_saying_what_to_pass(in_main):
    def local_factory():
        return CueEnv()

    class Redefined(gym.Env):  # put into __main__ below, so its name is a top-level one there
        pass

    cases = {
        "defined inside a function": (local_factory, ValueError),
        "is a lambda": (lambda: CueEnv(), ValueError),
        "functools.partial": (functools.partial(make_cue_env), TypeError),
        "an instance of CueEnv": (CueEnv(), TypeError),
        r"__main__:Redefined names another object now \(was Redefined redefined": (in_main(Redefined), ValueError),
    }
    sys.modules["__main__"].Redefined = type("Redefined", (), {})  # redefined after it was defined
    for fragment, (value, error) in cases.items():
        with pytest.raises(error, match=fragment):
            importable_name(value, "env.id")
    assert importable_name("CartPole-v1", "env.id") == "CartPole-v1"
    assert importable_name(make_cue_env, "env.id") == f"{make_cue_env.__module__}:make_cue_env"
    with pytest.raises(TypeError, match=r"model.network: got 3, an instance of int.*or a string \('package.module:Class'\)"):
        importable_name(3, "model.network")


def test_a_config_object_takes_overrides_and_objects_of_a_module_too(tmp_path, quiet):
    config = menger.load_experiment("cartpole-ppo")
    run = menger.train(config, [*quiet, *SMALL, "runtime.launcher=processes"], run_dir=tmp_path / "run",
                       env=make_cue_env, seed=5)
    saved = menger.load_run_config(run.run_dir, env=make_cue_env)
    assert saved.env.id == f"{make_cue_env.__module__}:make_cue_env"
    assert (saved.runtime.seed, saved.stop.env_frames, saved.runtime.launcher) == (5, 64, "processes")
    assert run.final_metrics["time/env_frames"] >= 64

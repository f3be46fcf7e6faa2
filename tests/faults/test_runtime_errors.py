"""A failed `menger` command is one short message: what failed, where in the user's code, the likely cause and
what to try, with the traceback only under --debug (or MENGER_DEBUG=1). A run refused before it starts (an
unknown env id, an env or a network that does not build) leaves nothing behind; a run that started and failed
(here: every actor's env fails to build in the actor) leaves config.yaml and error.txt, which the message names.

The envs and networks that fail are defined here, as a user's would be in their own module.
"""
from __future__ import annotations

import threading

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from torch import nn

from menger.cli import main
from menger.explain import explain
from menger.runtime import NoActorsError

MESSAGE_LINES = 8  # at most, for a message a user reads instead of a traceback


class RefusingEnv(gymnasium.Env):
    """An env whose constructor raises, as one that needs a simulator that is not running does."""

    def __init__(self):
        raise ConnectionError("the simulator at localhost:5555 refused the connection")


class OneSeatEnv(gymnasium.Env):
    """Builds once (for Menger's check of the spaces), then refuses: a licence with one seat. So the run starts,
    and every actor's env fails to build in the actor."""

    built = 0
    lock = threading.Lock()

    def __init__(self):
        with OneSeatEnv.lock:
            OneSeatEnv.built += 1
            if OneSeatEnv.built > 1:
                raise ConnectionError("licence server: all 1 seats are taken")
        self.observation_space = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 1.0, False, False, {}


class RaisingNetwork(nn.Module):
    def __init__(self, obs_space, action_space, **kwargs):
        raise TypeError("RaisingNetwork needs an even width")


class MisfitNetwork(nn.Module):
    """Builds, but its first layer takes 3 inputs where CartPole has 4."""

    def __init__(self, obs_space, action_space):
        super().__init__()
        self.pi, self.v = nn.Linear(3, action_space.n), nn.Linear(3, 1)

    def forward(self, obs):
        return self.pi(obs), self.v(obs).squeeze(-1)


def _train(tmp_path, *overrides, debug=False):
    argv = ["train", "cartpole-ppo", "--no-progress", "--launcher", "threads", "--run-dir", str(tmp_path / "run"),
            *[f"--set={item}" for item in overrides]]
    return main((["--debug"] if debug else []) + argv)


REFUSED = [  # (id, overrides, exit code, words the message holds)
    ("unknown-env", ["env.id=CartPol-v1"], 1, ["Unknown environment id 'CartPol-v1'", "CartPole-v1", "menger presets"]),
    ("env-constructor", [f"env.id={__name__}:RefusingEnv"], 1,
     ["building the env", "ConnectionError: the simulator at localhost:5555 refused", "test_runtime_errors.py"]),
    ("network-constructor", [f"model.network={__name__}:RaisingNetwork"], 2,
     ["building the network", "RaisingNetwork needs an even width", "test_runtime_errors.py", "forward(obs)"]),
    ("network-shape", [f"model.network={__name__}:MisfitNetwork"], 2,
     ["building the network", "shapes cannot be multiplied", "Box(4,)", "logits [N, A], value [N]"]),
]


@pytest.mark.parametrize(("overrides", "code", "words"), [case[1:] for case in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_run_refused_before_it_starts_is_one_short_message_and_leaves_nothing(tmp_path, capsys, overrides, code,
                                                                                words):
    exit_code = _train(tmp_path, *overrides)
    err = capsys.readouterr().err
    print(f"exit code {exit_code}:\n{err}")
    assert exit_code == code
    assert "Traceback" not in err and len(err.strip().splitlines()) < MESSAGE_LINES
    for word in words:
        assert word in err, f"{word!r} not in the message"
    assert not (tmp_path / "run").exists(), "a run refused before it started wrote a run directory"


@pytest.mark.parametrize("how", ["--debug", "MENGER_DEBUG=1"])
def test_debug_adds_the_traceback(tmp_path, capsys, monkeypatch, how):
    if how == "MENGER_DEBUG=1":
        monkeypatch.setenv("MENGER_DEBUG", "1")
    exit_code = _train(tmp_path, f"env.id={__name__}:RefusingEnv", debug=how == "--debug")
    err = capsys.readouterr().err
    assert exit_code == 1
    assert "Traceback (most recent call last)" in err and "in __init__" in err and "raise ConnectionError" in err
    assert err.strip().splitlines()[-1].startswith("  at "), "the short message comes last, after the traceback"


def test_debug_is_a_global_flag_anywhere_on_the_command_line(tmp_path, capsys):
    argv = ["train", "cartpole-ppo", "--launcher", "threads", "--run-dir", str(tmp_path / "run"), "--debug",
            "--set", "env.id=CartPol-v1"]
    assert main(argv) == 1
    assert "Traceback" in capsys.readouterr().err


def test_a_run_whose_actors_fail_names_the_actor_and_its_error_and_keeps_error_txt(tmp_path, capsys):
    OneSeatEnv.built = 0
    exit_code = _train(tmp_path, f"env.id={__name__}:OneSeatEnv", "runtime.actors=1",
                       "runtime.supervision.max_restarts=0", "runtime.supervision.no_actor_deadline_s=0.2",
                       "log.tensorboard=false")
    err = capsys.readouterr().err
    message = err[err.rindex("menger: "):]  # the supervisor's log lines come before it
    print(f"exit code {exit_code}:\n{message}")
    run = tmp_path / "run"
    assert exit_code == 3  # every actor is gone
    assert "Traceback" not in err and len(message.strip().splitlines()) < MESSAGE_LINES
    assert "actor 0: ConnectionError: licence server: all 1 seats are taken" in message
    assert "test_runtime_errors.py" in message and "in __init__" in message  # where, in the actor's own traceback
    assert str(run / "error.txt") in message
    assert (run / "config.yaml").exists()
    report = (run / "error.txt").read_text()
    assert "no actor has been alive" in report and "Traceback (most recent call last)" in report
    assert 'raise ConnectionError("licence server' in report, "error.txt lacks the actor's own traceback"


def test_a_failed_run_with_debug_prints_the_actor_traceback_too(tmp_path, capsys):
    OneSeatEnv.built = 0
    assert _train(tmp_path, f"env.id={__name__}:OneSeatEnv", "runtime.actors=1", "runtime.supervision.max_restarts=0",
                  "runtime.supervision.no_actor_deadline_s=0.2", "log.tensorboard=false", debug=True) == 3
    err = capsys.readouterr().err
    assert "actor 0: ConnectionError" in err and 'raise ConnectionError("licence server' in err


# ----- the hints, on errors made here (no run) -------------------------------------------------------------
def _raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as caught:  # noqa: BLE001 - the exception with its traceback is the test's input
        return caught


@pytest.mark.parametrize(("error", "words"), [
    (ModuleNotFoundError("No module named 'ray'", name="ray"), ['pip install "menger-rl[ray]"', "--launcher processes"]),
    (ModuleNotFoundError("No module named 'mypkg'", name="mypkg"), ["PYTHONPATH", "pip install -e"]),
    (ModuleNotFoundError("No module named 'ale_py'", name="ale_py"), ['pip install "menger-rl[atari]"']),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), ["ran out of memory", "runtime.envs_per_actor"]),
    (MemoryError(), ["ran out of memory"]),
    (OSError(28, "No space left on device"), ["/dev/shm", "--shm-size"]),
    (RuntimeError("mat1 and mat2 shapes cannot be multiplied (16x4 and 3x2)"), ["logits [N, A], value [N]"]),
    (KeyError("obs"), ["did not expect"]),
], ids=["ray-missing", "user-module-missing", "extra-missing", "cuda-oom", "memory-error", "shm-full", "shape",
        "unexpected"])
def test_common_causes_get_a_cause_and_what_to_try(error, words):
    message = explain(_raised(error), "train").message()
    print(message)
    assert message.startswith("menger: train failed: ") and f"{type(error).__name__}" in message
    for word in words:
        assert word in message
    assert "--debug" in message and len(message.splitlines()) < MESSAGE_LINES


def test_a_child_error_is_explained_by_the_childs_own_error_and_place():
    error = NoActorsError("no actor has been alive for 1 s (runtime.supervision.no_actor_deadline_s); last errors: "
                          "actor 1: RuntimeError: CUDA out of memory")
    error.child_errors = {"actor 1": ("RuntimeError: CUDA out of memory", 'Traceback (most recent call last):\n'
                                      '  File "/home/me/proj/nets.py", line 12, in forward\n    x = big(x)\n'
                                      'RuntimeError: CUDA out of memory\n')}
    explanation = explain(_raised(error), "train")
    assert explanation.where == "/home/me/proj/nets.py:12 in forward"
    assert any("ran out of memory" in hint for hint in explanation.hints)


def test_a_config_error_stays_one_line(tmp_path, capsys):
    assert _train(tmp_path, "ppo.lrr=1") == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("menger: config error: unknown key 'ppo.lrr'; did you mean")


def test_resuming_a_run_that_failed_before_its_first_checkpoint_points_at_its_error_txt(tmp_path, capsys):
    OneSeatEnv.built = 0
    _train(tmp_path, f"env.id={__name__}:OneSeatEnv", "runtime.actors=1", "runtime.supervision.max_restarts=0",
           "runtime.supervision.no_actor_deadline_s=0.2", "log.tensorboard=false")
    run = tmp_path / "run"
    report = (run / "error.txt").read_text()
    capsys.readouterr()
    assert main(["resume", str(run), "--allow-import", __name__]) == 1
    err = capsys.readouterr().err
    assert "nothing to resume" in err and str(run / "error.txt") in err and "menger train" in err
    assert (run / "error.txt").read_text() == report, "the refused resume replaced the run's own error.txt"


def test_the_ray_launcher_without_ray_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed: `import ray` raises
    monkeypatch.delitem(sys.modules, "menger.launch.ray", raising=False)
    code = main(["train", "cartpole-ppo", "--launcher", "ray", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    print(err)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) < MESSAGE_LINES
    assert 'pip install "menger-rl[ray]"' in err and "--launcher processes" in err
    assert not (tmp_path / "run").exists()


def test_a_config_error_raised_from_an_import_error_keeps_only_its_own_fix():
    """A missing optional extra (log.wandb.project without wandb) is a config error that names its own fix; the
    ImportError it chains from adds no generic "a module cannot be imported" hint."""
    from menger.config import ConfigError

    def raise_it():
        try:
            raise ModuleNotFoundError("No module named 'wandb'", name="wandb")
        except ImportError as exc:
            raise ConfigError('log.wandb.project is set, but wandb is not installed: pip install "menger-rl[wandb]"') \
                from exc

    try:
        raise_it()
    except ConfigError as exc:
        explanation = explain(exc, "train")
    assert explanation.hints == () and "menger-rl[wandb]" in explanation.what

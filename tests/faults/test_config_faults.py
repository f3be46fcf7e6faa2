"""Bad config input fails before anything starts, naming the key (docs/guides/reliability.md, promise 6; fault table, last row).

"Before anything starts" is checked by the run directory: `menger train --run-dir D` creates D only once the
config is valid, so a rejected config must leave no D behind (no actor, no checkpoint, no metrics file).
"""
import pytest

from menger import api
from menger.cli import main
from menger.config import ConfigError, dump_yaml, to_dict
from menger.experiment import load_experiment

CONFIG_ERROR_EXIT_CODE = 2

# (override, words the message must hold: the key, and the fix where one can be suggested)
BAD_OVERRIDES = [
    ("ppo.lrr=1", ["'ppo.lrr'", "did you mean 'ppo.lr'"]),
    ("ppoo.lr=1", ["'ppoo'", "did you mean 'ppo'"]),
    ("runtime.actorz=2", ["'runtime.actorz'", "did you mean 'runtime.actors'"]),
    ("ppo.lr=fast", ["'ppo.lr'", "number"]),
    ("runtime.actors=2.5", ["'runtime.actors'", "integer"]),
    ("ppo.gamma=1.5", ["'ppo.gamma'", "out of range", "[0.0, 1.0]"]),
    ("runtime.actors=0", ["'runtime.actors'", "out of range"]),
    ("stop.env_frames=-1", ["'stop.env_frames'", "out of range"]),
    ("runtime.launcher=thread", ["'runtime.launcher'", "'threads'"]),
]


@pytest.mark.parametrize(("override", "words"), BAD_OVERRIDES, ids=[case[0] for case in BAD_OVERRIDES])
def test_bad_override_exits_2_naming_the_key_before_starting(tmp_path, capsys, override, words):
    run_dir = tmp_path / "run"
    code = main(["train", "cartpole-ppo", "--no-progress", "--run-dir", str(run_dir), "--set", override])
    captured = capsys.readouterr()
    print(f"--set {override}: exit code {code}, message: {captured.err.strip()[:160]}")
    assert code == CONFIG_ERROR_EXIT_CODE
    for word in words:
        assert word in captured.err
    assert "training" not in captured.out, "the run started before the config was checked"
    assert not run_dir.exists()


def test_mistyped_key_in_an_experiment_file_is_named_with_its_section(tmp_path, capsys):
    experiment = tmp_path / "mine.yaml"
    experiment.write_text("algo: ppo\nenv: {id: CartPole-v1}\nruntime: {actors: 1, envs_per_actr: 4}\n"
                          "stop: {env_frames: 1000}\n")
    code = main(["train", str(experiment), "--no-progress", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    print(f"{experiment.name}: exit code {code}, message: {err.strip()[:160]}")
    assert code == CONFIG_ERROR_EXIT_CODE
    assert "'runtime.envs_per_actr'" in err and "did you mean 'runtime.envs_per_actor'" in err
    assert not (tmp_path / "run").exists()


def test_every_problem_is_reported_at_once(capsys):
    code = main(["train", "cartpole-ppo", "--no-progress", "--set", "ppo.lrr=1", "--set", "ppo.gamma=2"])
    err = capsys.readouterr().err
    assert code == CONFIG_ERROR_EXIT_CODE
    assert "'ppo.lrr'" in err and "'ppo.gamma'" in err


def test_resume_with_a_mistyped_override_exits_2_and_leaves_the_run_alone(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    dump_yaml(to_dict(load_experiment("cartpole-ppo")), run_dir / "config.yaml")
    before = sorted(path.name for path in run_dir.iterdir())
    code = main(["resume", str(run_dir), "--no-progress", "--set", "stop.env_frame=5000"])
    err = capsys.readouterr().err
    print(f"resume --set stop.env_frame=5000: exit code {code}, message: {err.strip()[:160]}")
    assert code == CONFIG_ERROR_EXIT_CODE
    assert "'stop.env_frame'" in err and "did you mean 'stop.env_frames'" in err
    assert sorted(path.name for path in run_dir.iterdir()) == before


def test_python_api_raises_config_error_before_creating_the_run(tmp_path):
    data = {"algo": "ppo", "ppo": {"lrr": 1e-3}, "stop": {"env_frames": 1000}}
    with pytest.raises(ConfigError, match=r"did you mean 'ppo\.lr'"):
        api.train(data, run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_cli_process_exit_code_is_2_for_an_unknown_key(harness):
    """The exit code as a shell sees it (main's return value reaching sys.exit), not just main's return."""
    run_dir = harness.tmp_path / "run"
    done = harness.run_menger("train", "cartpole-ppo", "--no-progress", "--run-dir", str(run_dir),
                              "--set", "ppo.lrr=1", timeout_s=60)
    print(f"`menger train cartpole-ppo --set ppo.lrr=1`: exit code {done.returncode}, stderr: {done.stderr.strip()}")
    assert done.returncode == CONFIG_ERROR_EXIT_CODE
    assert "'ppo.lrr'" in done.stderr and "did you mean 'ppo.lr'" in done.stderr
    assert "training" not in done.stdout
    assert not run_dir.exists()


def test_an_env_whose_constructor_hangs_ends_the_run_with_an_error_not_a_freeze(tmp_path):
    """The trainer's spaces probe builds one env: a constructor that never returns is bounded by the start-up
    deadline (runtime.supervision.startup_grace_s), and the error names the env and the key."""
    import threading
    import time

    import gymnasium

    from menger.launch import make_launcher
    from menger.runtime import Trainer
    from menger.runtime.spaces import EnvStartTimeout

    release = threading.Event()

    class HangingEnv(gymnasium.Env):
        def __init__(self):
            release.wait(60)  # hangs until the test lets it go
            raise RuntimeError("released")

    if "menger-tests/Hanging-v0" not in gymnasium.registry:
        gymnasium.register("menger-tests/Hanging-v0", entry_point=HangingEnv)
    config = load_experiment("cartpole-ppo", ["env.id=menger-tests/Hanging-v0", "runtime.launcher=threads",
                                              "runtime.supervision.startup_grace_s=1", "log.tensorboard=false"])
    started = time.monotonic()
    try:
        with pytest.raises(EnvStartTimeout, match=r"'menger-tests/Hanging-v0'.*1 s.*startup_grace_s") as raised:
            Trainer(config, tmp_path / "run", launcher=make_launcher(config.runtime)).run()
        elapsed = time.monotonic() - started
        print(f"constructor hangs: the run ended after {elapsed:.1f} s (deadline 1 s): {str(raised.value)[:120]}")
        assert elapsed < 30
    finally:
        release.set()


def test_a_hanging_env_constructor_is_bounded_by_the_runs_own_wall_clock(tmp_path):
    """With the start-up grace at its default (120 s) and stop.wall_clock_s=3, a constructor that never returns
    ends the run on the wall clock's deadline, with the same message naming the env and both settings; no run
    directory is written. The run goes in a thread so a regression fails here instead of hanging the suite."""
    import threading

    import gymnasium

    from menger.runtime.spaces import EnvStartTimeout

    release = threading.Event()

    class SlowToBuildEnv(gymnasium.Env):
        def __init__(self):
            release.wait(600)  # sleeps far past the wall clock, until the test lets it go
            raise RuntimeError("released")

    if "menger-tests/SlowToBuild-v0" not in gymnasium.registry:
        gymnasium.register("menger-tests/SlowToBuild-v0", entry_point=SlowToBuildEnv)
    config = load_experiment("cartpole-ppo", ["env.id=menger-tests/SlowToBuild-v0", "runtime.launcher=threads",
                                              "stop.wall_clock_s=3", "log.tensorboard=false"])
    assert config.runtime.supervision.startup_grace_s > 3  # the grace alone would wait longer
    outcome: dict = {}

    def train():
        try:
            api.run_experiment(config, tmp_path / "run")
        except BaseException as exc:  # noqa: BLE001 - handed to the test below
            outcome["error"] = exc

    runner = threading.Thread(target=train, daemon=True)
    try:
        runner.start()
        runner.join(60)
        assert not runner.is_alive(), "the run did not end: the probe waits out the start-up grace"
        error = outcome.get("error")
        print(f"constructor hangs, stop.wall_clock_s=3: {error!r}"[:240])
        assert isinstance(error, EnvStartTimeout)
        message = str(error)
        assert "'menger-tests/SlowToBuild-v0'" in message and "within 3 s" in message
        assert "stop.wall_clock_s" in message and "startup_grace_s=120" in message
        assert not (tmp_path / "run").exists()
    finally:
        release.set()


class BrokenNetwork:
    """A custom network whose constructor fails, as a user's may."""

    def __init__(self, obs_space, action_space, **kwargs):
        raise TypeError("BrokenNetwork() takes no argument 'width'")


BAD_RUNS = [
    (["env.id=NoSuchEnv-v9"], 1, ["Unknown environment id 'NoSuchEnv-v9'"]),
    (["env.kwargs={not_an_argument: 3}"], 1, ["building the env 'CartPole-v1' failed", "not_an_argument",
                                              "check env.id and env.kwargs"]),
    ([f"model.network={__name__}:BrokenNetwork"], 2, ["building the network for this env failed",
                                                      "takes no argument 'width'", "model.network"]),
]


@pytest.mark.parametrize(("overrides", "code", "words"), BAD_RUNS, ids=["unknown-env", "env-kwargs", "network"])
def test_a_run_that_cannot_start_says_why_in_one_message_and_leaves_no_run_directory(tmp_path, capsys, overrides,
                                                                                     code, words):
    run_dir = tmp_path / "run"
    argv = ["train", "cartpole-ppo", "--no-progress", "--launcher", "threads", "--run-dir", str(run_dir)]
    exit_code = main(argv + [f"--set={item}" for item in overrides])
    err = capsys.readouterr().err
    print(f"{overrides}: exit code {exit_code}, message: {err.strip()[:200]}")
    assert exit_code == code
    for word in words:
        assert word in err
    lines = err.strip().splitlines()  # what failed; where in the user's code, a hint, how to see the traceback
    assert "Traceback" not in err and len(lines) <= 4 and all(word in lines[0] for word in words), lines
    assert not run_dir.exists()


def test_an_unwritable_run_directory_is_one_clear_message(tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("a file where a directory should go")
    code = main(["train", "cartpole-ppo", "--no-progress", "--run-dir", str(blocked / "run")])
    err = capsys.readouterr().err
    assert code == 1 and "cannot create the run directory" in err and "writable --run-dir" in err
    assert "Traceback" not in err

"""`env.wrappers`: gymnasium wrappers applied to each env, in order, in the actors and in evaluation; checked
before anything starts; a run directory naming a wrapper outside Menger and gymnasium.wrappers is not opened
without consent."""
import numpy as np
import pytest

from menger import api
from menger.api import UntrustedRunError
from menger.cli import main
from menger.config import ConfigError
from menger.envs import UnknownEnvError, make_vec_env
from menger.commands.evaluate import evaluate_run
from menger.experiment import load_experiment

SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=2", "runtime.unroll_length=20",
         "runtime.learner.device=cpu", "runtime.learner.threads=1", "stop.env_frames=80", "stop.target_return=null",
         "log.tensorboard=false", "log.progress=false", "checkpoint.interval_s=0", "ppo.epochs=1"]


def _episode_lengths(envs, steps: int) -> list[int]:
    envs.reset(seed=0)
    lengths, length = [], np.zeros(envs.num_envs, int)
    for _ in range(steps):
        result = envs.step(np.stack([envs.single_action_space.sample() for _ in range(envs.num_envs)]))
        length += 1
        ended = result.terminated | result.truncated
        lengths += length[ended].tolist()
        length[ended] = 0
    return lengths


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])  # CartPole has its own vector env
def test_wrappers_apply_to_each_env_in_order(env_id):
    # TimeLimit(5) then TimeLimit(3): the inner limit would allow 5, the outer one ends every episode at 3
    wrappers = [{"class": "gymnasium.wrappers:TimeLimit", "max_episode_steps": 5},
                {"class": "gymnasium.wrappers:TimeLimit", "max_episode_steps": 3}]
    envs = make_vec_env(env_id, 2, seed=0, wrappers=wrappers, kwargs={} if env_id == "Pendulum-v1" else {})
    lengths = _episode_lengths(envs, 9)
    assert lengths and all(length <= 3 for length in lengths)
    if env_id == "Pendulum-v1":
        assert set(lengths) == {3}


def test_a_users_wrapper_class_and_function_apply(user_envs_on_path):
    plain = make_vec_env("Pendulum-v1", 1, seed=0)
    wrapped = make_vec_env("Pendulum-v1", 1, seed=0, wrappers=[
        {"class": "menger_test_user_envs:ScaledReward", "scale": -3.0}, "menger_test_user_envs:limit_steps"])
    plain.reset(seed=0), wrapped.reset(seed=0)
    action = np.zeros((1, 1), np.float32)
    for step in range(5):
        a, b = plain.step(action), wrapped.step(action)
        assert b.reward[0] == pytest.approx(-3.0 * a.reward[0])
    assert b.truncated[0] and not a.truncated[0]  # limit_steps' default: 5


@pytest.mark.parametrize("wrapper,match", [
    ("collections:OrderedDict",
     r"env.wrappers\[0\] = 'collections:OrderedDict' is a class that is not a gymnasium.Wrapper"),
    ("math:pi", r"env.wrappers\[0\] = 'math:pi' is a float that is not a gymnasium.Wrapper"),
    ("no_such_module_xyz:Wrap", r"env.wrappers\[0\] = 'no_such_module_xyz:Wrap': cannot import module"),
    ("gymnasium.wrappers:TimeLimt", r"has no attribute 'TimeLimt'. Did you mean: TimeLimit"),
])
def test_a_wrapper_that_is_not_one_is_refused_by_name_before_the_run_starts(tmp_path, wrapper, match):
    run_dir = tmp_path / "run"
    with pytest.raises(UnknownEnvError, match=match):
        api.train("pendulum-ppo", overrides=[*SMALL, f"env.wrappers=['{wrapper}']"], run_dir=str(run_dir))
    assert not run_dir.exists()


@pytest.mark.parametrize("value,match", [
    ("[{max_episode_steps: 3}]", "a mapping with a 'class' key"),
    ("[TimeLimit]", "name a wrapper as 'package.module:Wrapper'"),
    ("[gymnasium.wrappers:ClipAction]", None),
])
def test_the_config_checks_the_form_of_each_wrapper(value, match):
    overrides = [f"env.wrappers={value}"]
    if match is None:
        assert load_experiment("pendulum-ppo", overrides).env.wrappers == ("gymnasium.wrappers:ClipAction",)
    else:
        with pytest.raises(ConfigError, match=match):
            load_experiment("pendulum-ppo", overrides)


def test_wrappers_apply_in_the_actors_and_in_eval_and_gymnasiums_need_no_consent(tmp_path):
    run = api.train("pendulum-ppo", overrides=[
        *SMALL, "env.wrappers=[{class: 'gymnasium.wrappers:TimeLimit', max_episode_steps: 10}]"],
        run_dir=str(tmp_path / "run"))
    assert run.final_metrics["episode/length_mean"] == 10.0  # Pendulum's own limit is 200
    report = evaluate_run(run.run_dir, episodes=2)  # gymnasium.wrappers: no --allow-import needed
    assert report["length_mean"] == 10.0


def test_a_wrapper_outside_menger_is_refused_by_eval_until_allowed(tmp_path, user_envs_on_path, capsys):
    run = api.train("pendulum-ppo", overrides=[*SMALL, "env.wrappers=['menger_test_user_envs:limit_steps']"],
                    run_dir=str(tmp_path / "run"))
    assert run.final_metrics["episode/length_mean"] == 5.0
    with pytest.raises(UntrustedRunError, match=r"env.wrappers\[0\]='menger_test_user_envs:limit_steps'.*"
                                                r"--allow-import menger_test_user_envs"):
        api.load_policy(run.run_dir)
    capsys.readouterr()
    assert main(["eval", str(run.run_dir), "--episodes", "1"]) == 1
    assert "env.wrappers[0]='menger_test_user_envs:limit_steps'" in capsys.readouterr().err
    report = evaluate_run(run.run_dir, episodes=2, allow_import=["menger_test_user_envs"])
    assert report["length_mean"] == 5.0


def test_a_saved_config_with_a_wrapper_from_os_is_refused_before_anything_is_imported(tmp_path):
    import yaml

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"algo": "ppo", "stop": {"env_frames": 100}, "env": {
        "id": "Pendulum-v1", "wrappers": ["gymnasium.wrappers:ClipAction", {"class": "os:system", "x": 1}]}}))
    with pytest.raises(UntrustedRunError, match=r"env.wrappers\[1\]='os:system'.*--allow-import os"):
        api.load_run_config(run_dir)


def test_wrappers_of_a_vector_env_or_the_atari_preset_are_refused_with_the_reason(user_envs_on_path):
    with pytest.raises(UnknownEnvError, match="wrap single gymnasium envs, and 'menger_test_user_envs:CounterVectorEnv' "
                                              "is a VectorEnv"):
        make_vec_env("menger_test_user_envs:CounterVectorEnv", 2, seed=0, wrappers=["gymnasium.wrappers:ClipAction"])
    with pytest.raises(ConfigError, match="env.wrappers with env.preset='atari'"):
        load_experiment("pong-impala", ["env.wrappers=[gymnasium.wrappers:ClipAction]"])

"""A run directory is data: opening one never imports code it names outside Menger without the user's consent.

Someone else's `config.yaml` with `env.id: os:system` and `env.kwargs: {command: ...}` would otherwise run a shell
command the moment `menger eval`, `menger resume` or `menger.api.load_policy` opened it.
"""
from pathlib import Path

import pytest
import yaml

from menger import api
from menger.api import UntrustedRunError

USER_ENVS = Path(__file__).resolve().parents[1] / "envs"  # menger_test_user_envs: a user's own env module


def hostile_run(tmp_path: Path) -> tuple[Path, Path]:
    run_dir, marker = tmp_path / "run", tmp_path / "pwned"
    run_dir.mkdir()
    config = {"algo": "ppo", "stop": {"env_frames": 100},
              "env": {"id": "os:system", "kwargs": {"command": f"touch {marker}"}}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return run_dir, marker


@pytest.mark.parametrize("open_run", [
    lambda run: api.load_run_config(run),
    lambda run: api.load_policy(run),
    lambda run: api.resume(run),
], ids=["load_run_config", "load_policy", "resume"])
def test_a_saved_config_naming_os_system_is_refused_before_anything_runs(tmp_path, open_run):
    run_dir, marker = hostile_run(tmp_path)
    with pytest.raises(UntrustedRunError, match=r"env.id='os:system'.*--allow-import os"):
        open_run(run_dir)
    assert not marker.exists(), "the run directory's command ran"


def test_menger_eval_and_resume_refuse_it_with_a_clear_message_and_exit_1(harness):
    run_dir, marker = hostile_run(harness.tmp_path)
    for command in (["eval", str(run_dir)], ["resume", str(run_dir), "--no-progress"]):
        done = harness.run_menger(*command, timeout_s=60)
        assert done.returncode == 1, done.stderr
        assert "names code that opening it would import: env.id='os:system'" in done.stderr
        assert "Traceback" not in done.stderr
    print(f"menger {command[0]} on a run naming os:system: exit 1, command run: {marker.exists()}; "
          f"{done.stderr.strip()[:140]}")
    assert not marker.exists()


def test_a_users_own_modules_load_once_allowed(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(USER_ENVS))
    run = api.train("cartpole-ppo", ["env.id=menger_test_user_envs:CounterEnv", "runtime.launcher=threads",
                                     "runtime.actors=1", "runtime.envs_per_actor=2", "runtime.unroll_length=8",
                                     "stop.env_frames=64", "stop.target_return=null", "log.tensorboard=false",
                                     "log.progress=false", "runtime.learner.device=cpu"],
                    run_dir=str(tmp_path / "run"))
    with pytest.raises(UntrustedRunError, match="--allow-import menger_test_user_envs"):
        api.load_policy(run.run_dir)
    policy = api.load_policy(run.run_dir, allow_import=["menger_test_user_envs"])
    assert policy.config.env.id == "menger_test_user_envs:CounterEnv"
    resumed = api.resume(run.run_dir, ["stop.env_frames=128"], allow_import=["menger_test_user_envs"])
    assert resumed.final_metrics["time/env_frames"] >= 128


def test_menger_modules_and_gymnasium_ids_need_no_consent(tmp_path):
    for env_id in ("CartPole-v1", "menger.apps.cluster:ClusterScheduling-v0", "menger.envs.sanity:BanditVectorEnv"):
        run_dir = tmp_path / env_id.replace(":", "_").replace("/", "_")
        run_dir.mkdir()
        (run_dir / "config.yaml").write_text(yaml.safe_dump({"env": {"id": env_id}, "stop": {"env_frames": 1}}))
        assert api.load_run_config(run_dir).env.id == env_id

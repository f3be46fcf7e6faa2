"""RUN_DIR/system.json: package versions, git, command line, machine; a resume keeps the earlier starts."""
import json

from menger import api
from menger.runtime.system import git_state, system_record, write_system_file

TINY = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=2", "runtime.unroll_length=8",
        "stop.target_return=null", "log.tensorboard=false", "runtime.learner.device=cpu"]


def test_the_record_names_versions_the_command_and_the_machine():
    record = system_record(argv=["/venv/bin/menger", "train", "cartpole-ppo"])
    assert {"menger", "torch", "numpy", "gymnasium", "pettingzoo"} <= set(record["packages"])
    assert record["command"] == ["menger", "train", "cartpole-ppo"]
    assert record["machine"]["cpus"] >= 1 and record["machine"]["memory_bytes"] > 0
    assert record["python"].count(".") == 2 and record["resume"] is False


def test_no_git_or_no_checkout_gives_none(tmp_path, monkeypatch):
    assert git_state(tmp_path) is None  # not a checkout
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert git_state(tmp_path) is None
    assert system_record()["git"] is None


def test_a_git_checkout_gives_its_commit_and_whether_it_is_dirty(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("1")
    git("add", "a.txt")
    git("commit", "-qm", "one")
    state = git_state(tmp_path, tracked="a.txt")
    assert len(state["sha"]) == 40 and state["dirty"] is False
    (tmp_path / "a.txt").write_text("2")
    assert git_state(tmp_path)["dirty"] is True
    assert git_state(tmp_path, tracked="not-tracked.py") is None


def test_each_start_rewrites_the_top_and_keeps_the_earlier_ones(tmp_path):
    write_system_file(tmp_path, argv=["menger", "train", "x"])
    write_system_file(tmp_path, resume=True, argv=["menger", "resume", "r1"])
    write_system_file(tmp_path, resume=True, argv=["menger", "resume", "r2"])
    record = json.loads((tmp_path / "system.json").read_text())
    assert record["command"] == ["menger", "resume", "r2"] and record["resume"] is True
    assert [r["command"][-1] for r in record["previous"]] == ["x", "r1"]
    assert all("previous" not in r for r in record["previous"])


def test_train_and_resume_write_it(tmp_path):
    run = api.train("cartpole-ppo", [*TINY, "stop.env_frames=32"], run_dir=str(tmp_path / "run"))
    record = json.loads((run.run_dir / "system.json").read_text())
    from importlib.metadata import version

    assert record["packages"]["menger"] == version("menger-rl") and record["resume"] is False
    api.resume(run.run_dir, ["stop.env_frames=64"])
    record = json.loads((run.run_dir / "system.json").read_text())
    assert record["resume"] is True and len(record["previous"]) == 1


def test_a_refused_config_writes_nothing(tmp_path):
    import pytest

    with pytest.raises(Exception):
        api.train("cartpole-ppo", [*TINY, "env.id=NoSuchEnv-v0"], run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()

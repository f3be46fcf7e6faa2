"""What a run writes for comparing runs: TensorBoard's config text and HParams session, and Weights & Biases
through a fake `wandb` module (the real one is never installed for the tests), across a train and a resume."""
import sys
import types

import pytest

from menger import api
from menger.config import ConfigError, to_dict
from menger.experiment import load_experiment
from menger.logging import read_jsonl

SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.learner.threads=1",
         "runtime.learner.device=cpu", "checkpoint.interval_s=0", "log.progress=false", "log.interval_s=0.05",
         "stop.target_return=null", "stop.env_frames=2048"]


class FakeWandbRun:
    def __init__(self, calls, kwargs):
        self.calls, self.kwargs = calls, kwargs

    def log(self, data, step=None):
        self.calls.append(("log", dict(data), step))

    def finish(self):
        self.calls.append(("finish",))


@pytest.fixture
def fake_wandb(monkeypatch):
    """A `wandb` module that records init, log and finish."""
    module = types.ModuleType("wandb")
    module.calls = []

    def init(**kwargs):
        module.calls.append(("init", kwargs))
        return FakeWandbRun(module.calls, kwargs)

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def _events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def test_tensorboard_has_the_config_text_and_one_hparams_session_across_a_resume(tmp_path):
    from tensorboard.plugins.hparams import metadata

    run_dir = tmp_path / "run"
    api.train("cartpole-ppo", overrides=SMALL, run_dir=str(run_dir))
    api.resume(run_dir, ["stop.env_frames=4096"])

    texts = sorted((e.step, e.tensor_proto.string_val[0].decode())  # events files in name order: sort by step
                   for e in _events(run_dir / "tb").Tensors("config/text_summary"))
    assert [step for step, _ in texts] == [0, 2048]
    assert (run_dir / "config.yaml").read_text().strip() in texts[1][1]  # the config the resumed run saved
    assert "| `stop.env_frames` | `2048` | `4096` |" in texts[1][1]
    summary = _events(run_dir / "tb" / "hparams")
    [session] = summary.Tensors("_hparams_/session_start_info")
    content = summary.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = metadata.parse_session_start_info_plugin_data(content).hparams
    assert hparams["algo"].string_value == "ppo" and hparams["ppo.lr"].number_value == 0.002
    assert hparams["runtime.envs_per_actor"].number_value == 4 and hparams["stop.env_frames"].number_value == 2048
    assert "vtrace.lr" not in hparams and "checkpoint.interval_s" not in hparams  # what PPO never reads
    records = read_jsonl(run_dir / "metrics.jsonl")
    returns = [r["episode/return_mean"] for r in records if r.get("episode/return_mean") is not None]
    last = {tag: max(summary.Scalars(tag), key=lambda s: s.step).value for tag in summary.Tags()["scalars"]}
    assert last["hparams/return_mean"] == pytest.approx(returns[-1])
    assert last["hparams/return_mean_best"] == pytest.approx(max(returns))
    assert last["hparams/env_frames"] == 4096


def test_weights_and_biases_gets_the_config_every_record_at_its_env_frames_and_a_finish(tmp_path, fake_wandb):
    run_dir = tmp_path / "run"
    overrides = [*SMALL, "log.tensorboard=false", "log.wandb.project=menger-tests", "log.wandb.mode=offline",
                 "log.wandb.tags=[ci,ppo]"]
    api.train("cartpole-ppo", overrides=overrides, run_dir=str(run_dir))

    (kind, kwargs), *rest = fake_wandb.calls
    assert kind == "init"
    assert kwargs["config"] == to_dict(load_experiment("cartpole-ppo", overrides))
    assert kwargs["project"] == "menger-tests" and kwargs["mode"] == "offline" and kwargs["tags"] == ["ci", "ppo"]
    assert kwargs["name"] == "run" and kwargs["dir"] == str(run_dir) and kwargs["resume"] == "allow"
    assert rest[-1] == ("finish",) and all(call[0] == "log" for call in rest[:-1])
    logged = [(step, data) for _, data, step in rest[:-1]]
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [step for step, _ in logged] == [r["step"] for r in records]  # step = time/env_frames, every record
    assert all(step == data["time/env_frames"] for step, data in logged)
    assert logged[-1][1]["learner/updates"] == records[-1]["learner/updates"]

    first_id = kwargs["id"]
    fake_wandb.calls.clear()
    api.resume(run_dir, ["stop.env_frames=4096"])
    (kind, kwargs), *rest = fake_wandb.calls
    assert kwargs["id"] == first_id and kwargs["config"]["stop"]["env_frames"] == 4096  # the same W&B run goes on
    assert rest[-1] == ("finish",) and rest[-2][2] == 4096


def test_weights_and_biases_without_wandb_installed_stops_before_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with pytest.raises(ConfigError, match=r"pip install \"menger-rl\[wandb\]\".*or unset log.wandb.project"):
        api.train("cartpole-ppo", overrides=[*SMALL, "log.wandb.project=p"], run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()

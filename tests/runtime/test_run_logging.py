"""What a run writes for comparing runs: TensorBoard's config text and HParams session, across a train and a
resume."""
import pytest

from menger import api
from menger.logging import read_jsonl

SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=4", "runtime.learner.threads=1",
         "runtime.learner.device=cpu", "checkpoint.interval_s=0", "log.progress=false", "log.interval_s=0.05",
         "stop.target_return=null", "stop.env_frames=2048"]


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

    texts = [(e.step, e.tensor_proto.string_val[0].decode())
             for e in _events(run_dir / "tb").Tensors("config/text_summary")]
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
    assert summary.Scalars("hparams/return_mean")[-1].value == pytest.approx(returns[-1])
    assert summary.Scalars("hparams/return_mean_best")[-1].value == pytest.approx(max(returns))
    assert summary.Scalars("hparams/env_frames")[-1].value == 4096


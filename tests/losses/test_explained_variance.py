"""`learner/explained_variance` is in the metrics of every actor-critic learner (PPO, IMPALA, APPO); with PPO
(sync, so the run is a function of its seed) the value head explains part of the returns after 8k frames."""
import math

import pytest

from menger import api
from menger.logging import read_jsonl

SMALL = ["runtime.launcher=threads", "runtime.actors=1", "runtime.envs_per_actor=8", "runtime.learner.threads=1",
         "runtime.learner.device=cpu", "checkpoint.interval_s=0", "log.tensorboard=false", "log.progress=false",
         "log.interval_s=0.05", "stop.target_return=null", "runtime.seed=1"]


@pytest.mark.parametrize("preset,extra", [
    ("cartpole-ppo", ["stop.env_frames=8192"]),
    ("cartpole-impala", ["stop.env_frames=8192"]),
    ("cartpole-impala", ["algo=appo", "stop.env_frames=8192"]),
], ids=["ppo", "impala", "appo"])
def test_actor_critic_learners_report_explained_variance(tmp_path, preset, extra):
    result = api.train(preset, overrides=[*SMALL, *extra], run_dir=str(tmp_path / "run"))
    reported = [r["learner/explained_variance"] for r in read_jsonl(tmp_path / "run" / "metrics.jsonl")
                if r.get("learner/explained_variance") is not None]
    assert reported, "no metrics record carried learner/explained_variance"
    assert all(math.isfinite(value) and value <= 1.0 for value in reported)
    assert result.final_metrics["learner/explained_variance"] == reported[-1]
    if preset == "cartpole-ppo":
        assert reported[-1] > 0.0

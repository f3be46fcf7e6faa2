"""`env.normalize` on the Ray launcher: every Ray actor's observations count in the learner's statistics."""
from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from ray_harness import SMALL_RAY_RUN  # noqa: E402

from menger import api  # noqa: E402
from menger.checkpoint import CheckpointManager, unflatten_state  # noqa: E402


def test_every_ray_actor_contributes_to_the_running_statistics(cluster, tmp_path):
    actors, updates, frames_per_unroll = 3, 3, 4 * 32
    run = api.train("pendulum-ppo", overrides=[*SMALL_RAY_RUN, f"runtime.actors={actors}", "env.normalize.obs=true",
                                               "env.normalize.reward=true", "stop.target_return=null",
                                               f"stop.env_frames={actors * updates * frames_per_unroll}"],
                    run_dir=str(tmp_path / "run"))
    checkpoint = CheckpointManager(run.run_dir / "checkpoints").load_latest()
    state = unflatten_state(checkpoint.tensors, checkpoint.metadata)
    expected = actors * updates * frames_per_unroll
    assert state["normalization"]["obs"]["count"] == state["normalization"]["ret"]["count"] == expected
    assert state["accounts"]["accepted"] == expected

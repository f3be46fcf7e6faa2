"""Multi-agent envs and self-play on the Ray launcher: Connect Four and the wargame through Ray actors, whose games
reach the league and whose opponents are the league's snapshots."""
from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray")

from ray_harness import SMALL_RAY_RUN  # noqa: E402

from menger import api  # noqa: E402

SELFPLAY = ("league.mode=selfplay", "league.min_snapshot_steps=256", "league.snapshot_steps=512",
            "league.publish_s=0", "model.hidden=[32,32]", "runtime.actors=2")


@pytest.mark.parametrize("preset, rows, frames", [("connect4-selfplay", 8, 4096), ("wargame-mappo", 10, 2560)])
def test_selfplay_on_ray_actors(cluster, tmp_path, preset, rows, frames):
    run = api.train(preset, overrides=[*SMALL_RAY_RUN, *SELFPLAY, f"runtime.envs_per_actor={rows}",
                                       "runtime.unroll_length=16", f"stop.env_frames={frames}",
                                       "stop.wall_clock_s=null"],
                    run_dir=str(tmp_path / "run"))
    state = json.loads((run.run_dir / "league" / "state.json").read_text())
    snapshots = [p for p in state["players"] if p["role"] == "historical"]
    assert snapshots and sum(p["games"] for p in state["players"] if p["name"] == "main_0") > 0
    assert run.final_metrics["league/games"] > 0


def test_a_league_of_three_learners_on_one_ray_session(cluster, tmp_path):
    run = api.train("connect4-league", overrides=[*SMALL_RAY_RUN, *SELFPLAY[1:], "runtime.actors=1",
                                                  "runtime.envs_per_actor=8", "runtime.unroll_length=16",
                                                  "league.fixed_opponents=[random]", "stop.env_frames=1024",
                                                  "stop.wall_clock_s=null"],
                    run_dir=str(tmp_path / "league"))
    state = json.loads((run.run_dir / "league" / "state.json").read_text())
    parents = {p["parent"] for p in state["players"] if p["role"] == "historical"}
    assert parents == {"main_0", "main_exploiter_0", "league_exploiter_0"}
    assert ray.is_initialized()  # the test's cluster: the league joined it and left it running

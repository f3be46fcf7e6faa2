"""Connect Four and the wargame through the threads and processes launchers, in the three training modes (Ray:
tests/ray/test_ray_multiagent.py)."""
from __future__ import annotations

import pytest

from menger import api

TINY = ["model.hidden=[32,32]", "runtime.actors=2", "runtime.unroll_length=16", "log.tensorboard=false",
        "stop.wall_clock_s=null", "league.min_snapshot_steps=256", "league.snapshot_steps=512", "league.publish_s=0"]


@pytest.mark.parametrize("launcher", ["threads", "processes"])
def test_connect_four_selfplay(tmp_path, launcher):
    run = api.train("connect4-selfplay", overrides=[*TINY, f"runtime.launcher={launcher}", "runtime.envs_per_actor=8",
                                                    "stop.env_frames=4096", "league.fixed_opponents=[random]"],
                    run_dir=str(tmp_path / "run"))
    assert run.final_metrics["league/games"] > 100 and run.final_metrics["league/snapshots"] >= 2


@pytest.mark.parametrize("mode", [
    ["env.multiagent.agent_id=true", "model.agents=5"],                     # independent: a network per agent
    ["env.multiagent.agent_id=true", "env.multiagent.critic=local"],        # shared parameters
    ["env.multiagent.agent_id=true", "env.multiagent.critic=state"],        # MAPPO: a centralised critic
], ids=["independent", "shared", "centralised-critic"])
def test_wargame_modes_on_processes(tmp_path, mode):
    run = api.train("wargame-mappo", overrides=[*TINY, *mode, "runtime.launcher=processes",
                                                "runtime.envs_per_actor=10", "stop.env_frames=2560"],
                    run_dir=str(tmp_path / "run"))
    assert run.final_metrics["time/env_frames"] >= 2560 and run.final_metrics["episode/count"] > 0

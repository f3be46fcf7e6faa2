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


def test_the_generic_marl_preset_fits_its_rows_to_whole_games_of_the_env_it_is_given(tmp_path, caplog):
    """40 rows do not divide into games of 3 learned agents: the run rounds them to 39 (13 games) and says so,
    where a named preset's refusal would stop a new user at the first env. The evaluator's 10 episodes become
    12, 4 whole games (they were refused, naming runtime.envs_per_actor)."""
    from menger.api import load_run_config

    run_dir = tmp_path / "run"
    with caplog.at_level("WARNING", logger="menger.trainer"):
        run = api.train("marl", overrides=["env.id=tests.multiagent.fakes:Duel", 'env.multiagent.learn=["red_*","blue_0"]',
                                           "runtime.launcher=threads", "runtime.unroll_length=8", "model.hidden=[16]",
                                           "log.tensorboard=false", "stop.env_frames=1000",
                                           "eval.interval_frames=400", "eval.episodes=10"], run_dir=str(run_dir))
    config = load_run_config(run_dir, allow_import=["tests"])
    assert config.runtime.envs_per_actor == 39 and config.eval.episodes == 12
    assert run.final_metrics["time/env_frames"] >= 1000
    assert run.final_metrics["eval/episodes"] == 12
    assert any("39 rows, 13 games per actor" in r.getMessage() for r in caplog.records)
    assert any("the evaluator plays 4 games, 12 episodes" in r.getMessage() for r in caplog.records)


def test_menger_eval_reports_every_learned_agent_of_whole_games(tmp_path):
    """`menger eval` on a multi-agent run counts an episode per learned agent, as the evaluator does, and plays whole
    games: red_0 dies at step 2, red_1 and blue_0 play the 5 steps, so 4 episodes asked are 2 games, 6 episodes
    of lengths 2, 5, 5 (it reported red_0's alone: 4 episodes of length 2)."""
    from menger.commands.evaluate import evaluate_run

    run_dir = tmp_path / "run"
    api.train("marl", overrides=["env.id=tests.multiagent.fakes:Duel", 'env.multiagent.learn=["red_*","blue_0"]',
                                 "env.kwargs={deaths: {red_0: 2}}", "runtime.actors=1", "runtime.launcher=threads",
                                 "runtime.unroll_length=8", "model.hidden=[16]", "log.tensorboard=false",
                                 "stop.env_frames=300"], run_dir=str(run_dir))
    report = evaluate_run(run_dir, episodes=4, allow_import=["tests"])
    assert report["episodes"] == 6 and report["length_mean"] == 4.0
    assert 0.0 <= report["return_min"] and report["return_max"] <= 3.0  # a reward of 0 or 1 per step, at most 3 of 5


def test_the_generic_marl_preset_learns_every_agent_of_a_game_with_discrete_observations(tmp_path):
    """Rock-paper-scissors: two agents, both learned by one network, each seeing the other's last move as a
    Discrete(4) observation (read one-hot)."""
    run = api.train("marl", overrides=["env.id=pettingzoo.classic.rps_v2:parallel_env", "runtime.launcher=threads",
                                       "runtime.unroll_length=8", "model.hidden=[16]", "log.tensorboard=false",
                                       "stop.env_frames=2000"], run_dir=str(tmp_path / "run"))
    assert run.final_metrics["time/env_frames"] >= 2000 and run.final_metrics["episode/count"] > 0

"""Self-play and the league in the runtime: games reach the payoff table, snapshots are taken and played, a
league of several learners trains each, and a resumed run's league is the one that was saved."""
from __future__ import annotations

import json

import pytest
import yaml

from menger import api
from menger.checkpoint import CheckpointManager, unflatten_state
from menger.cli import main
from menger.runtime import Observer
from menger.runtime.league import LeagueHub

C4 = "pettingzoo.classic.connect_four_v3:env"


def _config(**extra):
    cfg = {"name": "c4", "algo": "ppo",
           "env": {"id": C4, "multiagent": {"swap_seats": True}},
           "model": {"hidden": [32, 32]},
           "runtime": {"launcher": "threads", "actors": 1, "envs_per_actor": 8, "unroll_length": 16, "seed": 3},
           "league": {"mode": "selfplay", "opponent": "latest", "min_snapshot_steps": 256, "snapshot_steps": 512,
                      "publish_s": 0.0},
           "stop": {"env_frames": 2048}, "checkpoint": {"interval_updates": 4},
           "log": {"tensorboard": False, "interval_s": 0.2}}
    for section, values in extra.items():
        cfg[section] = {**cfg.get(section, {}), **values} if isinstance(values, dict) else values
    return cfg


class LeagueAtStart(Observer):
    def __init__(self):
        self.state = None

    def on_start(self, trainer):
        self.state = trainer.league.hub.state()


def test_selfplay_records_games_takes_snapshots_and_plays_them(tmp_path):
    run = tmp_path / "run"
    result = api.train(_config(), run_dir=str(run))
    state = json.loads((run / "league" / "state.json").read_text())
    players = {p["name"]: p for p in state["players"]}
    snapshots = [p for p in players.values() if p["role"] == "historical"]
    assert len(snapshots) >= 2 and all(p["snapshot_key"] for p in snapshots)
    assert sum(p["games"] for p in snapshots) > 50  # the snapshots were played, not only stored
    assert players["main_0"]["games"] > 100
    store = run / "league" / "snapshots"
    assert all((store / f"{p['snapshot_key']}.bin").exists() for p in snapshots)
    table = json.loads((run / "league" / "tables" / "main_0.json").read_text())
    newest = snapshots[-1]
    assert [e["spec"] for e in table["entries"]] == [f"snapshot:{newest['snapshot_key']}"]  # latest

    def draws(seed):  # a run that samples its moves (`menger match --stochastic`) draws them from its own seed
        player = api.run_player(run, seed=seed, deterministic=False)
        return [int(player.act(*_first_observation())) for _ in range(30)]

    assert draws(1) == draws(1) and len(set(draws(1))) > 1 and draws(1) != draws(2)
    assert api.run_player(run).deterministic  # env.multiagent.match_actions: most_likely, the default
    saved = yaml.safe_load((run / "config.yaml").read_text())
    saved["env"]["multiagent"]["match_actions"] = "sampled"  # a run that says it plays as it trained
    (run / "config.yaml").write_text(yaml.safe_dump(saved))
    assert not api.run_player(run).deterministic and api.run_player(run, deterministic=True).deterministic
    assert main(["match", str(run), "--opponent", "random", "--most-likely", "--games", "2"]) == 0
    assert main(["match", str(run), "--opponent", str(run), "--stochastic", "--games", "4"]) == 0
    assert result.final_metrics["league/games"] > 100 and "league/elo" in result.final_metrics


def test_a_resumed_selfplay_run_has_the_league_it_saved(tmp_path):
    run = tmp_path / "run"
    api.train(_config(), run_dir=str(run))
    checkpoint = CheckpointManager(run / "checkpoints").load_latest()
    saved = unflatten_state(checkpoint.tensors, checkpoint.metadata)["league"]
    table_before = json.loads((run / "league" / "tables" / "main_0.json").read_text())["entries"]
    seen = LeagueAtStart()
    api.resume(run, overrides=["stop.env_frames=3072"], observers=[seen])
    assert seen.state["league"] == saved["league"]  # players, payoff, Elo, step counters, the league's generator
    assert seen.state["initial"] == saved["initial"] and seen.state["current"] == saved["current"]
    assert json.loads((run / "league" / "tables" / "main_0.json").read_text())["entries"] != [] and \
        table_before  # the table was written again for the resumed actors


@pytest.mark.slow
def test_a_league_trains_every_learner_and_resumes(tmp_path):
    run = tmp_path / "league"
    cfg = _config(league={"mode": "league", "main_exploiters": 1, "league_exploiters": 1,
                          "fixed_opponents": ["random"], "min_snapshot_steps": 256, "snapshot_steps": 512},
                  stop={"env_frames": 1536})
    api.train(cfg, run_dir=str(run))
    names = sorted(p.name for p in (run / "players").iterdir())
    assert names == ["league_exploiter_0", "main_0", "main_exploiter_0"]
    for name in names:
        assert CheckpointManager(run / "players" / name / "checkpoints").list(), name
    state = json.loads((run / "league" / "state.json").read_text())
    historical = [p for p in state["players"] if p["role"] == "historical"]
    assert {p["parent"] for p in historical} == set(names)  # every learner was snapshotted
    exploiter = [json.loads(line) for line in (run / "players" / "main_exploiter_0" / "metrics.jsonl").open()]
    assert exploiter[-1]["league/resets"] >= 1  # main exploiters go back to their first parameters
    members = len(state["players"])
    saved = json.loads((run / "league" / "hub.json").read_text())
    hub = LeagueHub(api.load_run_config(run).league, tmp_path / "elsewhere", seed=99)
    hub.load_state(saved)  # what `menger resume` does before any learner starts
    assert hub.state() == saved  # payoff, Elo, members and their snapshot keys, step counters, the generator
    api.resume(run, overrides=["stop.env_frames=2560"])
    after = json.loads((run / "league" / "state.json").read_text())
    assert len(after["players"]) > members  # it went on from the saved league, not from an empty one
    player = api.run_player(run, policy="main_exploiter_0")
    assert player.act(*_first_observation()) in range(7)


def _first_observation():
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=0)
    obs, *_ = env.last()
    return obs["observation"], obs["action_mask"]

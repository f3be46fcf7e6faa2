"""The league's state: plain JSON data, and a league resumed from it makes exactly the choices the original makes."""
import json

import numpy as np
import pytest

from menger.league import STATE_FILE, League, LeagueConfig, read_state, write_state

CONFIG = LeagueConfig(mode="league", main_agents=2, main_exploiters=1, league_exploiters=2,
                      fixed_opponents=("bot:random", "alphabeta:2"), min_snapshot_steps=40, snapshot_steps=120)


def drive(league, rounds, seed):
    """A fake runtime: every learner plays its chosen opponents, trains, and is snapshotted when due."""
    games = np.random.default_rng(seed)  # the outcomes of the games, independent of the league's generator
    log = []
    for round_index in range(rounds):
        for player in league.learners():
            opponent = league.choose_opponent(player)
            outcome = float(games.choice([0.0, 0.5, 1.0], p=[0.4, 0.1, 0.5]))
            league.record(player, opponent, outcome)
            league.update_steps(player, league.player(player).steps + int(games.integers(5, 15)))
            log.append((player, opponent, outcome))
            if league.snapshot_due(player):
                log.append(league.snapshot(player, f"{player}-{round_index}"))
    return log


def test_the_state_is_json_and_round_trips_exactly():
    league = League(CONFIG, seed=1)
    drive(league, 60, seed=2)
    state = league.state_dict()
    text = json.dumps(state)
    again = League(CONFIG, seed=999)
    again.load_state_dict(json.loads(text))
    assert again.state_dict() == state
    assert json.dumps(again.state_dict()) == text
    assert any(player.role == "historical" for player in again.players())


def test_a_resumed_league_makes_the_same_choices_as_the_original():
    league = League(CONFIG, seed=1)
    drive(league, 60, seed=2)
    resumed = League(CONFIG, seed=12345)  # another seed: everything must come from the state
    resumed.load_state_dict(json.loads(json.dumps(league.state_dict())))
    original_log, resumed_log = drive(league, 80, seed=3), drive(resumed, 80, seed=3)
    assert original_log == resumed_log
    assert any(len(entry) == 2 for entry in original_log)  # snapshots (with league exploiter resets) were taken
    assert resumed.state_dict() == league.state_dict()


def test_state_files_are_written_whole_and_checked_when_read(tmp_path):
    league = League(CONFIG, seed=1)
    drive(league, 10, seed=2)
    path = write_state(league, tmp_path / STATE_FILE)
    assert path == tmp_path / "league" / "state.json"
    assert read_state(path) == json.loads(json.dumps(league.state_dict()))
    assert [p.name for p in tmp_path.joinpath("league").iterdir()] == ["state.json"]
    with pytest.raises(FileNotFoundError, match="no league state at .*RUN_DIR/league/state.json"):
        read_state(tmp_path / "elsewhere.json")
    with pytest.raises(ValueError, match="saved league is mode 'league', this one 'selfplay'"):
        League(LeagueConfig()).load_state_dict(league.state_dict())

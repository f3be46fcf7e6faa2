"""Snapshot triggers (win rate after the minimum steps, or the step budget), resets, and the config's rules."""
import pytest

from menger.config import ConfigError, from_dict
from menger.league import League, LeagueConfig

STEPS = dict(min_snapshot_steps=100, snapshot_steps=300, payoff_decay=1.0, min_games=1)


def play(league, player, opponent, wins=0, losses=0):
    for outcome, count in ((1, wins), (0, losses)):
        for _ in range(count):
            league.record(player, opponent, outcome)


def test_a_snapshot_needs_the_minimum_steps_and_a_win_rate_above_the_threshold():
    league = League(LeagueConfig(mode="league", fixed_opponents=("bot:random",), **STEPS), seed=0)
    play(league, "main_0", "bot:random", wins=10)
    league.update_steps("main_0", 99)
    assert not league.snapshot_due("main_0")           # 1.0 against everything, but too early
    league.update_steps("main_0", 100)
    assert league.snapshot_due("main_0")
    name, reset = league.snapshot("main_0", "hash-1")
    assert (name, reset) == ("main_0@1", False)         # main agents are never reset
    snapshot = league.player(name)
    assert (snapshot.role, snapshot.parent, snapshot.snapshot_key, snapshot.steps) == \
        ("historical", "main_0", "hash-1", 100)
    assert league.rating(name) == league.rating("main_0")  # a snapshot starts at its learner's Elo
    league.update_steps("main_0", 250)
    assert not league.snapshot_due("main_0")            # 0.5 against main_0@1 (no games yet) is not > 0.7
    play(league, "main_0", "main_0@1", wins=7, losses=3)  # exactly 0.7 is not more than 0.7
    assert not league.snapshot_due("main_0")
    play(league, "main_0", "main_0@1", wins=1)
    assert league.snapshot_due("main_0")                # 8 / 11 > 0.7 against both historical players


def test_the_step_budget_snapshots_whatever_the_win_rates():
    league = League(LeagueConfig(mode="league", fixed_opponents=("bot:random",), **STEPS), seed=0)
    play(league, "main_0", "bot:random", losses=10)
    league.update_steps("main_0", 299)
    assert not league.snapshot_due("main_0")
    league.update_steps("main_0", 300)
    assert league.snapshot_due("main_0")
    league.snapshot("main_0", "k")
    league.update_steps("main_0", 599)                  # the budget counts from the last snapshot
    assert not league.snapshot_due("main_0")
    with pytest.raises(ValueError, match="never go down|>= its last count 599"):
        league.update_steps("main_0", 10)


def test_a_main_exploiter_must_beat_the_main_agents_and_is_always_reset():
    league = League(LeagueConfig(mode="league", main_exploiters=1, fixed_opponents=("bot:random",), **STEPS))
    league.update_steps("main_exploiter_0", 150)
    play(league, "main_exploiter_0", "bot:random", losses=5)  # bots do not count for a main exploiter
    play(league, "main_exploiter_0", "main_0", wins=3, losses=2)
    assert not league.snapshot_due("main_exploiter_0")
    play(league, "main_exploiter_0", "main_0", wins=5)
    assert league.snapshot_due("main_exploiter_0")
    rating_before = league.rating("main_exploiter_0")
    assert rating_before > 1000
    for index in range(1, 6):
        assert league.snapshot("main_exploiter_0", f"k{index}") == (f"main_exploiter_0@{index}", True)
    # the reset learner starts over: its games were played by parameters that no longer exist
    assert league.win_rate("main_exploiter_0", "main_0") == 0.5
    assert league.rating("main_exploiter_0") == 1000 and league.rating("main_exploiter_0@1") == rating_before


def test_a_league_exploiter_is_reset_a_quarter_of_the_time():
    league = League(LeagueConfig(mode="league", league_exploiters=1, **STEPS), seed=11)
    resets = [league.snapshot("league_exploiter_0", f"k{index}")[1] for index in range(4000)]
    assert sum(resets) / len(resets) == pytest.approx(0.25, abs=0.02)
    assert not any(league.snapshot("main_0", f"m{index}")[1] for index in range(20))


def test_selfplay_latest_must_beat_its_newest_snapshot_only():
    league = League(LeagueConfig(mode="selfplay", opponent="latest", **STEPS))
    league.update_steps("main_0", 100)
    assert league.snapshot_due("main_0")                # nothing to beat yet: due at the minimum steps
    league.snapshot("main_0", "k1")
    league.update_steps("main_0", 200)
    league.snapshot("main_0", "k2")
    league.update_steps("main_0", 300)
    play(league, "main_0", "main_0@2", wins=8, losses=2)  # main_0@1 was never played again: 0.5
    assert league.snapshot_due("main_0")


def test_the_config_refuses_what_cannot_work_and_names_the_key():
    with pytest.raises(ConfigError, match="league.mode=selfplay has one main agent and no exploiters"):
        LeagueConfig(mode="selfplay", league_exploiters=2)
    with pytest.raises(ConfigError, match=r"league.main_mix=\[0.5, 0.5, 0.15\]"):
        LeagueConfig(mode="league", main_mix=(0.5, 0.5, 0.15))
    with pytest.raises(ConfigError, match="league.snapshot_steps=10 < league.min_snapshot_steps=20"):
        LeagueConfig(min_snapshot_steps=20, snapshot_steps=10)
    with pytest.raises(ConfigError, match="league.snapshot_win_rate' = 1.5 is out of range"):
        LeagueConfig(snapshot_win_rate=1.5)
    with pytest.raises(ConfigError, match="did you mean 'league.opponent'"):
        from_dict(LeagueConfig, {"oponent": "pfsp"}, path="league")
    cfg = from_dict(LeagueConfig, {"mode": "league", "main_exploiters": 1, "league_exploiters": 2,
                                   "fixed_opponents": ["bot:random"]}, path="league")
    assert [player.name for player in League(cfg).players()] == [
        "main_0", "main_exploiter_0", "league_exploiter_0", "league_exploiter_1", "bot:random"]

"""Each role's opponent table against hand-derived distributions, and choose_opponent's draws against the table.

The payoff here does not decay and counts from the first game (payoff_decay=1, min_games=1), so that win rates
are plain fractions: 3 wins and 1 loss read 0.75.
"""
from collections import Counter

import pytest

from menger.league import League, LeagueConfig
from menger.league.players import remove_monotonic_suffix

EXACT = dict(payoff_decay=1.0, min_games=1)
DRAWS = 20_000


def play(league, player, opponent, wins=0, draws=0, losses=0):
    for outcome, count in ((1, wins), (0.5, draws), (0, losses)):
        for _ in range(count):
            league.record(player, opponent, outcome)


def table(league, player):
    return {row.name: row.weight for row in league.opponents_table(player)}


def assert_draws_follow_the_table(league, player, expected):
    counts = Counter(league.choose_opponent(player) for _ in range(DRAWS))
    assert set(counts) <= set(expected)
    for name, probability in expected.items():
        assert counts[name] / DRAWS == pytest.approx(probability, abs=0.015), (name, counts)


def test_a_main_agent_mixes_pfsp_self_play_and_verification():
    league = League(LeagueConfig(mode="league", main_exploiters=1, league_exploiters=1,
                                 fixed_opponents=("bot:random",), **EXACT), seed=3)
    league.snapshot("main_0", "key-main-1")
    league.snapshot("main_exploiter_0", "key-exploiter-1")
    play(league, "main_0", "bot:random", wins=4)                 # 1.0
    play(league, "main_0", "main_0@1", draws=4)                  # 0.5
    play(league, "main_0", "main_exploiter_0@1", losses=4)       # 0.0: an exploiter snapshot beats it
    # PFSP hard over (bot, main_0@1, main_exploiter_0@1): (0, 0.25, 1) / 1.25 = (0, 0.2, 0.8), share 0.5;
    # self-play: main_0 itself (0.5 > 0.3), share 0.35; verification: the exploiter snapshot it loses to, 0.15
    expected = {"main_0": 0.35, "main_0@1": 0.1, "main_exploiter_0@1": 0.4 + 0.15}
    assert table(league, "main_0") == pytest.approx(expected)
    assert list(table(league, "main_0")) == ["main_0", "main_0@1", "main_exploiter_0@1"]  # league order
    assert_draws_follow_the_table(league, "main_0", expected)


def test_a_main_agent_verifies_its_forgotten_snapshots_and_climbs_a_curriculum():
    league = League(LeagueConfig(mode="league", main_agents=2, **EXACT), seed=4)
    for key in ("a", "b", "c"):
        league.snapshot("main_1", key)
    play(league, "main_0", "main_1", losses=4)          # 0.0 < 0.3: main_1 is too strong to learn from
    play(league, "main_0", "main_1@1", wins=9, losses=1)  # 0.9
    play(league, "main_0", "main_1@2", wins=1, losses=1)  # 0.5
    play(league, "main_0", "main_1@3", wins=4, losses=1)  # 0.8: 0.5 < 0.8, so nothing is cut: all forgotten
    pfsp = {"main_1@1": 0.01 / 0.3, "main_1@2": 0.25 / 0.3, "main_1@3": 0.04 / 0.3}  # hard: 0.01, 0.25, 0.04
    curriculum = {"main_1@1": 0.09 / 0.5, "main_1@2": 0.25 / 0.5, "main_1@3": 0.16 / 0.5}  # var over main_1's
    expected = {name: 0.5 * pfsp[name] for name in pfsp}
    for name in pfsp:  # half of the self-play and verification shares each: against main_0, then main_1
        expected[name] += 0.35 / 2 * curriculum[name] + 0.15 / 2 * pfsp[name]
    expected["main_0"] = 0.35 / 2 + 0.15 / 2  # against itself: 0.5, and it has no snapshots to verify
    assert table(league, "main_0") == pytest.approx(expected)
    assert_draws_follow_the_table(league, "main_0", expected)


def test_remove_monotonic_suffix_keeps_what_ends_at_the_last_rise():
    import numpy as np

    players = ["s1", "s2", "s3", "s4"]
    rates, kept = remove_monotonic_suffix(np.array([0.6, 0.9, 0.8, 0.7]), players)
    assert rates.tolist() == [0.6, 0.9] and kept == ["s1", "s2"]
    rates, kept = remove_monotonic_suffix(np.array([0.9, 0.8, 0.6]), players[:3])
    assert rates.tolist() == [] and kept == []  # each newer snapshot is harder: nothing forgotten


def test_a_main_exploiter_plays_the_main_agent_or_its_snapshots_when_it_is_too_strong():
    league = League(LeagueConfig(mode="league", main_exploiters=1, **EXACT), seed=5)
    league.snapshot("main_0", "k1")
    league.snapshot("main_0", "k2")
    assert table(league, "main_exploiter_0") == {"main_0": 1.0}  # 0.5 before any game
    play(league, "main_exploiter_0", "main_0", losses=5)          # 0.0 < 0.2
    play(league, "main_exploiter_0", "main_0@1", draws=2)         # 0.5: var 0.25
    play(league, "main_exploiter_0", "main_0@2", wins=3, losses=1)  # 0.75: var 0.1875
    expected = {"main_0@1": 0.25 / 0.4375, "main_0@2": 0.1875 / 0.4375}
    assert table(league, "main_exploiter_0") == pytest.approx(expected)
    assert_draws_follow_the_table(league, "main_exploiter_0", expected)
    play(league, "main_exploiter_0", "main_0", wins=2)  # 2 / 7 >= 0.2: the current main agent again
    assert table(league, "main_exploiter_0") == {"main_0": 1.0}


def test_a_league_exploiter_plays_every_historical_player_by_pfsp():
    league = League(LeagueConfig(mode="league", league_exploiters=1, fixed_opponents=("alphabeta:2",), **EXACT),
                    seed=6)
    league.snapshot("main_0", "k1")
    league.snapshot("main_0", "k2")
    play(league, "league_exploiter_0", "alphabeta:2", wins=3)          # 1.0: hard 0
    play(league, "league_exploiter_0", "main_0@1", draws=2)            # 0.5: 0.25
    play(league, "league_exploiter_0", "main_0@2", wins=1, draws=1)    # 0.75: 0.0625
    expected = {"main_0@1": 0.8, "main_0@2": 0.2}
    assert table(league, "league_exploiter_0") == pytest.approx(expected)
    assert_draws_follow_the_table(league, "league_exploiter_0", expected)
    bot = next(row for row in League(LeagueConfig(mode="league", league_exploiters=1,
                                                  fixed_opponents=("alphabeta:2",))).opponents_table(
        "league_exploiter_0"))
    assert (bot.name, bot.snapshot_key, bot.spec, bot.weight) == ("alphabeta:2", None, "alphabeta:2", 1.0)


def test_with_no_historical_player_yet_learners_play_the_current_learners():
    league = League(LeagueConfig(mode="league", main_exploiters=1, league_exploiters=1), seed=0)
    assert table(league, "main_0") == {"main_0": 1.0}
    assert table(league, "main_exploiter_0") == {"main_0": 1.0}
    assert table(league, "league_exploiter_0") == {"main_0": 1.0}
    assert league.opponents_table("main_0")[0].snapshot_key is None  # the learner's current parameters


@pytest.mark.parametrize("opponent", ["latest", "uniform", "pfsp"])
def test_selfplay_plays_itself_until_the_first_snapshot_then_its_snapshots(opponent):
    league = League(LeagueConfig(mode="selfplay", opponent=opponent, **EXACT), seed=7)
    assert table(league, "main_0") == {"main_0": 1.0}
    for key in ("k1", "k2", "k3"):
        league.snapshot("main_0", key)
    play(league, "main_0", "main_0@1", wins=3, losses=1)  # 0.75: hard 0.0625
    play(league, "main_0", "main_0@2", draws=1)           # 0.5: 0.25
    play(league, "main_0", "main_0@3", losses=1)          # 0.0: 1
    expected = {"latest": {"main_0@3": 1.0},
                "uniform": {"main_0@1": 1 / 3, "main_0@2": 1 / 3, "main_0@3": 1 / 3},
                "pfsp": {"main_0@1": 0.0625 / 1.3125, "main_0@2": 0.25 / 1.3125, "main_0@3": 1 / 1.3125}}[opponent]
    assert table(league, "main_0") == pytest.approx(expected)
    assert [row.snapshot_key for row in league.opponents_table("main_0")] == \
        [{"main_0@1": "k1", "main_0@2": "k2", "main_0@3": "k3"}[name] for name in expected]
    assert_draws_follow_the_table(league, "main_0", expected)


def test_only_learners_choose_opponents_and_members_are_checked():
    league = League(LeagueConfig(mode="league", fixed_opponents=("bot:random",)))
    with pytest.raises(ValueError, match="'bot:random' is a fixed player, not a learner"):
        league.choose_opponent("bot:random")
    with pytest.raises(KeyError, match="no league member 'main_9'"):
        league.record("main_9", "main_0", 1)
    with pytest.raises(ValueError, match="already has a member named 'main_0'"):
        league.add_player("main", "main_0")
    with pytest.raises(ValueError, match="selfplay league has one main agent"):
        League(LeagueConfig()).add_player("main_exploiter", "x")


def test_selfplay_gives_the_fixed_opponents_their_share_however_often_they_are_beaten():
    cfg = LeagueConfig(mode="selfplay", opponent="pfsp", pfsp_weighting="linear_capped", fixed_share=0.6,
                       fixed_opponents=("random", "alphabeta:4"), min_snapshot_steps=0, snapshot_steps=1, **EXACT)
    league = League(cfg, seed=0)
    league.update_steps("main_0", 1)
    league.snapshot("main_0", "k1")
    league.update_steps("main_0", 2)
    league.snapshot("main_0", "k2")
    play(league, "main_0", "random", wins=99, losses=1)  # beaten: PFSP alone would all but drop it
    play(league, "main_0", "main_0@1", wins=9, losses=1)
    play(league, "main_0", "main_0@2", wins=5, losses=5)
    assert table(league, "main_0") == pytest.approx({"random": 0.3, "alphabeta:4": 0.3,
                                                     "main_0@1": 0.4 * 0.1 / 0.6, "main_0@2": 0.4 * 0.5 / 0.6})
    plain = League(LeagueConfig(**{**cfg.__dict__, "fixed_share": 0.0}), seed=0)
    assert "random" in table(plain, "main_0")  # without a share the fixed ones are PFSP's like the rest

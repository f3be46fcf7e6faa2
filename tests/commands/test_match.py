"""`menger match` (menger.commands.match): both seats, outcomes, the Wilson interval, who plays, the command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import menger_test_players as players  # tests/ is on the path: the user's own package of these tests
from menger import api
from menger.cli import _parser, main
from menger.envs.connect_four import AlphaBeta, RandomBot
from menger.commands.match import (ImportNotAllowedError, MatchError, MatchResult, RandomPlayer, env_factory, find_seats,
                          make_opponent, play_match, wilson_interval)

CONNECT_FOUR = "pettingzoo.classic.connect_four_v3:env"
HIGH_CARD = "menger_test_players:high_card"
ROOT = Path(__file__).resolve().parents[2]


def test_the_player_takes_each_seat_in_turn_and_both_are_counted():
    result = play_match(lambda: players.HighCard(first_wins=True), players.Fixed(action=0), players.Fixed(action=0),
                        games=6, seed=0)
    assert (result.wins, result.draws, result.losses, result.games) == (3, 0, 3, 6)
    assert result.by_seat == {"player_0": MatchResult(3, 0, 0, 3), "player_1": MatchResult(0, 0, 3, 3)}
    assert result.score == 0.5


def test_outcomes_come_from_the_rewards_or_from_infos():
    strong, weak = players.Fixed(action=2), players.Fixed(action=1)
    by_reward = play_match(players.HighCard, strong, weak, games=4)
    by_info = play_match(lambda: players.HighCard(outcome_only=True), strong, weak, games=4)
    draws = play_match(players.HighCard, strong, players.Fixed(action=2), games=4)
    assert (by_reward.wins, by_info.wins, draws.draws) == (4, 4, 4)
    assert draws.score == 0.5


def test_a_parallel_team_game_gives_the_player_every_agent_of_its_seat():
    assert find_seats(["red_0", "red_1", "blue_0", "blue_1"]) == {"red": ["red_0", "red_1"],
                                                                  "blue": ["blue_0", "blue_1"]}
    assert find_seats(["player_0", "player_1"]) == {"player_0": ["player_0"], "player_1": ["player_1"]}
    player = players.Fixed(action=2)
    result = play_match(players.team_sum, player, players.Fixed(action=1), games=4)
    assert (result.wins, result.games) == (4, 4) and set(result.by_seat) == {"red", "blue"}
    assert len(player.seen) == 8  # two agents a game


def test_reset_is_called_at_every_game_start():
    player = players.FirstLegal()
    play_match(players.HighCard, player, RandomPlayer(0), games=5)
    assert player.resets == 5


def test_a_game_that_never_ends_is_stopped():
    with pytest.raises(MatchError, match="max_turns=50"):
        play_match(lambda: players.HighCard(endless=True), RandomPlayer(0), RandomPlayer(1), games=1, max_turns=50)


def test_the_wilson_interval_matches_the_hand_computed_value():
    # 8 wins of 10, z = 1.96: (0.8 + 0.19208 -+ 1.96 sqrt(0.016 + 0.009604)) / 1.38416 = (0.4902, 0.9433)
    low, high = MatchResult(8, 0, 2, 10).win_rate_interval(z=1.96)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 10, 1.96) == pytest.approx((0.0, 3.8416 / 13.8416))
    result = MatchResult(6, 2, 2, 10)
    assert result.score == 0.7 and result.score_interval() == wilson_interval(7, 10)
    with pytest.raises(ValueError, match="must be the games"):
        MatchResult(1, 1, 1, 4)


def test_connect_four_depth_4_against_random_from_both_seats():
    result = play_match(env_factory(CONNECT_FOUR), AlphaBeta(4, 0), RandomBot(1), games=40, seed=0)
    assert result.wins >= 38 and all(seat.games == 20 for seat in result.by_seat.values())


def test_specs_name_the_env_bots():
    assert isinstance(make_opponent("random", CONNECT_FOUR), RandomPlayer)
    assert make_opponent("alphabeta:2", CONNECT_FOUR).depth == 2
    assert make_opponent("bot:alphabeta:3", CONNECT_FOUR).depth == 3
    assert isinstance(make_opponent("bot:random", CONNECT_FOUR), RandomBot)
    with pytest.raises(MatchError, match="did you mean 'alphabeta'"):
        make_opponent("bot:alphabet", CONNECT_FOUR)
    assert isinstance(make_opponent("bot:first", HIGH_CARD), players.FirstLegal)  # BOTS of the env's own module
    with pytest.raises(MatchError, match=r"no bot 'alphabeta'.*\(menger_test_players.BOTS\): first"):
        make_opponent("alphabeta:2", HIGH_CARD)
    with pytest.raises(MatchError, match="has no bots"):
        make_opponent("bot:first", "pettingzoo.classic.rps_v2:env")
    with pytest.raises(MatchError, match="unknown player"):
        make_opponent("strong", CONNECT_FOUR)


def test_env_bots_play_the_game_the_env_kwargs_make():
    from menger.envs.wargame import parallel_env
    from menger.league.opponents import FixedOpponents

    kwargs = {"observe_planes": False, "team": ["tank", "sniper"], "render_mode": None}
    bot = make_opponent("bot:focus-fire", "menger.envs.wargame:parallel_env", env_kwargs=kwargs)
    game = parallel_env(**kwargs)
    observations, _ = game.reset(seed=0)
    red = observations["red_0"]
    assert game.action_space("red_0").contains(bot.act(red["observation"], red["action_mask"]))
    assert make_opponent("alphabeta:2", CONNECT_FOUR, env_kwargs={"render_mode": None}).depth == 2  # takes none
    fixed = FixedOpponents("bot:focus-fire", "menger.envs.wargame:parallel_env", 0, env_kwargs=kwargs)
    assert fixed.bot.layout.size == len(red["observation"])
    with pytest.raises(ValueError, match="fit this bot's game"):         # one built for the default game refuses
        make_opponent("bot:focus-fire", "menger.envs.wargame:parallel_env").act(red["observation"], red["action_mask"])


def test_a_user_factory_is_imported_only_when_allowed():
    spec = "menger_test_players:Fixed"
    with pytest.raises(ImportNotAllowedError, match="--allow-import menger_test_players"):
        make_opponent(spec, CONNECT_FOUR, seed=7)
    built = make_opponent(spec, CONNECT_FOUR, seed=7, allow_import=["menger_test_players"])
    assert isinstance(built, players.Fixed) and built.seed == 7  # built with seed=
    assert isinstance(make_opponent("menger_test_players:FirstLegal", CONNECT_FOUR,
                                    allow_import=["menger_test_players"]), players.FirstLegal)  # with no arguments
    with pytest.raises(MatchError, match="no act"):
        make_opponent("menger_test_players:NoAct", CONNECT_FOUR, allow_import=["menger_test_players"])


def test_a_run_directory_plays_through_api_run_player(tmp_path, monkeypatch):
    (tmp_path / "config.yaml").write_text(f"env: {{id: '{CONNECT_FOUR}'}}\n")
    with pytest.raises(MatchError, match="cannot be loaded as a player: .* has no checkpoint"):
        make_opponent(str(tmp_path), CONNECT_FOUR)  # a run that has not trained yet
    calls = []
    monkeypatch.setattr(api, "run_player", lambda *args, **kwargs: calls.append((args, kwargs)) or RandomPlayer(0),
                        raising=False)
    assert isinstance(make_opponent(str(tmp_path), CONNECT_FOUR, seed=3, allow_import=["x"], policy="main"),
                      RandomPlayer)
    make_opponent(str(tmp_path), CONNECT_FOUR, seed=4, stochastic=True)
    make_opponent(str(tmp_path), CONNECT_FOUR, seed=5, stochastic=False)
    make_opponent(str(tmp_path), CONNECT_FOUR, seed=6, search=50, rollouts=0.5)
    assert calls == [((str(tmp_path),), {"policy": "main", "allow_import": ("x",), "seed": 3, "deterministic": None,
                                         "search": 0, "rollouts": 0.0}),
                     ((str(tmp_path),), {"policy": None, "allow_import": (), "seed": 4, "deterministic": False,
                                         "search": 0, "rollouts": 0.0}),
                     ((str(tmp_path),), {"policy": None, "allow_import": (), "seed": 5, "deterministic": True,
                                         "search": 0, "rollouts": 0.0}),
                     ((str(tmp_path),), {"policy": None, "allow_import": (), "seed": 6, "deterministic": None,
                                         "search": 50, "rollouts": 0.5})]
    with pytest.raises(MatchError, match="--policy names a policy of a run directory"):
        make_opponent("random", CONNECT_FOUR, policy="main")


def test_the_command_samples_as_the_run_says_unless_told():
    def stochastic(*flags):
        return _parser().parse_args(["match", "RUN", "--opponent", "random", *flags]).stochastic

    assert (stochastic(), stochastic("--stochastic"), stochastic("--most-likely")) == (None, True, False)
    with pytest.raises(SystemExit):  # the two contradict each other
        stochastic("--stochastic", "--most-likely")


def test_the_command_prints_both_seats_and_the_total(capsys):
    assert main(["match", "alphabeta:2", "--env", CONNECT_FOUR, "--opponent", "random", "--games", "6"]) == 0
    out = capsys.readouterr().out
    assert "alphabeta:2 vs random" in out and "95% interval" in out
    assert [line.split()[0] for line in out.splitlines()[2:5]] == ["player_0", "player_1", "total"]


def test_the_command_refuses_a_factory_it_may_not_import(capsys):
    assert main(["match", "random", "--env", CONNECT_FOUR, "--opponent", "menger_test_players:FirstLegal",
                 "--games", "2"]) == 1
    assert "--allow-import menger_test_players" in capsys.readouterr().err
    assert main(["match", "random", "--opponent", "random"]) == 1
    assert "--env ENV_ID" in capsys.readouterr().err


def test_a_run_directory_that_is_not_there_is_named_as_missing_not_taken_for_a_bot(tmp_path, capsys):
    missing = str(tmp_path / "runs" / "nope")
    assert main(["match", missing, "--opponent", "bot:focus-fire", "--games", "2"]) == 1
    err = capsys.readouterr().err
    assert f"no run directory at {missing}" in err and "is a bot" not in err


def test_the_command_line_plays_a_user_factory_and_prints_json():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    done = subprocess.run([sys.executable, "-m", "menger.cli", "match", "alphabeta:1", "--env", CONNECT_FOUR,
                           "--opponent", "menger_test_players:FirstLegal", "--allow-import", "menger_test_players",
                           "--games", "4", "--seed", "3", "--json"], capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["games"] == 4 and report["wins"] + report["draws"] + report["losses"] == 4
    assert set(report["seats"]) == {"player_0", "player_1"} and report["seed"] == 3
    assert 0 <= report["win_rate_interval"][0] <= report["win_rate"] <= report["win_rate_interval"][1] <= 1


def test_pettingzoo_registry_ids_are_played_and_find_their_bots():
    result = play_match(env_factory("classic/connect_four-v3"), make_opponent("alphabeta:2", "classic/connect_four-v3"),
                        RandomPlayer(1), games=4)
    assert result.wins + result.draws + result.losses == 4 and set(result.by_seat) == {"player_0", "player_1"}
    with pytest.raises(MatchError, match="registry has no env 'classic/nope-v1'"):
        env_factory("classic/nope-v1")

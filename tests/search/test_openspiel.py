"""OpenSpiel's MCTS bot as a `menger match` opponent (the openspiel extra), and `--search` on the command line."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from menger.cli import main
from menger.commands import match
from menger.commands.match import MatchError, env_factory, make_opponent, play_match
from menger.extras import MissingExtraError

from .test_mcts import TTT, UniformNetwork

CONNECT_FOUR = "pettingzoo.classic.connect_four_v3:env"


def test_openspiel_mcts_follows_both_games_from_the_observations_and_beats_random():
    pytest.importorskip("pyspiel")
    for env_id, games in ((TTT, 6), (CONNECT_FOUR, 2)):
        bot = make_opponent("openspiel:mcts:200", env_id, seed=0)
        result = play_match(env_factory(env_id), bot, make_opponent("random", env_id, seed=1), games=games, seed=0)
        assert result.losses == 0 and result.wins >= games - 1, env_id
        # its OpenSpiel state followed every move: it ended the last game where the PettingZoo one ended
        assert bot.state.is_terminal()


def test_openspiel_bot_refuses_what_it_cannot_follow():
    pytest.importorskip("pyspiel")
    with pytest.raises(MatchError, match="openspiel:mcts:SIMULATIONS"):
        make_opponent("openspiel:alphazero", TTT)
    with pytest.raises(MatchError, match="Connect Four and Tic-Tac-Toe"):
        make_opponent("openspiel:mcts:10", "pettingzoo.classic.rps_v2:env")
    bot = make_opponent("openspiel:mcts:10", TTT)
    board = np.zeros((3, 3, 2), np.int8)
    board[0, 0, 1] = board[1, 1, 1] = 1  # two opponent pieces appeared at once: a move was missed
    with pytest.raises(ValueError, match="placed 2 pieces"):
        bot.act(board, np.ones(9))


def test_a_missing_openspiel_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspiel", None)
    with pytest.raises(MissingExtraError, match=r"menger-rl\[openspiel\]"):
        make_opponent("openspiel:mcts:10", TTT)


def test_the_command_searches_with_a_run_and_reports_time_per_move(tmp_path, monkeypatch, capsys):
    from menger.search import SearchPlayer

    built = []

    def searching(*args, search=0, rollouts=0.0, seed=0, **kwargs):
        built.append(SearchPlayer(UniformNetwork(), search, rollouts=rollouts, seed=seed))
        return built[-1]

    monkeypatch.setattr(match, "run_player", searching)
    assert main(["match", str(tmp_path), "--env", TTT, "--opponent", "random", "--search", "100", "--games", "4",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["search"] == 100 and report["wins"] + report["draws"] + report["losses"] == 4
    assert report["player_move_s"] > report["opponent_move_s"] > 0
    assert main(["match", str(tmp_path), "--env", TTT, "--opponent", "random", "--search", "50", "--rollouts", "0.5",
                 "--games", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rollouts"] == 0.5 and built[-1].mcts.rollouts == 0.5
    with pytest.raises(SystemExit, match="add --search N"):
        main(["match", str(tmp_path), "--env", TTT, "--opponent", "random", "--rollouts", "0.5"])
    with pytest.raises(SystemExit, match=r"in \[0, 1\]; got 2.0"):
        main(["match", str(tmp_path), "--env", TTT, "--opponent", "random", "--search", "5", "--rollouts", "2"])


def test_openspiel_bot_plays_a_pettingzoo_registry_id():
    pytest.importorskip("pyspiel")
    bot = make_opponent("openspiel:mcts:10", "classic/connect_four-v3", seed=0)
    assert bot.game.get_type().short_name == "connect_four"

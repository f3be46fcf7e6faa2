"""`menger league RUN`: the players by Elo and the payoff heat map, from the state file a run writes."""
import numpy as np

from menger import cli
from menger.league import STATE_FILE, League, LeagueConfig, write_state
from menger.league.report import format_players, payoff_matrix

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def small_league():
    league = League(LeagueConfig(mode="league", main_exploiters=1, fixed_opponents=("bot:random",),
                                 min_games=2), seed=0)
    league.snapshot("main_0", "k1")
    for _ in range(3):
        league.record("main_0", "bot:random", 1)
        league.record("main_exploiter_0", "main_0", 1)
    league.record("main_0", "main_0@1", 0.5)  # one game: under min_games
    return league


def test_the_payoff_matrix_and_the_player_table():
    state = small_league().state_dict()
    names, matrix = payoff_matrix(state)
    assert names == ["main_0", "main_exploiter_0", "bot:random", "main_0@1"]
    assert matrix[0, 2] == 1.0 and matrix[2, 0] == 0.0 and matrix[1, 0] == 1.0
    assert np.isnan(matrix[0, 3]) and np.isnan(matrix[0, 0])  # too few games; the diagonal
    lines = format_players(state).splitlines()
    assert lines[0].split() == ["name", "role", "Elo", "games", "snapshot", "of"]
    assert [line.split()[0] for line in lines[1:]][0] == "main_exploiter_0"  # the best Elo first
    assert lines[-1].split()[0] == "bot:random"
    assert any(line.split()[0] == "main_0@1" and line.split()[-1] == "main_0" for line in lines)


def test_menger_league_prints_the_players_and_writes_the_png(tmp_path, capsys):
    run = tmp_path / "run"
    write_state(small_league(), run / STATE_FILE)
    assert cli.main(["league", str(run)]) == 0
    out = capsys.readouterr().out
    assert "main_exploiter_0" in out and f"payoff: {run / 'league' / 'payoff.png'}" in out
    assert (run / "league" / "payoff.png").read_bytes()[:8] == PNG_MAGIC
    assert cli.main(["league", str(run), "--png", str(tmp_path / "elsewhere.png")]) == 0
    assert (tmp_path / "elsewhere.png").read_bytes()[:8] == PNG_MAGIC


def test_menger_league_on_a_run_without_a_league_says_what_is_missing(tmp_path, capsys):
    assert cli.main(["league", str(tmp_path)]) == 1
    assert "no league state at" in capsys.readouterr().err


def test_a_large_league_shows_its_learners_fixed_opponents_and_newest_snapshots(tmp_path):
    from menger.league.report import _shown, write_payoff_png

    league = small_league()
    for index in range(2, 30):
        league.snapshot("main_0", f"k{index}")
    players = league.state_dict()["players"]
    shown = [players[index]["name"] for index in _shown(players, max_players=6)]
    assert shown == ["main_0", "main_exploiter_0", "bot:random", "main_0@27", "main_0@28", "main_0@29"]
    assert write_payoff_png(league.state_dict(), tmp_path / "p.png", max_players=6).read_bytes()[:8] == PNG_MAGIC

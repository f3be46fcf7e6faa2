"""Connect Four's bitboards are PettingZoo's game move for move: the same observations, masks, seats to move, ends
and outcomes over random games, and the same position read back from an env in the middle of a game."""
from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.classic import connect_four_v3

from menger.search.connect_four import ConnectFourState
from menger.search.games import PettingZooState, search_state


def _same(state: ConnectFourState, env) -> None:
    raw = env.unwrapped
    assert state.to_move() == raw.agent_selection
    assert state.terminal() == any(raw.terminations.values())
    for seat in raw.possible_agents:
        assert state.outcome(seat) == (float(np.sign(raw.rewards[seat])) if state.terminal() else 0.0)
    if not state.terminal():
        ours, theirs = state.observe(), env.observe(raw.agent_selection)
        assert ours["observation"].dtype == theirs["observation"].dtype == np.int8
        assert np.array_equal(ours["observation"], theirs["observation"])
        assert np.array_equal(ours["action_mask"], theirs["action_mask"])
        assert np.array_equal(state.legal(), theirs["action_mask"])


@pytest.mark.parametrize("seed", range(40))
def test_random_games_match_pettingzoo_move_for_move(seed):
    rng = np.random.default_rng(seed)
    env = connect_four_v3.env()
    env.reset(seed=seed)
    state = ConnectFourState.from_env(env)
    _same(state, env)
    while not state.terminal():
        if seed % 4 == 0:  # favour the middle columns: longer games, wins on every line
            weights = np.array([1, 2, 4, 6, 4, 2, 1]) * state.legal()
            move = int(rng.choice(7, p=weights / weights.sum()))
        else:
            move = int(rng.choice(np.flatnonzero(state.legal())))
        child = state.clone()
        child.step(move)
        env.step(move)
        _same(child, env)
        _same(ConnectFourState.from_env(env), env)  # read back from the env: the same position
        state = child


def _both(moves, env=None):
    """The moves played on the bitboards and on PettingZoo's env side by side, compared after each."""
    if env is None:
        env = connect_four_v3.env()
        env.reset()
    state = ConnectFourState.from_env(env)
    for move in moves:
        state.step(move)
        env.step(move)
        _same(state, env)
    return state


def test_wins_on_every_line_and_a_full_board_draw_are_scored_for_both_seats():
    vertical = _both([0, 1, 0, 1, 0, 1, 0])
    horizontal = _both([0, 0, 1, 1, 2, 2, 3])
    rising = _both([0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3])      # (0,0) (1,1) (2,2) (3,3)
    falling = _both([6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3])     # (6,0) (5,1) (4,2) (3,3)
    for state in (vertical, horizontal, rising, falling):
        assert state.terminal() and state.outcome("player_0") == 1.0 and state.outcome("player_1") == -1.0
    second = _both([6, 0, 1, 0, 1, 0, 1, 0])
    assert second.terminal() and second.outcome("player_1") == 1.0 and second.outcome("player_0") == -1.0
    draw = _both([5, 5, 5, 0, 5, 4, 4, 6, 6, 3, 5, 1, 3, 5, 2, 1, 2, 3, 0, 4, 1, 4, 3, 0, 2, 2, 2, 1, 0, 0, 0, 2,
                  1, 6, 1, 3, 4, 4, 3, 6, 6, 6])
    assert draw.terminal() and draw.outcome("player_0") == draw.outcome("player_1") == 0.0
    with pytest.raises(ValueError, match="the game is over"):
        draw.step(6)


def test_no_line_wraps_from_a_columns_top_into_the_next_columns_bottom():
    """player_0 holds column 0's top two cells and column 1's bottom two: four in a row of the board's cells
    counted column by column, not on the board. The seventh bit of each column keeps them apart."""
    env = connect_four_v3.env()
    env.reset()
    board = np.zeros((6, 7), int)  # row 0 the top, as PettingZoo's board
    board[:, 0] = [1, 1, 2, 2, 1, 2]
    board[4:, 1] = [1, 1]
    board[5, 6] = 2
    env.unwrapped.board = board.flatten().tolist()
    state = _both([3], env)  # player_0 to move (four pieces each), and nothing wins
    assert not state.terminal() and state.to_move() == "player_1"


def test_search_gets_bitboards_for_connect_four_and_the_env_state_for_other_games():
    from pettingzoo.classic import tictactoe_v3

    env = connect_four_v3.env()
    env.reset()
    assert isinstance(search_state(env), ConnectFourState)
    ttt = tictactoe_v3.env()
    ttt.reset()
    assert isinstance(search_state(ttt), PettingZooState)
    full = ConnectFourState()
    for _ in range(6):
        full.step(3)
    with pytest.raises(ValueError, match="column 3 cannot be played: it is full"):
        full.step(3)


def test_random_playouts_leave_the_position_and_score_from_the_movers_view():
    rng = np.random.default_rng(0)
    empty = ConnectFourState()
    outcomes = [empty.playout(rng) for _ in range(2000)]
    assert empty.moves == 0 and empty.pieces == [0, 0]
    # random against random: the first seat wins about 56 %, the second about 44 %, draws are rare
    assert 0.03 < float(np.mean(outcomes)) < 0.21 and set(outcomes) <= {-1.0, 0.0, 1.0}
    one_left = _both([5, 5, 5, 0, 5, 4, 4, 6, 6, 3, 5, 1, 3, 5, 2, 1, 2, 3, 0, 4, 1, 4, 3, 0, 2, 2, 2, 1, 0, 0, 0, 2,
                      1, 6, 1, 3, 4, 4, 3, 6, 6])  # the draw above, its last move not yet played
    assert one_left.playout(rng) == 0.0
    last_cell = _both([5, 5, 5, 0, 5, 4, 4, 6, 6, 3, 5, 1, 3, 5, 2, 1, 2, 3, 0, 4, 1, 4, 3, 0, 2, 2, 2, 1, 0, 0, 0, 2,
                       1, 6, 1, 3, 4, 4, 3, 6])  # two cells left in column 6: player_0, then player_1, then a draw
    assert {last_cell.playout(np.random.default_rng(seed)) for seed in range(5)} == {0.0}

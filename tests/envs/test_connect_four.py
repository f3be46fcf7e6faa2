"""Connect Four's bots (menger.envs.connect_four) on PettingZoo's own connect_four_v3."""
from __future__ import annotations

import numpy as np
import pytest

from menger.envs.connect_four import (INFINITY, WIN_SCORE, AlphaBeta, Guard, Opportunist, RandomBot, bitboards,
                                      heuristic, is_win, legal_columns, make_bot)
from menger.commands.match import env_factory, play_match

CONNECT_FOUR = "pettingzoo.classic.connect_four_v3:env"


def board(*cells):
    """A (6, 7, 2) observation from (row, column, plane) cells; row 5 is the bottom, plane 0 the mover's."""
    obs = np.zeros((6, 7, 2), np.int8)
    for row, column, plane in cells:
        obs[row, column, plane] = 1
    return obs


def full_mask(obs):
    return (obs[0].sum(axis=1) == 0).astype(np.int8)


def slow_heuristic(obs) -> int:
    """The window heuristic cell by cell, as the textbook loop writes it."""
    own, opp = obs[:, :, 0], obs[:, :, 1]
    score = 3 * int(own[:, 3].sum())
    for row in range(6):
        for column in range(7):
            for d_row, d_column in ((0, 1), (1, 0), (1, 1), (-1, 1)):
                cells = [(row + k * d_row, column + k * d_column) for k in range(4)]
                if not all(0 <= r < 6 and 0 <= c < 7 for r, c in cells):
                    continue
                mine, theirs = sum(own[r, c] for r, c in cells), sum(opp[r, c] for r, c in cells)
                score += 5 * (mine == 3 and theirs == 0) + 2 * (mine == 2 and theirs == 0)
                score -= 4 * (theirs == 3 and mine == 0)
    return score


def random_positions(count, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        obs, heights = np.zeros((6, 7, 2), np.int8), [0] * 7
        for move in range(int(rng.integers(0, 30))):
            column = int(rng.choice([c for c in range(7) if heights[c] < 6]))
            obs[5 - heights[column], column, move % 2] = 1
            heights[column] += 1
        yield obs


def test_the_bitboard_heuristic_matches_the_window_loop():
    for obs in random_positions(200):
        assert heuristic(*bitboards(obs)) == slow_heuristic(obs)


def test_wins_are_found_in_every_direction():
    assert is_win(bitboards(board(*[(5, c, 0) for c in range(2, 6)]))[0])  # a row
    assert is_win(bitboards(board(*[(r, 6, 0) for r in range(2, 6)]))[0])  # a column
    assert is_win(bitboards(board(*[(5 - k, k, 0) for k in range(4)]))[0])  # a rising diagonal
    assert is_win(bitboards(board(*[(2 + k, k + 3, 0) for k in range(4)]))[0])  # a falling one
    assert not is_win(bitboards(board(*[(5, c, 0) for c in (0, 1, 2, 4)]))[0])
    assert not is_win(bitboards(board((5, 6, 0), (4, 6, 0), (3, 6, 0), (5, 0, 0)))[0])  # no wrap across columns


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_alpha_beta_takes_an_immediate_win(depth):
    # own: three in the bottom row (columns 1-3); opponent stacked in column 6 with a threat of its own
    obs = board((5, 1, 0), (5, 2, 0), (5, 3, 0), (5, 6, 1), (4, 6, 1), (3, 6, 1))
    for seed in range(5):
        assert set(AlphaBeta(depth, seed).best_moves(obs, full_mask(obs))) == {0, 4}
        assert AlphaBeta(depth, seed).act(obs, full_mask(obs)) in (0, 4)


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_alpha_beta_blocks_an_immediate_loss(depth):
    obs = board((5, 0, 1), (4, 0, 1), (3, 0, 1), (5, 3, 0), (5, 4, 0), (4, 3, 0))  # the opponent threatens column 0
    for seed in range(5):
        assert AlphaBeta(depth, seed).act(obs, full_mask(obs)) == 0


def test_an_immediate_win_is_the_only_best_move_at_depth_4():
    # column 3 wins now; every other move, however it scores, is worse
    obs = board((5, 0, 0), (5, 1, 0), (5, 2, 0), (4, 0, 1), (4, 1, 1), (3, 0, 1))
    assert AlphaBeta(4, 0).best_moves(obs, full_mask(obs)) == [3]


def test_bots_follow_the_mask_and_accept_the_whole_observation_dict():
    obs = board()
    mask = np.array([0, 0, 1, 0, 0, 0, 0], np.int8)
    assert RandomBot(0).act(obs, mask) == 2
    assert AlphaBeta(2, 0).act({"observation": obs, "action_mask": mask}) == 2
    assert legal_columns(board(*[(r, 1, r % 2) for r in range(6)])) == [0, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="no legal move"):
        RandomBot(0).act(obs, np.zeros(7, np.int8))


def test_ties_are_broken_by_the_seed_so_games_vary():
    # a full centre column: the board is its own mirror image, so column c and 6 - c always score alike
    obs, mask = board(*[(row, 3, row % 2) for row in range(6)]), np.array([1, 1, 1, 0, 1, 1, 1], np.int8)
    best = AlphaBeta(4, 0).best_moves(obs, mask)
    assert len(best) >= 2 and set(best) == {6 - column for column in best}
    chosen = [AlphaBeta(4, seed).act(obs, mask) for seed in range(20)]
    assert set(chosen) == set(best)  # every equally good move is played by some seed
    assert chosen == [AlphaBeta(4, seed).act(obs, mask) for seed in range(20)]  # and the same one by the same seed


def test_make_bot_reads_names_and_refuses_bad_ones():
    assert isinstance(make_bot("random", 0), RandomBot)
    assert make_bot("alphabeta:3", 0).depth == 3 and make_bot("alphabeta", 0).depth == 4
    with pytest.raises(ValueError, match="did you mean 'alphabeta'"):
        make_bot("alphabet:3")
    with pytest.raises(ValueError, match="whole number"):
        make_bot("alphabeta:deep")
    with pytest.raises(ValueError, match=">= 1"):
        make_bot("alphabeta:0")


def test_the_opportunist_takes_every_four_it_is_left_and_plays_randomly_otherwise():
    # three of its own on the bottom row (columns 1-3) with both ends open: either end wins, and it plays one
    obs = board((5, 1, 0), (5, 2, 0), (5, 3, 0), (4, 1, 1), (4, 2, 1), (4, 3, 1))
    chosen = {Opportunist(seed).act(obs, full_mask(obs)) for seed in range(40)}
    assert chosen == {0, 4}
    # a four of its own that its opponent threatens too: it wins rather than blocks
    obs = board((5, 6, 0), (4, 6, 0), (3, 6, 0), (5, 0, 1), (4, 0, 1), (3, 0, 1))
    assert {Opportunist(seed).act(obs, full_mask(obs)) for seed in range(20)} == {6}
    # nothing to win: any legal column, as random plays, the same by the same seed
    obs, mask = board((5, 3, 0), (4, 3, 1)), np.array([1, 1, 0, 1, 1, 1, 0], np.int8)
    moves = [Opportunist(seed).act(obs, mask) for seed in range(60)]
    assert set(moves) == {0, 1, 3, 4, 5} and moves == [Opportunist(seed).act(obs, mask) for seed in range(60)]
    assert isinstance(make_bot("opportunist", 0), Opportunist)
    with pytest.raises(ValueError, match="takes no argument"):
        make_bot("opportunist:2")


def test_the_opportunist_beats_random_in_most_games():
    result = play_match(env_factory(CONNECT_FOUR), Opportunist(0), RandomBot(1), games=100, seed=0)
    assert result.wins >= 60, result


def test_the_guard_wins_when_it_can_blocks_when_it_must_and_plays_randomly_otherwise():
    # its own three with both ends open, and its opponent's three in column 6: it wins rather than blocks
    obs = board((5, 1, 0), (5, 2, 0), (5, 3, 0), (5, 6, 1), (4, 6, 1), (3, 6, 1))
    assert {Guard(seed).act(obs, full_mask(obs)) for seed in range(40)} == {0, 4}
    # nothing to win, its opponent's three in column 6: it blocks, where the opportunist plays anywhere
    obs = board((5, 1, 0), (5, 2, 0), (5, 6, 1), (4, 6, 1), (3, 6, 1))
    assert {Guard(seed).act(obs, full_mask(obs)) for seed in range(20)} == {6}
    assert len({Opportunist(seed).act(obs, full_mask(obs)) for seed in range(40)}) > 1
    obs, mask = board((5, 3, 0), (4, 3, 1)), np.array([1, 1, 0, 1, 1, 1, 0], np.int8)
    moves = [Guard(seed).act(obs, mask) for seed in range(60)]
    assert set(moves) == {0, 1, 3, 4, 5} and moves == [Guard(seed).act(obs, mask) for seed in range(60)]
    assert isinstance(make_bot("guard", 0), Guard)


def test_the_guard_beats_the_opportunist_which_beats_random():
    result = play_match(env_factory(CONNECT_FOUR), Guard(0), Opportunist(1), games=100, seed=0)
    assert result.wins >= 60, result


def test_depth_4_beats_random_in_95_percent_of_games():
    result = play_match(env_factory(CONNECT_FOUR), AlphaBeta(4, 0), RandomBot(1), games=100, seed=0)
    assert result.wins >= 95, result


def test_depth_4_beats_depth_1_in_a_majority():
    result = play_match(env_factory(CONNECT_FOUR), AlphaBeta(4, 0), AlphaBeta(1, 1), games=40, seed=0)
    assert result.wins > result.games / 2, result
    assert all(seat.games == 20 for seat in result.by_seat.values())


def test_a_forced_win_is_scored_by_how_soon_it_comes():
    # own pieces at the bottom of columns 2 and 3: column 1 or 4 makes an open three the opponent cannot stop
    obs = board((5, 2, 0), (5, 3, 0), (5, 6, 1), (4, 6, 1))
    own, opponent = bitboards(obs)
    bot = AlphaBeta(4, 0)
    assert set(bot.best_moves(obs, full_mask(obs))) == {1, 4}
    open_three = own | (1 << (1 * 7))  # column 1's bottom cell
    assert -bot._negamax(opponent, open_three, 3, -INFINITY, INFINITY, 1) == WIN_SCORE - 2  # won on our next move
    assert -bot._negamax(opponent, open_three, 1, -INFINITY, INFINITY, 3) == WIN_SCORE - 4  # found deeper: less

"""MultiAgentVecEnv: PettingZoo games as the rows of the agents one policy plays (menger.envs.multiagent)."""
from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.classic import connect_four_v3

from menger.envs import make_vec_env
from menger.envs.multiagent import AGENT_KEY, CRITIC_KEY, MASK_KEY, MultiAgentVecEnv, random_legal
from tests.multiagent.fakes import Duel


class CountingOpponents:
    """Plays action 0 for every seat and records each call: (opponent, number of seats)."""

    def __init__(self, names=("a", "b")):
        self.names, self.calls = names, []

    def assign(self, game):
        return self.names[game % len(self.names)]

    def act(self, name, raw, encoded):
        self.calls.append((name, len(raw)))
        return np.zeros(len(raw), np.int64)


def test_connect_four_rows_are_the_learned_seats_and_results_match_the_returns():
    env = MultiAgentVecEnv(connect_four_v3.env, 6, seed=0, learn=("player_0",), swap_seats=True)
    assert env.num_envs == 6 and env.single_action_space.n == 7
    assert set(env.single_observation_space.spaces) == {"observation", MASK_KEY}
    rng = np.random.default_rng(0)
    obs = env.reset()
    returns, ended_scores = np.zeros(6), []
    for _ in range(400):
        assert obs[MASK_KEY].sum(axis=1).min() >= 1  # the learned seat is always to move
        result = env.step(random_legal(obs, rng))
        returns += result.reward
        for i in np.flatnonzero(result.terminated | result.truncated):
            ended_scores.append((returns[i] + 1) / 2)
            returns[i] = 0
        obs = result.obs
    results = env.pop_results()
    assert len(results) == len(ended_scores) > 50
    assert sorted(s for _, s in results) == sorted(ended_scores)  # the score is the row's own return
    assert env.pop_results() == []


def test_swap_seats_plays_both_sides_in_turn():
    env = MultiAgentVecEnv(connect_four_v3.env, 2, seed=0, learn=("player_0",), swap_seats=True)
    env.reset()
    assert [env._learned(g) for g in range(2)] == [("player_0",), ("player_1",)]
    env._episodes[:] += 1
    env._start_game(0, 1)
    assert env._learned(0) == ("player_1",)


def test_an_illegal_move_is_never_asked_of_an_opponent():
    env = MultiAgentVecEnv(connect_four_v3.env, 4, seed=1, swap_seats=True)
    rng = np.random.default_rng(1)
    obs = env.reset()
    for _ in range(300):  # connect_four raises on an illegal move, so random_legal must read the masks
        obs = env.step(random_legal(obs, rng)).obs


def test_opponents_are_asked_once_per_opponent_per_step_across_games():
    opponents = CountingOpponents()
    env = MultiAgentVecEnv(lambda: Duel(max_steps=50), 4, seed=0, learn=("red_*",))
    env.set_opponents(opponents)
    env.reset()
    opponents.calls.clear()
    env.step(np.zeros(8, np.int64))
    assert sorted(opponents.calls) == [("a", 4), ("b", 4)]  # games 0, 2 against a; 1, 3 against b: 2 seats each


def test_a_dead_agent_row_is_invalid_until_its_game_restarts():
    env = MultiAgentVecEnv(lambda: Duel({"red_1": 2}, max_steps=4), 1, seed=0, learn=("red_*",))
    env.reset()
    steps = [env.step(np.ones(2, np.int64)) for _ in range(4)]
    assert steps[1].terminated.tolist() == [False, True]  # red_1 dies at step 2
    assert steps[2].valid.tolist() == [True, False] and steps[2].reward.tolist() == [1.0, 0.0]
    assert steps[3].truncated.tolist() == [True, False]  # the time limit ends the game: a draw
    assert env.pop_results() == [("random", 0.5)]
    assert env.step(np.ones(2, np.int64)).valid.tolist() == [True, True]  # the next game: both back


def test_the_outcome_in_the_infos_scores_the_game_and_an_opponent_side_outcome_is_negated():
    env = MultiAgentVecEnv(lambda: Duel({"blue_0": 1, "blue_1": 1}), 1, seed=0, learn=("red_*",))
    env.reset()
    result = env.step(np.zeros(2, np.int64))
    assert result.truncated.tolist() == [True, True] or result.terminated.tolist() == [True, True]
    assert env.pop_results() == [("random", 1.0)]
    env = MultiAgentVecEnv(lambda: Duel({"red_0": 1, "red_1": 1}), 1, seed=0, learn=("red_*",))
    env.reset()
    env.step(np.zeros(2, np.int64))
    assert env.pop_results() == [("random", 0.0)]


def test_agent_id_and_centralised_critic_entries():
    env = MultiAgentVecEnv(lambda: Duel(max_steps=50), 2, seed=0, learn=("red_*",), agent_id=True, critic="team")
    obs = env.reset()
    assert obs[AGENT_KEY].tolist() == [[1, 0], [0, 1], [1, 0], [0, 1]]
    assert obs[CRITIC_KEY].shape == (4, 6)
    assert obs[CRITIC_KEY][0].tolist() == obs[CRITIC_KEY][1].tolist() == \
        obs["observation"][0].tolist() + obs["observation"][1].tolist()
    state = MultiAgentVecEnv(lambda: Duel(max_steps=50), 2, seed=0, learn=("red_*",), critic="state").reset()
    assert state[CRITIC_KEY].tolist() == [[0, 4]] * 4


def test_masks_come_through_and_reach_the_env():
    env = MultiAgentVecEnv(lambda: Duel(max_steps=50), 1, seed=0, learn=("red_*",))
    obs = env.reset()
    assert obs[MASK_KEY].tolist() == [[1, 1], [1, 1]]
    obs = env.step(np.ones(2, np.int64)).obs
    assert obs[MASK_KEY].tolist() == [[1, 0], [1, 0]]  # odd steps: action 1 is illegal


def test_errors_name_the_fix():
    with pytest.raises(ValueError, match="matches none of"):
        MultiAgentVecEnv(connect_four_v3.env, 1, seed=0, learn=("red_*",))
    with pytest.raises(ValueError, match="turn-based"):
        MultiAgentVecEnv(connect_four_v3.env, 1, seed=0, learn=("player_*",))
    with pytest.raises(ValueError, match="as many agents"):
        MultiAgentVecEnv(lambda: Duel(), 1, seed=0, learn=("red_0",), swap_seats=True)
    with pytest.raises(ValueError, match="multiple of 2"):
        make_vec_env("tests.multiagent.fakes:Duel", 3, seed=0, multiagent=type("M", (), {"learn": ("red_*",)})())


def test_make_vec_env_knows_a_pettingzoo_factory():
    env = make_vec_env("pettingzoo.classic.connect_four_v3:env", 4, seed=0)
    assert isinstance(env, MultiAgentVecEnv) and env.num_envs == 4
    env.close()


def _pieces(obs) -> np.ndarray:
    return obs["observation"].reshape(len(obs["observation"]), -1).sum(axis=1)


def test_a_random_opening_starts_each_game_after_zero_to_n_random_moves_drawn_from_the_seed():
    plain = MultiAgentVecEnv(connect_four_v3.env, 64, seed=3, swap_seats=True).reset()
    assert set(_pieces(plain)) == {0, 1}  # the learner moves first, or after the opponent's one move

    def opened(seed):
        return MultiAgentVecEnv(connect_four_v3.env, 64, seed=seed, swap_seats=True, random_opening=4).reset()

    first = opened(3)
    counts = _pieces(first)
    assert counts.min() == 0 and counts.max() == 5  # 0-4 random plies, then maybe the opponent's move
    assert len(set(counts)) == 6
    assert (first[MASK_KEY].sum(axis=1) >= 1).all()
    np.testing.assert_array_equal(opened(3)["observation"], first["observation"])  # the seed decides the opening
    assert not np.array_equal(opened(4)["observation"], first["observation"])


def test_games_a_long_random_opening_ends_start_again_and_play_on():
    env = MultiAgentVecEnv(connect_four_v3.env, 16, seed=0, swap_seats=True, random_opening=42)
    rng = np.random.default_rng(0)
    obs = env.reset()
    for _ in range(100):
        assert (obs[MASK_KEY].sum(axis=1) >= 1).all()  # every row is a live game with its learner to move
        obs = env.step(random_legal(obs, rng)).obs
    assert len(env.pop_results()) > 16


def test_a_random_opening_is_configured_from_env_multiagent_and_refused_where_it_cannot_apply():
    from menger.experiment import MultiAgentConfig

    env = make_vec_env("pettingzoo.classic.connect_four_v3:env", 4, seed=0,
                       multiagent=MultiAgentConfig(random_opening=3))
    assert env.random_opening == 3
    env.close()
    with pytest.raises(ValueError, match="turn-based"):
        MultiAgentVecEnv(lambda: Duel(), 1, seed=0, learn=("red_*",), random_opening=2)
    with pytest.raises(ValueError, match="turn-based"):  # the wargame's games are stepped as one batch
        make_vec_env("menger.envs.wargame:parallel_env", 10, seed=0,
                     multiagent=MultiAgentConfig(learn=("red_*",), random_opening=2))
    with pytest.raises(ValueError, match=">= 0"):
        MultiAgentVecEnv(connect_four_v3.env, 1, seed=0, random_opening=-1)

"""AlphaZero's self-play games (every seat of each game, rounds of whole games, exact snapshots) and its search
(the games' leaves evaluated together, the same visits as one search at a time)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from pettingzoo.classic import connect_four_v3, rps_v2, tictactoe_v3

from menger.algorithms.alphazero.acting import SearchActions
from menger.algorithms.alphazero.games import SelfPlayGames
from menger.algorithms.alphazero.spec import AlphaZeroConfig
from menger.search import MCTS, PettingZooState


def _uniform(states):
    return np.full((len(states), 9), 1 / 9), np.zeros(len(states))


def test_a_round_holds_whole_games_and_rewards_the_mover_of_the_last_move():
    envs = SelfPlayGames(tictactoe_v3.env, 2, seed=0, round_length=9)
    obs = envs.reset()
    assert obs["observation"].shape == (2, 3, 3, 2) and obs["action_mask"].tolist() == [[1] * 9] * 2
    # game 0: the first player takes the top row (0, 3, 6 in PettingZoo's column-major cells) in five moves;
    # game 1 plays the same four moves, then blocks elsewhere and goes on
    moves = [(0, 0), (1, 1), (3, 3), (4, 4), (6, 2)]
    for t, (a, b) in enumerate(moves):
        result = envs.step(np.array([a, b]))
        assert result.valid.tolist() == [True, True]
        assert result.terminated[0] == (t == 4)
    assert result.reward[0] == 1.0 and envs.live.tolist() == [False, True]
    result = envs.step(np.array([0, 5]))
    assert result.valid.tolist() == [False, True]  # game 0 sits out the round
    assert envs.moves.tolist() == [5, 6]
    for _ in range(3):
        result = envs.step(np.array([0, int(np.flatnonzero(envs._obs["action_mask"][1])[0])]))
    assert envs.step_in_round == 0 and envs.live.all()  # nine steps: a new round, every game from the start
    assert result.obs["action_mask"].tolist() == [[1] * 9] * 2


def test_a_game_still_on_at_the_round_end_is_cut_not_terminated():
    envs = SelfPlayGames(connect_four_v3.env, 1, seed=0, round_length=3)
    envs.reset()
    for t in range(3):
        result = envs.step(np.array([t % 7]))
    assert result.truncated[0] and not result.terminated[0] and result.valid[0]


def _play_randomly(envs, steps, rng):
    out = []
    for _ in range(steps):
        moves = [int(rng.choice(np.flatnonzero(mask))) for mask in envs._obs["action_mask"]]
        result = envs.step(np.array(moves))
        out.append((result.obs["observation"].copy(), result.reward.copy(), result.valid.copy()))
    return out


def test_a_snapshot_restores_every_game_exactly():
    envs = SelfPlayGames(connect_four_v3.env, 3, seed=0, round_length=20)
    envs.reset()
    _play_randomly(envs, 7, np.random.default_rng(0))
    state = envs.get_state()
    expected = _play_randomly(envs, 30, np.random.default_rng(1))  # across games' ends and a new round
    copy = SelfPlayGames(connect_four_v3.env, 3, seed=5, round_length=20)
    copy.reset(seed=5)
    copy.set_state(state)
    for (o1, r1, v1), (o2, r2, v2) in zip(expected, _play_randomly(copy, 30, np.random.default_rng(1))):
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2) and np.array_equal(v1, v2)


def test_a_game_search_cannot_copy_is_refused_naming_those_it_can():
    with pytest.raises(ValueError, match="Connect Four"):
        SelfPlayGames(rps_v2.env, 2, seed=0, round_length=5)


def test_searching_games_together_gives_the_visits_of_searching_them_one_by_one():
    states = []
    for opening in ([], [4], [4, 0, 8]):
        game = tictactoe_v3.env()
        game.reset()
        for move in opening:
            game.step(move)
        states.append(PettingZooState(game))
    calls = []

    def evaluate(leaves):
        calls.append(len(leaves))
        priors = np.stack([np.linspace(1, 2, 9) for _ in leaves])
        return priors / priors.sum(1, keepdims=True), np.array([0.1 * len(s.legal().nonzero()[0]) % 1 for s in leaves])

    mcts = MCTS(evaluate, simulations=30, batch=1)
    together = mcts.search_many(states)
    assert max(calls) == 3  # every game's leaf in one call
    for state, result in zip(states, together):
        alone = mcts.search(state)
        assert np.array_equal(alone.visits, result.visits) and np.array_equal(alone.actions, result.actions)


class _Params:  # the port's parameters: version 0, already in the policy
    def version(self):
        return 0

    def read_into(self, network):
        return 0


def test_the_actors_search_writes_visit_distributions_and_plays_legal_moves():
    from menger.experiment import load_experiment
    from menger.models import build_policy

    config = load_experiment("tictactoe-alphazero", ["alphazero.simulations=8", "alphazero.temperature_moves=2"])
    envs = SelfPlayGames(tictactoe_v3.env, 4, seed=0, round_length=9)
    policy = build_policy(envs.single_observation_space, envs.single_action_space, config.model, config.algo,
                          config.env.normalize)
    source = SearchActions(policy, _Params(), torch.Generator().manual_seed(0), envs=envs, settings=config.alphazero)
    obs = envs.reset()
    for _ in range(9):
        mask = obs["action_mask"].copy()
        out = source.act(obs, None)
        targets = out.extras["search_policy"].numpy()
        live = envs.live.copy()
        assert np.allclose(targets[live].sum(1), 1.0) and not targets[~live].any()
        assert (targets[live][mask[live] == 0] == 0).all()  # visits only on legal moves
        assert all(mask[g, a] for g, a in enumerate(out.action.numpy()) if live[g])
        obs = envs.step(out.action.numpy()).obs


@pytest.mark.parametrize("search", ["gumbel", "puct"])
def test_random_opening_moves_vary_the_games_a_sharp_policy_would_repeat(search):
    """A network sure of one move: without random_moves every Connect Four game opens the same (Gumbel's noise
    is no match for a sharp prior, the visit counts follow it too); with them each of the first temperature_moves
    moves is drawn uniformly with that chance, and later moves are the search's again."""
    from menger.algorithms.alphazero.spec import AlphaZeroConfig

    class Sure(torch.nn.Module):
        def forward(self, obs, state=None):
            logits = torch.full((len(obs["observation"]), 7), -20.0)
            logits[:, 3] = 20.0
            return logits.masked_fill(obs["action_mask"] < 0.5, -1e9), torch.zeros(len(logits)), state

    def openings(random_moves):
        envs = SelfPlayGames(connect_four_v3.env, 32, seed=0, round_length=42)
        settings = AlphaZeroConfig(search=search, simulations=8, temperature_moves=4, random_moves=random_moves,
                                   dirichlet_fraction=0.0)
        source = SearchActions(Sure(), _Params(), torch.Generator().manual_seed(0), envs=envs, settings=settings)
        obs, moves = envs.reset(), []
        for _ in range(6):
            action = source.act(obs, None).action.numpy()
            moves.append(action.copy())
            obs = envs.step(action).obs
        return np.stack(moves, 1)  # [games, moves]

    assert (openings(0.0) == 3).all()
    varied = openings(0.5)
    assert len({tuple(game[:4]) for game in varied}) > 8 and (varied[:, :4] != 3).mean() > 0.25
    assert (varied[:, 4:] == 3).mean() > (varied[:, :4] == 3).mean()

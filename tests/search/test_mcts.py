"""PUCT search: against a slow reference on small trees, the PUCT choice by hand, terminal values from each seat,
batched leaf evaluation, PettingZoo states cloned without touching the game, and search through `menger match`."""
from __future__ import annotations

import math

import numpy as np
import pytest
from pettingzoo.classic import connect_four_v3, tictactoe_v3

from menger.commands.match import MatchError, env_factory, make_opponent, play_match
from menger.search import MCTS, Node, PettingZooState, SearchPlayer, searchable

TTT = "pettingzoo.classic.tictactoe_v3:env"


class Nim:
    """Take 1, 2 or 3 stones (never more than are left); whoever takes the last stone wins. Seats "a" and "b"."""

    def __init__(self, stones: int, mover: str = "a"):
        self.stones, self.mover, self.last = stones, mover, None

    def clone(self):
        copy = Nim(self.stones, self.mover)
        copy.last = self.last
        return copy

    def step(self, action: int) -> None:
        self.stones -= action + 1
        self.last, self.mover = self.mover, "b" if self.mover == "a" else "a"

    def to_move(self):
        return self.mover

    def legal(self):
        return np.array([1 if take + 1 <= self.stones else 0 for take in range(3)])

    def terminal(self):
        return self.stones == 0

    def outcome(self, seat):
        return 1.0 if seat == self.last else -1.0


def fixed_evaluate(states):
    """A deterministic stand-in for a network: priors and values that depend on the position only."""
    priors, values = [], []
    for state in states:
        rng = np.random.default_rng(state.stones * 2 + (state.mover == "b"))
        priors.append(rng.dirichlet(np.ones(3)))
        values.append(rng.uniform(-1, 1))
    return np.array(priors), np.array(values)


def reference_visits(root_state, evaluate, simulations: int, c_puct: float) -> dict[int, int]:
    """Sequential PUCT written the plain way (recursion, dictionaries keyed by the move sequence)."""
    stats: dict[tuple, dict] = {}

    def expand(key, state):
        (prior,), _ = evaluate([state])
        legal = np.flatnonzero(state.legal())
        p = prior[legal] / prior[legal].sum()
        stats[key] = {"actions": list(legal), "P": dict(zip(legal, p)), "N": dict.fromkeys(legal, 0),
                      "W": dict.fromkeys(legal, 0.0)}

    def simulate(key, state) -> float:
        """The value of `state` from the view of its mover, after one simulation through it."""
        node = stats[key]
        total = 1 + sum(node["N"].values())  # the visit that expanded the node counts
        scores = [(node["W"][a] / node["N"][a] if node["N"][a] else 0.0)
                  + c_puct * node["P"][a] * math.sqrt(total) / (1 + node["N"][a]) for a in node["actions"]]
        action = node["actions"][int(np.argmax(scores))]
        child = state.clone()
        child.step(action)
        if child.terminal():
            value = child.outcome(state.to_move())
        elif key + (action,) not in stats:
            expand(key + (action,), child)
            _, (leaf_value,) = evaluate([child])
            value = leaf_value if child.to_move() == state.to_move() else -leaf_value
        else:
            below = simulate(key + (action,), child)
            value = below if child.to_move() == state.to_move() else -below
        node["N"][action] += 1
        node["W"][action] += value
        return value

    expand((), root_state)
    for _ in range(simulations):
        simulate((), root_state)
    return {int(a): n for a, n in stats[()]["N"].items()}


@pytest.mark.parametrize("stones, mover", [(7, "a"), (9, "b"), (12, "a")])
def test_sequential_search_visits_as_the_reference_does(stones, mover):
    result = MCTS(fixed_evaluate, simulations=60, c_puct=1.25, batch=1).search(Nim(stones, mover))
    ours = dict(zip(result.actions.tolist(), result.visits.astype(int).tolist()))
    assert ours == reference_visits(Nim(stones, mover), fixed_evaluate, 60, 1.25)
    assert result.visits.sum() == 60


def test_the_puct_choice_by_hand():
    node = Node("a", np.array([0, 1, 2]), np.array([0.5, 0.3, 0.2]))
    node.visits[:] = [2, 1, 0]
    node.value_sum[:] = [1.0, 0.8, 0.0]
    # Q + 1.25 P sqrt(1 + 3) / (1 + N): 0.5 + 0.4167 = 0.917, 0.8 + 0.375 = 1.175, 0 + 0.5 = 0.5
    assert node.choose(1.25) == 1
    # with a larger constant the prior weighs more: 0.5 + 1.667 = 2.167, 0.8 + 1.5 = 2.3, 2.0
    assert node.choose(5.0) == 1
    node.value_sum[:] = [1.0, -0.5, 0.0]  # action 1 now loses on average: 0.917, -0.125, 0.5
    assert node.choose(1.25) == 0
    # a node no walk has left yet: the visit that expanded it counts, so the first walk follows the prior
    fresh = Node("a", np.array([0, 1, 2]), np.array([0.1, 0.7, 0.2]))
    assert fresh.choose(1.25) == 1


@pytest.mark.parametrize("mover", ["a", "b"])
def test_terminal_values_are_scored_from_the_seat_to_move(mover):
    # two stones: taking both wins at once (+1 on every visit); taking one leaves the last stone to the other seat:
    # the network values that leaf on its first visit, every later visit ends the game there (-1)
    result = MCTS(fixed_evaluate, simulations=30, batch=1).search(Nim(2, mover))
    q, visits = dict(zip(result.actions.tolist(), result.q.tolist())), result.visits
    _, (leaf_value,) = fixed_evaluate([Nim(1, "b" if mover == "a" else "a")])
    assert q[1] == 1.0 and q[0] == pytest.approx((-leaf_value - (visits[0] - 1)) / visits[0])
    assert result.best() == 1
    # five stones: every move but one hands the other seat a position it wins outright; take one to leave four
    result = MCTS(fixed_evaluate, simulations=400, batch=1).search(Nim(5, mover))
    assert result.best() == 0


@pytest.mark.parametrize("mover", ["a", "b"])
def test_the_search_value_is_the_mean_of_the_roots_value_and_every_walks(mover):
    # two stones, 30 walks: each walk taking both is worth +1; the first taking one is the leaf's value negated,
    # every later one -1 (the other seat takes the last stone)
    result = MCTS(fixed_evaluate, simulations=30, batch=1).search(Nim(2, mover))
    _, (root_value,) = fixed_evaluate([Nim(2, mover)])
    _, (leaf_value,) = fixed_evaluate([Nim(1, "b" if mover == "a" else "a")])
    takes_one, takes_both = (int(n) for n in result.visits)
    walks = [1.0] * takes_both + [-leaf_value] + [-1.0] * (takes_one - 1)
    assert result.search_value == pytest.approx((root_value + sum(walks)) / 31)
    assert result.root_value == pytest.approx(root_value)


def test_rollouts_mix_each_new_leafs_playout_into_the_networks_value():
    from menger.search.mcts import playout

    def constant(states):
        return np.full((len(states), 3), 1 / 3), np.full(len(states), 0.3)

    root = Nim(9, "a")
    result = MCTS(constant, simulations=1, batch=1, rollouts=0.5, seed=7).search(root)
    draws = np.random.default_rng(7)
    root_playout = playout(root, draws)  # the root's playout is drawn first, then the one leaf's
    leaf = root.clone()
    leaf.step(int(result.actions[result.visits.argmax()]))
    leaf_playout = playout(leaf, draws)
    assert result.root_value == pytest.approx(0.15 + 0.5 * root_playout)
    assert result.q[result.visits.argmax()] == pytest.approx(-(0.15 + 0.5 * leaf_playout))  # the other seat moves
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        MCTS(constant, rollouts=1.5)
    # playouts alone, with a network that knows nothing: the searches still take Nim's winning move (leave 4)
    assert MCTS(constant, simulations=300, batch=1, rollouts=1.0, seed=0).search(Nim(5, "a")).best() == 0


@pytest.mark.parametrize("batch", [1, 4, 16])
def test_batched_leaves_spend_exactly_the_simulations_and_call_the_network_per_batch(batch):
    calls = []

    def counting(states):
        calls.append(len(states))
        return fixed_evaluate(states)

    result = MCTS(counting, simulations=50, batch=batch).search(Nim(15))
    assert result.visits.sum() == 50
    assert calls[0] == 1 and max(calls[1:]) <= batch  # the root, then up to `batch` leaves a call
    if batch > 1:
        assert len(calls) - 1 < 50  # fewer calls than leaves


def uniform(states):
    n = len(states)
    return np.full((n, len(states[0].legal())), 1.0 / len(states[0].legal())), np.zeros(n)


def tictactoe_after(*moves):
    env = tictactoe_v3.env()
    env.reset(seed=0)
    for move in moves:
        env.step(move)
    return env


@pytest.mark.parametrize("batch", [1, 8])
def test_search_takes_the_win_and_blocks_the_loss_at_tictactoe(batch):
    # X (player_1) has 0 and 1, O has 3 and 4; X to move: 2 wins at once
    assert MCTS(uniform, simulations=200, batch=batch).search(PettingZooState(tictactoe_after(0, 3, 1, 4))).best() == 2
    # X has 0 and 8, O has 4 and 1, X to move: O threatens 1-4-7, X must block at 7
    assert MCTS(uniform, simulations=400, batch=batch).search(PettingZooState(tictactoe_after(0, 4, 8, 1))).best() == 7


def test_a_cloned_state_leaves_the_game_it_came_from_untouched():
    env = connect_four_v3.env()
    env.reset(seed=0)
    env.step(3)
    board, mover = list(env.unwrapped.board), env.agent_selection
    state = PettingZooState(env)
    copy = state.clone()
    for column in (0, 1, 0, 1, 0, 2, 0):  # player_1 stacks column 0 four high and wins
        copy.step(column)
    assert copy.terminal() and copy.outcome("player_1") == 1.0 and copy.outcome("player_0") == -1.0
    assert env.unwrapped.board == board and env.agent_selection == mover and not state.terminal()
    assert state.to_move() == "player_1" and state.legal().tolist() == [1] * 7


def test_games_whose_state_cannot_be_cloned_are_refused_naming_those_that_can():
    from pettingzoo.classic import rps_v2

    env = rps_v2.env()
    env.reset(seed=0)
    assert not searchable(env) and searchable(tictactoe_after())
    with pytest.raises(ValueError, match="Connect Four .*Tic-Tac-Toe"):
        PettingZooState(env)


class UniformNetwork:
    def priors_and_values(self, observations, masks, agents):
        return uniform([_Shape(len(observations[0]["action_mask"]))] * len(observations))

    resets = 0

    def reset(self):
        self.resets += 1


class _Shape:
    def __init__(self, n):
        self.n = n

    def legal(self):
        return np.ones(self.n)


def test_menger_match_hands_a_search_player_the_game_and_it_beats_random():
    network = UniformNetwork()
    player = SearchPlayer(network, simulations=200, batch=1)
    result = play_match(env_factory(TTT), player, make_opponent("random", TTT, seed=1), games=10, seed=0)
    assert result.losses == 0 and result.wins >= 8
    assert network.resets == 10 and player.last.visits.sum() == 200
    with pytest.raises(ValueError, match="pass env="):
        player.act(np.zeros((3, 3, 2)), np.ones(9))
    with pytest.raises(MatchError, match="give a run directory"):
        make_opponent("random", TTT, search=10)


def test_a_run_player_gives_search_the_policy_its_moves_come_from(tmp_path):
    from menger.api import Policy, RunPlayer
    from menger.envs import make_vec_env
    from menger.experiment import load_experiment
    from menger.models import build_policy

    cfg = load_experiment("connect4-selfplay")
    probe = make_vec_env(cfg.env.id, 1, seed=0, kwargs=dict(cfg.env.kwargs), multiagent=cfg.env.multiagent)
    network = build_policy(probe.single_observation_space, probe.single_action_space, cfg.model, cfg.algo,
                           cfg.env.normalize)
    sides = probe.sides
    probe.close()
    player = RunPlayer(Policy(network, cfg), sides)
    env = connect_four_v3.env()
    env.reset(seed=0)
    for column in (0, 0, 0, 0, 0, 0, 3):  # column 0 full
        env.step(column)
    observed = [PettingZooState(env).observe(), env.observe("player_1")]
    priors, values = player.priors_and_values(observed, [None, None], ["player_1", "player_1"])
    assert priors.shape == (2, 7) and values.shape == (2,)
    assert priors[:, 0].max() < 1e-6 and np.allclose(priors.sum(1), 1.0)  # the full column gets nothing
    assert player.act(observed[0]["observation"], observed[0]["action_mask"]) == int(np.argmax(priors[0]))

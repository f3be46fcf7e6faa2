"""Gumbel MuZero's search: mctx's sequential-halving schedule, the improved policy with nothing visited, and the
choices it makes at Tic-Tac-Toe and Nim with few simulations."""
from __future__ import annotations

import numpy as np
import pytest

from menger.search import PettingZooState
from menger.search.gumbel import GumbelSearch, completed_q, considered_visits, improved_policy
from menger.search.mcts import Node
from tests.search.test_mcts import Nim, tictactoe_after, uniform


def test_the_schedule_is_mctx_s_sequential_halving():
    # 4 actions, 16 simulations: two rounds of all four, then the best two share the rest
    assert considered_visits(4, 16) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert considered_visits(1, 5) == [0, 1, 2, 3, 4]
    assert considered_visits(2, 6) == [0, 0, 1, 1, 2, 2]
    assert len(considered_visits(16, 32)) == 32 and considered_visits(16, 32)[:16] == [0] * 16


def test_with_nothing_visited_the_improved_policy_is_the_prior():
    node = Node("a", np.array([0, 2, 5]), np.array([0.5, 0.3, 0.2]), value=0.4)
    assert np.allclose(improved_policy(node), [0.5, 0.3, 0.2])


def test_a_visited_action_that_did_well_gains_probability_over_its_prior():
    node = Node("a", np.array([0, 1]), np.array([0.5, 0.5]), value=0.0)
    node.visits[:] = [2, 2]
    node.value_sum[:] = [1.6, -1.6]  # q = 0.8 and -0.8
    policy = improved_policy(node)
    assert policy[0] > 0.99 and np.isclose(policy.sum(), 1.0)


def _completed_q_by_hand(prior, visits, value_sum, value):
    """mctx's qtransform_completed_by_mix_value written out one action at a time."""
    n = len(prior)
    total = sum(visits)
    q = [value_sum[a] / visits[a] if visits[a] else 0.0 for a in range(n)]
    seen = [a for a in range(n) if visits[a]]
    if seen:
        weighted = sum(prior[a] * q[a] for a in seen) / sum(prior[a] for a in seen)
        mixed = (value + total * weighted) / (total + 1)
    else:
        mixed = value
    completed = [q[a] if visits[a] else mixed for a in range(n)]
    low, high = min(completed), max(completed)
    return [(50 + max(visits)) * 0.1 * (c - low) / max(high - low, 1e-8) for c in completed]


@pytest.mark.parametrize("seed", range(6))
def test_completed_q_is_mctx_s_mixed_value_rescaled(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    node = Node("a", np.arange(n), rng.dirichlet(np.ones(n)), value=float(rng.uniform(-1, 1)))
    node.visits[:] = rng.integers(0, 4, n) * (rng.random(n) < 0.6)
    node.value_sum[:] = node.visits * rng.uniform(-1, 1, n)
    expected = _completed_q_by_hand(node.prior.tolist(), node.visits.tolist(), node.value_sum.tolist(), node.value)
    assert np.allclose(completed_q(node), expected)
    score = np.log(node.prior) + np.array(expected)
    assert np.allclose(improved_policy(node), np.exp(score) / np.exp(score).sum())


@pytest.mark.parametrize("seed", [None, 0, 1])
def test_it_takes_the_win_and_blocks_the_loss_at_tictactoe(seed):
    rng = None if seed is None else np.random.default_rng(seed)
    search = GumbelSearch(uniform, simulations=16)
    win = search.search_many([PettingZooState(tictactoe_after(0, 3, 1, 4))], rng=rng)[0]
    assert win.chosen == 2 and np.isclose(win.improved.sum(), 1.0)
    # with no value to go on, a block shows only once O's reply is searched under each of X's five moves
    block = GumbelSearch(uniform, simulations=100).search_many([PettingZooState(tictactoe_after(0, 4, 8, 1))],
                                                               rng=rng)[0]
    assert block.chosen == 7
    assert block.policy(9)[7] == block.improved.max()  # the target puts the most weight on the block


def test_nim_s_winning_move():
    # 5 stones: taking 1 (action 0) leaves a multiple of 4, a lost position for the other seat
    result = GumbelSearch(uniform, simulations=32, considered=3).search(Nim(5))
    assert result.chosen == 0
    assert result.visits.sum() == 32

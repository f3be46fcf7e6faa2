"""Gumbel MuZero's search (Danihelka et al. 2022, "Policy improvement by planning with Gumbel"), as mctx does it:
a policy improvement that holds with few simulations (16 or 32 a move, where PUCT needs hundreds).

At the root, Gumbel noise g(a) is added to the prior's logits l(a); sequential halving spends the simulations on
the top `considered` actions by g + l, halving them by g + l + sigma(q) until one is left: the action played
(sampling without replacement by the Gumbel-top-k trick, so exploration needs no Dirichlet noise or
temperature). Below the root each walk takes argmax_a pi'(a) - N(a) / (1 + sum N). The policy trained towards
is the improved policy pi' = softmax(l + sigma(completed q)), where an unvisited action's q is the node's mixed
value and sigma(q) = (50 + max_b N(b)) * 0.1 * q after q is rescaled to [0, 1] over the node's actions (mctx's
`qtransform_completed_by_mix_value` defaults).

    search = GumbelSearch(evaluate, simulations=16, considered=16)
    results = search.search_many(states, rng=rng)      # rng=None: no noise (play at full strength)
    results[i].chosen, results[i].policy(num_actions)  # the move, and pi' over every action
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from menger.search.mcts import MCTS, GameState, Node, SearchResult

VISIT_SCALE, VALUE_SCALE = 50.0, 0.1  # mctx's maxvisit_init and value_scale


def considered_visits(considered: int, simulations: int) -> list[int]:
    """Sequential halving's schedule (mctx's `get_sequence_of_considered_visits`): simulation k goes to an action
    with this many visits so far, among those still considered."""
    if considered <= 1:
        return list(range(simulations))
    log2max = int(math.ceil(math.log2(considered)))
    sequence: list[int] = []
    visits = [0] * considered
    remaining = considered
    while len(sequence) < simulations:
        extra = max(1, int(simulations / (log2max * remaining)))
        for _ in range(extra):
            sequence.extend(visits[:remaining])
            for i in range(remaining):
                visits[i] += 1
        remaining = max(2, remaining // 2)
    return sequence[:simulations]


def completed_q(node: Node) -> np.ndarray:
    """sigma(completed q) over the node's actions: visited actions' mean values, unvisited ones the mixed value,
    rescaled to [0, 1], times (50 + max N) * 0.1. (Few numpy calls: it runs at every node of every walk.)"""
    visits = node.visits
    total = float(visits.sum())
    if total == 0.0:  # every q is the node's value: rescaled, all 0
        return np.zeros(len(visits))
    visited = visits > 0
    q = node.value_sum / np.maximum(visits, 1.0)
    weights = np.where(visited, np.maximum(node.prior, 1e-30), 0.0)
    mixed = (node.value + total * float(weights @ q) / float(weights.sum())) / (total + 1.0)
    q = np.where(visited, q, mixed)
    low = q.min()
    return (q - low) * ((VISIT_SCALE + visits.max()) * VALUE_SCALE / max(q.max() - low, 1e-8))


def improved_policy(node: Node) -> np.ndarray:
    """pi' = softmax(log prior + sigma(completed q)) over the node's actions."""
    score = np.log(np.maximum(node.prior, 1e-30)) + completed_q(node)
    score = np.exp(score - score.max())
    return score / score.sum()


class GumbelSearch(MCTS):
    def __init__(self, evaluate, simulations: int = 16, considered: int = 16):
        super().__init__(evaluate, simulations, batch=1)
        if considered < 1:
            raise ValueError(f"considered must be at least 1 action; got {considered}")
        self.considered = considered

    def _choose(self, node: Node) -> int:
        """Below the root: the action whose share of visits lags its improved policy most."""
        return int(np.argmax(improved_policy(node) - node.visits / (1.0 + node.visits.sum())))

    def _search_many(self, states: Sequence[GameState], noise, rng) -> list[SearchResult]:
        priors, values = self._evaluate(states)
        roots = [self._node(state, prior, value) for state, prior, value in zip(states, priors, values)]
        gumbels = [rng.gumbel(size=len(root.actions)) if rng is not None else np.zeros(len(root.actions))
                   for root in roots]
        logits = [np.log(np.maximum(root.prior, 1e-30)) for root in roots]
        schedules = [considered_visits(min(self.considered, len(root.actions)), self.simulations) for root in roots]
        for k in range(self.simulations):
            paths, leaves = [], []
            for root, gumbel, logit, schedule in zip(roots, gumbels, logits, schedules):
                first = _score(root, gumbel, logit, schedule[k])
                path, leaf_state, terminal_value = self._descend(root, first)
                if terminal_value is not None:
                    self._backup(path, terminal_value)
                else:
                    paths.append(path)
                    leaves.append(leaf_state)
            if not leaves:
                continue
            leaf_priors, leaf_values = self._evaluate(leaves)
            for path, leaf_state, leaf_prior, leaf_value in zip(paths, leaves, leaf_priors, leaf_values):
                node, index = path[-1]
                node.children[index] = self._node(leaf_state, leaf_prior, leaf_value)
                self._backup(path, float(leaf_value), leaf_state.to_move())
        out = []
        for root, value, gumbel, logit in zip(roots, values, gumbels, logits):
            q = np.divide(root.value_sum, root.visits, out=np.zeros_like(root.value_sum), where=root.visits > 0)
            chosen = int(root.actions[_score(root, gumbel, logit, root.visits.max())])
            out.append(SearchResult(root.actions, root.visits.copy(), q, float(value), improved_policy(root), chosen))
        return out


def _score(root: Node, gumbel: np.ndarray, logit: np.ndarray, visits: float) -> int:
    """The considered action with `visits` visits and the highest g + l + sigma(q) (an index into its actions)."""
    score = gumbel + logit + completed_q(root)
    considered = root.visits == visits
    return int(np.argmax(np.where(considered, score, -np.inf) if considered.any() else score))

"""Monte-Carlo tree search with a policy-value network (AlphaZero's PUCT), on any turn-based game's state.

A state is anything with the `GameState` methods: it can be cloned and stepped, says whose move it is, which
actions are legal, and when the game is over, each seat's outcome. `evaluate(states)` gives, for a batch of leaf
states, the network's prior over actions and its value in [-1, 1] from the view of the seat to move there.

One simulation walks from the root by PUCT,

    a* = argmax_a  Q(s, a) + c_puct * P(s, a) * sqrt(N(s)) / (1 + N(s, a))

with Q from the view of the seat to move at s (0 for an action not yet tried) and N(s) = 1 + sum_b N(s, b), the
visit that expanded s counted (as mctx and AlphaZero's pseudocode count it at interior nodes: without it, sqrt(0)
would leave every new node's first walk to the first legal action, whatever the prior), expands the leaf it reaches, and
backs its value up the path, negated at each step where the seat to move changes (a game's terminal states
are scored by their outcome, not by the network). `batch` leaves are gathered per network call: a virtual loss
(one visit that lost) on each path sends the next walk elsewhere, and is taken back before the real values are
added. With `batch=1` this is sequential PUCT exactly.
"""
from __future__ import annotations

import gc
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Protocol, Sequence

import numpy as np


class GameState(Protocol):
    """A position of a turn-based game, as search needs it."""

    def clone(self) -> "GameState": ...

    def step(self, action: int) -> None: ...

    def to_move(self) -> Hashable: ...

    def legal(self) -> np.ndarray:
        """A 0/1 mask over the actions."""

    def terminal(self) -> bool: ...

    def outcome(self, seat: Hashable) -> float:
        """The final result for `seat` in [-1, 1], once `terminal()`."""


Evaluate = Callable[[Sequence[GameState]], tuple[np.ndarray, np.ndarray]]  # -> priors [n, A], values [n]


@dataclass
class Node:
    """A state in the tree: the seat to move, the prior and statistics of each legal action, its children."""

    seat: Hashable
    actions: np.ndarray           # the legal actions
    prior: np.ndarray             # P(s, a) over `actions`, summing to 1
    visits: np.ndarray = field(init=False)   # N(s, a)
    value_sum: np.ndarray = field(init=False)  # W(s, a), from `seat`'s view
    children: dict = field(default_factory=dict)  # index into actions -> Node, or a terminal value (float)
    state: Any = None             # the position, so a walk clones and steps once, from its leaf's parent
    value: float = 0.0            # the network's value of the position, from `seat`'s view

    def __post_init__(self):
        self.visits = np.zeros(len(self.actions))
        self.value_sum = np.zeros(len(self.actions))

    def choose(self, c_puct: float) -> int:
        """The PUCT choice (an index into `actions`); ties go to the first, as argmax takes them. N(s) counts the
        visit that expanded this node: a new node's first walk follows the prior."""
        total = 1.0 + self.visits.sum()
        q = np.divide(self.value_sum, self.visits, out=np.zeros_like(self.value_sum), where=self.visits > 0)
        u = c_puct * self.prior * math.sqrt(total) / (1.0 + self.visits)
        return int(np.argmax(q + u))


@dataclass
class SearchResult:
    """The root's legal actions, their visit counts and mean values (root seat's view), and the root value."""

    actions: np.ndarray
    visits: np.ndarray
    q: np.ndarray
    root_value: float
    improved: np.ndarray | None = None  # Gumbel search: its improved policy over `actions`
    chosen: int | None = None           # Gumbel search: the action sequential halving chose

    def policy(self, num_actions: int) -> np.ndarray:
        """The search's policy over all `num_actions` actions, what AlphaZero trains towards: the visit
        distribution, or a Gumbel search's improved policy."""
        out = np.zeros(num_actions)
        out[self.actions] = self.visits / self.visits.sum() if self.improved is None else self.improved
        return out

    @property
    def search_value(self) -> float:
        """The root's value after the search, its seat's view: the mean of the network's value at the root and
        every walk's backed-up value, (v + sum_a N(a) Q(a)) / (1 + sum_a N(a))."""
        return float((self.root_value + (self.visits * self.q).sum()) / (1.0 + self.visits.sum()))

    def best(self) -> int:
        """The most visited action (ties: the higher mean value, then the first)."""
        top = np.flatnonzero(self.visits == self.visits.max())
        return int(self.actions[top[np.argmax(self.q[top])]])


def playout(state: GameState, rng: np.random.Generator) -> float:
    """The outcome of one game played on from `state` by uniformly random legal moves, from the view of the seat
    to move at `state` (a game state may bring a faster `playout(rng)` of its own)."""
    own = getattr(state, "playout", None)
    if own is not None:
        return own(rng)
    seat, game = state.to_move(), state.clone()
    while not game.terminal():
        legal = np.flatnonzero(game.legal())
        game.step(int(legal[rng.integers(len(legal))]))
    return game.outcome(seat)


class MCTS:
    """`rollouts` in [0, 1]: each new leaf's value is (1 - rollouts) v + rollouts z, v the network's and z a
    random playout's outcome from the leaf (AlphaGo's mixed evaluation, its lambda; 0: the network's alone, as
    AlphaZero), the playouts drawn from a generator seeded by `seed`."""

    def __init__(self, evaluate: Evaluate, simulations: int = 100, c_puct: float = 1.25, batch: int = 8,
                 virtual_loss: float = 1.0, rollouts: float = 0.0, seed: int | None = None):
        if simulations < 1 or batch < 1:
            raise ValueError(f"simulations ({simulations}) and batch ({batch}) must be at least 1")
        if not 0.0 <= rollouts <= 1.0:
            raise ValueError(f"rollouts is the playouts' weight in a leaf's value, in [0, 1]; got {rollouts}")
        self.evaluate, self.simulations, self.c_puct = evaluate, simulations, c_puct
        self.batch, self.virtual_loss = batch, virtual_loss
        self.rollouts, self.playout_rng = float(rollouts), np.random.default_rng(seed)

    def _evaluate(self, states: Sequence[GameState]) -> tuple[np.ndarray, np.ndarray]:
        """`evaluate`, with the playouts' outcomes mixed into the values when `rollouts` is set."""
        priors, values = self.evaluate(states)
        if self.rollouts:
            outcomes = np.array([playout(state, self.playout_rng) for state in states])
            values = (1.0 - self.rollouts) * np.asarray(values, dtype=np.float64) + self.rollouts * outcomes
        return priors, values

    def search(self, state: GameState) -> SearchResult:
        return self.search_many([state])[0]

    def search_many(self, states: Sequence[GameState], *, noise: tuple[float, float] | None = None,
                    rng: np.random.Generator | None = None) -> list[SearchResult]:
        """One search from each of `states` (games played side by side), their leaves evaluated together: each
        round walks `batch` times from every root and makes one `evaluate` call for all the leaves reached.
        `noise` = (alpha, fraction): AlphaZero's exploration at the roots, P = (1 - fraction) P + fraction
        Dirichlet(alpha), drawn from `rng`."""
        if any(state.terminal() for state in states):
            raise ValueError("the game is over: there is no move to search for")
        collecting = gc.isenabled()  # the trees hold thousands of objects and no cycles (refcounts free them):
        gc.disable()                 # the cyclic collector would walk them again at every few hundred new ones
        try:
            return self._search_many(states, noise, rng)
        finally:
            if collecting:
                gc.enable()

    def _search_many(self, states, noise, rng) -> list[SearchResult]:
        priors, values = self._evaluate(states)
        roots = [self._node(state, prior, value) for state, prior, value in zip(states, priors, values)]
        if noise is not None:
            alpha, fraction = noise
            rng = rng if rng is not None else np.random.default_rng()
            for root in roots:
                root.prior = (1.0 - fraction) * root.prior + fraction * rng.dirichlet(np.full(len(root.actions), alpha))
        done = 0
        while done < self.simulations:
            paths, leaves = [], []
            walks = min(self.batch, self.simulations - done)
            for _ in range(walks):
                for root in roots:
                    path, leaf_state, terminal_value = self._descend(root)
                    if terminal_value is not None:  # a game end: its outcome, no network call
                        self._backup(path, terminal_value)
                    else:
                        self._apply_virtual_loss(path)
                        paths.append(path)
                        leaves.append(leaf_state)
            done += walks
            if not leaves:
                continue
            leaf_priors, leaf_values = self._evaluate(leaves)
            for path, leaf_state, leaf_prior, leaf_value in zip(paths, leaves, leaf_priors, leaf_values):
                self._apply_virtual_loss(path, undo=True)
                node, index = path[-1]
                if index not in node.children:  # two walks of one batch may reach the same new leaf: one node
                    node.children[index] = self._node(leaf_state, leaf_prior, leaf_value)
                self._backup(path, float(leaf_value), leaf_state.to_move())
        out = []
        for root, value in zip(roots, values):
            q = np.divide(root.value_sum, root.visits, out=np.zeros_like(root.value_sum), where=root.visits > 0)
            out.append(SearchResult(root.actions, root.visits.copy(), q, float(value)))
        return out

    # ----- internals ----------------------------------------------------------------------------------------
    @staticmethod
    def _node(state: GameState, prior: np.ndarray, value: float = 0.0) -> Node:
        actions = np.flatnonzero(np.asarray(state.legal()))
        p = np.asarray(prior, dtype=np.float64)[actions]
        p = p / p.sum() if p.sum() > 0 else np.full(len(actions), 1.0 / len(actions))
        return Node(state.to_move(), actions, p, state=state, value=float(value))

    def _choose(self, node: Node) -> int:
        """The action a walk takes at `node` (an index into its actions): PUCT."""
        return node.choose(self.c_puct)

    def _descend(self, root: Node, first: int | None = None):
        """Walk from the root to a new leaf or a game end: (path of (node, index)), the leaf's state (None at a
        game end), and the terminal value from the view of the last node's seat when the walk ended the game.
        `first`: the root's action, chosen by the caller. Only the last step is played: from a clone of the
        position its node keeps."""
        node, path = root, []
        while True:
            index = first if first is not None and not path else self._choose(node)
            path.append((node, index))
            child = node.children.get(index)
            if isinstance(child, Node):
                node = child
                continue
            if child is not None:  # a game end found before: its outcome
                return path, None, child
            walker = node.state.clone()
            walker.step(int(node.actions[index]))
            if walker.terminal():
                outcome = walker.outcome(node.seat)
                node.children[index] = outcome
                return path, None, outcome
            return path, walker, None

    def _backup(self, path, value: float, leaf_seat=None) -> None:
        """Add `value` up the path. It is from `leaf_seat`'s view (None: from the last node's seat's view, as a
        terminal outcome is); it changes sign wherever the seat to move differs."""
        seat = path[-1][0].seat if leaf_seat is None else leaf_seat
        for node, index in reversed(path):
            if node.seat != seat:
                value, seat = -value, node.seat
            node.visits[index] += 1
            node.value_sum[index] += value

    def _apply_virtual_loss(self, path, undo: bool = False) -> None:
        sign = -1.0 if undo else 1.0
        for node, index in path:
            node.visits[index] += sign
            node.value_sum[index] -= sign * self.virtual_loss

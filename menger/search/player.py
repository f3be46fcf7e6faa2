"""A policy-value network that plays through search (`menger match RUN --search N`).

    player = SearchPlayer(menger.api.run_player(RUN), simulations=400)   # or run_player(RUN, search=400)
    player = SearchPlayer(network, 400, rollouts=0.5, seed=0)  # leaves valued half by random playouts (AlphaGo)
    action = player.act(observation, action_mask, env=env)   # env: the live AEC env, cloned, never stepped

The network is anything with `priors_and_values(observations, action_masks, agents) -> (priors [n, A], values
[n])` (`menger.api.RunPlayer` has it): the prior and value of the agent to move, in PettingZoo's observation
format. `last` keeps the last search (visit counts, values).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from menger.search.games import search_state
from menger.search.mcts import MCTS, SearchResult


class SearchPlayer:
    def __init__(self, network: Any, simulations: int, c_puct: float = 1.25, batch: int = 8, rollouts: float = 0.0,
                 seed: int | None = 0):
        self.network = network
        self.mcts = MCTS(self._evaluate, simulations, c_puct, batch, rollouts=rollouts, seed=seed)
        self.last: SearchResult | None = None

    def act(self, observation: Any, action_mask: Any = None, env: Any = None) -> int:
        if env is None:
            raise ValueError("search plays on the game's own state: pass env= (menger match does), the AEC env "
                             "whose position it is")
        self.last = self.mcts.search(search_state(env))
        return self.last.best()

    def reset(self) -> None:
        if callable(getattr(self.network, "reset", None)):
            self.network.reset()

    def _evaluate(self, states: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """`states` are the positions of `act`'s search (`menger.search.games.search_state`)."""
        observed = [state.observe() for state in states]
        return self.network.priors_and_values(observed, [None] * len(states), [s.to_move() for s in states])

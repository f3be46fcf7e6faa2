"""How AlphaZero's actors choose their moves: a search from every live game's position, the games' leaves
evaluated together on the actor's cached parameters (`Actor`'s `action_source`)::

    source = SearchActions(policy, params, generator, envs=SelfPlayGames(...), settings=config.alphazero)
    version = source.refresh()               # the newest parameters, copied only when their version moved
    out = source.act(obs, None)              # one move per live game; out.extras: the search's policies
                                             # ("search_policy") and values ("search_value") it trains towards

Each move: `simulations` walks from the root of every live game, one network call per round of walks across the
games. With `search: puct`, PUCT with Dirichlet noise on the roots' priors, then a move drawn from the visit
distribution for the first `temperature_moves` moves of a game (openings vary), the most visited one after; the
target is the visit distribution. With `search: gumbel` (`menger.search.gumbel`), sequential halving over the
top `considered` actions by Gumbel noise plus logits chooses the move, and the target is the improved policy.
With `random_moves: p`, each of a game's first `temperature_moves` moves is, with chance p, a legal move drawn
uniformly instead (its position still searched and written with the search's policy). Every draw comes from the
actor's torch generator, so an actor's snapshot holds its search's randomness and a resumed run plays the same
moves.
"""
from __future__ import annotations

import numpy as np
import torch

from menger.envs.multiagent import MASK_KEY, OBS_KEY
from menger.inference.source import LocalActions
from menger.models.policy import ActOutput
from menger.search.games import search_state
from menger.search.gumbel import GumbelSearch
from menger.search.mcts import MCTS


class SearchActions:
    def __init__(self, policy, params, generator: torch.Generator, *, envs, settings):
        self.local = LocalActions(policy, params, generator)
        self.policy, self.generator, self.envs, self.settings = policy, generator, envs, settings
        self.num_actions = int(envs.single_action_space.n)
        if settings.search == "gumbel":
            self.mcts = GumbelSearch(self.evaluate, settings.simulations, settings.considered)
        else:
            self.mcts = MCTS(self.evaluate, settings.simulations, settings.c_puct, batch=settings.search_batch)

    def refresh(self) -> int:
        return self.local.refresh()

    def act(self, obs, state: torch.Tensor | None) -> ActOutput:
        envs, cfg = self.envs, self.settings
        rows = envs.num_envs
        action = np.zeros(rows, np.int64)
        logp = np.zeros(rows, np.float32)
        value = np.zeros(rows, np.float32)
        targets = np.zeros((rows, self.num_actions), np.float32)
        searched = np.zeros(rows, np.float32)
        live = np.flatnonzero(envs.live)
        if live.size:
            rng = np.random.default_rng(int(torch.randint(2 ** 62, (1,), generator=self.generator)))
            noise = (cfg.dirichlet_alpha, cfg.dirichlet_fraction) if cfg.dirichlet_fraction > 0 and \
                cfg.search == "puct" else None
            results = self.mcts.search_many([search_state(envs.games[g]) for g in live], noise=noise, rng=rng)
            for g, result in zip(live, results):
                policy = result.policy(self.num_actions)
                opening = envs.moves[g] < cfg.temperature_moves
                if opening and cfg.random_moves and rng.random() < cfg.random_moves:  # an opening off the policy
                    a = int(rng.choice(result.actions))
                elif result.chosen is not None:  # Gumbel: sequential halving's choice, explored by its noise
                    a = result.chosen
                elif opening:
                    a = int(rng.choice(self.num_actions, p=policy))
                else:
                    a = result.best()
                action[g], logp[g], value[g], targets[g] = a, np.log(max(policy[a], 1e-30)), result.root_value, policy
                searched[g] = result.search_value
        return ActOutput(torch.from_numpy(action), torch.from_numpy(logp), state, torch.from_numpy(value),
                         extras={"search_policy": torch.from_numpy(targets),
                                 "search_value": torch.from_numpy(searched)})

    @torch.no_grad()
    def evaluate(self, states) -> tuple[np.ndarray, np.ndarray]:
        """The network's prior (a masked softmax) and value, clipped to the outcomes' range, for a batch of
        positions (`search_state`s): the leaves of every game's search at once."""
        observed = [state.observe() for state in states]
        obs = {OBS_KEY: torch.from_numpy(np.stack([o[OBS_KEY] for o in observed])).float(),
               MASK_KEY: torch.from_numpy(np.stack([o[MASK_KEY] for o in observed])).float()}
        logits, values, _ = self.policy(obs)
        return torch.softmax(logits.float(), -1).numpy(), values.float().clamp(-1.0, 1.0).numpy()

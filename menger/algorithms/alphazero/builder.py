"""AlphaZero's learner, its actors' self-play games and the search they act with."""
from __future__ import annotations

import functools

from menger.algorithms.alphazero.acting import SearchActions
from menger.algorithms.alphazero.games import SelfPlayGames
from menger.algorithms.alphazero.learning import AlphaZeroLearner
from menger.algorithms.builders import learner_kwargs


def make_learner(config, policy, device) -> AlphaZeroLearner:
    return AlphaZeroLearner(policy, config.alphazero, **learner_kwargs(config, device))


def make_envs(config, seed: int) -> SelfPlayGames:
    from menger.envs.make import resolve_env

    _, factory = resolve_env(config.env.id)
    return SelfPlayGames(functools.partial(factory, **dict(config.env.kwargs)), config.runtime.envs_per_actor,
                         seed=seed, round_length=config.runtime.unroll_length, env_id=config.env.id)


def actor_parts(config, policy, *, actor_id: int, incarnation: int, restore, envs) -> dict:
    return {"action_source": functools.partial(SearchActions, envs=envs, settings=config.alphazero)}

"""Building an actor: its envs, its algorithm's network and actor parts, its action source and its opponents.

The runtime hands `make_actor` to the transport with the actor's keywords (`build` in `Transport.start_actor`),
so the role packages below never build each other: the transport places a thread, a process or a Ray actor and
calls `build(port=..., **kwargs)` there.
"""
from __future__ import annotations

from menger.actors import Actor
from menger.core import ActorPort
from menger.models import build_policy
from menger.models.normalize import UnrollMoments
from menger.registry import actor_envs, actor_parts


def make_actor(actor_id: int, incarnation: int, config, port: ActorPort, seed: int,
               restore: dict | None = None, inference=None, league: tuple[str, str] | None = None) -> Actor:
    """Build an actor's envs and policy from the experiment (the caller closes `actor.envs`).

    `inference`: a central service's client (`actions_for(actor_id, params) -> ActionSource`, from the service's
    `actor_kwargs`); None acts locally on the port's parameters. `league`: (table path, snapshot directory) of
    a multi-agent run's league on this host, whose table chooses the opponents; None: `env.multiagent.opponent`.
    """
    from menger.envs import make_vec_env

    envs = actor_envs(config, seed)  # an algorithm's own (alphazero), else the experiment's env
    if envs is None:
        envs = make_vec_env(config.env.id, config.runtime.envs_per_actor, seed=seed, kwargs=dict(config.env.kwargs),
                            preset=config.env.preset, nonfinite=config.env.nonfinite,
                            num_threads=config.env.num_threads, next_step_autoreset=config.coordination == "replay",
                            wrappers=config.env.wrappers, multiagent=config.env.multiagent,
                            info_keys=config.env.info_keys)
    try:
        policy = build_policy(envs.single_observation_space, envs.single_action_space, config.model, config.algo,
                              config.env.normalize)
        policy.eval()
        if hasattr(envs, "set_opponents"):
            envs.set_opponents(_opponents(config, envs, league, seed))
        parts = actor_parts(config, policy, actor_id=actor_id, incarnation=incarnation, restore=restore, envs=envs)
        actions = None if inference is None else inference.actions_for(actor_id, port.params)
        normalize = config.env.normalize
        moments = UnrollMoments(normalize, config.normalize_gamma, envs.num_envs) if normalize.active else None
        return Actor(actor_id, incarnation, envs, policy, port, unroll_length=config.runtime.unroll_length,
                     seed=seed, restore=restore, actions=actions, moments=moments, **parts)
    except BaseException:
        envs.close()
        raise


def _opponents(config, envs, league: tuple[str, str] | None, seed: int):
    """Who plays the agents the policy does not: the league's table, or one fixed opponent."""
    from menger.league.opponents import FixedOpponents, TableOpponents
    from menger.league.snapshots import SnapshotStore

    template = build_policy(envs.single_observation_space, envs.single_action_space, config.model, config.algo,
                            config.env.normalize)  # the frozen players' network: parameters come from snapshots
    template.eval()
    if league is None:
        return FixedOpponents(config.env.multiagent.opponent, config.env.id, seed, template, dict(config.env.kwargs))
    table, snapshots = league
    return TableOpponents(table, SnapshotStore(snapshots), template, config.env.id, seed + 1, dict(config.env.kwargs))

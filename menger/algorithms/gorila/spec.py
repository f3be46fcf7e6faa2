"""GORILA (Nair et al. 2015): Ape-X's actors and replay; several DQN learner processes push gradients to a
sharded parameter server."""
from __future__ import annotations

from dataclasses import dataclass

from menger.algorithms import Algorithm
from menger.algorithms.apex.spec import ApexConfig, q_network, replay_values


@dataclass(frozen=True)
class GorilaConfig(ApexConfig):
    """GORILA (Nair et al. 2015): Ape-X's actors and replay, and `runtime.learner.count` DQN learners that each
    sample the replay, compute the gradient of Ape-X's loss on the parameters they last fetched, and push it to the
    sharded parameter server (`runtime.parameter_server`). `target_update_interval` counts the server's steps."""

def _problems(config) -> list[str]:
    problems = []
    if config.learner_mode != "parameter_server":
        problems.append(f"runtime.learner.mode={config.runtime.learner.mode} with algo gorila: its learners push "
                        "gradients to a parameter server; leave runtime.learner.mode at auto (or train apex, whose "
                        "one learner steps by itself)")
    if config.replay.lockstep:
        problems.append("replay.lockstep with algo gorila: its learners sample and push at their own pace, so a "
                        "run is not a function of its seeds; unset replay.lockstep (or train apex)")
    if config.replay.publish_every != 1:
        problems.append(f"replay.publish_every={config.replay.publish_every} with algo gorila: the parameter server "
                        "publishes every step it takes, which its learners read; leave it at 1")
    return problems


ALGORITHM = Algorithm(
    name="gorila", summary="GORILA: DQN learners pushing gradients from the replay to a parameter server",
    sections={"gorila": GorilaConfig}, settings="gorila", network=q_network,
    learns_from="replay", learner_modes=("parameter_server",), actions="q", evaluation="greedy",
    gamma=lambda config: config.gorila.gamma, problems=_problems, unroll_fields=replay_values,
    central_inference=False, multi_agent=False, gradient_learners=True, presets=("cartpole-gorila",),
)

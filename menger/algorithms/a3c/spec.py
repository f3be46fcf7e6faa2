"""A3C (Mnih et al. 2016): actor-learners push the gradients of their own unrolls to a sharded parameter server
(runtime.learner.mode: parameter_server, the default), or A2C: the learner computes them (allreduce)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from menger.algorithms import Algorithm
from menger.config import field
from menger.algorithms.networks import actor_learner_network


@dataclass(frozen=True)
class A3CConfig:
    """A3C (Mnih et al. 2016): actor-critic on n-step returns (n = runtime.unroll_length), gradients computed by
    the actors (runtime.learner.mode: parameter_server) or by the learner (allreduce: A2C)."""

    lr: float = field(7e-4, min=0.0, doc="Adam learning rate (each parameter-server shard's)")
    lr_schedule: Literal["constant", "linear"] = field("constant", doc="linear: anneal to 0 at stop.env_frames")
    gamma: float = field(0.99, min=0.0, max=1.0, doc="discount")
    gae_lambda: float = field(1.0, min=0.0, max=1.0, doc="lambda of the returns and advantages (GAE); 1: the "
                              "n-step returns of the paper")
    value_coef: float = field(0.5, min=0.0, doc="value loss weight")
    entropy_coef: float = field(0.01, min=0.0, doc="entropy bonus weight")
    max_grad_norm: float = field(0.5, min=0.0, doc="global norm clip of each applied (averaged) gradient (0 = none)")
    adam_eps: float = field(1e-5, min=0.0, doc="Adam epsilon")

def _problems(config) -> list[str]:
    if config.learner_mode != "parameter_server":
        return []
    rt, ps = config.runtime, config.runtime.parameter_server
    problems = []
    if rt.learner.count > 1:
        problems.append(f"runtime.learner.count={rt.learner.count}: with a parameter server the gradient workers "
                        "are the actors (runtime.actors) and one learner applies their gradients; use "
                        "runtime.learner.count=1")
    if rt.coordination.mode not in ("auto", ps.update):
        problems.append(f"runtime.coordination.mode={rt.coordination.mode!r} but runtime.parameter_server.update="
                        f"{ps.update!r}: the server's update decides when gradients are applied; leave the "
                        "coordination mode at auto")
    if ps.update == "async" and rt.coordination.batch_unrolls not in (0, 1):
        problems.append(f"runtime.coordination.batch_unrolls={rt.coordination.batch_unrolls}: an async "
                        "parameter server applies each gradient as it arrives; leave batch_unrolls at 0, or "
                        "use runtime.parameter_server.update=sync to average one gradient per actor")
    return problems


ALGORITHM = Algorithm(
    name="a3c", summary="A3C: actor-learners pushing gradients to a parameter server (A2C with allreduce)",
    sections={"a3c": A3CConfig}, settings="a3c", network=actor_learner_network, coordination="sync",
    learner_modes=("parameter_server", "allreduce"), gamma=lambda config: config.a3c.gamma, problems=_problems,
    custom_network=True, independent_agents=True, recurrent=True, board_mirror=True,
    normalize=True, presets=("a3c", "cartpole-a3c"),
)

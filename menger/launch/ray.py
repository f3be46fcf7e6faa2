"""The Ray launcher: actors as Ray actors with resource requests; the learner stays in the driver process.

Where things run::

    driver (`menger train ... --launcher ray`): Trainer + learner, publishes each version once (ray.put)
    every node: one ParameterCache actor (num_cpus=0, pinned to its node)
    anywhere Ray has room: actors (num_cpus=runtime.ray_actor_cpus, num_gpus=runtime.ray_actor_gpus), spread
    runtime.inference=central: an InferenceMailbox actor (num_cpus=0) pinned to the driver's node; the batched
    forward itself runs in a thread of the driver, on the learner's device (`menger.inference.ray`)

`runtime.ray_address` joins an existing cluster ("auto" or "HOST:PORT"); without it a local Ray instance is
started with no dashboard, and shut down at the end. If Ray is already initialised (a test's cluster, a
notebook), that session is used and left running. Only this module, `menger.transport.ray` and
`menger.inference.ray` (central inference: the mailbox actor) import Ray.
"""
from __future__ import annotations

import logging

import ray

from menger.transport.ray import RayTransport

log = logging.getLogger("menger.launch.ray")


class RayLauncher:
    name = "ray"
    single_thread_actors = True

    def __init__(self):
        self.owns_session = False
        self.actor_options: dict = {}
        self._remote_classes: dict = {}

    def connect(self, address: str | None) -> None:
        """Join `address`, or start a private local instance; reuse a session that is already up."""
        if ray.is_initialized():
            return
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=True)
            log.info("joined the Ray cluster at %s: %s", address, ray.cluster_resources())
        else:
            # "local": always a private instance, never an unrelated cluster that happens to run on this machine
            ray.init(address="local", include_dashboard=False, dashboard_host="127.0.0.1", log_to_driver=True)
            log.info("started a local Ray instance: %s", ray.cluster_resources())
        self.owns_session = True

    def make_transport(self, *, spec, policy, config, slots_per_actor: int) -> RayTransport:
        rt = config.runtime
        self.connect(rt.ray_address)
        self.actor_options = {"num_cpus": rt.ray_actor_cpus, "num_gpus": rt.ray_actor_gpus,
                              "scheduling_strategy": "SPREAD", "max_restarts": 0}
        return RayTransport(self, spec, policy, rt.actors, slots_per_actor, rt.startup_grace_s)

    def start_actor(self, target: type, kwargs: dict):
        """Create `target` as a Ray actor with this run's resource request; returns its Ray handle.

        Ray's own restarts stay off (`max_restarts=0`): the trainer restarts a dead actor as a new incarnation,
        so its partial unroll is dropped and counted.
        """
        remote = self._remote_classes.get(target)
        if remote is None:
            remote = self._remote_classes[target] = ray.remote(target)
        return remote.options(**self.actor_options).remote(**kwargs)

    def shutdown(self) -> None:
        if self.owns_session and ray.is_initialized():
            ray.shutdown()
            self.owns_session = False

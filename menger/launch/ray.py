"""The Ray launcher: actors as Ray actors with resource requests; the learner stays in the driver process.

Where things run::

    driver (`menger train ... --launcher ray`): Trainer + learner, publishes each version once (ray.put)
    every node: one ParameterCache actor (num_cpus=0, pinned to its node)
    anywhere Ray has room: actors (num_cpus=runtime.ray.actor_cpus, num_gpus=runtime.ray.actor_gpus), spread
    runtime.inference.mode=central: an InferenceMailbox actor (num_cpus=0) pinned to the driver's node; the batched
    forward itself runs in a thread of the driver, on the learner's device (`menger.inference.ray`)

The launcher owns its transport (`RayTransport`) and its central inference service (`RayInference`).
`runtime.ray.address` joins an existing cluster ("auto" or "HOST:PORT"); without it a local Ray instance is
started with no dashboard, and shut down at the end. If Ray is already initialised (a test's cluster, a
notebook), that session is used and left running. Only this module, `menger.transport.ray`,
`menger.params.ray` and `menger.inference.ray` import Ray.
"""
from __future__ import annotations

import logging

import ray

from menger.core import InferenceBackend
from menger.inference import LocalInference
from menger.inference.ray import start_ray_inference
from menger.transport.ray import RayTransport

log = logging.getLogger("menger.launch.ray")


class RayLauncher:
    name = "ray"
    local_actors = 0  # Ray actors may live on other nodes, and take CPUs Ray accounts for: not the learner's

    def __init__(self, runtime):
        """`runtime`: the experiment's `RuntimeConfig` (actors, seed, the ray, supervision and inference sections)."""
        self.runtime = runtime
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

    def make_transport(self, spec, policy, slots_per_actor: int) -> RayTransport:
        rt = self.runtime
        self.connect(rt.ray.address)
        self.actor_options = {"num_cpus": rt.ray.actor_cpus, "num_gpus": rt.ray.actor_gpus,
                              "scheduling_strategy": "SPREAD", "max_restarts": 0}
        return RayTransport(self, spec, policy, rt.actors, slots_per_actor, rt.supervision.startup_grace_s)

    def start_inference(self, policy, transport: RayTransport, device) -> InferenceBackend:
        """`runtime.inference.mode`: local (no service) or central (a mailbox on this node, the forward here)."""
        if self.runtime.inference.mode != "central":
            return LocalInference()
        return start_ray_inference(self.runtime, policy, transport.params.latest, device)

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

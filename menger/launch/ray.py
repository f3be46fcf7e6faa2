"""The Ray launcher: actors as Ray actors with resource requests; the learner stays in the driver process.

Where things run::

    driver (`menger train ... --launcher ray`): Trainer + learner, publishes each version once (ray.put)
    every node: one ParameterCache actor (num_cpus=0, pinned to its node); runtime.ray.cache_fanout: cells above them
    anywhere Ray has room: actors (num_cpus=runtime.ray.actor_cpus, num_gpus=runtime.ray.actor_gpus), spread
    runtime.inference.mode=central: actors send each step's request on a socket to the driver, where the batched
    forward runs in a thread, on the learner's device (`menger.inference.ray`)

The launcher owns its transport (`RayTransport`) and its central inference service (`RayInference`).
`runtime.ray.address` joins an existing cluster ("auto" or "HOST:PORT"); without it a local Ray instance is
started with no dashboard, and shut down at the end. If Ray is already initialised (a test's cluster, a
notebook), that session is used and left running. The local instance keeps Ray's token authentication (Ray's
default; Menger says so in its own log line instead of Ray's warning, which suggests turning it off), starts
no idle workers ahead of need, and runs its actors at the learner's priority (not Ray's nice 15). Only this
module, `menger.launch.emulated_ray`, `menger.transport.ray`, `menger.params.ray`, `menger.params.caches` and
`menger.inference.ray` import Ray.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os

import ray
from ray.exceptions import RayError

from menger.core import InferenceBackend
from menger.inference import LocalInference
from menger.inference.ray import start_ray_inference
from menger.transport.ray import RayTransport

log = logging.getLogger("menger.launch.ray")

AUTH_MODE_VAR = "RAY_AUTH_MODE"  # unset: a local instance gets token authentication (Ray's default)
# The local instance's workers: none started ahead of need (Ray would start one idle Python worker per CPU while
# it starts, each importing Ray and competing with the learner), and at the learner's priority (Ray's default
# niceness of 15 starves the actors, the run's main work, behind any other process on a shared machine).
LOCAL_SYSTEM_CONFIG = {"prestart_worker_first_driver": False, "enable_worker_prestart": False, "worker_niceness": 0}


def local_security_note(auth_mode: str) -> str:
    """What a user should know about the local instance's ports (Ray's own warning suggests turning auth off)."""
    if auth_mode.lower() == "token":
        return ("Ray's token authentication is on (its token: ~/.ray/auth_token by default, made once), so only processes "
                "holding it can use this instance's ports; a cluster uses the same mechanism, see docs/cluster.md")
    return (f"{AUTH_MODE_VAR}={auth_mode}: Ray's token authentication is OFF, and anyone who can reach this machine's "
            f"Ray ports can run code on it; unset {AUTH_MODE_VAR} to turn it back on (docs/cluster.md, Security)")


class _DropAuthOptOutAdvice(logging.Filter):
    """Ray's notice that it turned token authentication on ends with how to turn it off; Menger's log line says
    what the user needs instead (`local_security_note`). Ray's other warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled")


@contextlib.contextmanager
def _without_ray_auth_warning():
    ray_auth_log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    drop = _DropAuthOptOutAdvice()
    ray_auth_log.addFilter(drop)
    try:
        yield
    finally:
        ray_auth_log.removeFilter(drop)


_joined_for_sizing = False  # `cluster_cpus` joined the cluster before the launcher: the launcher owns the session


def cluster_cpus(address: str) -> float:
    """The CPUs of the cluster at `address` now (the live nodes'), joining it if this process has not yet
    (the auto-sizing of an elastic run reads them before the launcher starts)."""
    global _joined_for_sizing
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=True)
        _joined_for_sizing = True
    return float(ray.cluster_resources().get("CPU", 0.0))


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
        global _joined_for_sizing
        if ray.is_initialized():
            if _joined_for_sizing:  # joined for this run's auto-sizing: the run's session, ended with it
                self.owns_session, _joined_for_sizing = True, False
            return
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=True)
            log.info("joined the Ray cluster at %s: %s (authentication: docs/cluster.md, Security)",
                     address, ray.cluster_resources())
        else:
            auth = os.environ.get(AUTH_MODE_VAR, "token")  # unset: Ray turns token authentication on
            # "local": always a private instance, never an unrelated cluster that happens to run on this machine
            with _without_ray_auth_warning():
                ray.init(address="local", include_dashboard=False, dashboard_host="127.0.0.1", log_to_driver=True,
                         _system_config=LOCAL_SYSTEM_CONFIG)
            level = logging.INFO if auth.lower() == "token" else logging.WARNING
            log.log(level, "started a local Ray instance (%d CPUs); %s", ray.cluster_resources().get("CPU", 0),
                    local_security_note(auth))
        self.owns_session = True

    def make_transport(self, spec, policy, slots_per_actor: int) -> RayTransport:
        rt = self.runtime
        self.connect(rt.ray.address)
        self.actor_options = {"num_cpus": self.actor_cpus(), "num_gpus": rt.ray.actor_gpus,
                              "scheduling_strategy": "SPREAD", "max_restarts": 0}
        return RayTransport(self, spec, policy, rt.actors, slots_per_actor, rt.supervision.startup_grace_s,
                            rt.ray.cache_fanout)

    def actor_cpus(self) -> float:
        """The CPUs each actor requests: `runtime.ray.actor_cpus`, except on a private local instance whose CPUs
        would not hold every actor at that request (Ray would keep the rest waiting for CPUs that never come):
        there the actors share the machine's CPUs, as processes would."""
        rt = self.runtime
        if rt.ray.address is not None or rt.ray.actor_cpus == 0:
            return rt.ray.actor_cpus
        cpus = ray.cluster_resources().get("CPU", 0)
        if rt.actors * rt.ray.actor_cpus <= cpus:
            return rt.ray.actor_cpus
        share = math.floor(cpus / rt.actors * 1000) / 1000  # Ray counts CPUs in 1/10,000ths: round down
        log.info("%d actors x runtime.ray.actor_cpus=%g do not fit this machine's %g CPUs: each requests %g CPU, so "
                 "all of them run", rt.actors, rt.ray.actor_cpus, cpus, share)
        return share

    def start_inference(self, policy, transport: RayTransport, device) -> InferenceBackend:
        """`runtime.inference.mode`: local (no service) or central (a request server and the forward here)."""
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

    def kill_actor(self, actor) -> None:
        """End an actor this launcher started (the handle's `kill`); one that is gone already is left alone."""
        try:
            ray.kill(actor, no_restart=True)
        except RayError:
            pass

    def cluster_cpus(self) -> float:
        """The CPUs of the cluster's live nodes now (an elastic run's `ClusterWatcher` reads them)."""
        return cluster_cpus(self.runtime.ray.address)

    def shutdown(self) -> None:
        if self.owns_session and ray.is_initialized():
            ray.shutdown()
            self.owns_session = False

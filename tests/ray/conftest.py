"""A simulated multi-node Ray cluster on one machine, shared by the module's tests (starting one takes seconds).

Layout: a head node with no CPUs (the driver: the trainer and its learner) and two worker nodes with 2 CPUs each;
actors request half a CPU, so the nodes that survive a node's removal have room for its actors. GCS health checks
are fast so that a removed node is noticed within seconds, not the default half minute. Workers run at the
driver's priority, as on the local instance Menger starts (`menger.launch.ray.LOCAL_SYSTEM_CONFIG`): at Ray's
default niceness of 15 any other work on the machine starves them, and a test waiting for an update times out.
"""
from __future__ import annotations

import pytest

# tests/conftest.py makes every Ray node of the simulated cluster bind to 127.0.0.1 (set before ray is imported).
ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 500,
                      "health_check_failure_threshold": 3, "worker_niceness": 0}


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    sim = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "_system_config": FAST_HEALTH_CHECKS})
    for _ in range(2):
        sim.add_node(num_cpus=2)
    sim.wait_for_nodes()
    ray.init(address=sim.address)
    yield sim
    ray.shutdown()
    sim.shutdown()

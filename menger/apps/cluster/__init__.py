"""Cluster resource management after DeepRM (Mao et al., HotNets 2016).

Importing this package registers ``ClusterScheduling-v0`` with gymnasium.
"""

import gymnasium

from menger.apps.cluster.config import ClusterConfig, ClusterConfigError
from menger.apps.cluster.jobs import JobSet, TraceError, read_trace, sample_jobs

ENV_ID = "ClusterScheduling-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="menger.apps.cluster.env:ClusterSchedulingEnv")

__all__ = ["ENV_ID", "ClusterConfig", "ClusterConfigError", "JobSet", "TraceError", "read_trace", "sample_jobs"]

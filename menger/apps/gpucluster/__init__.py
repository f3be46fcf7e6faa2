"""GPU-sharing cluster scheduling on a production trace (Weng et al., "Beware of Fragmentation", ATC 2023).

The Alibaba GPU cluster trace of 2023 in its own CSV formats (``trace``), the cluster's free resources
(``cluster``), the fragmentation measure (``frag``), the paper's heuristics including FGD (``policies``) and its
Monte-Carlo inflation evaluation (``evaluate``). The trace is not shipped: ``menger schedule-gpus --nodes ...
--trace ...`` reads the user's copy. Importing this package registers ``GpuSharing-v0`` (``env``), in which a
learned scheduler places each task.
"""

import gymnasium

from menger.apps.gpucluster.cluster import ClusterState, Task, task_list
from menger.apps.gpucluster.trace import Nodes, Tasks, TraceError, read_nodes, read_tasks

ENV_ID = "GpuSharing-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="menger.apps.gpucluster.env:GpuSharingEnv")

__all__ = ["ENV_ID", "ClusterState", "Nodes", "Task", "Tasks", "TraceError", "read_nodes", "read_tasks", "task_list"]

"""Where a parameter server's shards live, by launcher (`menger.params.sharded`, `menger.params.ray`)."""
from __future__ import annotations

import torch

from menger.params.sharded import ShardedParameterServer, ShardProcesses


def make_parameter_server(params: list[torch.Tensor], shards: int, max_grad_norm: float, make_optimizer,
                          launcher: str):
    """The sharded server for a launcher: shards as Ray actors (ray), as processes (processes), or here (threads)."""
    if launcher == "ray":
        from menger.params.ray import RayShards

        return RayShards(params, shards, max_grad_norm, make_optimizer)
    server = ShardProcesses if launcher == "processes" else ShardedParameterServer
    return server(params, shards, max_grad_norm, make_optimizer)

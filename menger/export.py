"""`menger export RUN --format torchscript`: a trained policy as one file that runs with torch alone, no Menger.

    import torch
    policy = torch.jit.load("policy.pt")
    actions = policy(obs)                     # obs [N, *obs_shape] (float32, or uint8 images) -> actions
    actions, state = policy(obs, state)       # a recurrent policy (r2d2, model.lstm_size): state [2, N, H], zeros
                                              # at an episode's start; zero a row's state where its episode ended

The actions are the deterministic ones `menger eval` and `menger.api.load_policy` take: the most likely (or
greedy) action for Discrete spaces, the mean (clipped to the space) for Box. A run trained with
`env.normalize.obs` normalises inside the file with the statistics of its checkpoint: give it raw observations.
The file also carries
`menger.json` (torch.jit.load(path, _extra_files={"menger.json": ""})): the observation and action spaces, the
algorithm, the recurrent state's size, whether it normalises observations, and the checkpoint it came from.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from torch import nn

FORMATS = ("torchscript",)


class ExportError(RuntimeError):
    """The run's policy cannot be exported as asked; the message says why and what to do."""


class _Deterministic(nn.Module):
    """The network's deterministic action (and next state, when recurrent), as one traceable forward."""

    def __init__(self, network: nn.Module):
        super().__init__()
        self.network = network
        self.recurrent = bool(getattr(network, "lstm_size", 0))
        space = network.action_space
        self.box = isinstance(space, gym.spaces.Box)
        if self.box:
            self.register_buffer("low", torch.as_tensor(space.low, dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(space.high, dtype=torch.float32))

    def forward(self, obs: torch.Tensor, state: torch.Tensor | None = None):
        out = self.network.act(obs, state, deterministic=True)
        action = torch.maximum(torch.minimum(out.action, self.high), self.low) if self.box else out.action
        return (action, out.state) if self.recurrent else action


def export_policy(run_dir: str | Path, out: str | Path | None = None, fmt: str = "torchscript",
                  allow_import=()) -> Path:
    """Write the run's newest policy as a standalone file (default RUN_DIR/policy.pt); returns its path."""
    from menger.api import load_policy

    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r} is not one Menger writes; choose {', '.join(FORMATS)} (ONNX is not "
                          "built yet: export TorchScript, or torch.onnx.export the network of menger.api.load_policy)")
    policy = load_policy(run_dir, allow_import)
    network = policy.network.cpu().eval().requires_grad_(False)  # an inference graph: no autograd at run time
    space = network.obs_space
    if not isinstance(space, gym.spaces.Box):
        raise ExportError(f"the run's observations are {space}; export takes Box observations (one tensor), not "
                          "Dict or Discrete ones yet")
    module = _Deterministic(network).eval()
    dtype = torch.uint8 if np.dtype(space.dtype) == np.uint8 else torch.float32
    example = torch.zeros((2, *space.shape), dtype=dtype)
    inputs = (example, network.initial_state(2)) if module.recurrent else (example,)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks, constant on every path we take
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates TorchScript; it still runs
        traced = torch.jit.trace(module, inputs, check_trace=False)
    path = Path(out) if out is not None else Path(run_dir) / "policy.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"format": "menger.export/1", "algo": policy.config.algo, "env": policy.config.env.id,
            "obs_shape": list(space.shape), "obs_dtype": str(np.dtype(space.dtype)),
            "action_space": str(network.action_space), "lstm_size": int(getattr(network, "lstm_size", 0)),
            "normalizes_obs": getattr(network, "obs_normalizer", None) is not None,
            "run_dir": str(run_dir)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(traced, str(path), _extra_files={"menger.json": json.dumps(meta)})
    return path

"""`menger export RUN`: a trained policy as one file that runs without Menger, for torch or for ONNX Runtime.

TorchScript (`--format torchscript`, the default; RUN_DIR/policy.pt), with torch alone:

    import torch
    policy = torch.jit.load("policy.pt")
    actions = policy(obs)                     # obs [N, *obs_shape] (float32, or uint8 images) -> actions
    actions, state = policy(obs, state)       # a recurrent policy (r2d2, model.lstm_size): state [2, N, H], zeros
                                              # at an episode's start; zero a row's state where its episode ended

ONNX (`--format onnx`; RUN_DIR/policy.onnx; `pip install "menger-rl[export]"` to write it), with onnxruntime alone:

    import onnxruntime as ort
    policy = ort.InferenceSession("policy.onnx")
    (actions,) = policy.run(None, {"obs": obs})                            # any batch size N
    actions, state = policy.run(None, {"obs": obs, "state": state})        # recurrent: outputs action, next_state

Dict observations of Box entries (an `action_mask`, a multi-agent policy's `agent_id`) are one input per entry, in
the order of the space's keys, each named `obs.KEY` in ONNX (`menger.json`'s `obs_keys` lists them):
`policy(obs_a, obs_b[, state])` in TorchScript, `policy.run(None, {"obs.a": obs_a, "obs.b": obs_b})` in ONNX. A
centralised critic's `critic_state` entry is dropped: only the value function reads it, and the file holds no
value function, so the file takes the agent's own observation alone.

The actions are the deterministic ones `menger eval` and `menger.api.load_policy` take: the most likely (or
greedy) action for Discrete spaces (int64), the mean (clipped to the space) for Box. MultiDiscrete, MultiBinary,
Tuple and Dict spaces give one flat action [N, width] (int64, or float32 with a Box component), each component in
its columns: `menger.json`'s `action_layout` lists them (key, space, start, stop), the Q-learners' joint action
given back as its components. A run trained with `env.normalize.obs` normalises inside the file with
the statistics of its checkpoint: give it raw observations. Both files carry `menger.json`: the observation and
action spaces, the algorithm, the recurrent state's size and the step of the checkpoint it came from (the newest,
or the one `--checkpoint best|STEP` picks) (TorchScript: torch.jit.load(path, _extra_files={"menger.json": ""});
ONNX: the model's metadata, `policy.get_modelmeta().custom_metadata_map["menger.json"]`).

ONNX goes through torch's TorchScript-based exporter (`torch.onnx.export(..., dynamo=False)`): it traces the same
graph as the TorchScript export, needs only the `onnx` package (not onnxscript), and is in every torch from 2.4 to
2.13, where it is deprecated in favour of the torch.export-based exporter but still works. The newer exporter
refuses the data-dependent checks of Menger's networks (SAC's bounds check), so it is not used.
"""
from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from menger.extras import require
from menger.models.encoders import CRITIC_KEY

FORMATS = ("torchscript", "onnx")
SUFFIXES = {"torchscript": ".pt", "onnx": ".onnx"}
ONNX_OPSET = 17  # written by torch 2.4 to 2.13, read by every onnxruntime since 1.12


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
        sizes = network.codec.joint_sizes  # a Q network's joint Discrete: give each component's index
        self.joint = bool(sizes)
        if self.joint:
            strides = [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
            self.register_buffer("strides", torch.tensor(strides, dtype=torch.int64))
            self.register_buffer("sizes", torch.tensor(sizes, dtype=torch.int64))

        self.keys = tuple(_entry_keys(network.obs_space))  # a Dict observation: one input per entry

    def forward(self, *inputs: torch.Tensor):
        """(obs[, state]) for a Box observation, (entry_1, ..., entry_k[, state]) for a Dict one."""
        count = len(self.keys) or 1
        obs = dict(zip(self.keys, inputs[:count])) if self.keys else inputs[0]
        state = inputs[count] if self.recurrent else None
        out = self.network.act(obs, state, deterministic=True)
        action = out.action
        if self.box:
            action = torch.maximum(torch.minimum(action, self.high), self.low)
        if self.joint:
            action = torch.div(action.unsqueeze(-1), self.strides, rounding_mode="floor") % self.sizes
        return (action, out.state) if self.recurrent else action


def export_policy(run_dir: str | Path, out: str | Path | None = None, fmt: str = "torchscript",
                  allow_import=(), checkpoint: str | int = "latest") -> Path:
    """Write the run's policy (`checkpoint`: its newest, its best or a step) as a standalone file (default
    RUN_DIR/policy.pt, or policy.onnx); returns its path."""
    from menger.api import load_policy

    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r} is not one Menger writes; choose {' or '.join(FORMATS)}")
    if fmt == "onnx":
        _require_onnx()
    policy = load_policy(run_dir, allow_import, checkpoint=checkpoint)
    network = policy.network.cpu().eval().requires_grad_(False)  # an inference graph: no autograd at run time
    module = _Deterministic(network).eval()
    entries = _entries(network.obs_space)
    examples = tuple(torch.zeros((2, *sub.shape), dtype=_dtype(sub)) for sub in entries.values())
    inputs = (*examples, network.initial_state(2)) if module.recurrent else examples
    path = Path(out) if out is not None else Path(run_dir) / f"policy{SUFFIXES[fmt]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    shapes = {key: list(sub.shape) for key, sub in entries.items()}
    dtypes = {key: str(np.dtype(sub.dtype)) for key, sub in entries.items()}
    meta = {"format": "menger.export/1", "algo": policy.config.algo, "env": policy.config.env.id,
            "obs_shape": shapes.get("", shapes), "obs_dtype": dtypes.get("", dtypes),
            "obs_keys": [] if "" in entries else list(entries),
            "action_space": str(network.codec.env_space), "action_layout": _layout(network.codec),
            "lstm_size": int(getattr(network, "lstm_size", 0)),
            "normalizes_obs": getattr(network, "obs_normalizer", None) is not None,
            "run_dir": str(run_dir), "checkpoint": policy.checkpoint.get("step")}
    if fmt == "onnx":
        _write_onnx(module, inputs, path, meta)
    else:
        _write_torchscript(module, inputs, path, meta)
    return path


def _entry_keys(space: gym.Space) -> list[str]:
    """The inputs of an exported Dict observation: its entries but a centralised critic's (no action reads it)."""
    if not isinstance(space, gym.spaces.Dict):
        return []
    return [key for key in space.spaces if key != CRITIC_KEY]


def _entries(space: gym.Space) -> dict[str, gym.spaces.Box]:
    """Input name ("" for a Box observation) -> its space; anything but Box observations or entries is refused."""
    entries = {key: space[key] for key in _entry_keys(space)} if isinstance(space, gym.spaces.Dict) else {"": space}
    others = {key: sub for key, sub in entries.items() if not isinstance(sub, gym.spaces.Box)}
    if others:
        where = ", ".join(f"{key!r}: {sub}" for key, sub in others.items()) if "" not in others else str(space)
        raise ExportError(f"the run's observations are {space}; export takes a Box observation, or a Dict of Box "
                          f"entries (one input each), not {where}: wrap the env to give Box observations")
    return entries


def _dtype(space: gym.spaces.Box) -> torch.dtype:
    return torch.uint8 if np.dtype(space.dtype) == np.uint8 else torch.float32


def _write_torchscript(module: _Deterministic, inputs: tuple, path: Path, meta: dict) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # shape checks, constant on every path we take
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates TorchScript; it still runs
        traced = torch.jit.trace(module, inputs, check_trace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(traced, str(path), _extra_files={"menger.json": json.dumps(meta)})


def _require_onnx() -> None:
    """onnx checks and labels the exporter's output (onnxruntime, in the same extra, runs the file)."""
    require("onnx", "export", "`menger export --format onnx`", instead="export --format torchscript")


def _write_onnx(module: _Deterministic, inputs: tuple, path: Path, meta: dict) -> None:
    """The traced graph with a dynamic batch axis, checked by onnx, with `menger.json` in its metadata."""
    import onnx

    obs_names = [f"obs.{key}" for key in module.keys] or ["obs"]
    names, outputs = ([*obs_names, "state"], ["action", "next_state"]) if module.recurrent else (obs_names, ["action"])
    axes = {**{name: {0: "batch"} for name in obs_names}, "action": {0: "batch"}}
    if module.recurrent:
        axes.update(state={1: "batch"}, next_state={1: "batch"})
    # a torch without the argument exports this way already
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # as for TorchScript: the same trace
        warnings.simplefilter("ignore", DeprecationWarning)  # torch >= 2.9 deprecates this exporter; it still works
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(module, inputs, str(path), input_names=names, output_names=outputs, dynamic_axes=axes,
                          opset_version=ONNX_OPSET, do_constant_folding=True, **legacy)
    model = onnx.load(str(path))
    entry = model.metadata_props.add()
    entry.key, entry.value = "menger.json", json.dumps(meta)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _layout(codec) -> list[dict]:
    """Where each component of the env's action sits in the exported action [N, width] (key, space, columns);
    empty for a Discrete or Box space, whose actions are the space's own."""
    if codec.whole:
        return []
    at, out = 0, []
    for leaf in codec.leaves:
        out.append({"key": leaf.key, "space": str(leaf.space), "start": at, "stop": at + leaf.width})
        at += leaf.width
    return out

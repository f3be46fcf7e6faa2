"""Frozen copies of a policy, stored once per host and keyed by their content; read by every actor on the host.

    store = SnapshotStore(run_dir / "league" / "snapshots")
    key = store.put(learner.policy)               # the learner: sha256 of the parameters; written once
    params = store.open(key)                      # an actor: {name: tensor} views on a read-only memory map
    frozen = FrozenPolicy(template, params)       # acts with those parameters through torch.func.functional_call

A snapshot is one file of raw float32 values (`<key>.bin`) beside one `layout.json` (the names and shapes every
snapshot of the run shares). Readers map the file read-only, so the host's page cache holds the only copy: no
actor copies a snapshot, however many actors read it (RLlib replicates the whole league on every worker).
Files are written to a temporary name and renamed, so a reader never sees half a snapshot.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn


class SnapshotStore:
    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        self._layout: list[tuple[str, tuple[int, ...], str]] | None = None
        self._open: dict[str, dict[str, torch.Tensor]] = {}

    # ----- the learner's side ----------------------------------------------------------------------------
    def put(self, module: nn.Module) -> str:
        """Store `module`'s parameters and buffers (once: the same content is the same key); returns the key."""
        state = module.state_dict()
        layout = [(name, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for name, t in state.items()]
        flat = torch.cat([t.detach().reshape(-1).to(torch.float32).cpu() for t in state.values()]) if state \
            else torch.zeros(0)
        data = flat.numpy().astype("<f4", copy=False).tobytes()
        key = hashlib.sha256(data).hexdigest()[:20]
        self.dir.mkdir(parents=True, exist_ok=True)
        self._write_layout(layout)
        path = self.dir / f"{key}.bin"
        if not path.exists():
            _atomic_write(path, data)
        return key

    def has(self, key: str) -> bool:
        return (self.dir / f"{key}.bin").exists()

    def keys(self) -> list[str]:
        return sorted(p.stem for p in self.dir.glob("*.bin")) if self.dir.exists() else []

    def delete(self, key: str) -> None:
        """Remove snapshot `key` (readers that mapped it keep their mapping until they drop it)."""
        self._open.pop(key, None)
        (self.dir / f"{key}.bin").unlink(missing_ok=True)

    def bytes_on_host(self) -> int:
        """What the store holds on this host: every snapshot once, whatever the number of readers."""
        return sum(p.stat().st_size for p in self.dir.glob("*.bin")) if self.dir.exists() else 0

    # ----- the actors' side ------------------------------------------------------------------------------
    def open(self, key: str) -> dict[str, torch.Tensor]:
        """{name: tensor} of snapshot `key`: float tensors are views on the file's read-only memory map."""
        if key in self._open:
            return self._open[key]
        path = self.dir / f"{key}.bin"
        if not path.exists():
            raise FileNotFoundError(f"snapshot {key} is not in {self.dir}: the league names a snapshot this host does "
                                    "not hold")
        values = np.memmap(path, dtype="<f4", mode="r")
        with warnings.catch_warnings():  # read-only on purpose: the frozen player never writes its parameters
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.from_numpy(values)
        tensors, offset = {}, 0
        for name, shape, dtype in self.layout():
            size = int(np.prod(shape)) if shape else 1
            view = flat[offset:offset + size].view(shape)
            tensors[name] = view if dtype == "float32" else view.to(getattr(torch, dtype))  # ints: a tiny copy
            offset += size
        if offset != flat.numel():
            raise ValueError(f"snapshot {key} holds {flat.numel()} values but the run's layout needs {offset}: it was "
                             "written by another network")
        self._open[key] = tensors
        return tensors

    def layout(self) -> list[tuple[str, tuple[int, ...], str]]:
        if self._layout is None:
            raw = json.loads((self.dir / "layout.json").read_text())
            self._layout = [(name, tuple(shape), dtype) for name, shape, dtype in raw]
        return self._layout

    def _write_layout(self, layout) -> None:
        if self._layout is None:
            path = self.dir / "layout.json"
            if not path.exists():
                _atomic_write(path, json.dumps(layout).encode())
            self._layout = [(name, tuple(shape), dtype) for name, shape, dtype in layout]


class FrozenPolicy:
    """A policy network acting with a snapshot's parameters (no copy: `torch.func.functional_call` on the views)."""

    def __init__(self, template: nn.Module, params: dict[str, torch.Tensor], generator: torch.Generator):
        self.acting = _Acting(template)
        self.params = {f"policy.{name}": t for name, t in params.items()}
        self.generator = generator

    @torch.no_grad()
    def act(self, obs: dict) -> np.ndarray:
        tensors = {k: torch.from_numpy(np.asarray(v)).float() for k, v in obs.items()}
        return torch.func.functional_call(self.acting, self.params, (tensors, self.generator)).numpy()


class _Acting(nn.Module):
    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, obs, generator):
        return self.policy.act(obs, generator=generator).action


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)

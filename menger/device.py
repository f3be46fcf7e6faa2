"""Which torch device the learner (and central inference) runs on: a leaf module every layer may import."""
from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """'auto' is CUDA when a device is present, else the CPU; 'cuda' without one is an error that says so."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("runtime.learner.device=cuda but no CUDA device is available; use device=auto or cpu")
    return torch.device(name)

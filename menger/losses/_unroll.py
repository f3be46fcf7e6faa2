"""Shared pieces of the return estimators: shape checks and the backward discounted recursion."""

from __future__ import annotations

import torch
from torch import Tensor


def check_unroll(bootstrap_value: Tensor, **time_major: Tensor) -> None:
    """Fail fast, naming the tensor, unless all ``time_major`` tensors are [T, B...] and bootstrap is [B...]."""
    names = list(time_major)
    reference_name = names[0]
    reference = time_major[reference_name]
    if reference.dim() < 1 or reference.shape[0] == 0:
        raise ValueError(
            f"{reference_name} has shape {tuple(reference.shape)}; expected time-major [T, B] with T >= 1."
        )
    for name in names[1:]:
        if time_major[name].shape != reference.shape:
            raise ValueError(
                f"{name} has shape {tuple(time_major[name].shape)} but {reference_name} has shape "
                f"{tuple(reference.shape)}; all per-step inputs must be time-major [T, B] and alike."
            )
    for name, tensor in time_major.items():
        if not tensor.is_floating_point():
            raise TypeError(f"{name} has dtype {tensor.dtype}; pass a floating-point tensor (float32 or float64).")
    if bootstrap_value.shape != reference.shape[1:]:
        raise ValueError(
            f"bootstrap_value has shape {tuple(bootstrap_value.shape)}; expected {tuple(reference.shape[1:])}, "
            f"the value of the state after the last step of each of the B envs (V(s_T), no time axis)."
        )


def check_fraction(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}={value} is outside [0, 1]; it weights future corrections, e.g. 0.95.")


def next_values(values: Tensor, bootstrap_value: Tensor) -> Tensor:
    """V(s_{t+1}) for every t: the values shifted one step, with V(s_T) = bootstrap_value at the end."""
    return torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)


def discounted_backward_sum(deltas: Tensor, coefficients: Tensor) -> Tensor:
    """x_t = deltas_t + coefficients_t * x_{t+1}, with x_T = 0, for t = T-1 down to 0.

    GAE (coefficients = gamma * lambda) and V-trace (coefficients = gamma * c) are both this recursion.
    A loop over T is clearer than a closed form and T is short (an unroll).
    """
    running = torch.zeros_like(deltas[0])
    steps = []
    for t in reversed(range(deltas.shape[0])):
        running = deltas[t] + coefficients[t] * running
        steps.append(running)
    return torch.stack(steps[::-1], dim=0)

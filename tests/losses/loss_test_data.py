"""Random unrolls for the loss tests: episode ends inside the unroll, fixed seeds; tolerances per dtype."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

GAMMA = 0.97
SHAPES = [(1, 1), (2, 3), (7, 4), (16, 2)]


@dataclass(frozen=True)
class Unroll:
    """One [T, B] unroll as NumPy float64 arrays (the references' input) with a torch view on demand."""

    rewards: np.ndarray
    values: np.ndarray
    bootstrap_value: np.ndarray
    discounts: np.ndarray
    behaviour_logp: np.ndarray
    target_logp: np.ndarray
    mask: np.ndarray

    def torch(self, name: str, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return torch.tensor(getattr(self, name), dtype=dtype)


def random_unroll(seed: int, T: int, B: int, done_probability: float = 0.25) -> Unroll:
    rng = np.random.default_rng(seed)
    done = rng.random((T, B)) < done_probability
    if T >= 3:
        done[T // 2, 0] = True  # at least one episode end strictly inside the unroll
    behaviour_logp = -rng.exponential(1.0, (T, B))
    mask = (rng.random((T, B)) > 0.2).astype(np.float64)
    mask.flat[0] = 1.0
    return Unroll(
        rewards=rng.normal(0.0, 1.0, (T, B)),
        values=rng.normal(0.0, 1.0, (T, B)),
        bootstrap_value=rng.normal(0.0, 1.0, B),
        discounts=GAMMA * (1.0 - done),
        behaviour_logp=behaviour_logp,
        target_logp=behaviour_logp + rng.normal(0.0, 0.7, (T, B)),
        mask=mask,
    )


# float64 must agree with the float64 reference to rounding; float32 to its precision.
TOLERANCES = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-4)}


def assert_close(actual: torch.Tensor, expected, dtype: torch.dtype) -> None:
    """actual kept the input dtype and agrees with the float64 reference within that dtype's tolerance."""
    assert actual.dtype == dtype, f"computed in {actual.dtype}, inputs were {dtype}"
    expected = np.asarray(expected, dtype=np.float64)
    np.testing.assert_allclose(actual.detach().double().numpy(), expected, **TOLERANCES[dtype])

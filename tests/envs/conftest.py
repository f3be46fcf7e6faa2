from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent


@pytest.fixture
def user_envs_on_path(monkeypatch):
    """Make tests/envs/menger_test_user_envs.py importable, as a user's own module would be."""
    monkeypatch.syspath_prepend(str(HERE))


@pytest.fixture
def action_sequence():
    """Builds a fixed sequence of batched random actions, so two envs can be driven identically."""

    def build(env, steps: int, seed: int = 0) -> list[np.ndarray]:
        space = env.single_action_space
        space.seed(seed)
        return [np.stack([space.sample() for _ in range(env.num_envs)]) for _ in range(steps)]

    return build

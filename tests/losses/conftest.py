"""Fixtures of the loss tests: random unrolls of several shapes, both float dtypes."""

from __future__ import annotations

import pytest
import torch
from loss_test_data import SHAPES, Unroll, random_unroll


@pytest.fixture(params=SHAPES, ids=lambda shape: f"T{shape[0]}xB{shape[1]}")
def unroll(request) -> Unroll:
    T, B = request.param
    return random_unroll(seed=1000 * T + B, T=T, B=B)


@pytest.fixture(params=[torch.float64, torch.float32], ids=["float64", "float32"])
def dtype(request) -> torch.dtype:
    return request.param

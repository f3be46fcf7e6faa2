"""explained_variance against NumPy's variances, and the values a reader of `learner/explained_variance` relies on."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from menger.losses import explained_variance


def numpy_explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - Var[returns - values] / Var[returns], as SB3's `explained_variance` writes it."""
    return float(1.0 - np.var(returns - values) / np.var(returns))


@pytest.mark.parametrize("shape", [(1, 7), (16, 4), (128, 32)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_numpy(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    returns = rng.normal(3.0, 2.0, shape)
    values = returns + rng.normal(0.0, 1.0, shape)  # a value head that explains about three quarters
    got = explained_variance(torch.tensor(values, dtype=dtype), torch.tensor(returns, dtype=dtype))
    expected = numpy_explained_variance(values.astype(np.float32 if dtype == torch.float32 else np.float64),
                                        returns.astype(np.float32 if dtype == torch.float32 else np.float64))
    assert got.dim() == 0 and got.dtype == torch.float64
    assert float(got) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_a_mask_leaves_entries_out_as_if_they_were_not_there():
    rng = np.random.default_rng(3)
    returns, values = rng.normal(size=(8, 5)), rng.normal(size=(8, 5))
    mask = rng.random((8, 5)) < 0.6
    values_with_garbage = np.where(mask, values, np.nan)  # masked entries have no effect, not even a NaN
    got = explained_variance(torch.tensor(values_with_garbage), torch.tensor(returns), torch.tensor(mask))
    assert float(got) == pytest.approx(numpy_explained_variance(values[mask], returns[mask]), rel=1e-12)


def test_perfect_mean_and_worse_than_mean_predictions():
    returns = torch.tensor([1.0, 2.0, 4.0, 8.0])
    assert float(explained_variance(returns.clone(), returns)) == 1.0
    assert float(explained_variance(torch.full((4,), float(returns.mean())), returns)) == pytest.approx(0.0)
    assert float(explained_variance(-returns, returns)) < 0.0


def test_nothing_to_explain_is_nan():
    assert math.isnan(float(explained_variance(torch.zeros(5), torch.ones(5))))  # returns that do not vary
    assert math.isnan(float(explained_variance(torch.zeros(5), torch.arange(5.0), torch.zeros(5))))  # no entries


def test_shapes_that_differ_are_refused():
    with pytest.raises(ValueError, match="values has shape"):
        explained_variance(torch.zeros(4, 2), torch.zeros(4, 3))

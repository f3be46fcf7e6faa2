"""Diagnostics of a batch that the learners report beside their losses (pure functions, no gradient).

explained_variance(values, returns) = 1 - Var[returns - values] / Var[returns]: 1 when the value head predicts the
returns exactly, 0 when it does no better than their mean, negative when it does worse. It is what SB3 logs as
train/explained_variance and CleanRL as losses/explained_variance, over the batch the update learns from.
"""

from __future__ import annotations

import torch
from torch import Tensor

from menger.losses.masking import check_alike, check_mask, masked_mean


@torch.no_grad()
def explained_variance(values: Tensor, returns: Tensor, mask: Tensor | None = None) -> Tensor:
    """1 - Var[returns - values] / Var[returns] over the entries where `mask` is set (all when None).

    values, returns (and mask): any shape, alike, e.g. [T, B]. Population variances (as numpy's `var`), computed
    in float64. NaN when the returns do not vary (nothing to explain; SB3 and CleanRL say the same) or when the
    mask selects nothing; a 0-d tensor.
    """
    check_alike("values and returns are one value and one return per step", floating=True,
                values=values, returns=returns)
    if mask is not None:
        check_mask(mask, returns)
    values, returns = values.detach().double(), returns.detach().double()
    count = returns.numel() if mask is None else int((mask != 0).sum())
    if count == 0:
        return returns.new_tensor(float("nan"))
    residual = returns - values
    var_returns = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    var_residual = masked_mean((residual - masked_mean(residual, mask)) ** 2, mask)
    if var_returns == 0:
        return returns.new_tensor(float("nan"))
    return 1.0 - var_residual / var_returns

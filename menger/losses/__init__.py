"""Menger's algorithm maths as pure torch functions, each checked against a slow NumPy reference (tests/losses).

All per-step tensors are time-major [T, B]. discounts[t] = gamma * (1 - done[t]), where done[t] says the
episode ended at step t. mask [T, B] is 1 for a real transition and 0 for one to ignore in every mean.
Return estimators (gae, vtrace) compute targets without gradient; losses return (loss, detached stats).
"""

from menger.losses.gae import gae
from menger.losses.impala import appo_loss, impala_loss
from menger.losses.masking import masked_mean
from menger.losses.ppo import ppo_loss
from menger.losses.vtrace import VTraceReturns, vtrace

__all__ = ["VTraceReturns", "appo_loss", "gae", "impala_loss", "masked_mean", "ppo_loss", "vtrace"]

"""PQN's maths (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning") as pure torch functions.

PQN learns Q from the unrolls of vectorised envs with no replay buffer and no target network: each unroll gets
Q(lambda) targets from the current network, then a few epochs of minibatch regression fit Q(s_t, a_t) to them.
Tensors are time-major [T, B]; `dones[t]` = 1 says the episode ended at step t, so observation t + 1 is the
next episode's first and nothing is bootstrapped across it.
"""
from __future__ import annotations

import torch
from torch import Tensor


def lambda_returns(rewards: Tensor, dones: Tensor, next_max_q: Tensor, gamma: float, lam: float) -> Tensor:
    """Q(lambda) targets of one unroll, computed backwards (the paper's eq. for R^lambda_t)::

        R^lambda_{T-1} = r_{T-1} + gamma (1 - d_{T-1}) max_a' Q(s_T, a')
        R^lambda_t     = r_t + gamma (1 - d_t) [ lam R^lambda_{t+1} + (1 - lam) max_a' Q(s_{t+1}, a') ]

    which is the lambda-weighted mix of the n-step returns (1 - lam) sum_n lam^(n-1) G^(n)_t, the last n-step
    return of the unroll (or of the episode) taking the remaining weight. lam = 0 is one-step Q-learning's
    target, lam = 1 the discounted return to the unroll's end with one bootstrap there.

    rewards, dones, next_max_q: [T, B], next_max_q[t] = max_a Q(s_{t+1}, a). Returns R^lambda [T, B].
    The targets are regression constants (semi-gradient TD), so the inputs are detached: a caller may pass
    values that require grad, and no gradient flows into the targets.
    """
    rewards, next_max_q = rewards.detach(), next_max_q.detach()
    continues = gamma * (1.0 - dones.detach())
    returns = torch.empty_like(rewards)
    # seeding the recursion with the last bootstrap makes its first step the one-step target, whatever lam
    ahead = next_max_q[-1]
    for t in reversed(range(rewards.shape[0])):
        ahead = rewards[t] + continues[t] * ((1.0 - lam) * next_max_q[t] + lam * ahead)
        returns[t] = ahead
    return returns


def q_regression_loss(q_taken: Tensor, targets: Tensor, kind: str = "mse") -> Tensor:
    """The regression of Q(s_t, a_t) to its target R^lambda_t, averaged over the steps given:

        "mse":   L = 1/2 mean_t (Q(s_t, a_t) - R^lambda_t)^2       (the paper's loss)
        "huber": L = mean_t huber_1(Q(s_t, a_t) - R^lambda_t)      (smooth L1: quadratic within 1, linear beyond)

    Huber bounds the gradient of rare large errors (unclipped rewards) at the cost of a slower fit of them.
    """
    if kind == "mse":
        return 0.5 * (q_taken - targets).pow(2).mean()
    if kind == "huber":
        return torch.nn.functional.smooth_l1_loss(q_taken, targets)
    raise ValueError(f"unknown PQN loss {kind!r}; choose 'mse' (the paper's) or 'huber'")

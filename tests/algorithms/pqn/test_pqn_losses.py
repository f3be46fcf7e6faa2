"""PQN's Q(lambda) targets against the paper's weighted sum of n-step returns, and the regression loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from menger.algorithms.pqn.losses import lambda_returns, q_regression_loss


def reference_lambda_returns(r, d, q_next, gamma, lam):
    """G^lambda_t = (1 - lam) sum_{n=1}^{N-1} lam^(n-1) G^(n)_t + lam^(N-1) G^(N)_t, where N is the number of
    steps to the unroll's end or to the episode's end (its last step included), whichever comes first, and
    G^(n)_t = sum_{k<n} gamma^k r_{t+k} + gamma^n (1 - d_{t+n-1}) max_a Q(s_{t+n}, a)."""
    T, B = r.shape
    G = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            N = T - t
            for k in range(T - t):
                if d[t + k, b]:
                    N = k + 1  # the episode ends at t + k: longer returns would cross into the next one
                    break
            total = 0.0
            for n in range(1, N + 1):
                g_n = sum(gamma**k * r[t + k, b] for k in range(n))
                g_n += gamma**n * (1.0 - d[t + n - 1, b]) * q_next[t + n - 1, b]
                weight = lam ** (N - 1) if n == N else (1.0 - lam) * lam ** (n - 1)
                total += weight * g_n
            G[t, b] = total
    return G


def random_unroll(T, B, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(T, B)), (rng.random((T, B)) < 0.2).astype(np.float64), rng.normal(size=(T, B))


def run(r, d, q, gamma, lam):
    return lambda_returns(torch.tensor(r), torch.tensor(d), torch.tensor(q), gamma, lam).numpy()


@pytest.mark.parametrize("T,B", [(1, 1), (5, 3), (12, 4)])
@pytest.mark.parametrize("gamma", [0.9, 0.99])
@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95, 1.0])
def test_matches_the_weighted_sum_of_n_step_returns(T, B, gamma, lam):
    r, d, q = random_unroll(T, B, seed=100 * T + B)
    np.testing.assert_allclose(run(r, d, q, gamma, lam), reference_lambda_returns(r, d, q, gamma, lam),
                               rtol=1e-10, atol=1e-10)


def test_lambda_zero_is_the_one_step_q_learning_target():
    r, d, q = random_unroll(7, 3, seed=1)
    np.testing.assert_allclose(run(r, d, q, 0.9, 0.0), r + 0.9 * (1 - d) * q, rtol=1e-12)


def test_lambda_one_is_the_return_to_the_unrolls_end_with_one_bootstrap():
    T, gamma = 6, 0.9
    r, q = np.arange(1.0, T + 1)[:, None], np.full((T, 1), 10.0)
    d = np.zeros((T, 1))
    d[2] = 1.0  # the first episode ends at step 2: steps 0-2 see no bootstrap, steps 3-5 bootstrap at the end
    G = run(r, d, q, gamma, 1.0)
    assert G[0, 0] == pytest.approx(1 + gamma * 2 + gamma**2 * 3)
    assert G[3, 0] == pytest.approx(4 + gamma * 5 + gamma**2 * 6 + gamma**3 * 10)


def test_targets_carry_no_gradient():
    r, d, q = (torch.tensor(x, requires_grad=True) for x in random_unroll(4, 2, seed=2))
    G = lambda_returns(r, d, q, 0.99, 0.65)
    assert not G.requires_grad


def test_q_regression_loss_values():
    q, target = torch.tensor([0.0, 1.0, 3.0]), torch.tensor([0.5, 1.0, 0.0])
    assert float(q_regression_loss(q, target)) == pytest.approx(0.5 * (0.25 + 0.0 + 9.0) / 3)
    assert float(q_regression_loss(q, target, "huber")) == pytest.approx((0.5 * 0.25 + 0.0 + 2.5) / 3)
    with pytest.raises(ValueError, match="huber"):
        q_regression_loss(q, target, "l1")

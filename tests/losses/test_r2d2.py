"""R2D2's sequence targets, priorities and loss against slow loops over every sequence and step."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import offpolicy_reference as reference
from menger.losses import r2d2_loss, r2d2_targets, sequence_priorities


def _sequences(seed: int, steps: int = 12, batch: int = 5, actions: int = 3, gamma: float = 0.97):
    """Random sequences with terminations (discount 0), truncations (the step after is invalid, as an autoreset
    step is) and a dropped step, in float64."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(steps, batch))
    terminated = rng.random((steps, batch)) < 0.1
    valid = np.ones((steps, batch))
    ends = terminated | (rng.random((steps, batch)) < 0.08)   # terminated or truncated
    valid[1:][ends[:-1]] = 0.0                                 # the autoreset step after an end
    valid[rng.integers(steps), rng.integers(batch)] = 0.0      # a dropped step (a NaN transition)
    discounts = gamma * (1.0 - terminated)
    q_online = rng.normal(size=(steps + 1, batch, actions)) * 3
    q_target = rng.normal(size=(steps + 1, batch, actions)) * 3
    return [torch.from_numpy(x) for x in (q_online, q_target, rewards, discounts, valid)]


def _reference_targets(q_online, q_target, r, d, valid, n, eps):
    """Ape-X's reference windows over the sequence, each bootstrapped from the observation it ends at."""
    steps, batch = r.shape
    y, mask = np.zeros((steps, batch)), np.zeros((steps, batch))
    index = np.arange((steps + 1) * batch).reshape(steps + 1, batch)
    for item in reference.n_step_items(index, np.zeros((steps, batch)), r, d, valid, n):
        t, b, R, D = item["t"], item["b"], item["R"], item["D"]
        s = t + item["m"]
        q = q_target[s, b, reference.argmax(q_online[s, b])]
        if eps is None:
            y[t, b] = R + (D * q if D != 0 else 0.0)
        else:
            y[t, b] = reference.h(R + (D * reference.h_inverse(q, eps) if D != 0 else 0.0), eps)
        mask[t, b] = 1.0
    return y, mask


@pytest.mark.parametrize("n", [1, 3, 5])
@pytest.mark.parametrize("eps", [1e-3, None])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sequence_targets_match_the_loop_over_every_step(n, eps, seed):
    q_online, q_target, rewards, discounts, valid = _sequences(seed)
    targets, mask = r2d2_targets(q_online, q_target, rewards, discounts, valid, n, value_rescaling_eps=eps)
    y, m = _reference_targets(*(x.numpy() for x in (q_online, q_target, rewards, discounts, valid)), n, eps)
    np.testing.assert_array_equal(mask.numpy(), m)
    np.testing.assert_allclose(targets.numpy(), y, rtol=1e-10, atol=1e-10)
    assert m.sum() == valid.sum()  # every valid step learns, the last ones from the sequence's last observation


def test_a_window_at_the_end_of_the_sequence_bootstraps_from_its_last_observation():
    rewards, discounts, valid = torch.ones(3, 1, dtype=torch.float64), torch.full((3, 1), 0.5, dtype=torch.float64), \
        torch.ones(3, 1, dtype=torch.float64)
    q = torch.zeros(4, 1, 2, dtype=torch.float64)
    q[3, 0] = torch.tensor([1.0, 8.0])   # the last observation: a* = 1, worth 8
    targets, mask = r2d2_targets(q, q, rewards, discounts, valid, n=5, value_rescaling_eps=None)
    # step 1: r1 + 0.5 r2 + 0.25 * 8 (two steps left, not five)
    assert targets[1, 0].item() == pytest.approx(1 + 0.5 + 0.25 * 8)
    assert targets[2, 0].item() == pytest.approx(1 + 0.5 * 8) and mask.sum() == 3


def test_sequence_priorities_mix_the_max_and_the_mean():
    td = torch.tensor([[1.0, -2.0, 0.0], [-3.0, 4.0, 0.0], [5.0, 100.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [1, 0, 0]], dtype=torch.float64)  # 100 is masked out
    p = sequence_priorities(td, mask, eta=0.9, priority_eps=1e-6)
    expected = [0.9 * 5 + 0.1 * 3 + 1e-6, 0.9 * 4 + 0.1 * 3 + 1e-6, 1e-6]  # the last sequence has no step
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="eta"):
        sequence_priorities(td, mask, eta=1.5)


def test_the_loss_is_the_weighted_mean_of_each_sequences_masked_mean_and_moves_only_taken_values():
    q_online, q_target, rewards, discounts, valid = _sequences(3)
    targets, mask = r2d2_targets(q_online, q_target, rewards, discounts, valid, n=3)
    rng = np.random.default_rng(4)
    actions = torch.from_numpy(rng.integers(0, 3, size=rewards.shape))
    weights = torch.from_numpy(rng.random(rewards.shape[1]))
    q = q_online[:-1].clone().requires_grad_(True)
    loss, priorities, stats = r2d2_loss(q, actions, targets, mask, weights)
    qn, a, y, m, w = q.detach().numpy(), actions.numpy(), targets.numpy(), mask.numpy(), weights.numpy()
    per_sequence, expected_p = [], []
    for b in range(qn.shape[1]):
        td = [y[t, b] - qn[t, b, a[t, b]] for t in range(qn.shape[0]) if m[t, b]]
        per_sequence.append(w[b] * np.mean([0.5 * x ** 2 for x in td]))
        expected_p.append(0.9 * max(abs(x) for x in td) + 0.1 * np.mean(np.abs(td)) + 1e-6)
    assert loss.item() == pytest.approx(np.mean(per_sequence), rel=1e-12)
    np.testing.assert_allclose(priorities.numpy(), expected_p, rtol=1e-12)
    loss.backward()
    taken = torch.zeros_like(q, dtype=torch.bool).scatter_(-1, actions.unsqueeze(-1), True) & (mask != 0)[..., None]
    assert (q.grad[~taken] == 0).all() and (q.grad[taken] != 0).all()
    assert set(stats) == {"q_loss", "td_error", "q_taken", "target"}

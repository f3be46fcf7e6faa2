"""n-step items, (Double) DQN targets, the dueling head and the prioritised TD loss against offpolicy_reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import losses_reference
import offpolicy_reference as reference
from loss_test_data import GAMMA, TOLERANCES, assert_close, random_unroll
from menger.losses.dqn import (
    PRIORITY_EPS,
    double_q_targets,
    dqn_loss,
    dueling,
    n_step_items,
    n_step_targets,
    q_learning_targets,
)
from menger.losses.value_rescaling import value_rescale


def random_windows(seed: int, B: int, n: int, done_probability: float = 0.3):
    """[B, n] windows with episode ends at random window steps; NumPy float64."""
    rng = np.random.default_rng(seed)
    done = rng.random((B, n)) < done_probability
    return rng.normal(0.0, 1.0, (B, n)), GAMMA * (1.0 - done), rng.normal(0.0, 5.0, B)


def tensors(*arrays, dtype=torch.float64):
    return [torch.tensor(array, dtype=dtype) for array in arrays]


# ----- n-step targets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 5])
@pytest.mark.parametrize("B", [1, 16])
def test_n_step_targets_match_the_sum(B, n, dtype):
    rewards, discounts, bootstrap = random_windows(seed=10 * B + n, B=B, n=n)
    targets = n_step_targets(*tensors(rewards, discounts, bootstrap, dtype=dtype))
    assert targets.shape == (B,)
    assert_close(targets, reference.n_step_return(rewards, discounts, bootstrap), dtype)


def test_an_episode_end_inside_the_window_keeps_its_reward_and_cuts_the_rest():
    rewards = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]], dtype=torch.float64)
    discounts = torch.tensor([[0.9, 0.0, 0.9], [0.9, 0.9, 0.9]], dtype=torch.float64)  # row 0 ends at step 1
    targets = n_step_targets(rewards, discounts, torch.tensor([100.0, 100.0], dtype=torch.float64))
    assert targets[0].item() == pytest.approx(1.0 + 0.9 * 2.0)
    assert targets[1].item() == pytest.approx(1.0 + 0.9 * 2.0 + 0.81 * 3.0 + 0.729 * 100.0)


def test_a_window_padded_with_identity_steps_is_its_shorter_return():
    short = n_step_targets(*tensors([[1.0, 2.0]], [[0.9, 0.9]], [10.0]))
    padded = n_step_targets(*tensors([[1.0, 2.0, 0.0, 0.0]], [[0.9, 0.9, 1.0, 1.0]], [10.0]))
    torch.testing.assert_close(padded, short, rtol=0, atol=0)


def test_a_cut_bootstrap_is_exactly_zero_even_when_not_finite():
    targets = n_step_targets(*tensors([[1.0, 2.0]], [[0.9, 0.0]], [np.nan]))
    assert targets.item() == pytest.approx(2.8)


def off_by_one_discount(r, gamma, V):
    """A mutant: the reward of window step k discounted by gamma_0 ... gamma_k instead of gamma_0 ... gamma_{k-1}."""
    return np.array([sum(losses_reference.product(gamma[b, : k + 1]) * r[b, k] for k in range(r.shape[1]))
                     + losses_reference.product(gamma[b]) * V[b] for b in range(len(V))])


def bootstrap_one_step_short(r, gamma, V):
    """A mutant: the bootstrap discounted by gamma_0 ... gamma_{n-2}, one factor short."""
    return np.array([sum(losses_reference.product(gamma[b, :k]) * r[b, k] for k in range(r.shape[1]))
                     + losses_reference.product(gamma[b, :-1]) * V[b] for b in range(len(V))])


def no_episode_cut(r, gamma, V):
    """A mutant: gamma^k throughout, as if no episode ever ended inside a window."""
    n = r.shape[1]
    return np.array([sum(GAMMA**k * r[b, k] for k in range(n)) + GAMMA**n * V[b] for b in range(len(V))])


@pytest.mark.parametrize("mutant", [off_by_one_discount, bootstrap_one_step_short, no_episode_cut])
def test_the_reference_detects_a_wrong_discount(mutant):
    rewards, discounts, bootstrap = random_windows(seed=7, B=32, n=3)
    expected = reference.n_step_return(rewards, discounts, bootstrap)
    np.testing.assert_allclose(n_step_targets(*tensors(rewards, discounts, bootstrap)).numpy(), expected, rtol=1e-12)
    wrong = mutant(rewards, discounts, bootstrap)
    assert not np.allclose(wrong, expected, rtol=1e-3, atol=1e-3), f"{mutant.__name__} went unnoticed"


def test_n_step_target_shapes_are_checked():
    with pytest.raises(ValueError, match="bootstrap_value"):
        n_step_targets(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(3))
    with pytest.raises(ValueError, match="discounts"):
        n_step_targets(torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(4))
    with pytest.raises(ValueError, match="rewards"):
        n_step_targets(torch.zeros(4), torch.zeros(4), torch.zeros(4))


# ----- n-step items from an unroll -----------------------------------------------------------------------


def unroll_arrays(unroll, seed: int = 0):
    """obs [T+1, B, 2] holding (t, b), so that an item's obs says where it came from; actions [T, B]."""
    T, B = unroll.rewards.shape
    t, b = np.meshgrid(np.arange(T + 1), np.arange(B), indexing="ij")
    obs = np.stack([t, b], axis=-1).astype(np.float64)
    actions = np.random.default_rng(seed).integers(0, 4, (T, B))
    return obs, actions


def build_items(unroll, n, dtype=torch.float64, valid=None):
    obs, actions = unroll_arrays(unroll)
    valid = unroll.mask if valid is None else valid
    return n_step_items(
        torch.tensor(obs, dtype=dtype), torch.tensor(actions), unroll.torch("rewards", dtype),
        unroll.torch("discounts", dtype), torch.tensor(valid), n,
    )


@pytest.mark.parametrize("n", [1, 2, 3, 5, 20])
def test_items_match_the_walk_of_each_window(unroll, dtype, n):
    items = build_items(unroll, n, dtype)
    obs, actions = unroll_arrays(unroll)
    expected = reference.n_step_items(obs, actions, unroll.rewards, unroll.discounts, unroll.mask, n)
    assert len(items.rewards) == len(expected)
    assert_close(items.rewards, [item["R"] for item in expected], dtype)
    assert_close(items.discounts, [item["D"] for item in expected], dtype)
    for name, key in (("obs", "obs"), ("next_obs", "next_obs")):
        assert_close(getattr(items, name), np.array([item[key] for item in expected]).reshape(-1, 2), dtype)
    for name, key in (("actions", "action"), ("length", "m"), ("start", "t"), ("env", "b")):
        np.testing.assert_array_equal(getattr(items, name).numpy(), [item[key] for item in expected], err_msg=name)


def test_items_by_hand_around_an_episode_end_a_reset_step_and_the_unroll_end():
    rewards = torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0]], dtype=torch.float64)
    done = torch.tensor([[0.0], [1.0], [1.0], [0.0], [0.0]], dtype=torch.float64)  # ends at 1; 2 is a reset step
    valid = torch.tensor([[1], [1], [0], [1], [1]])
    obs = torch.arange(6, dtype=torch.float64).reshape(6, 1)
    items = n_step_items(obs, torch.zeros(5, 1, dtype=torch.long), rewards, 0.9 * (1.0 - done), valid, n=3)
    assert items.start.tolist() == [0, 1, 3, 4]  # the reset step starts no item
    torch.testing.assert_close(items.rewards, torch.tensor([1 + 0.9 * 2, 2, 4 + 0.9 * 5, 5], dtype=torch.float64))
    torch.testing.assert_close(items.discounts, torch.tensor([0.0, 0.0, 0.81, 0.9], dtype=torch.float64))
    assert items.length.tolist() == [2, 1, 2, 1]  # cut by the episode end; truncated by the unroll's end
    assert items.next_obs.tolist() == [2.0, 2.0, 5.0, 5.0]


def test_an_invalid_step_inside_an_episode_ends_the_window_but_keeps_the_bootstrap():
    """A dropped NaN at step 2: steps 0 and 1 are real and obs_2 is a real state to bootstrap from."""
    rewards = torch.tensor([[1.0], [2.0], [3.0], [4.0]], dtype=torch.float64)
    discounts = torch.full((4, 1), 0.9, dtype=torch.float64)
    valid = torch.tensor([[True], [True], [False], [True]])
    obs = torch.arange(5, dtype=torch.float64).reshape(5, 1)
    items = n_step_items(obs, torch.zeros(4, 1, dtype=torch.long), rewards, discounts, valid, n=3)
    assert items.start.tolist() == [0, 1, 3]
    torch.testing.assert_close(items.rewards, torch.tensor([1 + 0.9 * 2, 2, 4], dtype=torch.float64))
    torch.testing.assert_close(items.discounts, torch.tensor([0.81, 0.9, 0.9], dtype=torch.float64))
    assert items.next_obs.tolist() == [2.0, 2.0, 4.0]


def test_long_windows_give_the_n_step_returns_of_the_unroll(unroll):
    """With every step real and n >= T, R + D V(next_obs) is the unroll's n-step return G_t of losses_reference."""
    T, B = unroll.rewards.shape
    all_valid = np.ones((T, B))
    items = build_items(unroll, n=T, valid=all_valid)
    values = np.concatenate([unroll.values, unroll.bootstrap_value[None]])  # V(obs_t), t = 0..T
    next_t, next_b = items.next_obs[:, 0].long(), items.next_obs[:, 1].long()
    targets = items.rewards + items.discounts * torch.tensor(values)[next_t, next_b]
    expected = losses_reference.n_step_returns(unroll.rewards, unroll.bootstrap_value, unroll.discounts)
    np.testing.assert_allclose(targets.numpy(), expected.reshape(-1), rtol=1e-10, atol=1e-10)


def test_one_item_per_valid_step():
    unroll = random_unroll(seed=4, T=9, B=5)
    items = build_items(unroll, n=3)
    real = set(zip(*np.nonzero(unroll.mask)))
    assert len(items.start) == len(real) == len(set(zip(items.start.tolist(), items.env.tolist())))
    assert set(zip(items.start.tolist(), items.env.tolist())) == real
    assert ((items.length >= 1) & (items.length <= 3)).all()


def test_bootstrapping_one_step_early_is_detected():
    """A mutant that bootstraps from obs_{t+m-1}: the (t, b) the observations hold give it away."""
    unroll = random_unroll(seed=2, T=7, B=4)
    obs, actions = unroll_arrays(unroll)
    items = build_items(unroll, n=3)
    expected = reference.n_step_items(obs, actions, unroll.rewards, unroll.discounts, unroll.mask, 3)
    one_step_early = np.array([obs[item["t"] + item["m"] - 1, item["b"]] for item in expected])
    np.testing.assert_array_equal(items.next_obs.numpy(), [item["next_obs"] for item in expected])
    assert not np.array_equal(items.next_obs.numpy(), one_step_early)


def test_dict_observations_are_cut_like_tensors():
    unroll = random_unroll(seed=3, T=6, B=2)
    obs, actions = unroll_arrays(unroll)
    pixels = torch.tensor(obs)
    items = n_step_items(
        {"pixels": pixels, "t": pixels[..., 0]}, torch.tensor(actions), unroll.torch("rewards"),
        unroll.torch("discounts"), torch.tensor(unroll.mask), 3,
    )
    plain = build_items(unroll, 3)
    torch.testing.assert_close(items.obs["pixels"], plain.obs)
    torch.testing.assert_close(items.next_obs["t"], plain.next_obs[:, 0])


def test_item_arguments_are_checked():
    T, B = 4, 2
    args = dict(obs=torch.zeros(T + 1, B), actions=torch.zeros(T, B), rewards=torch.zeros(T, B),
                discounts=torch.zeros(T, B), valid=torch.ones(T, B), n=3)
    with pytest.raises(ValueError, match="obs"):
        n_step_items(**dict(args, obs=torch.zeros(T, B)))
    with pytest.raises(ValueError, match="valid"):
        n_step_items(**dict(args, valid=torch.ones(T, B + 1)))
    with pytest.raises(ValueError, match="n=0"):
        n_step_items(**dict(args, n=0))
    with pytest.raises(ValueError, match="discounts"):
        n_step_items(**dict(args, discounts=torch.zeros(T + 1, B)))


# ----- Q-learning and Double DQN targets -----------------------------------------------------------------


def random_q(seed: int, B: int = 24, A: int = 5):
    rng = np.random.default_rng(seed)
    q_online, q_target = rng.normal(0.0, 3.0, (B, A)), rng.normal(0.0, 3.0, (B, A))
    R = rng.normal(0.0, 2.0, B)
    D = GAMMA**3 * (rng.random(B) > 0.25)
    return q_online, q_target, R, D


@pytest.mark.parametrize("eps", [None, 1e-3], ids=["plain", "rescaled"])
def test_double_q_targets_match_the_reference(dtype, eps):
    q_online, q_target, R, D = random_q(seed=1)
    targets = double_q_targets(*tensors(q_online, q_target, R, D, dtype=dtype), value_rescaling_eps=eps)
    assert_close(targets, reference.double_q_targets(q_online, q_target, R, D, eps), dtype)


@pytest.mark.parametrize("eps", [None, 1e-3], ids=["plain", "rescaled"])
def test_q_learning_targets_match_the_max(dtype, eps):
    _, q_target, R, D = random_q(seed=2)
    targets = q_learning_targets(*tensors(q_target, R, D, dtype=dtype), value_rescaling_eps=eps)
    assert_close(targets, reference.q_learning_targets(q_target, R, D, eps), dtype)


@pytest.mark.parametrize("eps", [None, 1e-3], ids=["plain", "rescaled"])
def test_double_dqn_is_dqn_when_the_online_net_is_the_target_net(eps):
    _, q_target, R, D = random_q(seed=3)
    q_target, R, D = tensors(q_target, R, D)
    torch.testing.assert_close(
        double_q_targets(q_target, q_target, R, D, value_rescaling_eps=eps),
        q_learning_targets(q_target, R, D, value_rescaling_eps=eps), rtol=0, atol=0,
    )


def test_double_dqn_never_exceeds_dqn_and_differs_when_the_nets_do():
    q_online, q_target, R, D = tensors(*random_q(seed=4))
    double, plain = double_q_targets(q_online, q_target, R, D), q_learning_targets(q_target, R, D)
    assert (double <= plain).all()
    assert (double < plain).any()


def test_double_dqn_by_hand():
    """The online net prefers action 1, which the target net values at 0; plain DQN takes the target's 5."""
    q_online, q_target = torch.tensor([[1.0, 2.0]]), torch.tensor([[5.0, 0.0]])
    R, D = torch.tensor([1.0]), torch.tensor([0.5])
    assert double_q_targets(q_online, q_target, R, D).item() == pytest.approx(1.0)
    assert q_learning_targets(q_target, R, D).item() == pytest.approx(3.5)


def test_the_rescaled_target_of_a_terminal_item_is_h_of_its_reward():
    q = torch.tensor([[1e6, -1e6]], dtype=torch.float64)
    R = torch.tensor([250.0], dtype=torch.float64)
    targets = double_q_targets(q, q, R, torch.zeros(1, dtype=torch.float64), value_rescaling_eps=1e-3)
    torch.testing.assert_close(targets, value_rescale(R, 1e-3))


def test_targets_carry_no_gradient_and_are_over_the_last_axis():
    q_online, q_target, R, D = (x.requires_grad_() for x in tensors(*random_q(seed=5)))
    assert not double_q_targets(q_online, q_target, R, D).requires_grad
    assert not q_learning_targets(q_target, R, D).requires_grad
    sequences = double_q_targets(q_online.reshape(4, 6, 5), q_target.reshape(4, 6, 5), R.reshape(4, 6), D.reshape(4, 6))
    torch.testing.assert_close(sequences.reshape(-1), double_q_targets(q_online, q_target, R, D))


def test_target_shapes_are_checked():
    with pytest.raises(ValueError, match="q_next_online"):
        double_q_targets(torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(5), torch.zeros(5))
    with pytest.raises(ValueError, match="q_next_target"):
        double_q_targets(torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(4), torch.zeros(4))
    with pytest.raises(ValueError, match="n_step_discounts"):
        q_learning_targets(torch.zeros(4, 3), torch.zeros(4), torch.zeros(3))


# ----- dueling -------------------------------------------------------------------------------------------


def test_dueling_matches_eq_9(dtype):
    rng = np.random.default_rng(6)
    value, advantages = rng.normal(size=(7, 1)), rng.normal(size=(7, 4))
    assert_close(dueling(*tensors(value, advantages, dtype=dtype)), reference.dueling(value, advantages), dtype)


def test_dueling_is_identifiable_and_averages_to_the_value():
    value, advantages = torch.randn(5, 1, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    q = dueling(value, advantages)
    torch.testing.assert_close(q.mean(dim=-1, keepdim=True), value)
    torch.testing.assert_close(dueling(value, advantages + 7.0), q)
    torch.testing.assert_close(q.argmax(-1), advantages.argmax(-1), rtol=0, atol=0)


def test_dueling_gradients_and_shapes():
    value = torch.randn(3, 1, dtype=torch.float64, requires_grad=True)
    advantages = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(dueling, (value, advantages))
    dueling(value, advantages)[:, 2].sum().backward()  # dQ(s, 2)/dV = 1, dQ(s, 2)/dA(s, a) = [a == 2] - 1/4
    torch.testing.assert_close(value.grad, torch.ones(3, 1, dtype=torch.float64))
    torch.testing.assert_close(advantages.grad[0], torch.tensor([-0.25, -0.25, 0.75, -0.25], dtype=torch.float64))
    with pytest.raises(ValueError, match="value"):
        dueling(torch.zeros(3), torch.zeros(3, 4))


# ----- the TD loss and its priorities --------------------------------------------------------------------


def random_replay_batch(seed: int, B: int = 20, A: int = 4, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    arrays = dict(
        q=rng.normal(0.0, 2.0, (B, A)),
        actions=rng.integers(0, A, B),
        targets=rng.normal(0.0, 2.0, B),  # errors beyond Huber's delta and within it
        weights=rng.uniform(0.1, 1.0, B),
        mask=(rng.random(B) > 0.25).astype(np.float64),
    )
    arrays["mask"][0] = 1.0
    batch = {name: torch.tensor(array, dtype=dtype) for name, array in arrays.items() if name != "actions"}
    batch["actions"] = torch.tensor(arrays["actions"])
    batch["q"].requires_grad_()
    return batch, arrays


def call_loss(batch, **options):
    return dqn_loss(batch["q"], batch["actions"], batch["targets"], batch["weights"], batch["mask"], **options)


@pytest.mark.parametrize("options", [dict(loss="huber"), dict(loss="huber", huber_delta=0.5), dict(loss="mse")],
                         ids=["huber", "huber_0.5", "mse"])
def test_dqn_loss_matches_the_reference(options, dtype):
    batch, arrays = random_replay_batch(seed=11, dtype=dtype)
    loss, priorities, stats = call_loss(batch, **options)
    kappa = options.get("huber_delta", 1.0)
    expected_loss, expected_priorities, expected_stats = reference.dqn_loss(
        arrays["q"], arrays["actions"], arrays["targets"], arrays["weights"], arrays["mask"], options["loss"], kappa,
        PRIORITY_EPS,
    )
    assert loss.dtype == dtype
    np.testing.assert_allclose(loss.item(), expected_loss, **TOLERANCES[dtype])
    assert_close(priorities, expected_priorities, dtype)
    for name, value in expected_stats.items():
        np.testing.assert_allclose(stats[name].item(), value, **TOLERANCES[dtype], err_msg=name)


def test_priorities_are_the_absolute_td_error_plus_eps_and_zero_when_masked():
    q = torch.tensor([[1.0, 2.0], [0.0, 0.0], [3.0, 3.0]], dtype=torch.float64)
    actions, targets = torch.tensor([1, 0, 1]), torch.tensor([2.0, 5.0, -1.0], dtype=torch.float64)
    _, priorities, _ = dqn_loss(q, actions, targets, mask=torch.tensor([1.0, 0.0, 1.0]), priority_eps=0.01)
    torch.testing.assert_close(priorities, torch.tensor([0.01, 0.0, 4.01], dtype=torch.float64))
    assert not priorities.requires_grad


def test_the_gradient_reaches_only_the_taken_actions():
    batch, arrays = random_replay_batch(seed=12)
    batch["targets"].requires_grad_()
    batch["weights"].requires_grad_()
    call_loss(batch)[0].backward()
    taken = np.zeros_like(arrays["q"], dtype=bool)
    taken[np.arange(len(arrays["actions"])), arrays["actions"]] = arrays["mask"] != 0
    grad = batch["q"].grad.numpy()
    assert (grad[~taken] == 0).all() and (grad[taken] != 0).all()
    assert batch["targets"].grad is None and batch["weights"].grad is None


def test_huber_clips_the_gradient_at_delta():
    q = torch.zeros(2, 1, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([10.0, -0.3], dtype=torch.float64)
    weights = torch.tensor([0.5, 1.0], dtype=torch.float64)
    loss, _, _ = dqn_loss(q, torch.zeros(2, dtype=torch.long), targets, weights, huber_delta=1.0)
    loss.backward()
    # d/dQ of w * huber(y - Q), over N = 2: -w * clip(y - Q, -1, 1) / 2
    torch.testing.assert_close(q.grad[:, 0], torch.tensor([-0.5 * 1.0 / 2, 0.3 / 2], dtype=torch.float64))
    assert loss.item() == pytest.approx((0.5 * (10.0 - 0.5) + 0.5 * 0.09) / 2)


def test_mse_is_huber_with_a_delta_beyond_every_error():
    batch, _ = random_replay_batch(seed=13)
    mse, _, _ = call_loss(batch, loss="mse")
    wide_huber, _, _ = call_loss(batch, loss="huber", huber_delta=1e6)
    torch.testing.assert_close(mse, wide_huber, rtol=1e-12, atol=1e-12)
    narrow_huber, _, _ = call_loss(batch, loss="huber")
    assert narrow_huber < mse


def test_masked_items_change_nothing_even_when_garbage():
    batch, _ = random_replay_batch(seed=14)
    loss, priorities, stats = call_loss(batch)
    loss.backward()
    poisoned, _ = random_replay_batch(seed=14)
    masked = poisoned["mask"] == 0
    assert masked.any()
    with torch.no_grad():
        poisoned["q"][masked] = torch.nan
        poisoned["targets"][masked] = torch.inf
        poisoned["weights"][masked] = -1e30
        poisoned["actions"][masked] = -1  # not even a valid index
    poisoned_loss, poisoned_priorities, poisoned_stats = call_loss(poisoned)
    poisoned_loss.backward()
    torch.testing.assert_close(poisoned_loss, loss, rtol=0, atol=0)
    torch.testing.assert_close(poisoned_priorities, priorities, rtol=0, atol=0)
    torch.testing.assert_close(poisoned["q"].grad, batch["q"].grad, rtol=0, atol=0)
    for name in stats:
        torch.testing.assert_close(poisoned_stats[name], stats[name], rtol=0, atol=0)


def test_an_all_masked_batch_gives_zero_loss_and_zero_gradient():
    batch, _ = random_replay_batch(seed=15)
    batch["mask"] = torch.zeros_like(batch["mask"])
    loss, priorities, stats = call_loss(batch)
    loss.backward()
    assert loss.item() == 0.0 and (priorities == 0).all() and (batch["q"].grad == 0).all()
    assert all(value.item() == 0.0 for value in stats.values())


def test_dqn_loss_gradients_match_finite_differences():
    batch, _ = random_replay_batch(seed=16, B=6, A=3)

    def loss_of(q):
        return call_loss(dict(batch, q=q), huber_delta=0.7)[0]

    assert torch.autograd.gradcheck(loss_of, (batch["q"],))


def test_dqn_loss_arguments_are_checked():
    q, targets = torch.zeros(4, 3), torch.zeros(4)
    with pytest.raises(TypeError, match="actions"):
        dqn_loss(q, torch.zeros(4), targets)
    with pytest.raises(ValueError, match="weights"):
        dqn_loss(q, torch.zeros(4, dtype=torch.long), targets, torch.ones(5))
    with pytest.raises(ValueError, match="loss='l1'"):
        dqn_loss(q, torch.zeros(4, dtype=torch.long), targets, loss="l1")
    with pytest.raises(ValueError, match="q has shape"):
        dqn_loss(torch.zeros(5, 3), torch.zeros(4, dtype=torch.long), targets)

"""Value-based learning from replay: n-step items (Ape-X, Horgan et al. 2018), Q-learning and Double DQN
targets (van Hasselt et al. 2016), the dueling head (Wang et al. 2016) and the prioritised TD loss.

A replay item is one transition with an n-step window folded in: (obs_t, action_t, R, D, obs_{t+m}), where
R = sum_{k<m} (prod_{j<k} discount_{t+j}) r_{t+k} and D = prod_{k<m} discount_{t+k}, so that its target is
R + D * Q(obs_{t+m}, .) whatever m the window got. A sampled batch is rows of items: tensors here are [B] or
[B, A] (an n-step window is [B, n], the window axis second), not the time-major [T, B] of an unroll.

Actors cut their unrolls with n_step_items; a learner step::

    batch = replay.sample(batch_size)                           # NStepItems rows, keys, importance weights
    with torch.no_grad():
        targets = double_q_targets(online(batch.next_obs), target(batch.next_obs), batch.rewards, batch.discounts)
    loss, priorities, stats = dqn_loss(online(batch.obs), batch.actions, targets, batch.weights)
    step(loss); replay.update_priorities(batch.keys, priorities)
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from menger.losses.masking import check_mask, cut_bootstrap, keep_masked, masked_mean
from menger.losses.value_rescaling import inverse_value_rescale, value_rescale

Obs = Tensor | dict[str, Tensor]

PRIORITY_EPS = 1e-6  # Schaul et al. 2016's epsilon: a transition whose TD error is 0 must stay sampleable


def _check_like(reference_name: str, reference: Tensor, **tensors: Tensor | None) -> None:
    for name, tensor in tensors.items():
        if tensor is not None and tensor.shape != reference.shape:
            raise ValueError(
                f"{name} has shape {tuple(tensor.shape)} but {reference_name} has shape {tuple(reference.shape)}; "
                f"pass them alike: one entry per replay item ([B], or [T, B] for sequences) or per unroll step."
            )


def _check_float(**tensors: Tensor | None) -> None:
    for name, tensor in tensors.items():
        if tensor is not None and not tensor.is_floating_point():
            raise TypeError(f"{name} has dtype {tensor.dtype}; pass a floating-point tensor (float32 or float64).")


def _window_sums(rewards: Tensor, discounts: Tensor) -> tuple[Tensor, Tensor]:
    """(R, D) of [B, n] windows: R = sum_k (prod_{j<k} discounts_j) rewards_k and D = prod_k discounts_k."""
    n_step_rewards = torch.zeros_like(rewards[..., 0])
    running_discount = torch.ones_like(rewards[..., 0])
    for k in range(rewards.shape[-1]):
        n_step_rewards = n_step_rewards + running_discount * rewards[..., k]
        running_discount = running_discount * discounts[..., k]
    return n_step_rewards, running_discount


@torch.no_grad()
def n_step_targets(rewards: Tensor, discounts: Tensor, bootstrap_value: Tensor) -> Tensor:
    """G = sum_{k<n} (prod_{j<k} discounts_j) rewards_k + (prod_{j<n} discounts_j) bootstrap_value.

    rewards, discounts [B, n] are each item's window (r_t ... r_{t+n-1}), bootstrap_value [B] is the value of
    obs_{t+n}. discounts_j = gamma * (1 - done_j): an episode that ends at window step j keeps r_j, drops every
    later reward and the bootstrap. Pad a window shorter than n with reward 0 and discount 1 (a step that
    changes nothing). Returns [B], a target: no gradient flows.
    """
    if rewards.dim() != 2 or rewards.shape[1] == 0:
        raise ValueError(f"rewards has shape {tuple(rewards.shape)}; expected [B, n], one n-step window per item.")
    _check_like("rewards", rewards, discounts=discounts)
    _check_float(rewards=rewards, discounts=discounts, bootstrap_value=bootstrap_value)
    if bootstrap_value.shape != rewards.shape[:1]:
        raise ValueError(
            f"bootstrap_value has shape {tuple(bootstrap_value.shape)}; expected {tuple(rewards.shape[:1])}, "
            f"the value of the state after each item's window."
        )
    n_step_rewards, n_step_discounts = _window_sums(rewards, discounts)
    return n_step_rewards + cut_bootstrap(n_step_discounts, bootstrap_value)


class NStepItems(NamedTuple):
    """Replay items cut from an unroll, one per valid step, in time-major order (t, then env b).

    obs, actions: at the item's start step t. rewards [N]: R = sum_{k<m} (prod_{j<k} discount_{t+j}) r_{t+k}.
    discounts [N]: D = prod_{k<m} discount_{t+k} (0 once the window met an episode end). next_obs: obs_{t+m},
    the state to bootstrap from. length [N]: m, the steps the window holds (1 <= m <= n). start, env [N]: t and b.
    """

    obs: Obs
    actions: Tensor
    rewards: Tensor
    discounts: Tensor
    next_obs: Obs
    length: Tensor
    start: Tensor
    env: Tensor


def _index_obs(obs: Obs, time: Tensor, env: Tensor) -> Obs:
    if isinstance(obs, dict):
        return {key: value[time, env] for key, value in obs.items()}
    return obs[time, env]


def _check_obs(obs: Obs, rewards: Tensor) -> None:
    expected = (rewards.shape[0] + 1, rewards.shape[1])
    for name, value in (obs.items() if isinstance(obs, dict) else [("obs", obs)]):
        if tuple(value.shape[:2]) != expected:
            raise ValueError(
                f"{name} has shape {tuple(value.shape)}; expected [T+1, B, ...] = {expected} + ..., the T+1 "
                f"observations of the unroll (obs_T is the state after its last step)."
            )


@torch.no_grad()
def n_step_items(obs: Obs, actions: Tensor, rewards: Tensor, discounts: Tensor, valid: Tensor, n: int) -> NStepItems:
    """Cut an unroll into n-step replay items (Ape-X): obs [T+1, B, ...] (a tensor or a dict of them), actions
    [T, B, ...], rewards, discounts, valid [T, B] with discounts_t = gamma * (1 - done_t).

    Every step t with valid_t != 0 starts one item; an invalid step (a reset step, a dropped NaN) starts none.
    The window of step t takes steps t, t+1, ... and stops after n steps or earlier:
    * after an episode end (discount 0): that step's reward counts, D = 0 cuts the bootstrap;
    * before an invalid step: its reward is not a real one, so the window ends and bootstraps from obs_{t+m},
      the last real state before it, with the discounts of the steps it kept;
    * at the end of the unroll: the window is *truncated* to the m = T - t steps it has and bootstraps from
      obs_T with D = prod of m discounts. Each item carries its own D, so its target R + D * Q(obs_{t+m}) is a
      correct m-step target; dropping these windows instead would lose the last n-1 steps of every unroll,
      which no later unroll replays. Only their horizon is shorter.
    """
    if rewards.dim() != 2 or rewards.shape[0] == 0:
        raise ValueError(f"rewards has shape {tuple(rewards.shape)}; expected time-major [T, B] with T >= 1.")
    _check_like("rewards", rewards, discounts=discounts)
    _check_float(rewards=rewards, discounts=discounts)
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n={n!r} must be an int >= 1, the longest window of an item (Ape-X uses 3).")
    check_mask(valid, rewards, name="valid")
    if actions.shape[:2] != rewards.shape:
        raise ValueError(
            f"actions has shape {tuple(actions.shape)}; expected [T, B, ...] = {tuple(rewards.shape)} + ..., "
            f"the action taken at each step."
        )
    _check_obs(obs, rewards)

    T = rewards.shape[0]
    window = torch.arange(T, device=rewards.device)[:, None] + torch.arange(n, device=rewards.device)  # [T, n]: t + k
    inside = window < T
    window = window.clamp(max=T - 1)
    window_discounts = discounts[window]  # [T, n, B]
    # Step k belongs to the window when it is real and no earlier step of the window ended its episode.
    kept = (valid[window] != 0) & inside[:, :, None]
    for k in range(1, n):
        kept[:, k] &= kept[:, k - 1] & (window_discounts[:, k - 1] != 0)
    rewards_kept = torch.where(kept, rewards[window], torch.zeros_like(window_discounts))
    discounts_kept = torch.where(kept, window_discounts, torch.ones_like(window_discounts))
    n_step_rewards, n_step_discounts = _window_sums(rewards_kept.transpose(1, 2), discounts_kept.transpose(1, 2))
    length = kept.sum(dim=1)  # [T, B]

    start, env = (valid != 0).nonzero(as_tuple=True)  # time-major order
    m = length[start, env]
    return NStepItems(
        obs=_index_obs(obs, start, env),
        actions=actions[start, env],
        rewards=n_step_rewards[start, env],
        discounts=n_step_discounts[start, env],
        next_obs=_index_obs(obs, start + m, env),
        length=m,
        start=start,
        env=env,
    )


def _check_q(name: str, q: Tensor, per_item_name: str, per_item: Tensor) -> None:
    if q.dim() < 1 or q.shape[:-1] != per_item.shape:
        raise ValueError(
            f"{name} has shape {tuple(q.shape)}; expected {tuple(per_item.shape)} + [A], one row of action "
            f"values per entry of {per_item_name}."
        )


def _bootstrap_target(
    q_bootstrap: Tensor, n_step_rewards: Tensor, n_step_discounts: Tensor, value_rescaling_eps: float | None
) -> Tensor:
    _check_like("n_step_rewards", n_step_rewards, n_step_discounts=n_step_discounts)
    _check_float(n_step_rewards=n_step_rewards, n_step_discounts=n_step_discounts)
    if value_rescaling_eps is None:
        return n_step_rewards + cut_bootstrap(n_step_discounts, q_bootstrap)
    q_bootstrap = inverse_value_rescale(q_bootstrap, value_rescaling_eps)
    return value_rescale(n_step_rewards + cut_bootstrap(n_step_discounts, q_bootstrap), value_rescaling_eps)


@torch.no_grad()
def q_learning_targets(
    q_next_target: Tensor,
    n_step_rewards: Tensor,
    n_step_discounts: Tensor,
    *,
    value_rescaling_eps: float | None = None,
) -> Tensor:
    """DQN's target y = R + D * max_a Q_target(s', a) (Mnih et al. 2015), [B] from q_next_target [B, A].

    R, D are the items' n-step reward sum and discount product (n_step_items). With value_rescaling_eps, the
    networks learn h(Q) and y = h(R + D * h^-1(max_a Q_target(s', a))) (R2D2). No gradient flows.
    """
    _check_q("q_next_target", q_next_target, "n_step_rewards", n_step_rewards)
    q_bootstrap = q_next_target.max(dim=-1).values
    return _bootstrap_target(q_bootstrap, n_step_rewards, n_step_discounts, value_rescaling_eps)


@torch.no_grad()
def double_q_targets(
    q_next_online: Tensor,
    q_next_target: Tensor,
    n_step_rewards: Tensor,
    n_step_discounts: Tensor,
    *,
    value_rescaling_eps: float | None = None,
) -> Tensor:
    """Double DQN's target y = R + D * Q_target(s', argmax_a Q_online(s', a)) (van Hasselt et al. 2016), [B]
    from q_next_online, q_next_target [B, A] (or [T, B, A] with [T, B] R and D).

    The online network picks the action and the target network values it, so the noise that makes a max over
    estimates biased upwards is not the noise that scores the pick. Ties go to the lowest action index.
    value_rescaling_eps as in q_learning_targets. No gradient flows.
    """
    _check_q("q_next_online", q_next_online, "n_step_rewards", n_step_rewards)
    _check_like("q_next_online", q_next_online, q_next_target=q_next_target)
    best_actions = q_next_online.argmax(dim=-1, keepdim=True)
    q_bootstrap = q_next_target.gather(-1, best_actions).squeeze(-1)
    return _bootstrap_target(q_bootstrap, n_step_rewards, n_step_discounts, value_rescaling_eps)


def dueling(value: Tensor, advantages: Tensor) -> Tensor:
    """Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a') (Wang et al. 2016, eq. 9): value [..., 1], advantages [..., A].

    Subtracting the mean makes V and A identifiable (adding c to every advantage changes nothing) while the
    mean over actions of Q stays V. Gradients flow into both streams.
    """
    if value.shape != advantages.shape[:-1] + (1,):
        raise ValueError(
            f"value has shape {tuple(value.shape)}; expected {tuple(advantages.shape[:-1]) + (1,)}, one state value "
            f"per row of advantages {tuple(advantages.shape)} (keep its last axis of size 1)."
        )
    return value + advantages - advantages.mean(dim=-1, keepdim=True)


def td_loss(td_errors: Tensor, loss: str, huber_delta: float) -> Tensor:
    """Per-item loss of TD errors: "huber" 0.5 d^2 for |d| <= delta, delta (|d| - delta / 2) beyond (DQN's error
    clipping: the gradient is d clipped to [-delta, delta]); "mse" 0.5 d^2 (Huber with delta = infinity)."""
    if loss == "mse":
        return 0.5 * td_errors**2
    if loss != "huber":
        raise ValueError(f"loss={loss!r} is not a TD loss; choose 'huber' (DQN, Ape-X) or 'mse'.")
    if not huber_delta > 0:
        raise ValueError(f"huber_delta={huber_delta} must be > 0; DQN uses 1.0.")
    magnitude = td_errors.abs()
    quadratic = magnitude.clamp(max=huber_delta)
    return 0.5 * quadratic**2 + huber_delta * (magnitude - quadratic)


def dqn_loss(
    q: Tensor,
    actions: Tensor,
    targets: Tensor,
    weights: Tensor | None = None,
    mask: Tensor | None = None,
    *,
    loss: str = "huber",
    huber_delta: float = 1.0,
    priority_eps: float = PRIORITY_EPS,
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """Prioritised TD loss: q [B, A] (or [T, B, A]) the online values, actions [B] integer, targets [B] (from
    q_learning_targets / double_q_targets), weights [B] importance weights, mask [B]. Returns
    (loss, priorities [B], stats).

    delta_i = y_i - Q(s_i, a_i); loss = mean over the mask of w_i * td_loss(delta_i) (Schaul et al. 2016, with
    w_i = (N P(i))^-beta / max_j w_j given by the replay). New priorities are |delta_i| + priority_eps
    (Ape-X's absolute TD error; the epsilon keeps a perfectly predicted item sampleable), detached, and exactly
    0 for masked items, which are not to be written back. Priorities are returned beside the stats because
    stats are detached scalars for the logger. Gradients flow into q only, at the taken actions.
    Stats: q_loss, td_error (mean |delta|), q_taken (mean Q(s, a)), target (mean y).
    """
    _check_like("targets", targets, actions=actions, weights=weights)
    _check_q("q", q, "targets", targets)
    _check_float(q=q, targets=targets, weights=weights)
    if actions.is_floating_point() or actions.dtype == torch.bool:
        raise TypeError(f"actions has dtype {actions.dtype}; pass the integer indices of the taken actions.")
    if mask is not None:
        check_mask(mask, targets)
        actions = torch.where(mask != 0, actions, torch.zeros_like(actions))  # a masked action may be garbage
    q_taken = keep_masked(q.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1), mask)
    targets = keep_masked(targets.detach(), mask)
    weights = torch.ones_like(targets) if weights is None else keep_masked(weights.detach(), mask)

    td_errors = targets - q_taken
    q_loss = masked_mean(weights * td_loss(td_errors, loss, huber_delta), mask)
    with torch.no_grad():
        priorities = keep_masked(td_errors.abs() + priority_eps, mask)
        stats = {
            "q_loss": q_loss.detach(),
            "td_error": masked_mean(td_errors.abs(), mask),
            "q_taken": masked_mean(q_taken, mask),
            "target": masked_mean(targets, mask),
        }
    return q_loss, priorities, stats

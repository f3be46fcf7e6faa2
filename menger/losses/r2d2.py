"""R2D2's sequence losses (Kapturowski et al. 2019): n-step double Q-learning on rescaled values over a stored
sequence, and the priority of a sequence.

A replayed sequence holds L observations (after the burn-in) and the L - 1 transitions between them: rewards,
discounts (gamma * (1 - terminated)) and valid [L-1, B], time-major, as in an unroll (obs [T+1], steps [T]). The
networks are unrolled over all L observations from the state the burn-in reached; the last observation is only
ever bootstrapped from. A learner step::

    q = online.unroll(obs, state)                           # [L, B, A], with gradient
    with torch.no_grad():
        q_target = target.unroll(obs, target_state)         # [L, B, A]
        targets, mask = r2d2_targets(q.detach(), q_target, rewards, discounts, valid, n=5)
    loss, priorities, stats = r2d2_loss(q[:-1], actions, targets, mask, weights)

Windows are cut exactly as Ape-X's items are (`n_step_items`): a window stops after an episode end, before an
invalid step, and at the end of the sequence, bootstrapping from the last state it reached. The values are
learned as h(Q) (`value_rescale`), so the target is h(R + D * h^-1(Q_target(s', argmax_a Q_online(s', a)))).
"""
from __future__ import annotations

import torch
from torch import Tensor

from menger.losses.dqn import PRIORITY_EPS, _bootstrap_target, n_step_items, td_loss
from menger.losses.masking import check_mask
from menger.losses.value_rescaling import DEFAULT_EPS

PRIORITY_ETA = 0.9  # R2D2's mix of the max and the mean |TD| of a sequence


def _check_sequence(q: Tensor, rewards: Tensor, name: str) -> None:
    if q.dim() != 3 or q.shape[:2] != (rewards.shape[0] + 1, rewards.shape[1]):
        raise ValueError(f"{name} has shape {tuple(q.shape)}; expected [L, B, A] = ({rewards.shape[0] + 1}, "
                         f"{rewards.shape[1]}, A): a value per observation, one more than the transitions "
                         f"{tuple(rewards.shape)}.")


@torch.no_grad()
def r2d2_targets(q_online: Tensor, q_target: Tensor, rewards: Tensor, discounts: Tensor, valid: Tensor, n: int,
                 value_rescaling_eps: float | None = DEFAULT_EPS) -> tuple[Tensor, Tensor]:
    """(targets [L-1, B], mask [L-1, B]): the rescaled n-step double-Q target of every valid step, and 1 where a
    step has one. q_online, q_target [L, B, A] over the sequence's L observations. No gradient flows."""
    _check_sequence(q_online, rewards, "q_online")
    _check_sequence(q_target, rewards, "q_target")
    best = q_online.argmax(dim=-1, keepdim=True)  # double Q: the online network picks, the target one values
    return sequence_targets(q_target.gather(-1, best).squeeze(-1), rewards, discounts, valid, n, value_rescaling_eps)


@torch.no_grad()
def sequence_targets(bootstrap: Tensor, rewards: Tensor, discounts: Tensor, valid: Tensor, n: int,
                     value_rescaling_eps: float | None = DEFAULT_EPS) -> tuple[Tensor, Tensor]:
    """(targets [L-1, B], mask [L-1, B]) from the value to bootstrap from at each of the L observations,
    bootstrap [L, B] (h-space when value_rescaling_eps is set): h(R + D * h^-1(bootstrap[t + m])) for the window
    of each valid step t. `r2d2_targets` with double Q; an actor's initial priorities with its own max_a Q."""
    if bootstrap.shape != (rewards.shape[0] + 1, rewards.shape[1]):
        raise ValueError(f"bootstrap has shape {tuple(bootstrap.shape)}; expected [L, B] = ({rewards.shape[0] + 1}, "
                         f"{rewards.shape[1]}): a value per observation, one more than the transitions.")
    index = torch.arange(bootstrap.numel(), device=rewards.device).view(bootstrap.shape)
    items = n_step_items(index, torch.zeros_like(rewards, dtype=torch.int64), rewards, discounts, valid, n)
    y = _bootstrap_target(bootstrap[items.start + items.length, items.env], items.rewards, items.discounts,
                          value_rescaling_eps)
    targets, mask = torch.zeros_like(rewards), torch.zeros_like(rewards)
    targets[items.start, items.env] = y.to(targets.dtype)
    mask[items.start, items.env] = 1.0
    return targets, mask


def sequence_priorities(td_errors: Tensor, mask: Tensor, eta: float = PRIORITY_ETA,
                        priority_eps: float = PRIORITY_EPS) -> Tensor:
    """p = eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t| over each sequence's masked steps, [B] from
    [L-1, B], plus priority_eps; a sequence with no step to learn from gets priority_eps. Detached."""
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta={eta} must be in [0, 1]; R2D2 uses 0.9.")
    check_mask(mask, td_errors)
    with torch.no_grad():
        magnitude = td_errors.abs() * (mask != 0)
        count = (mask != 0).sum(0)
        mean = magnitude.sum(0) / count.clamp(min=1)
        return eta * magnitude.max(0).values + (1.0 - eta) * mean + priority_eps


def r2d2_loss(q: Tensor, actions: Tensor, targets: Tensor, mask: Tensor, weights: Tensor | None = None, *,
              loss: str = "mse", huber_delta: float = 1.0, eta: float = PRIORITY_ETA,
              priority_eps: float = PRIORITY_EPS) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """q [L-1, B, A] the online values at the steps (with gradient), actions [L-1, B], targets and mask [L-1, B]
    from `r2d2_targets`, weights [B] the sequences' importance weights. Returns (loss, priorities [B], stats).

    loss = mean over sequences of w_b * (mean over b's masked steps of td_loss(y - Q(s, a))) (0.5 delta^2 by
    default, as R2D2); a sequence with no masked step adds 0. Priorities: `sequence_priorities`. Gradients
    flow into q only, at the taken actions. Stats: q_loss, td_error (mean |delta|), q_taken, target.
    """
    check_mask(mask, targets)
    if q.dim() != 3 or q.shape[:2] != targets.shape or actions.shape != targets.shape:
        raise ValueError(f"q {tuple(q.shape)}, actions {tuple(actions.shape)} and targets {tuple(targets.shape)} "
                         f"must be [L-1, B, A], [L-1, B] and [L-1, B]: one per step of the sequences.")
    if weights is not None and weights.shape != targets.shape[1:]:
        raise ValueError(f"weights has shape {tuple(weights.shape)}; expected {tuple(targets.shape[1:])}, one "
                         f"importance weight per sequence.")
    keep = mask != 0
    safe_actions = torch.where(keep, actions.long(), torch.zeros_like(actions, dtype=torch.long))
    q_taken = q.gather(-1, safe_actions.unsqueeze(-1)).squeeze(-1)
    td_errors = torch.where(keep, targets.detach() - q_taken, torch.zeros_like(q_taken))
    count = keep.sum(0).clamp(min=1)
    per_sequence = (td_loss(td_errors, loss, huber_delta) * keep).sum(0) / count
    w = torch.ones_like(per_sequence) if weights is None else weights.detach()
    q_loss = (w * per_sequence).mean()
    priorities = sequence_priorities(td_errors.detach(), mask, eta, priority_eps)
    with torch.no_grad():
        steps = keep.sum().clamp(min=1)
        stats = {"q_loss": q_loss.detach(), "td_error": td_errors.abs().sum() / steps,
                 "q_taken": (q_taken * keep).sum() / steps, "target": (targets * keep).sum() / steps}
    return q_loss, priorities, stats

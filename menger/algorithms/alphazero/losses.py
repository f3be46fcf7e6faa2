"""AlphaZero's targets and loss (Silver et al. 2018) as pure torch functions.

Tensors are time-major [T, B] over an unroll of self-play games (`menger.algorithms.alphazero.games`): at each
step the seat to move in game b made a move; `rewards[t]` is the mover's result when that move ended the game.
"""
from __future__ import annotations

import torch
from torch import Tensor


def outcome_targets(rewards: Tensor, terminated: Tensor, dones: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """Each position's game outcome z from the view of the seat to move there, and whether it is known.

    Two-player zero-sum games that alternate moves: the mover of a game's last move has its result, r_T, and
    every earlier position the negation of the next one's, z_t = -z_{t+1}. An outcome is known where the game
    ends by a termination later in the same unroll; a game cut short (`dones` without `terminated`: the round's
    end) or still on at the unroll's end has none. Invalid steps (a game sitting out its round) have none.

    rewards, terminated, dones, valid: [T, B]. Returns z [T, B] (0 where unknown) and known [T, B] (bool).
    """
    steps = rewards.shape[0]
    z, known = torch.zeros_like(rewards), torch.zeros_like(rewards, dtype=torch.bool)
    ahead = torch.zeros_like(rewards[0])
    ahead_known = torch.zeros_like(known[0])
    for t in reversed(range(steps)):
        ends = terminated[t] > 0.5
        goes_on = (dones[t] < 0.5) & ahead_known  # the same game's next position, with its outcome known
        ahead = torch.where(ends, rewards[t], -ahead)
        ahead_known = (valid[t] > 0.5) & (ends | goes_on)
        z[t] = torch.where(ahead_known, ahead, torch.zeros_like(ahead))
        known[t] = ahead_known
    return z, known


def value_targets(z: Tensor, search_value: Tensor, search_weight: float) -> Tensor:
    """The value's target: the outcome z mixed with the search's value q of the same position (both from the
    mover's view), (1 - w) z + w q. The outcome is unbiased but noisy (one game's result, decided by moves made
    long after); the search's value is what the position was worth to a search that saw further than the network."""
    return z if search_weight == 0.0 else (1.0 - search_weight) * z + search_weight * search_value


def alphazero_loss(logits: Tensor, values: Tensor, target_policy: Tensor, target_value: Tensor,
                   value_weight: float = 1.0) -> tuple[Tensor, dict[str, Tensor]]:
    """AlphaZero's loss, averaged over the positions::

        L = (z - v)^2 * value_weight  -  sum_a pi(a) log p(a)

    `logits` [N, A] (illegal actions already masked to a very negative logit, where pi is 0), `values` [N],
    `target_policy` pi [N, A] (the search's visit distribution), `target_value` z [N]. Weight decay is the
    optimizer's. Returns the loss and its parts (detached)."""
    log_p = torch.log_softmax(logits.float(), -1)
    policy_loss = -(target_policy * log_p).sum(-1).mean()
    value_loss = (values.float() - target_value).pow(2).mean()
    return policy_loss + value_weight * value_loss, {"policy_loss": policy_loss.detach(),
                                                       "value_loss": value_loss.detach()}

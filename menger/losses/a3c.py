"""A3C's actor-critic loss on n-step returns (Mnih et al. 2016, algorithm S3)."""

from __future__ import annotations

from torch import Tensor

from menger.losses.masking import keep_masked, masked_mean


def a3c_loss(
    logp: Tensor,
    values: Tensor,
    entropy: Tensor,
    returns: Tensor,
    mask: Tensor | None = None,
    *,
    value_coef: float = 0.5,
    entropy_coef: float = 0.01,
) -> tuple[Tensor, dict[str, Tensor]]:
    """loss = policy_loss + value_coef * value_loss - entropy_coef * entropy, means over the mask.

    `returns` are the n-step returns R_t = r_t + discounts_t R_{t+1}, bootstrapped from V(s_T) at the unroll's end
    and cut where an episode ends: `gae(rewards, values, bootstrap, discounts, lam=1.0)`'s second output.
    policy_loss = -(R_t - V(s_t)) log pi(a_t), value_loss = 0.5 (R_t - V(s_t))^2. The returns and advantages are
    constants: gradients flow into logp, values and entropy only. All inputs [T, B].
    Stats (detached scalars): policy_loss, value_loss, entropy.
    """
    for name, tensor in (("logp", logp), ("values", values), ("entropy", entropy)):
        if tensor.shape != returns.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but the returns have shape "
                             f"{tuple(returns.shape)}; compute the loss on the [T, B] unroll the returns came from")
    advantages = keep_masked((returns - values).detach(), mask)
    logp, values, entropy, returns = (keep_masked(x, mask) for x in (logp, values, entropy, returns.detach()))
    policy_loss = masked_mean(-advantages * logp, mask)
    value_loss = masked_mean(0.5 * (returns - values) ** 2, mask)
    mean_entropy = masked_mean(entropy, mask)
    loss = policy_loss + value_coef * value_loss - entropy_coef * mean_entropy
    stats = {"policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(), "entropy": mean_entropy.detach()}
    return loss, stats

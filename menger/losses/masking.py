"""Masks: which entries of a batch are real transitions and take part in a mean.

A mask entry of 0 marks a reset step or a rejected value. Such an entry must have no effect at all, not even
through a NaN or an infinity it may hold, so masked entries are *replaced* by zeros (``torch.where``) rather
than multiplied by zero (``nan * 0`` is still NaN, and so is its gradient).
"""

from __future__ import annotations

import torch
from torch import Tensor


def check_mask(mask: Tensor, like: Tensor, name: str = "mask") -> None:
    """Fail fast when a mask cannot describe ``like`` entry by entry."""
    if mask.shape != like.shape:
        raise ValueError(
            f"{name} has shape {tuple(mask.shape)} but the values it masks have shape {tuple(like.shape)}; "
            f"pass one mask entry per value (1 = learn from it, 0 = ignore it)."
        )


def keep_masked(x: Tensor, mask: Tensor | None) -> Tensor:
    """``x`` where the mask is set, 0 elsewhere; gradients to masked entries are exactly 0, never NaN."""
    if mask is None:
        return x
    check_mask(mask, x)
    return torch.where(mask != 0, x, torch.zeros((), dtype=x.dtype, device=x.device))


def masked_mean(x: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean of ``x`` over the entries where ``mask`` is set (all entries when ``mask`` is None).

    An empty mask (nothing to learn from) gives 0 rather than 0/0: a batch made only of reset steps then
    contributes no loss and no gradient, instead of poisoning the parameters with NaN.
    """
    if mask is None:
        return x.mean() if x.numel() > 0 else x.new_zeros(())
    weights = mask.to(x.dtype)
    total = (keep_masked(x, mask) * weights).sum()
    count = weights.sum()
    # A safe denominator, not torch.where on the quotient: the unselected 0/0 would still send NaN gradients.
    safe_count = torch.where(count > 0, count, torch.ones_like(count))
    return total / safe_count


def masked_normalize(x: Tensor, mask: Tensor | None = None, eps: float = 1e-8) -> Tensor:
    """Standardise ``x`` with the mean and (population) std of its masked entries only.

    Reset steps and rejected values must not shift the statistics of the real advantages. Masked entries
    come back as 0. With one real entry (std 0) every entry becomes 0, not NaN.
    """
    mean = masked_mean(x, mask)
    variance = masked_mean((x - mean) ** 2, mask)
    return keep_masked((x - mean) / (variance.sqrt() + eps), mask)


def check_alike(what: str, *, floating: bool = False, **tensors: Tensor | None) -> None:
    """Fail fast when the given tensors (None ones skipped) differ in shape, or, with `floating`, are not
    floating point; `what` says what the inputs are, for the message."""
    present = {name: t for name, t in tensors.items() if t is not None}
    first_name, first = next(iter(present.items()))
    for name, tensor in present.items():
        if tensor.shape != first.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but {first_name} has shape "
                             f"{tuple(first.shape)}; {what}, all alike.")
        if floating and not tensor.is_floating_point():
            raise TypeError(f"{name} has dtype {tensor.dtype}; pass a floating-point tensor (float32 or float64).")


def cut_bootstrap(discounts: Tensor, bootstrap_value: Tensor) -> Tensor:
    """discounts * bootstrap_value, exactly 0 where the episode ended (discount 0), even for a non-finite value."""
    return torch.where(discounts != 0, discounts * bootstrap_value, torch.zeros_like(bootstrap_value))

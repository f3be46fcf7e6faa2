"""R2D2's invertible value rescaling (Pohlen et al. 2018, "Observe and Look Further", section 3.2 and
appendix A; Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed RL", section 2).

A Q-network learns h(Q) instead of Q, so that returns of very different scales (Atari scores from 10 to 10^5)
fit one network without clipping rewards. The n-step target becomes h(R + D * h^-1(Q_target(s', a*))).
"""

from __future__ import annotations

import torch
from torch import Tensor

DEFAULT_EPS = 1e-3  # the papers' choice: h(x) ~ sqrt(|x|) near 0, ~ eps * x far away, so h stays invertible


def _check_eps(eps: float) -> None:
    if not eps >= 0:
        raise ValueError(f"eps={eps} must be >= 0; the papers use 1e-3 (0 gives the pure signed square root).")


def value_rescale(x: Tensor, eps: float = DEFAULT_EPS) -> Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x, elementwise, any shape.

    Computed as x / (sqrt(|x| + 1) + 1) + eps x, which is the same number (multiply sqrt(|x|+1) - 1 by its
    conjugate) without the cancellation of sqrt(|x|+1) - 1 near 0 and with the true derivative 1/2 + eps at
    x = 0 (sign(x) would give the gradient eps there). h is odd, strictly increasing, h(0) = 0.
    """
    _check_eps(eps)
    return x / (torch.sqrt(x.abs() + 1.0) + 1.0) + eps * x


def inverse_value_rescale(x: Tensor, eps: float = DEFAULT_EPS) -> Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1) (Pohlen et al., appendix A).

    With s = sqrt(1 + 4 eps (1 + eps + |x|)) and w = sqrt(|h^-1(x)| + 1) = 2 (1 + eps + |x|) / (1 + s), the root
    of eps w^2 + w - (1 + eps + |x|) = 0, this is computed as h^-1(x) = 2 x (w + 1) / (1 + 2 eps + s): the same
    number, but the printed form subtracts nearly equal terms twice ((s - 1), then (.)^2 - 1) and loses most
    float32 digits for |x| < 1, and divides 0 by 0 at eps = 0, where this form gives x (|x| + 2) exactly.
    """
    _check_eps(eps)
    root = torch.sqrt(1.0 + 4.0 * eps * (1.0 + eps + x.abs()))
    w = 2.0 * (1.0 + eps + x.abs()) / (1.0 + root)
    return 2.0 * x * (w + 1.0) / (1.0 + 2.0 * eps + root)

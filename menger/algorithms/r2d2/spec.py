"""R2D2 (Kapturowski et al. 2019): Ape-X with an LSTM core, learned from replayed sequences that carry the
recurrent state their actor had, with a burn-in and rescaled values."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from menger.algorithms import Algorithm
from menger.config import ConfigError, field

from menger.algorithms.apex.spec import ApexConfig
from menger.algorithms.networks import recurrent_q_network


@dataclass(frozen=True)
class R2D2Config(ApexConfig):
    """R2D2 (Kapturowski et al. 2019): Ape-X with an LSTM core (model.lstm_size), learned from replayed sequences
    that carry the recurrent state the actor had at their first step, with a burn-in and rescaled values.

    A sequence is `sequence_length` steps of one env cut from one unroll, every `period` steps: it starts at
    t = 0, period, 2 period, ... and the unroll holds runtime.unroll_length = sequence_length + k * period steps.
    The first `burn_in` steps of a sequence only refresh the stored state (no loss, no gradient), except in an
    unroll's first sequence, which nothing stored precedes: it learns from every step."""

    lr: float = field(1e-4, min=0.0, doc="Adam learning rate")
    adam_eps: float = field(1e-3, min=0.0, doc="Adam epsilon")
    gamma: float = field(0.997, min=0.0, max=1.0, doc="discount")
    n_step: int = field(5, min=1, doc="n of the n-step returns (cut at episode ends and at the sequence's end)")
    loss: Literal["huber", "mse"] = field("mse", doc="TD loss (R2D2: squared error on rescaled values)")
    sequence_length: int = field(80, min=2, doc="steps in a replayed sequence, its burn-in included")
    period: int = field(40, min=1, doc="steps between the starts of consecutive sequences of an unroll (they "
                        "overlap by sequence_length - period)")
    burn_in: int = field(40, min=0, doc="steps unrolled from the stored state without gradient before the loss")
    priority_eta: float = field(0.9, min=0.0, max=1.0, doc="a sequence's priority: eta * max |TD| + (1 - eta) * "
                                "mean |TD|")
    value_rescaling: bool = field(True, doc="learn h(Q) with h(x) = sign(x)(sqrt(|x| + 1) - 1) + 1e-3 x")

    def __post_init__(self):
        if self.burn_in >= self.sequence_length:
            raise ConfigError(f"r2d2.burn_in={self.burn_in} leaves nothing to learn from in a sequence of "
                              f"r2d2.sequence_length={self.sequence_length} steps; make the burn-in shorter")

    def starts(self, unroll_length: int) -> range:
        """The first steps of the sequences cut from an unroll."""
        return range(0, unroll_length - self.sequence_length + 1, self.period)

def _problems(config) -> list[str]:
    r2, steps = config.r2d2, config.runtime.unroll_length
    problems = []
    if config.model.lstm_size < 1:
        problems.append("model.lstm_size=0: r2d2 needs an LSTM core; set e.g. model.lstm_size=128")
    if steps < r2.sequence_length or (steps - r2.sequence_length) % r2.period:
        fits = r2.sequence_length + max(0, -(-(steps - r2.sequence_length) // r2.period)) * r2.period
        problems.append(f"runtime.unroll_length={steps} does not cut into sequences of r2d2.sequence_length="
                        f"{r2.sequence_length} every r2d2.period={r2.period} steps without leaving steps out; "
                        f"use runtime.unroll_length={r2.sequence_length} + k * {r2.period} "
                        f"(e.g. {fits})")
    return problems


def _unroll_fields(config) -> dict:
    """Greedy values for the priorities, and the recurrent state at each sequence's first step."""
    return {"values": True, "sequence_starts": len(config.r2d2.starts(config.runtime.unroll_length))}


ALGORITHM = Algorithm(
    name="r2d2", summary="R2D2: recurrent Ape-X from replayed sequences", sections={"r2d2": R2D2Config},
    settings="r2d2", network=recurrent_q_network, learns_from="replay", replay_items="sequences", actions="q",
    evaluation="greedy", gamma=lambda config: config.r2d2.gamma, problems=_problems, unroll_fields=_unroll_fields,
    recurrent=True, central_inference=False, multi_agent=False,
    presets=("r2d2", "memory-r2d2", "cartpole-novel-r2d2", "pong-r2d2"),
)
